# Declares kiln's build options from the one table in codegen/options.py and
# checks their values at configure time: a bad value stops configure with a
# message naming the option and what it accepts.

# The codegen runs from the source tree: keep it free of bytecode caches.
set(ENV{PYTHONDONTWRITEBYTECODE} 1)

execute_process(
  COMMAND "${Python_EXECUTABLE}" -c "import jinja2"
  RESULT_VARIABLE _kiln_has_jinja ERROR_QUIET)
if(_kiln_has_jinja)
  message(FATAL_ERROR "kiln: the codegen needs Jinja2 in the Python that runs it (${Python_EXECUTABLE}). "
                      "Install it with `${Python_EXECUTABLE} -m pip install jinja2`, or build with `pip install .`, "
                      "which installs the build requirements.")
endif()

set(_kiln_decls "${CMAKE_BINARY_DIR}/kiln_option_declarations.cmake")
execute_process(
  COMMAND "${Python_EXECUTABLE}" -m codegen options-cmake
  WORKING_DIRECTORY "${KILN_SOURCE_DIR}"
  OUTPUT_FILE "${_kiln_decls}"
  ERROR_VARIABLE _kiln_err
  RESULT_VARIABLE _kiln_rc)
if(_kiln_rc)
  message(FATAL_ERROR "kiln: cannot read the option table from codegen/options.py:\n${_kiln_err}")
endif()
include("${_kiln_decls}")
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${KILN_SOURCE_DIR}/codegen/options.py")

# Writes every option's value into one JSON file (rewritten only when a value
# changes, so the codegen reruns exactly when an option changed) and validates it.
function(kiln_write_options path)
  set(json "{}")
  foreach(name IN LISTS KILN_OPTION_NAMES)
    set(value "${${name}}")
    string(REPLACE "\\" "\\\\" value "${value}")
    string(REPLACE "\"" "\\\"" value "${value}")
    string(JSON json SET "${json}" "${name}" "\"${value}\"")
  endforeach()
  string(JSON json SET "${json}" "KILN_ISA_RESOLVED" "\"${KILN_ISA_RESOLVED}\"")
  # Rewritten only when a value changed: its timestamp is what makes the codegen rerun.
  set(old "")
  if(EXISTS "${path}")
    file(READ "${path}" old)
  endif()
  if(NOT old STREQUAL "${json}\n")
    file(WRITE "${path}" "${json}\n")
  endif()
  if(KILN_MODELS)
    execute_process(COMMAND "${Python_EXECUTABLE}" -c "import onnx, numpy" RESULT_VARIABLE no_onnx ERROR_QUIET)
    if(no_onnx)
      message(FATAL_ERROR "kiln: KILN_MODELS='${KILN_MODELS}' needs the onnx and numpy packages in the Python that "
                          "runs the codegen (${Python_EXECUTABLE}): `${Python_EXECUTABLE} -m pip install onnx numpy`, "
                          "or build with `pip install .`, or set -DKILN_MODELS= to bake only the kernel list.")
    endif()
  endif()
  execute_process(
    COMMAND "${Python_EXECUTABLE}" -m codegen check-options "${path}"
    WORKING_DIRECTORY "${KILN_SOURCE_DIR}"
    ERROR_VARIABLE err
    RESULT_VARIABLE rc)
  if(rc)
    string(STRIP "${err}" err)
    message(FATAL_ERROR "${err}")
  endif()
endfunction()
