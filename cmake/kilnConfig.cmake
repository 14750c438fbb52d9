# kiln's CMake package: kiln_add_model() for C++ projects (cmake/KilnAddModel.cmake).
#
#   find_package(kiln CONFIG REQUIRED)   # with -Dkiln_DIR=$(kiln --cmake-dir), or the repository's cmake/
#
# The package is the installed kiln (or a checkout): its codegen, templates and the emulator's sources, found
# beside this file. The codegen runs at build time in the Python that has kiln installed (with Jinja2, NumPy and
# onnx): the first `python3` on PATH, or -DPython_EXECUTABLE=... . The project's host ISA (KILN_ISA, probed
# at configure time) and hardware profile (KILN_TARGET) are cache variables, one per project.
cmake_minimum_required(VERSION 3.24)
include_guard(GLOBAL)

get_filename_component(KILN_SOURCE_DIR "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)
if(NOT EXISTS "${KILN_SOURCE_DIR}/codegen/__main__.py" OR NOT EXISTS "${KILN_SOURCE_DIR}/kernels/kiln/core.cpp")
  set(kiln_FOUND FALSE)
  string(CONCAT kiln_NOT_FOUND_MESSAGE "kiln's codegen or emulator sources are missing beside "
         "${CMAKE_CURRENT_LIST_FILE} (expected ${KILN_SOURCE_DIR}/codegen and kernels/); reinstall kiln")
  return()
endif()
list(APPEND CMAKE_MODULE_PATH "${CMAKE_CURRENT_LIST_DIR}")

if(NOT Python_EXECUTABLE)
  find_package(Python 3.11 REQUIRED COMPONENTS Interpreter)
endif()
execute_process(COMMAND "${Python_EXECUTABLE}" -B -c "import codegen, jinja2, numpy, onnx"
                WORKING_DIRECTORY "${KILN_SOURCE_DIR}" RESULT_VARIABLE _kiln_py_rc ERROR_VARIABLE _kiln_py_err)
if(_kiln_py_rc)
  string(STRIP "${_kiln_py_err}" _kiln_py_err)
  set(kiln_FOUND FALSE)
  string(CONCAT kiln_NOT_FOUND_MESSAGE "kiln's codegen cannot run in ${Python_EXECUTABLE} (${_kiln_py_err}); "
         "point -DPython_EXECUTABLE at the Python kiln is installed in")
  return()
endif()

set(KILN_ISA "auto" CACHE STRING "Host instruction set of the emulator: auto, amx_bf16, avx512_bf16, avx512, avx2, portable")
set(KILN_TARGET "ascend910b" CACHE STRING "Hardware profile every model of this project is baked for")
include(KilnISA)       # KILN_ISA -> KILN_ISA_RESOLVED, KILN_ISA_FLAGS
include(KilnCodegen)   # the codegen step and the emulator library
include(KilnAddModel)  # kiln_add_model()
find_package(OpenMP COMPONENTS CXX)
set(kiln_FOUND TRUE)
