# kiln_bake_kernels(<target> OPTIONS_FILE <json> OUTPUT_DIR <dir> [COMPILE_OPTIONS ...])
#
# Runs kiln's codegen as a build step (the way add_halide_library runs a
# generator) and compiles what it writes into a static library <target>, which
# carries the include directories and instruction-set flags its users need.
# The library sees no Python or pybind11 flags, so a reinstall from a fresh
# isolated build environment recompiles only the module, not the kernels. The list of generated
# files is asked from the codegen at configure time; at build time the codegen
# reruns when an option, a template, a codegen module or the kernel list
# changes, rewrites only files whose content changed (ninja's restat then skips
# recompiling the rest), and a failed run leaves no stamp, so it reruns next time.
# Both runs share the tiling search's results through a cache in OUTPUT_DIR
# (codegen/select/search_cache.py), so the build-time run and rebuilds after an option
# change search only kernels whose inputs changed.
#
# Build speed (benchmarks/bench_build.py): the emulator's instruction bodies
# are compiled once into the kiln_emu library (kernels/kiln/core.cpp) rather than
# into each generated kernel, and kiln_emu owns a precompiled header of the
# emulator headers every kernel includes. Neither depends on generated files, so
# both compile while the codegen runs. -DCMAKE_DISABLE_PRECOMPILE_HEADERS=ON
# turns the precompiled header off.
function(kiln_bake_kernels target)
  cmake_parse_arguments(ARG "" "OPTIONS_FILE;OUTPUT_DIR" "COMPILE_OPTIONS" ${ARGN})
  _kiln_emu_library("${ARG_COMPILE_OPTIONS}")
  set(kernel_list "${KILN_KERNEL_LIST}")
  if(NOT kernel_list)
    set(kernel_list "${KILN_SOURCE_DIR}/kernels/default.toml")
  endif()
  _kiln_model_files(model_files "${KILN_MODELS}" "${KILN_SOURCE_DIR}")
  # Tuning records change variants (and kernel names): the codegen reruns when the file's contents change.
  set(records_file "")
  if(KILN_TUNING_RECORDS)
    get_filename_component(records_file "${KILN_TUNING_RECORDS}" ABSOLUTE BASE_DIR "${KILN_SOURCE_DIR}")
  endif()
  _kiln_codegen(${target} "${ARG_OPTIONS_FILE}" "${ARG_OUTPUT_DIR}" "" "${kernel_list};${model_files};${records_file}")
  # kernel_table.cpp holds the generated table and manifest, which change with every option: the module
  # reaches them through kiln/baked.hpp and is not recompiled.
  add_library(${target} STATIC ${_kiln_sources} "${KILN_SOURCE_DIR}/kernels/kernel_table.cpp")
  _kiln_kernel_library(${target} "${ARG_OUTPUT_DIR}" "${ARG_COMPILE_OPTIONS}")
  # The table is initialisation code run once at import: -O0 compiles it in under half the time of -O3
  # (it is what an option change recompiles), and a -O0 TU cannot use the -O3 precompiled header.
  set_source_files_properties("${KILN_SOURCE_DIR}/kernels/kernel_table.cpp" TARGET_DIRECTORY ${target}
                              PROPERTIES COMPILE_OPTIONS -O0 SKIP_PRECOMPILE_HEADERS ON)
endfunction()

# The codegen of one baked library: the files it writes are asked from it at configure time (their .cpp files
# are returned in _kiln_sources), and at build time it reruns when an option, a template, a codegen module or
# one of `depends` changes, through the custom target <target>_codegen. `extra` are more arguments to both runs
# (kiln_add_model's --cpp-api).
macro(_kiln_codegen target options_file output_dir extra depends)
  # `python -B -m codegen` from the source dir: -m finds the package in the working
  # directory, -B keeps the source tree free of bytecode. No tool paths of the
  # (possibly temporary, pip-isolated) build environment appear in the command,
  # so a reinstall does not look like a changed command to ninja.
  set(_kiln_cmd "${Python_EXECUTABLE}" -B -m codegen)
  # The codegen's progress lines ([kiln codegen ...] on stderr) are echoed as it runs (pip -v shows them);
  # the fatal message keeps only the error.
  execute_process(
    COMMAND ${_kiln_cmd} outputs "${options_file}" --work-dir "${output_dir}" ${extra}
    WORKING_DIRECTORY "${KILN_SOURCE_DIR}"
    OUTPUT_VARIABLE _kiln_outputs
    ERROR_VARIABLE _kiln_err
    ECHO_ERROR_VARIABLE
    RESULT_VARIABLE _kiln_rc)
  if(_kiln_rc)
    string(REGEX REPLACE "\\[kiln codegen[^\n]*\n" "" _kiln_err "${_kiln_err}")
    string(STRIP "${_kiln_err}" _kiln_err)
    message(FATAL_ERROR "${_kiln_err}")
  endif()
  string(STRIP "${_kiln_outputs}" _kiln_outputs)
  string(REPLACE "\n" ";" _kiln_outputs "${_kiln_outputs}")
  list(TRANSFORM _kiln_outputs PREPEND "${output_dir}/")
  set(_kiln_sources ${_kiln_outputs})
  list(FILTER _kiln_sources INCLUDE REGEX "\\.cpp$")

  if(_kiln_fixed_sources)  # kiln_add_model: an installed kiln's files change only with a reinstall
    file(GLOB_RECURSE _kiln_codegen_modules "${KILN_SOURCE_DIR}/codegen/*.py")
    file(GLOB _kiln_templates "${KILN_SOURCE_DIR}/templates/*.j2")
  else()  # kiln's own build: a new codegen module or template reconfigures
    file(GLOB_RECURSE _kiln_codegen_modules CONFIGURE_DEPENDS "${KILN_SOURCE_DIR}/codegen/*.py")
    file(GLOB _kiln_templates CONFIGURE_DEPENDS "${KILN_SOURCE_DIR}/templates/*.j2")
  endif()
  # The set of generated files depends on the kernel list, the models and the codegen: reconfigure when they change.
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${depends} ${_kiln_codegen_modules})

  set(_kiln_stamp "${output_dir}/.codegen.stamp")
  add_custom_command(
    OUTPUT "${_kiln_stamp}"
    BYPRODUCTS ${_kiln_outputs}
    COMMAND ${_kiln_cmd} generate "${options_file}" "${output_dir}" --stamp "${_kiln_stamp}" ${extra}
    DEPENDS ${_kiln_codegen_modules} ${_kiln_templates} "${options_file}" ${depends}
    WORKING_DIRECTORY "${KILN_SOURCE_DIR}"
    COMMENT "kiln: generating kernels for ${target} (codegen)"
    USES_TERMINAL  # ninja's console pool: the progress lines stream instead of arriving when it ends
    VERBATIM)
  add_custom_target(${target}_codegen DEPENDS "${_kiln_stamp}")
