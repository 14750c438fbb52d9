// Fast bodies of the emulator's hot instructions (core.hpp): the Cube mmad
// microkernel, fp32 -> fp16 runs for Fixpipe, the Vector ops as contiguous
// runs, and the fractal transposes. Every routine computes exactly what the
// plain per-element code computed before it: the same fp32 operations in the
// same order, rounded once to fp16 with round-to-nearest-even.
//
// The instruction set is fixed at compile time: KILN_SIMD_BITS is 512 with
// AVX-512F, 256 with AVX2+FMA+F16C, else 0 (portable: plain loops here, and
// core.hpp keeps its own plain mmad).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kiln/arch.hpp"
#include "kiln/half.hpp"

#if defined(__AVX512F__)
#define KILN_SIMD_BITS 512
#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define KILN_SIMD_BITS 256
#else
#define KILN_SIMD_BITS 0
#endif
#if KILN_SIMD_BITS
#include <immintrin.h>
#endif

namespace kiln::simd {

// 64-byte aligned view into a growable scratch vector (grows, never shrinks, so
// alternating instruction sizes do not re-zero it every call).
template <class Vec>
inline typename Vec::value_type* scratch64(Vec& v, std::size_t n) {
  using T = typename Vec::value_type;
  const std::size_t need = n + 64 / sizeof(T);
  if (v.size() < need) v.resize(need);
  const std::uintptr_t p = reinterpret_cast<std::uintptr_t>(v.data());
  return reinterpret_cast<T*>((p + 63) & ~std::uintptr_t(63));
}

// ---- scalar element access (tails, portable builds) --------------------------
inline float ld(f16 h) { return f16_to_f32(h); }
inline float ld(float f) { return f; }
template <class T>
inline T st(float v) {
  if constexpr (sizeof(T) == 2) return f32_to_f16(v);
  else return v;
}

// ---- vector layer: W fp32 lanes ------------------------------------------------
// fp16 loads widen exactly; fp16 stores round to nearest even (as f32_to_f16).
// x86 max/min return their second operand unless the comparison holds, which is
// exactly `a > b ? a : b` / `a < b ? a : b` (NaN and signed zeros included).
#if KILN_SIMD_BITS == 512
using vf = __m512;
constexpr int W = 16;
inline vf vload(const float* p) { return _mm512_loadu_ps(p); }
inline vf vload(const f16* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
inline void vstore(float* p, vf v) { _mm512_storeu_ps(p, v); }
inline void vstore(f16* p, vf v) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
inline vf vset1(float s) { return _mm512_set1_ps(s); }
inline vf vzero() { return _mm512_setzero_ps(); }
inline vf vadd(vf a, vf b) { return _mm512_add_ps(a, b); }
inline vf vsub(vf a, vf b) { return _mm512_sub_ps(a, b); }
inline vf vmul(vf a, vf b) { return _mm512_mul_ps(a, b); }
inline vf vdiv(vf a, vf b) { return _mm512_div_ps(a, b); }
inline vf vmax(vf a, vf b) { return _mm512_max_ps(a, b); }
inline vf vmin(vf a, vf b) { return _mm512_min_ps(a, b); }
inline vf vfma(vf a, vf b, vf c) { return _mm512_fmadd_ps(a, b, c); }
inline vf vabs(vf a) { return _mm512_abs_ps(a); }
// a comparison as 1.0 / 0.0 per lane (ordered: NaN compares false, as the scalar form); select a where c != 0
template <int kPred>
inline vf vcmp(vf a, vf b) {
  return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(a, b, kPred), _mm512_set1_ps(1.0f));
}
inline vf vsel(vf c, vf a, vf b) { return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(c, vzero(), _CMP_NEQ_UQ), b, a); }
// W raw 16-bit Cube operands (fp16, or bf16 = the top half of an fp32) widened exactly.
inline vf vwiden(__m256i h, bool bf16) {
  if (!bf16) return _mm512_cvtph_ps(h);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
inline vf vwiden(const f16* p, bool bf16) {
  return vwiden(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)), bf16);
}
#elif KILN_SIMD_BITS == 256
using vf = __m256;
constexpr int W = 8;
inline vf vload(const float* p) { return _mm256_loadu_ps(p); }
inline vf vload(const f16* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
inline void vstore(float* p, vf v) { _mm256_storeu_ps(p, v); }
inline void vstore(f16* p, vf v) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
inline vf vset1(float s) { return _mm256_set1_ps(s); }
inline vf vzero() { return _mm256_setzero_ps(); }
inline vf vadd(vf a, vf b) { return _mm256_add_ps(a, b); }
inline vf vsub(vf a, vf b) { return _mm256_sub_ps(a, b); }
inline vf vmul(vf a, vf b) { return _mm256_mul_ps(a, b); }
inline vf vdiv(vf a, vf b) { return _mm256_div_ps(a, b); }
inline vf vmax(vf a, vf b) { return _mm256_max_ps(a, b); }
inline vf vmin(vf a, vf b) { return _mm256_min_ps(a, b); }
inline vf vfma(vf a, vf b, vf c) { return _mm256_fmadd_ps(a, b, c); }
inline vf vabs(vf a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), a); }
template <int kPred>
inline vf vcmp(vf a, vf b) {
  return _mm256_and_ps(_mm256_cmp_ps(a, b, kPred), _mm256_set1_ps(1.0f));
}
inline vf vsel(vf c, vf a, vf b) { return _mm256_blendv_ps(b, a, _mm256_cmp_ps(c, vzero(), _CMP_NEQ_UQ)); }
inline vf vwiden(const f16* p, bool bf16) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  if (!bf16) return _mm256_cvtph_ps(h);
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
#endif

