# kiln_bake_kernels(<target> OPTIONS_FILE <json> OUTPUT_DIR <dir>)
#
# Runs kiln's codegen as a build step (the way add_halide_library runs a
# generator) and compiles what it writes into <target>. The list of generated
# files is asked from the codegen at configure time; at build time the codegen
# reruns when an option, a template, a codegen module or the kernel list
# changes, rewrites only files whose content changed (ninja's restat then skips
# recompiling the rest), and a failed run leaves no stamp, so it reruns next time.
function(kiln_bake_kernels target)
  cmake_parse_arguments(ARG "" "OPTIONS_FILE;OUTPUT_DIR" "" ${ARGN})
  set(env "${CMAKE_COMMAND}" -E env "PYTHONPATH=${KILN_SOURCE_DIR}" PYTHONDONTWRITEBYTECODE=1 --)
  execute_process(
    COMMAND ${env} "${Python_EXECUTABLE}" -m codegen outputs "${ARG_OPTIONS_FILE}"
    WORKING_DIRECTORY "${KILN_SOURCE_DIR}"
    OUTPUT_VARIABLE outputs
    ERROR_VARIABLE err
    RESULT_VARIABLE rc)
  if(rc)
    string(STRIP "${err}" err)
    message(FATAL_ERROR "${err}")
  endif()
  string(STRIP "${outputs}" outputs)
  string(REPLACE "\n" ";" outputs "${outputs}")
  list(TRANSFORM outputs PREPEND "${ARG_OUTPUT_DIR}/")
  set(sources ${outputs})
  list(FILTER sources INCLUDE REGEX "\\.cpp$")

  file(GLOB codegen_modules CONFIGURE_DEPENDS "${KILN_SOURCE_DIR}/codegen/*.py")
  file(GLOB templates CONFIGURE_DEPENDS "${KILN_SOURCE_DIR}/templates/*.j2")
  set(kernel_list "${KILN_KERNEL_LIST}")
  if(NOT kernel_list)
    set(kernel_list "${KILN_SOURCE_DIR}/kernels/default.toml")
  endif()
  # The set of generated files depends on the kernel list and the codegen: reconfigure when they change.
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${kernel_list}" ${codegen_modules})

  set(stamp "${ARG_OUTPUT_DIR}/.codegen.stamp")
  add_custom_command(
    OUTPUT "${stamp}"
    BYPRODUCTS ${outputs}
    COMMAND ${env} "${Python_EXECUTABLE}" -m codegen generate "${ARG_OPTIONS_FILE}" "${ARG_OUTPUT_DIR}"
            --stamp "${stamp}"
    DEPENDS ${codegen_modules} ${templates} "${ARG_OPTIONS_FILE}" "${kernel_list}"
    WORKING_DIRECTORY "${KILN_SOURCE_DIR}"
    COMMENT "kiln: generating kernels (codegen)"
    VERBATIM)
  add_custom_target(${target}_codegen DEPENDS "${stamp}")
  add_dependencies(${target} ${target}_codegen)
  target_sources(${target} PRIVATE ${sources})
  target_include_directories(${target} PRIVATE "${ARG_OUTPUT_DIR}")
endfunction()
