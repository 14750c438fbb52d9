# Picks the host instruction set the emulator is compiled for. KILN_ISA=auto
# probes the build machine (CPU flags and OS support for the register state);
# portable adds no flags and runs on any x86-64 or other CPU.
include(CheckCXXCompilerFlag)
include(CheckCXXSourceRuns)

set(_kiln_isa_flags_amx_bf16 -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512bf16 -mamx-tile -mamx-bf16 -mfma -mf16c)
# avx512 + AVX512_BF16 (vdpbf16ps): the bf16 Cube path of KILN_DTYPE=bf16 builds takes two k per instruction
set(_kiln_isa_flags_avx512_bf16 -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512bf16 -mfma -mf16c)
set(_kiln_isa_flags_avx512 -mavx512f -mavx512bw -mavx512vl -mavx512dq -mfma -mf16c)
set(_kiln_isa_flags_avx2 -mavx2 -mfma -mf16c)
set(_kiln_isa_flags_portable "")

# Returns in `out` the best ISA this machine runs, probed with CPUID + XGETBV.
function(_kiln_probe_isa out)
  if(NOT CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64|amd64|i[3-6]86")
    set(${out} portable PARENT_SCOPE)
    return()
  endif()
  set(src [=[
#include <cpuid.h>
#include <cstdio>
static unsigned long long xgetbv0() { unsigned a, d; __asm__ volatile("xgetbv" : "=a"(a), "=d"(d) : "c"(0)); return ((unsigned long long)d << 32) | a; }
int main() {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return 1;
  const bool osxsave = c & (1u << 27), fma = c & (1u << 12), f16c = c & (1u << 29);
  if (!osxsave) return 1;
  const unsigned long long xcr0 = xgetbv0();
  const bool ymm = (xcr0 & 6) == 6, zmm = (xcr0 & 0xe6) == 0xe6, tiles = (xcr0 & 0x60000) == 0x60000;
  __get_cpuid_count(7, 0, &a, &b, &c, &d);
  const bool avx2 = b & (1u << 5), avx512f = b & (1u << 16), avx512bw = b & (1u << 30), avx512vl = b & (1u << 31),
             avx512dq = b & (1u << 17), amx_bf16 = d & (1u << 22), amx_tile = d & (1u << 24);
  unsigned a1 = 0, b1, c1, d1;
  __get_cpuid_count(7, 1, &a1, &b1, &c1, &d1);
  const bool avx512bf16 = a1 & (1u << 5);
  const bool has512 = zmm && avx512f && avx512bw && avx512vl && avx512dq && fma && f16c;
  if (has512 && amx_bf16 && amx_tile && tiles && avx512bf16) return 40;
  if (has512 && avx512bf16) return 35;
  if (has512) return 30;
  if (ymm && avx2 && fma && f16c) return 20;
  return 10;
}
]=])
  file(WRITE "${CMAKE_BINARY_DIR}/kiln_isa_probe.cpp" "${src}")
  try_run(run_rc compile_ok "${CMAKE_BINARY_DIR}/kiln_isa_probe" "${CMAKE_BINARY_DIR}/kiln_isa_probe.cpp")
  if(NOT compile_ok)
    set(${out} portable PARENT_SCOPE)
  elseif(run_rc EQUAL 40)
    set(${out} amx_bf16 PARENT_SCOPE)
  elseif(run_rc EQUAL 35)
    set(${out} avx512_bf16 PARENT_SCOPE)
  elseif(run_rc EQUAL 30)
    set(${out} avx512 PARENT_SCOPE)
  elseif(run_rc EQUAL 20)
    set(${out} avx2 PARENT_SCOPE)
  else()
    set(${out} portable PARENT_SCOPE)
  endif()
endfunction()

string(TOLOWER "${KILN_ISA}" _kiln_isa)
if(_kiln_isa STREQUAL "auto")
  _kiln_probe_isa(_kiln_isa)
  set(_kiln_isa_why "detected on this machine")
else()
  set(_kiln_isa_why "forced by KILN_ISA")
endif()
if(NOT DEFINED _kiln_isa_flags_${_kiln_isa})
  message(FATAL_ERROR "KILN_ISA='${KILN_ISA}' is not valid: expected one of auto, amx_bf16, avx512_bf16, avx512, avx2, portable")
endif()
set(KILN_ISA_FLAGS ${_kiln_isa_flags_${_kiln_isa}})
if(KILN_ISA_FLAGS)
  string(REPLACE ";" " " _kiln_flag_text "${KILN_ISA_FLAGS}")
  check_cxx_compiler_flag("${_kiln_flag_text}" KILN_COMPILER_ACCEPTS_${_kiln_isa})
  if(NOT KILN_COMPILER_ACCEPTS_${_kiln_isa})
    message(WARNING "kiln: the compiler does not accept the ${_kiln_isa} flags; using the portable path")
    set(_kiln_isa portable)
    set(KILN_ISA_FLAGS "")
  endif()
endif()
set(KILN_ISA_RESOLVED "${_kiln_isa}")
message(STATUS "kiln: host ISA ${KILN_ISA_RESOLVED} (${_kiln_isa_why}) flags: ${KILN_ISA_FLAGS}")