#if KILN_SIMD_BITS == 512
// In-register transpose of a 16x16 fp32 block (r[i] holds row i on entry, column i on exit).
inline void transpose16(__m512 r[16]) {
  __m512 t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
    r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xEE);
    r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  for (int i = 0; i < 4; ++i) {
    t[i] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0x88);
    t[i + 4] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0xDD);
    t[i + 8] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0x88);
    t[i + 12] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0xDD);
  }
  for (int i = 0; i < 8; ++i) {
    r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
    r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xDD);
  }
}
#endif

#if KILN_SIMD_BITS == 512 && defined(__AVX512BW__)
#define KILN_SIMD_T16 1
// 16x16 transpose of 16-bit values held as 8 zmm (z[p] = rows 2p, 2p+1; on exit
// columns 2p, 2p+1). Element (r, c) sits in register r>>1, lane (r&1)*16 + c
// and must move to register c>>1, lane (c&1)*16 + r: three stages each swap one
// register-index bit with one lane-index bit (r3<->c3, r2<->c2, r1<->c1) with
// two-source word permutes, the last stage also swapping lane bits 4 and 0.
struct T16Index {
  alignas(64) std::uint16_t idx[3][2][32];
  constexpr T16Index() : idx{} {
    for (int st = 0; st < 3; ++st) {
      const int l = 3 - st;  // lane bit swapped with register bit 2 - st
      for (int L = 0; L < 32; ++L) {
        // The last stage writes lane Lf the element the plain swap would put at sigma(Lf).
        const int src = st == 2 ? ((L & 0xE) | ((L >> 4) & 1) | ((L & 1) << 4)) : L;
        const bool hi = (src >> l) & 1;
        idx[st][0][L] = std::uint16_t(hi ? 32 + (src & ~(1 << l)) : src);  // register with bit = 0
        idx[st][1][L] = std::uint16_t(hi ? 32 + src : (src | (1 << l)));   // register with bit = 1
      }
    }
  }
};
inline constexpr T16Index kT16{};

inline void transpose16_u16(__m512i z[8]) {
  for (int st = 0; st < 3; ++st) {
    const int k = 4 >> st;  // register pairs (p, p + k)
    const __m512i i0 = _mm512_load_si512(kT16.idx[st][0]), i1 = _mm512_load_si512(kT16.idx[st][1]);
    for (int p = 0; p < 8; ++p) {
      if (p & k) continue;
      const __m512i a = z[p], b = z[p + k];
      z[p] = _mm512_permutex2var_epi16(a, i0, b);
      z[p + k] = _mm512_permutex2var_epi16(a, i1, b);
    }
  }
}
#endif

// ---- MTE1: 16x16 fractal transpose of 16-bit values (LoadData2D transpose) ----
inline void transpose_fractal16(const f16* s, f16* d) {
#if defined(KILN_SIMD_T16)
  __m512i z[8];
  for (int p = 0; p < 8; ++p) z[p] = _mm512_loadu_si512(s + p * 32);
  transpose16_u16(z);
  for (int p = 0; p < 8; ++p) _mm512_storeu_si512(d + p * 32, z[p]);
#else
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) d[i * 16 + j] = s[j * 16 + i];
#endif
}

// ---- Cube --------------------------------------------------------------------
#if KILN_SIMD_BITS
// A (ZZ, [M1][K1][16 m][16 k]) widened to fp32 in the same layout (n: multiple of 256).
inline void widen_a(const f16* src, float* dst, std::size_t n, bool bf16) {
  for (std::size_t i = 0; i < n; i += W) vstore(dst + i, vwiden(src + i, bf16));
}

