// fp16 <-> fp32 conversion. The emulated Ascend datapath stores activations and
// weights as IEEE binary16; arithmetic happens in fp32 (the Cube accumulates in
// fp32 and the Vector unit's fp16 ops are computed exactly and rounded once).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kiln/f16.hpp"

#if defined(__F16C__)
#include <immintrin.h>
#endif

namespace kiln {

inline float f16_to_f32(f16 h) {
#if defined(__F16C__)
  return _cvtsh_ss(h);
#else
  const std::uint32_t sign = (std::uint32_t(h) & 0x8000u) << 16;
  std::uint32_t exp = (h >> 10) & 0x1fu;
  std::uint32_t man = h & 0x3ffu;
  std::uint32_t bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {  // subnormal: renormalise
      int e = -1;
      do {
        ++e;
        man <<= 1;
      } while ((man & 0x400u) == 0);
      bits = sign | (std::uint32_t(127 - 15 - e) << 23) | ((man & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (man << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
#endif
}

inline f16 f32_to_f16(float f) {
#if defined(__F16C__)
  return _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
#else
  std::uint32_t x;
  std::memcpy(&x, &f, 4);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u)  // inf / nan
    return f16(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u : 0));
  if (absx >= 0x477ff000u)  // rounds to >= 65520: overflow to inf
    return f16(sign | 0x7c00u);
  if (absx < 0x38800000u) {                    // result is subnormal or zero
    if (absx < 0x33000000u) return f16(sign);  // < 2^-25 rounds to 0
    const std::uint32_t e = absx >> 23;
    const std::uint32_t m = (absx & 0x7fffffu) | 0x800000u;
    const std::uint32_t shift = 126 - e;  // 14 + (113 - e) - ... keeps 10 bits
    std::uint32_t r = m >> shift;
    const std::uint32_t rem = m & ((1u << shift) - 1);
    const std::uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1))) ++r;
    return f16(sign | r);
  }
  std::uint32_t r = ((absx >> 13) - (112u << 10));
  const std::uint32_t rem = absx & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1))) ++r;
  return f16(sign | r);
#endif
}

// bfloat16 (stored in the same 16-bit slots): the top half of an fp32.
inline float bf16_to_f32(std::uint16_t b) {
  const std::uint32_t bits = std::uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// fp32 -> bfloat16 bits, round to nearest even (denormals kept, NaN stays a quiet NaN): the Fixpipe's and the
// fp16 -> bf16 operand conversion of KILN_DTYPE=bf16 builds. fp16 values are never fp32 denormals, so an
// fp16 value converts as its exact fp32 widening does.
inline std::uint16_t f32_to_bf16(float f) {
  std::uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return std::uint16_t((x >> 16) | 0x40u);
  return std::uint16_t((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

inline std::uint16_t f16_to_bf16(f16 h) { return f32_to_bf16(f16_to_f32(h)); }

inline void f16_to_f32(const f16* src, float* dst, std::size_t n) {
  std::size_t i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i))));
#elif defined(__F16C__) && defined(__AVX__)
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
#endif
  for (; i < n; ++i) dst[i] = f16_to_f32(src[i]);
}

inline void f32_to_f16(const float* src, f16* dst, std::size_t n) {
  std::size_t i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i),
                        _mm512_cvtps_ph(_mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
#elif defined(__F16C__) && defined(__AVX__)
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
#endif
  for (; i < n; ++i) dst[i] = f32_to_f16(src[i]);
}

}  // namespace kiln