endmacro()

# A baked library's build settings: after its codegen, position-independent, the emulator's and the generated
# headers, the ISA flags, kiln_emu and its precompiled header.
function(_kiln_kernel_library target output_dir compile_options)
  add_dependencies(${target} ${target}_codegen)
  set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  target_include_directories(${target} PUBLIC "${KILN_SOURCE_DIR}/kernels" "${output_dir}")
  target_compile_options(${target} PUBLIC ${compile_options})
  target_link_libraries(${target} PUBLIC kiln_emu)
  if(NOT CMAKE_DISABLE_PRECOMPILE_HEADERS)
    target_precompile_headers(${target} REUSE_FROM kiln_emu)
  endif()
endfunction()

# kiln_emu: the emulation layer, compiled once with the kernels' flags (the first baked library's flags
# when a project bakes several), and the precompiled header the kernels reuse. Its compile flags must
# stay those of the kernels for the header to be valid (-Winvalid-pch says so if not).
function(_kiln_emu_library compile_options)
  if(TARGET kiln_emu)
    return()
  endif()
  add_library(kiln_emu STATIC "${KILN_SOURCE_DIR}/kernels/kiln/core.cpp")
  set_target_properties(kiln_emu PROPERTIES POSITION_INDEPENDENT_CODE ON)
  target_include_directories(kiln_emu PUBLIC "${KILN_SOURCE_DIR}/kernels")
  target_compile_options(kiln_emu PUBLIC ${compile_options})
  if(NOT TARGET OpenMP::OpenMP_CXX)
    find_package(OpenMP COMPONENTS CXX)
  endif()
  if(TARGET OpenMP::OpenMP_CXX)  # kernels launch through OpenMP (kiln/launch.hpp): the header needs the same
    target_link_libraries(kiln_emu PUBLIC OpenMP::OpenMP_CXX)
  endif()
  if(NOT CMAKE_DISABLE_PRECOMPILE_HEADERS)
    target_precompile_headers(kiln_emu PRIVATE "${KILN_SOURCE_DIR}/kernels/kiln/kernel_abi.hpp"
                              "${KILN_SOURCE_DIR}/kernels/kiln/ops.hpp")
    if(CMAKE_CXX_COMPILER_ID MATCHES "GNU")
      target_compile_options(kiln_emu PUBLIC -Winvalid-pch)
    endif()
  endif()
endfunction()

# The ONNX files (absolute paths) the KILN_MODELS entries `models` name, relative ones resolved against
# `base_dir` (the source dir, where the codegen runs). Each entry is a model spec (codegen/frontend/model_spec.py):
# the file is what precedes an optional @BATCH or @INPUT=DxD...[+INPUT=...] suffix, so a file baked with pinned
# shapes is still a dependency of the codegen. Entries split on ';' or ',' as the option parser splits them
# (the spec grammar has no commas).
function(_kiln_model_files out_var models base_dir)
  string(REPLACE "," ";" specs "${models}")
  set(files "")
  foreach(model IN LISTS specs)
    string(STRIP "${model}" model)
    string(REGEX REPLACE "@([0-9]+|[^@]*=[^@]*)$" "" model "${model}")
    if(model MATCHES "\\.onnx$")
      get_filename_component(model "${model}" ABSOLUTE BASE_DIR "${base_dir}")
      list(APPEND files "${model}")
    endif()
  endforeach()
  set(${out_var} "${files}" PARENT_SCOPE)
endfunction()