// B (ZN, [K1][N1][16 n][16 k]) widened and transposed inside each fractal to
// [K1][N1][16 k][16 n], so one k step of a fractal is one 16-wide row over n.
inline void widen_b_t(const f16* src, float* dst, std::size_t fractals, bool bf16) {
  for (std::size_t f = 0; f < fractals; ++f) {
#if defined(KILN_SIMD_T16)  // transpose the 16-bit values (8 zmm), then widen each row
    __m512i z[8];
    for (int p = 0; p < 8; ++p) z[p] = _mm512_loadu_si512(src + f * 256 + p * 32);
    transpose16_u16(z);
    for (int p = 0; p < 8; ++p) {
      vstore(dst + f * 256 + p * 32, vwiden(_mm512_castsi512_si256(z[p]), bf16));
      vstore(dst + f * 256 + p * 32 + 16, vwiden(_mm512_extracti64x4_epi64(z[p], 1), bf16));
    }
#elif KILN_SIMD_BITS == 512
    __m512 r[16];
    for (int i = 0; i < 16; ++i) r[i] = vwiden(src + f * 256 + i * 16, bf16);
    transpose16(r);
    for (int i = 0; i < 16; ++i) vstore(dst + f * 256 + i * 16, r[i]);
#else
    f16 t[256];
    transpose_fractal16(src + f * 256, t);
    for (int i = 0; i < 256; i += W) vstore(dst + f * 256 + i, vwiden(t + i, bf16));
#endif
  }
}

// Register block of the mmad: MR rows (inside one 16-row m fractal) x NR n
// fractals of C, each 16-wide row VR = 16/W vectors, MR*NR*VR accumulators.
// For every output element the products are added with one FMA per k, k
// ascending over the whole K, exactly as the plain loop (acc += a*b, which gcc
// contracts to an FMA with -mfma) does, so results are bit-identical.
//   c: C row 0 of this block in n fractal 0; n fractal j at c + j*c_nstep
//   a: widened A row 0 of this block at k fractal 0 (k fractal step 256)
//   b: transposed B at k fractal 0, n fractal 0 (n fractal step 256, k fractal step b_kstep)
//   init: acc starts at bias[j*16 ..] (bias != nullptr) or 0, else at C
template <int MR, int NR>
inline void mmad_block(float* c, std::size_t c_nstep, const float* a, const float* b, std::size_t b_kstep, int K1,
                       bool init, const float* bias) {
  constexpr int VR = 16 / W, NV = NR * VR;
  vf acc[MR][NV];
  for (int q = 0; q < NV; ++q) {
    const std::size_t col = std::size_t(q / VR) * c_nstep + (q % VR) * W;
    const vf b0 = init && bias ? vload(bias + (q / VR) * 16 + (q % VR) * W) : vzero();
    for (int i = 0; i < MR; ++i) acc[i][q] = init ? b0 : vload(c + col + i * 16);
  }
  for (int k1 = 0; k1 < K1; ++k1) {
    const float* ak = a + std::size_t(k1) * 256;
    const float* bk = b + std::size_t(k1) * b_kstep;
#pragma GCC unroll 4
    for (int kk = 0; kk < 16; ++kk) {
      vf bv[NV];
      for (int q = 0; q < NV; ++q) bv[q] = vload(bk + (q / VR) * 256 + kk * 16 + (q % VR) * W);
      for (int i = 0; i < MR; ++i) {
        const vf av = vset1(ak[i * 16 + kk]);
        for (int q = 0; q < NV; ++q) acc[i][q] = vfma(av, bv[q], acc[i][q]);
      }
    }
  }
  for (int q = 0; q < NV; ++q) {
    const std::size_t col = std::size_t(q / VR) * c_nstep + (q % VR) * W;
    for (int i = 0; i < MR; ++i) vstore(c + col + i * 16, acc[i][q]);
  }
}

#if KILN_SIMD_BITS == 512
// The 32-zmm grouping of N1 n fractals, shared by the mmad routes: rows(NR, MR, r0) for groups of 3 x 8 rows,
// then 2 x 8, a lone fractal as 1 x 16, advancing n1. 3k+1 fractals go as 3(k-1) + 2 + 2, so no group is a
// lone fractal unless N1 == 1.
template <class Rows>
inline void zmm_fractal_groups(int N1, int& n1, Rows&& rows) {
  using I1 = std::integral_constant<int, 1>;
  using I2 = std::integral_constant<int, 2>;
  using I3 = std::integral_constant<int, 3>;
  using I8 = std::integral_constant<int, 8>;
  using I16 = std::integral_constant<int, 16>;
  const int threes = N1 % 3 == 1 && N1 > 1 ? N1 / 3 - 1 : N1 / 3;
  for (int g = 0; g < threes; ++g, n1 += 3) rows(I3{}, I8{}, 0), rows(I3{}, I8{}, 8);
  for (; N1 - n1 >= 2; n1 += 2) rows(I2{}, I8{}, 0), rows(I2{}, I8{}, 8);
  if (n1 < N1) rows(I1{}, I16{}, 0);
}
#endif

