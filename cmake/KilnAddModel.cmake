# kiln_add_model(<target> MODEL <file.onnx | zoo name> [SHAPES <pins>] [OPTIONS NAME=VALUE ...])
#
# Bakes one model, at build time, into a static library <target> with a generated header <target>.hpp: the
# class kiln::model::<target>::Model runs it on caller-owned fp32 buffers, with no Python at run time (the
# plan is generated tables, the weights are linked in). The way add_halide_library runs a Halide generator:
#
#   find_package(kiln CONFIG REQUIRED)              # -Dkiln_DIR=$(kiln --cmake-dir)
#   kiln_add_model(tiny MODEL tiny.onnx OPTIONS USE_WINOGRAD=OFF)
#   target_link_libraries(app PRIVATE tiny)         # #include "tiny.hpp"
#
# MODEL: an ONNX file (relative to the current source dir) or a zoo name; SHAPES: its dynamic inputs pinned,
# in the model-spec grammar after the @ (`x=1x3x224x224`, or a batch `4`). OPTIONS: kiln's build options for
# this model alone, checked at configure time as kiln's own build checks them (a bad name or value stops
# configure naming it). KILN_ISA and KILN_TARGET are one per project (the cache variables; a model's
# KILN_TARGET must agree). Each model's kernels live in the namespace kiln::kernels::<target>, so models baked
# with different options link side by side; an option change re-bakes only that model.
function(kiln_add_model target)
  cmake_parse_arguments(ARG "" "MODEL;SHAPES" "OPTIONS" ${ARGN})
  if(NOT target MATCHES "^[A-Za-z_][A-Za-z0-9_]*$")
    message(FATAL_ERROR "kiln_add_model(${target}): the target name becomes a C++ namespace and a header name; "
                        "use letters, digits and _ (not starting with a digit)")
  endif()
  if(NOT ARG_MODEL)
    message(FATAL_ERROR "kiln_add_model(${target}): MODEL is required (an .onnx file or a zoo name)")
  endif()
  if(ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "kiln_add_model(${target}): unexpected argument(s) ${ARG_UNPARSED_ARGUMENTS}; "
                        "accepted: MODEL, SHAPES, OPTIONS")
  endif()
  set(model "${ARG_MODEL}")
  set(depends "")
  if(model MATCHES "\\.onnx$")
    get_filename_component(model "${model}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    if(NOT EXISTS "${model}")
      message(FATAL_ERROR "kiln_add_model(${target}): MODEL ${model}: no such file")
    endif()
    set(depends "${model}")
  endif()
  if(DEFINED ARG_SHAPES)
    set(model "${model}@${ARG_SHAPES}")
  endif()
  _kiln_project_target("${target}" "${ARG_OPTIONS}")
  set(options ${ARG_OPTIONS})
  list(FILTER options EXCLUDE REGEX "^KILN_TARGET=")
  list(TRANSFORM options PREPEND "--set;")

  set(out "${CMAKE_CURRENT_BINARY_DIR}/kiln_${target}")
  file(MAKE_DIRECTORY "${out}")
  execute_process(
    COMMAND "${Python_EXECUTABLE}" -B -m codegen model-options "${out}/options.json" --model "${model}"
            --isa-resolved "${KILN_ISA_RESOLVED}" ${options} --set "KILN_TARGET=${KILN_TARGET}"
    WORKING_DIRECTORY "${KILN_SOURCE_DIR}"
    ERROR_VARIABLE err
    RESULT_VARIABLE rc)
  if(rc)
    string(STRIP "${err}" err)
    message(FATAL_ERROR "kiln_add_model(${target}): ${err}")
  endif()
  _kiln_emu_library("${KILN_ISA_FLAGS};$<$<CONFIG:Release>:-O3>")
  set(_kiln_fixed_sources TRUE)  # no CONFIGURE_DEPENDS globs: `ninja -n` tells what an option change rebuilds
  _kiln_codegen(${target} "${out}/options.json" "${out}" "--cpp-api;${target}" "${depends}")
  add_library(${target} STATIC ${_kiln_sources})
  _kiln_kernel_library(${target} "${out}" "${KILN_ISA_FLAGS};$<$<CONFIG:Release>:-O3>")
  # the weights blob is linked in by the assembler (.incbin): a new blob reassembles the model's tables
  set_source_files_properties("${out}/${target}_model.cpp" TARGET_DIRECTORY ${target} PROPERTIES
                              OBJECT_DEPENDS "${out}/.codegen.stamp" SKIP_PRECOMPILE_HEADERS ON)
endfunction()

# KILN_TARGET is one per project: a model's OPTIONS may repeat it, not change it (the emulator library and the
# profile header are shared).
function(_kiln_project_target target options)
  foreach(item IN LISTS options)
    if(item MATCHES "^KILN_TARGET=(.*)$" AND NOT CMAKE_MATCH_1 STREQUAL KILN_TARGET)
      message(FATAL_ERROR "kiln_add_model(${target}): KILN_TARGET=${CMAKE_MATCH_1}, but this project bakes for "
                          "KILN_TARGET=${KILN_TARGET}; one target per project (set -DKILN_TARGET=... for all)")
    endif()
  endforeach()
endfunction()

# kiln_add_python_module(<target> MODEL <model target>)
#
# The model <model target> (a kiln_add_model) as a Python extension module named _core, the module kiln's own
# build makes (kernels/module.cpp) over this model's kernel table: `kiln compile` builds it, `kiln.load(DIR)`
# loads it beside the installed package's.
function(kiln_add_python_module target)
  cmake_parse_arguments(ARG "" "MODEL" "" ${ARGN})
  if(NOT TARGET pybind11::module)
    execute_process(COMMAND "${Python_EXECUTABLE}" -m pybind11 --cmakedir OUTPUT_VARIABLE dir
                    OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    find_package(Python 3.11 REQUIRED COMPONENTS Interpreter Development.Module)
    find_package(pybind11 CONFIG REQUIRED HINTS "${dir}")
  endif()
  pybind11_add_module(${target} MODULE "${KILN_SOURCE_DIR}/kernels/module.cpp"
                      "${KILN_SOURCE_DIR}/kernels/kernel_table.cpp")
  set_target_properties(${target} PROPERTIES OUTPUT_NAME _core)
  target_compile_definitions(${target} PRIVATE KILN_ISA_NAME="${KILN_ISA_RESOLVED}"
                             KILN_KERNEL_NAMESPACE=kiln::kernels::${ARG_MODEL})
  target_link_libraries(${target} PRIVATE ${ARG_MODEL})
endfunction()
