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
  # `python -B -m codegen` from the source dir: -m finds the package in the working
  # directory, -B keeps the source tree free of bytecode. No tool paths of the
  # (possibly temporary, pip-isolated) build environment appear in the command,
  # so a reinstall does not look like a changed command to ninja.
  set(codegen "${Python_EXECUTABLE}" -B -m codegen)
  # The codegen's progress lines ([kiln codegen ...] on stderr) are echoed as it runs (pip -v shows them);
  # the fatal message keeps only the error.
  execute_process(
    COMMAND ${codegen} outputs "${ARG_OPTIONS_FILE}" --work-dir "${ARG_OUTPUT_DIR}"
    WORKING_DIRECTORY "${KILN_SOURCE_DIR}"
    OUTPUT_VARIABLE outputs
    ERROR_VARIABLE err
    ECHO_ERROR_VARIABLE
    RESULT_VARIABLE rc)
  if(rc)
    string(REGEX REPLACE "\\[kiln codegen[^\n]*\n" "" err "${err}")
    string(STRIP "${err}" err)
    message(FATAL_ERROR "${err}")
  endif()
  string(STRIP "${outputs}" outputs)
  string(REPLACE "\n" ";" outputs "${outputs}")
  list(TRANSFORM outputs PREPEND "${ARG_OUTPUT_DIR}/")
  set(sources ${outputs})
  list(FILTER sources INCLUDE REGEX "\\.cpp$")

  file(GLOB_RECURSE codegen_modules CONFIGURE_DEPENDS "${KILN_SOURCE_DIR}/codegen/*.py")
  file(GLOB templates CONFIGURE_DEPENDS "${KILN_SOURCE_DIR}/templates/*.j2")
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
  # The set of generated files depends on the kernel list, the models and the codegen: reconfigure when they change.
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${kernel_list}" ${model_files} ${codegen_modules}
               ${records_file})

  set(stamp "${ARG_OUTPUT_DIR}/.codegen.stamp")
  add_custom_command(
    OUTPUT "${stamp}"
    BYPRODUCTS ${outputs}
    COMMAND ${codegen} generate "${ARG_OPTIONS_FILE}" "${ARG_OUTPUT_DIR}"
            --stamp "${stamp}"
    DEPENDS ${codegen_modules} ${templates} "${ARG_OPTIONS_FILE}" "${kernel_list}" ${model_files} ${records_file}
    WORKING_DIRECTORY "${KILN_SOURCE_DIR}"
    COMMENT "kiln: generating kernels (codegen)"
    USES_TERMINAL  # ninja's console pool: the progress lines stream instead of arriving when it ends
    VERBATIM)
  add_custom_target(${target}_codegen DEPENDS "${stamp}")
  # kernel_table.cpp holds the generated table and manifest, which change with every option: the module
  # reaches them through kiln/baked.hpp and is not recompiled.
  add_library(${target} STATIC ${sources} "${KILN_SOURCE_DIR}/kernels/kernel_table.cpp")
  add_dependencies(${target} ${target}_codegen)
  set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  target_include_directories(${target} PUBLIC "${KILN_SOURCE_DIR}/kernels" "${ARG_OUTPUT_DIR}")
  target_compile_options(${target} PUBLIC ${ARG_COMPILE_OPTIONS})
  target_link_libraries(${target} PUBLIC kiln_emu)
  # The table is initialisation code run once at import: -O0 compiles it in under half the time of -O3
  # (it is what an option change recompiles), and a -O0 TU cannot use the -O3 precompiled header.
  set_source_files_properties("${KILN_SOURCE_DIR}/kernels/kernel_table.cpp" TARGET_DIRECTORY ${target}
                              PROPERTIES COMPILE_OPTIONS -O0 SKIP_PRECOMPILE_HEADERS ON)
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