// C (NZ [N1][M1][16][16] fp32) (+)= af x bf over all K1 k fractals.
// AVX-512 (32 zmm): n fractals in groups of 3 x 8 rows (24 accumulators), the
// remainder in groups of 2 x 8 rows, a lone fractal as 1 x 16 rows.
// AVX2 (16 ymm): one n fractal (2 ymm per row) x 6, 6, 4 rows.
inline void mmad_f32(float* c, const float* af, const float* bf, int M1, int N1, int K1, bool init, const float* bias) {
  const std::size_t c_nstep = std::size_t(M1) * 256, b_kstep = std::size_t(N1) * 256;
  int n1 = 0;
  // Rows [r0, r0+MR) of every m fractal against n fractals [n1, n1+NR).
  auto rows = [&](auto nr, auto mr, int r0) {
    constexpr int NR = decltype(nr)::value, MR = decltype(mr)::value;
    for (int m1 = 0; m1 < M1; ++m1)
      mmad_block<MR, NR>(c + std::size_t(n1) * c_nstep + std::size_t(m1) * 256 + r0 * 16, c_nstep,
                         af + std::size_t(m1) * K1 * 256 + r0 * 16, bf + std::size_t(n1) * 256, b_kstep, K1, init,
                         bias ? bias + n1 * 16 : nullptr);
  };
#if KILN_SIMD_BITS == 512
  zmm_fractal_groups(N1, n1, rows);
#else
  using I1 = std::integral_constant<int, 1>;
  using I4 = std::integral_constant<int, 4>;
  using I6 = std::integral_constant<int, 6>;
  for (; n1 < N1; ++n1) rows(I1{}, I6{}, 0), rows(I1{}, I6{}, 6), rows(I1{}, I4{}, 12);
#endif
}
#endif  // KILN_SIMD_BITS

// ---- Fixpipe: fp32 -> fp16 runs ----------------------------------------------
// dst[i] = fp16(relu ? (src[i] < 0 ? 0 : src[i]) : src[i]), round-to-nearest-even. ReLU keeps NaN, as ONNX
// Relu does (no device source documents the Fixpipe's NaN behaviour; docs/numerics.md).
inline void f32_to_f16_run(const float* src, f16* dst, std::size_t n, bool relu) {
#if KILN_SIMD_BITS
  // max(0, v) returns its second operand unless 0 > v: exactly v < 0 ? 0 : v (NaN stays NaN, -0 stays -0).
  const vf z = vzero();
  std::size_t i = 0;
  if (relu)
    for (; i + W <= n; i += W) vstore(dst + i, vmax(z, vload(src + i)));
  else
    for (; i + W <= n; i += W) vstore(dst + i, vload(src + i));
  if (i < n) {  // partial vector through a zero-padded copy (the vector convert rounds as f32_to_f16)
    alignas(64) float t[W] = {};
    f16 h[W];
    std::memcpy(t, src + i, (n - i) * sizeof(float));
    const vf v = vload(t);
    vstore(h, relu ? vmax(z, v) : v);
    std::memcpy(dst + i, h, (n - i) * sizeof(f16));
  }
#else
  for (std::size_t i = 0; i < n; ++i) {
    const float v = src[i];
    dst[i] = f32_to_f16(relu && v < 0.f ? 0.f : v);
  }
#endif
}

// ---- bf16 Cube operands (KILN_DTYPE=bf16) -------------------------------------
// Round to nearest even on the fp32 bit pattern, as f32_to_bf16 (half.hpp): NaN stays a quiet NaN.
#if KILN_SIMD_BITS == 512
inline __m256i bf16_round(__m512 v) {
  const __m512i x = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_srli_epi32(_mm512_add_epi32(x, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  r = _mm512_mask_or_epi32(r, nan, _mm512_srli_epi32(x, 16), _mm512_set1_epi32(0x40));
  return _mm512_cvtepi32_epi16(r);
}
#endif

// fp16 values rounded to bf16 in place (an activation entering the Cube of a bf16 build).
inline void f16_to_bf16_inplace(f16* p, std::size_t n) {
  std::size_t i = 0;
#if KILN_SIMD_BITS == 512
  for (; i + 16 <= n; i += 16) _mm256_storeu_si256(reinterpret_cast<__m256i*>(p + i), bf16_round(vload(p + i)));
#endif
  for (; i < n; ++i) p[i] = f16_to_bf16(p[i]);
}

// dst[i] = bf16(relu ? max(0, src[i]) : src[i]) (Fixpipe L0C -> L1 of a bf16 chain; NaN kept, as above).
inline void f32_to_bf16_run(const float* src, f16* dst, std::size_t n, bool relu) {
  std::size_t i = 0;
#if KILN_SIMD_BITS == 512
  const vf z = vzero();
  for (; i + 16 <= n; i += 16) {
    const vf v = vload(src + i);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), bf16_round(relu ? vmax(z, v) : v));
  }
#endif
  for (; i < n; ++i) dst[i] = f32_to_bf16(relu && src[i] < 0.f ? 0.f : src[i]);
}

#if KILN_SIMD_BITS == 512 && defined(__AVX512BF16__)
#define KILN_SIMD_DPBF16 1
// The bf16 mmad on vdpbf16ps (AVX512_BF16): each instruction adds two k steps per lane, pairs (k, k+1)
// taken from one 32-bit word of each operand, so A (ZZ: a row's k values are contiguous) is used as it
// sits in L0A and only B is regrouped. vdpbf16ps treats bf16 denormal inputs as zero, flushes denormal
// results and adds the pair's two exact products to the accumulator in its own order, so results can
// differ from the k-ascending FMA path by a few fp32 roundings of the accumulator (README, bf16 section;
// benchmarks/micro/bench_bf16_mmad.cpp measures it); the FMA path stays the reference on every other ISA.
// B (ZN, [K1][N1][16 n][16 k] bf16) -> [K1][N1][8 k pairs][16 n] 32-bit pairs: a 16x8 dword transpose.
inline void pair_b_bf16(const f16* src, std::uint32_t* dst, std::size_t fractals) {
  for (std::size_t f = 0; f < fractals; ++f) {
    __m512 r[16];  // r[n] = row n's 8 pairs, then the next fractal's (zero past the end)
    const std::uint32_t* s = reinterpret_cast<const std::uint32_t*>(src + f * 256);
    const bool two = f + 1 < fractals;
    for (int n = 0; n < 16; ++n) {
      const __m256 lo = _mm256_loadu_ps(reinterpret_cast<const float*>(s + n * 8));
      const __m256 hi = two ? _mm256_loadu_ps(reinterpret_cast<const float*>(s + 128 + n * 8)) : _mm256_setzero_ps();
      r[n] = _mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1);
    }
    transpose16(r);  // r[p] = pair p over the 16 n of fractal f; r[8 + p] the same of fractal f + 1
    float* d = reinterpret_cast<float*>(dst + f * 128);
    for (int p = 0; p < (two ? 16 : 8); ++p) _mm512_storeu_ps(d + p * 16, r[p]);
    if (two) ++f;
  }
}

// As mmad_block, two k per instruction: a = L0A row 0 of this block at k fractal 0 as 32-bit pairs
// (row step 8, k fractal step 128), b = paired B (n fractal step 128, k fractal step b_kstep).
template <int MR, int NR>
inline void mmad_block_bf16(float* c, std::size_t c_nstep, const std::uint32_t* a, const std::uint32_t* b,
                            std::size_t b_kstep, int K1, bool init, const float* bias) {
  __m512 acc[MR][NR];
  for (int q = 0; q < NR; ++q) {
    const __m512 b0 = init && bias ? _mm512_loadu_ps(bias + q * 16) : _mm512_setzero_ps();
    for (int i = 0; i < MR; ++i) acc[i][q] = init ? b0 : _mm512_loadu_ps(c + q * c_nstep + i * 16);
  }
  for (int k1 = 0; k1 < K1; ++k1) {
    const std::uint32_t* ak = a + std::size_t(k1) * 128;
    const std::uint32_t* bk = b + std::size_t(k1) * b_kstep;
#pragma GCC unroll 2
    for (int p = 0; p < 8; ++p) {
      __m512bh bv[NR];
      for (int q = 0; q < NR; ++q) bv[q] = (__m512bh)_mm512_loadu_si512(bk + q * 128 + p * 16);
      for (int i = 0; i < MR; ++i) {
        const __m512bh av = (__m512bh)_mm512_set1_epi32(int(ak[i * 8 + p]));
        for (int q = 0; q < NR; ++q) acc[i][q] = _mm512_dpbf16_ps(acc[i][q], av, bv[q]);
      }
    }
  }
  for (int q = 0; q < NR; ++q)
    for (int i = 0; i < MR; ++i) _mm512_storeu_ps(c + q * c_nstep + i * 16, acc[i][q]);
}

// C (NZ fp32) (+)= A (L0A ZZ bf16) x B (paired, from pair_b_bf16), grouped as mmad_f32.
inline void mmad_bf16_dp(float* c, const f16* a16, const std::uint32_t* bp, int M1, int N1, int K1, bool init,
                         const float* bias) {
  const std::size_t c_nstep = std::size_t(M1) * 256, b_kstep = std::size_t(N1) * 128;
  const std::uint32_t* a = reinterpret_cast<const std::uint32_t*>(a16);
  int n1 = 0;
  auto rows = [&](auto nr, auto mr, int r0) {
    constexpr int NR = decltype(nr)::value, MR = decltype(mr)::value;
    for (int m1 = 0; m1 < M1; ++m1)
      mmad_block_bf16<MR, NR>(c + std::size_t(n1) * c_nstep + std::size_t(m1) * 256 + r0 * 16, c_nstep,
                              a + std::size_t(m1) * K1 * 128 + r0 * 8, bp + std::size_t(n1) * 128, b_kstep, K1, init,
                              bias ? bias + n1 * 16 : nullptr);
  };
  zmm_fractal_groups(N1, n1, rows);
}
#endif

// ---- Vector ops ----------------------------------------------------------------
// One functor per VecOp, called as op(a, b, c) with a = src0, b = src1 (binary)
// or the scalar s (unary), c = dst before the op (read only if kReadsDst). The
// scalar form is the reference semantics in fp32; the vector form computes the
// same value in W lanes.
// clang-format off: one-line operator table (clang-format would read `a * b` in a macro argument as a pointer)
#if KILN_SIMD_BITS
#define KILN_SIMD_V(expr) \
  vf operator()(vf a, vf b, vf c) const { (void)a; (void)b; (void)c; return expr; }
#else
#define KILN_SIMD_V(expr)
#endif
#define KILN_SIMD_OP(Name, reads_dst, scalar_expr, vec_expr)                                           \
  struct Name {                                                                                         \
    static constexpr bool kReadsDst = reads_dst, kScalarOnly = false;                                  \
    float s = 0.f; /* the scalar operand of Adds/Muls/Maxs/Mins */                                      \
    float operator()(float a, float b, float c) const { (void)a; (void)b; (void)c; return scalar_expr; } \
    KILN_SIMD_V(vec_expr)                                                                               \
  };
KILN_SIMD_OP(OpAdd, false, a + b, vadd(a, b))
KILN_SIMD_OP(OpSub, false, a - b, vsub(a, b))
KILN_SIMD_OP(OpMul, false, a * b, vmul(a, b))
KILN_SIMD_OP(OpDiv, false, a / b, vdiv(a, b))
KILN_SIMD_OP(OpMax, false, a > b ? a : b, vmax(a, b))
KILN_SIMD_OP(OpMin, false, a < b ? a : b, vmin(a, b))
KILN_SIMD_OP(OpMulAddDst, true, std::fma(a, b, c), vfma(a, b, c))
KILN_SIMD_OP(OpRelu, false, a < 0.f ? 0.f : a, vmax(vzero(), a))  /* NaN kept, as ONNX Relu */
KILN_SIMD_OP(OpAbs, false, std::fabs(a), vabs(a))
KILN_SIMD_OP(OpReciprocal, false, 1.0f / a, vdiv(vset1(1.0f), a))
KILN_SIMD_OP(OpCopy, false, a, a)
KILN_SIMD_OP(OpAdds, false, a + s, vadd(a, b))
KILN_SIMD_OP(OpMuls, false, a * s, vmul(a, b))
KILN_SIMD_OP(OpMaxs, false, a > s ? a : s, vmax(a, b))
KILN_SIMD_OP(OpMins, false, a < s ? a : s, vmin(a, b))
KILN_SIMD_OP(OpCmpLt, false, a < b ? 1.f : 0.f, vcmp<_CMP_LT_OQ>(a, b))  /* vcmpv_*: 1 / 0 per lane, NaN false */
KILN_SIMD_OP(OpCmpGt, false, a > b ? 1.f : 0.f, vcmp<_CMP_GT_OQ>(a, b))
KILN_SIMD_OP(OpCmpEq, false, a == b ? 1.f : 0.f, vcmp<_CMP_EQ_OQ>(a, b))
KILN_SIMD_OP(OpCmpLe, false, a <= b ? 1.f : 0.f, vcmp<_CMP_LE_OQ>(a, b))
KILN_SIMD_OP(OpCmpGe, false, a >= b ? 1.f : 0.f, vcmp<_CMP_GE_OQ>(a, b))
KILN_SIMD_OP(OpSel, true, c != 0.f ? a : b, vsel(c, a, b))  /* vsel: the condition is dst before the op */
#undef KILN_SIMD_OP
// clang-format on
#undef KILN_SIMD_V

// Exp stays std::exp per element (a vector exp would not round identically), so
// its runs are a plain scalar loop; Ln and Sqrt likewise (std::log / std::sqrt:
// NaN for a negative input, log(0) = -inf), and LeakyRelu (x < 0 ? alpha * x : x,
// NaN kept; alpha is the scalar operand s).
#define KILN_SCALAR_ONLY_OP(Name, expr)                            \
  struct Name {                                                    \
    static constexpr bool kReadsDst = false, kScalarOnly = true;   \
    float s = 0.f;                                                 \
    float operator()(float a, float, float) const { return expr; } \
  };
KILN_SCALAR_ONLY_OP(OpExp, std::exp(a))
KILN_SCALAR_ONLY_OP(OpLn, std::log(a))
KILN_SCALAR_ONLY_OP(OpSqrt, std::sqrt(a))
KILN_SCALAR_ONLY_OP(OpLeakyRelu, a < 0.f ? a * s : a)
#undef KILN_SCALAR_ONLY_OP

// d[i] = op(a[i], b[i], d[i]) over one contiguous run. Element types convert on
// load/store (fp16 <-> fp32). A partial vector (tail of a run) goes through
// zero-padded copies: the padding lanes are computed and dropped.
template <class Op, class D, class S>
inline void run_binary(const Op& op, D* d, const S* a, const S* b, std::size_t n) {
#if KILN_SIMD_BITS
  std::size_t i = 0;
  for (; i + W <= n; i += W) vstore(d + i, op(vload(a + i), vload(b + i), Op::kReadsDst ? vload(d + i) : vzero()));
  if (i < n) {
    alignas(64) S ta[W] = {}, tb[W] = {};
    alignas(64) D td[W] = {};
    std::memcpy(ta, a + i, (n - i) * sizeof(S));
    std::memcpy(tb, b + i, (n - i) * sizeof(S));
    if (Op::kReadsDst) std::memcpy(td, d + i, (n - i) * sizeof(D));
    vstore(td, op(vload(ta), vload(tb), vload(td)));
    std::memcpy(d + i, td, (n - i) * sizeof(D));
  }
#else
  for (std::size_t i = 0; i < n; ++i) d[i] = st<D>(op(ld(a[i]), ld(b[i]), Op::kReadsDst ? ld(d[i]) : 0.f));
#endif
}

// d[i] = op(a[i]) over one contiguous run; the scalar of Adds/Muls/Maxs/Mins is
// op.s. With OpCopy and D != S this is vcast.
template <class Op, class D, class S>
inline void run_unary(const Op& op, D* d, const S* a, std::size_t n) {
#if KILN_SIMD_BITS
  if constexpr (!Op::kScalarOnly) {
    const vf sv = vset1(op.s);
    std::size_t i = 0;
    for (; i + W <= n; i += W) vstore(d + i, op(vload(a + i), sv, vzero()));
    if (i < n) {
      alignas(64) S ta[W] = {};
      alignas(64) D td[W];
      std::memcpy(ta, a + i, (n - i) * sizeof(S));
      vstore(td, op(vload(ta), sv, vzero()));
      std::memcpy(d + i, td, (n - i) * sizeof(D));
    }
    return;
  }
#endif
  for (std::size_t i = 0; i < n; ++i) d[i] = st<D>(op(ld(a[i]), op.s, 0.f));
}

// A Vector op picked once per instruction: `run` over a contiguous run (b is
// ignored by unary ops), `lane` for one fp32 lane (the lane-by-lane path).
// Plain function pointers, so an instruction instantiates one small run loop
// per op and element type, and the loops over runs and lanes are shared.
template <class T>
struct VecKernel {
  void (*run)(const VecKernel& k, T* d, const T* a, const T* b, std::size_t n) = nullptr;
  float (*lane)(const VecKernel& k, float a, float b, float c) = nullptr;
  float s = 0.f;  // scalar operand of Adds/Muls/Maxs/Mins
  bool reads_dst = false;
};

template <class Op, class T, bool kBinary>
inline VecKernel<T> make_kernel(float s) {
  VecKernel<T> k;
  k.s = s;
  k.reads_dst = Op::kReadsDst;
  k.run = [](const VecKernel<T>& kk, T* d, const T* a, const T* b, std::size_t n) {
    if constexpr (kBinary) run_binary(Op{kk.s}, d, a, b, n);
    else run_unary(Op{kk.s}, d, a, n);
    (void)b;
  };
  k.lane = [](const VecKernel<T>& kk, float a, float b, float c) { return Op{kk.s}(a, kBinary ? b : kk.s, c); };
  return k;
}

// The kernel of a binary VecOp; run == nullptr if op is not binary.
template <class T>
inline VecKernel<T> binary_kernel(emu::VecOp op) {
  using emu::VecOp;
  switch (op) {
    case VecOp::Add: return make_kernel<OpAdd, T, true>(0.f);
    case VecOp::Sub: return make_kernel<OpSub, T, true>(0.f);
    case VecOp::Mul: return make_kernel<OpMul, T, true>(0.f);
    case VecOp::Div: return make_kernel<OpDiv, T, true>(0.f);
    case VecOp::Max: return make_kernel<OpMax, T, true>(0.f);
    case VecOp::Min: return make_kernel<OpMin, T, true>(0.f);
    case VecOp::MulAddDst: return make_kernel<OpMulAddDst, T, true>(0.f);
    case VecOp::CmpLt: return make_kernel<OpCmpLt, T, true>(0.f);
    case VecOp::CmpGt: return make_kernel<OpCmpGt, T, true>(0.f);
    case VecOp::CmpEq: return make_kernel<OpCmpEq, T, true>(0.f);
    case VecOp::CmpLe: return make_kernel<OpCmpLe, T, true>(0.f);
    case VecOp::CmpGe: return make_kernel<OpCmpGe, T, true>(0.f);
    case VecOp::Sel: return make_kernel<OpSel, T, true>(0.f);
    default: return {};
  }
}

// The kernel of a unary or scalar VecOp; run == nullptr if op is not one.
template <class T>
inline VecKernel<T> unary_kernel(emu::VecOp op, float scalar) {
  using emu::VecOp;
  switch (op) {
    case VecOp::Relu: return make_kernel<OpRelu, T, false>(scalar);
    case VecOp::Exp: return make_kernel<OpExp, T, false>(scalar);
    case VecOp::Ln: return make_kernel<OpLn, T, false>(scalar);
    case VecOp::Sqrt: return make_kernel<OpSqrt, T, false>(scalar);
    case VecOp::LeakyRelu: return make_kernel<OpLeakyRelu, T, false>(scalar);
    case VecOp::Abs: return make_kernel<OpAbs, T, false>(scalar);
    case VecOp::Reciprocal: return make_kernel<OpReciprocal, T, false>(scalar);
    case VecOp::Copy: return make_kernel<OpCopy, T, false>(scalar);
    case VecOp::Adds: return make_kernel<OpAdds, T, false>(scalar);
    case VecOp::Muls: return make_kernel<OpMuls, T, false>(scalar);
    case VecOp::Maxs: return make_kernel<OpMaxs, T, false>(scalar);
    case VecOp::Mins: return make_kernel<OpMins, T, false>(scalar);
    default: return {};
  }
}

// The enabled lanes of a level-0 vector instruction as contiguous runs. With a
// prefix mask of `len` lanes, each operand's lanes of one repeat are contiguous
// (block stride 1) or contiguous per 32-byte block; cutting the repeat into
// pieces of `chunk` lanes (len, or the smallest block of an operand with block
// stride != 1) makes every piece contiguous in every operand. Piece c of repeat
// r starts at r*step[k] + coff[k][c] in operand k. When all repeats abut in one
// piece each, the whole instruction is one run of times*len (merged).
struct RunOperand {
  const void* ptr;  // first element the instruction addresses
  unsigned elem;    // element size in bytes
  unsigned blk, rep;
};
struct Runs {
  bool ok = false;
  bool merged = false;
  unsigned len = 0, chunk = 0, nchunks = 0;
  std::size_t step[3] = {0, 0, 0};  // dst, src0, src1 (elements per repeat)
  std::uint32_t coff[3][16] = {};   // piece offsets inside a repeat (elements)
};

// ops[0] is dst. Also refuses operands that overlap in a way the piecewise
// vector loop would read in a different order than the lane-by-lane loop: every
// source must be disjoint from dst or address exactly the same elements.
inline Runs plan_runs(int prefix, unsigned times, const RunOperand* ops, int nops) {
  Runs r;
  if (prefix <= 0 || times == 0) return r;
  r.len = unsigned(prefix);
  r.chunk = r.len;
  for (int k = 0; k < nops; ++k)
    if (ops[k].blk != 1) r.chunk = std::min(r.chunk, 32 / ops[k].elem);
  r.nchunks = (r.len + r.chunk - 1) / r.chunk;
  if (r.nchunks > 16) return r;
  bool merged = r.nchunks == 1;
  std::uintptr_t lo[3], hi[3];
  for (int k = 0; k < nops; ++k) {
    const std::size_t E = 32 / ops[k].elem;
    r.step[k] = std::size_t(ops[k].rep) * E;
    merged = merged && r.step[k] == r.len;
    std::size_t end = 0;  // one past the last element of a repeat
    for (unsigned c = 0; c < r.nchunks; ++c) {
      const std::size_t lane = std::size_t(c) * r.chunk;
      r.coff[k][c] = std::uint32_t(ops[k].blk == 1 ? lane : (lane / E) * ops[k].blk * E + lane % E);
      end = std::max<std::size_t>(end, r.coff[k][c] + std::min<std::size_t>(r.chunk, r.len - lane));
    }
    lo[k] = reinterpret_cast<std::uintptr_t>(ops[k].ptr);
    hi[k] = lo[k] + (std::size_t(times - 1) * r.step[k] + end) * ops[k].elem;
  }
  for (int k = 1; k < nops; ++k) {
    const bool disjoint = hi[k] <= lo[0] || hi[0] <= lo[k];
    const bool same = lo[k] == lo[0] && ops[k].elem == ops[0].elem && r.step[k] == r.step[0] &&
                      std::memcmp(r.coff[k], r.coff[0], sizeof(r.coff[0])) == 0;
    if (!disjoint && !same) return r;
  }
  r.ok = true;
  r.merged = merged;
  return r;
}

// Calls fn(dst_off, src0_off, src1_off, n) for each piece, in lane order.
template <class Fn>
inline void for_runs(const Runs& r, unsigned times, Fn&& fn) {
  if (r.merged) {
    fn(std::size_t(0), std::size_t(0), std::size_t(0), std::size_t(r.len) * times);
    return;
  }
  for (unsigned t = 0; t < times; ++t)
    for (unsigned c = 0; c < r.nchunks; ++c)
      fn(t * r.step[0] + r.coff[0][c], t * r.step[1] + r.coff[1][c], t * r.step[2] + r.coff[2][c],
         std::size_t(std::min(r.chunk, r.len - c * r.chunk)));
}

}  // namespace kiln::simd
