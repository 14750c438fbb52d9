// Micro-benchmark and bit-identity check of the emulator's hot instructions
// (kernels/kiln/core.hpp): mmad, load3d, load2d, the Fixpipe epilogues and the
// Vector ops. Each instruction is compared bit for bit against a frozen copy of
// its former per-element implementation (the ref:: functions below), on random
// data over many shapes, then both are timed single-threaded.
//
// Build and run from the repo root, with the ISA flags of the build to check
// (cmake/KilnISA.cmake), e.g. the avx512 ones:
//   ISA="-mavx512f -mavx512bw -mavx512vl -mavx512dq -mfma -mf16c"   (avx2: "-mavx2 -mfma -mf16c", portable: "")
//   g++ -O3 -std=c++17 $ISA -I kernels benchmarks/micro/bench_core_ops.cpp kernels/kiln/core.cpp -o bench_core_ops
//   ./bench_core_ops
// Options: --check-only (skip timings), --quick (fewer shapes, shorter timings).
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kiln/core.hpp"
#include "kiln/half.hpp"

using namespace kiln;
using namespace kiln::emu;

// A coupled profile (one core has L0A/B/C and UB) with the 310P's numbers, but
// L0A/L0B/L0C enlarged so the larger benchmark shapes fit in one instruction.
static constexpr Profile kBench{
    "bench", "310P numbers, enlarged L0 buffers", 8, 8, true, 1.0,
    {0, 1 << 20, 1 << 20, 1 << 20, 1 << 20, 256 << 10, 1024},
    {1, 32, 512, 512, 64, 32, 64},
    17, 17, 256, 128, 128, 32, 64, 64,
    30, 28, 50, 20, 20, 21, 30, 2,
    {2, 2, 2, 4, 2, 2, 6, 2, 2, 2, 2, 1, 4, 1, 1, 1, 1, 1, 7, 7},
    {2, 2, 2, 4, 2, 2, 6, 2, 2, 2, 2, 1, 2, 1, 1, 1, 1, 1, 3, 3}};

// ============================================================================
// Reference: the per-element implementations as they were before the SIMD
// paths (bodies copied from core.hpp, checks and timeline dropped).
// ============================================================================
namespace ref {

static void widen16(CubeIn t, const f16* src, float* dst, std::size_t n) {
  if (t == CubeIn::F16) {
    f16_to_f32(src, dst, n);
  } else {
    for (std::size_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(src[i]);
  }
}

static void mmad(float* cptr, const f16* aptr, const f16* bptr, int m, int n, int k, bool init, const float* bias,
                 CubeIn in_type) {
  static std::vector<float> af, bf;
  const int M1 = (m + 15) / 16, N1 = (n + 15) / 16, K1 = (k + 15) / 16;
  af.resize(std::size_t(M1) * K1 * 256);
  bf.resize(std::size_t(K1) * N1 * 256);
  widen16(in_type, aptr, af.data(), af.size());
  for (std::size_t f = 0; f < std::size_t(K1) * N1; ++f) {
    const f16* src = bptr + f * 256;
    float* dst = bf.data() + f * 256;
    float tmp[256];
    widen16(in_type, src, tmp, 256);
    for (int nn = 0; nn < 16; ++nn)
      for (int kk = 0; kk < 16; ++kk) dst[kk * 16 + nn] = tmp[nn * 16 + kk];
  }
  for (int n1 = 0; n1 < N1; ++n1) {
    for (int m1 = 0; m1 < M1; ++m1) {
      float* cf = cptr + (std::size_t(n1) * M1 + m1) * 256;
      alignas(64) float acc[16][16];
      if (init) {
        for (int r = 0; r < 16; ++r)
          for (int q = 0; q < 16; ++q) acc[r][q] = bias ? bias[n1 * 16 + q] : 0.f;
      } else {
        std::memcpy(acc, cf, sizeof(acc));
      }
      for (int k1 = 0; k1 < K1; ++k1) {
        const float* af_ = af.data() + (std::size_t(m1) * K1 + k1) * 256;
        const float* bf_ = bf.data() + (std::size_t(k1) * N1 + n1) * 256;
        for (int r = 0; r < 16; ++r)
          for (int kk = 0; kk < 16; ++kk) {
            const float av = af_[r * 16 + kk];
            for (int q = 0; q < 16; ++q) acc[r][q] += av * bf_[kk * 16 + q];
          }
      }
      std::memcpy(cf, acc, sizeof(acc));
    }
  }
}

static void load2d(f16* dst, const f16* src, std::size_t repeat, std::size_t src_stride, std::size_t dst_stride,
                   bool transpose) {
  for (std::size_t r = 0; r < repeat; ++r) {
    const f16* s = src + r * src_stride * 256;
    f16* d = dst + r * dst_stride * 256;
    if (!transpose) {
      std::memcpy(d, s, 512);
    } else {
      for (int i = 0; i < 16; ++i)
        for (int j = 0; j < 16; ++j) d[i * 16 + j] = s[j * 16 + i];
    }
  }
}

static void load3d(f16* dstp, const f16* fmp, const Img2col& g, long m_start, int m1_count, int k1_start,
                   int k1_count) {
  const int taps = g.kh * g.kw;
  for (int mi = 0; mi < m1_count; ++mi) {
    for (int r = 0; r < 16; ++r) {
      const long p = m_start + mi * 16 + r;
      const bool valid_pixel = p < g.m_total;
      const int ho = valid_pixel ? int(p / g.out_w) : 0;
      const int wo = valid_pixel ? int(p % g.out_w) : 0;
      for (int ki = 0; ki < k1_count; ++ki) {
        f16* d = dstp + (std::size_t(mi) * k1_count + ki) * 256 + r * 16;
        const int k1 = k1_start + ki;
        const int c1 = k1 / taps, t = k1 % taps, i = t / g.kw, j = t % g.kw;
        const int hi = ho * g.stride_h - g.pad_top + i * g.dil_h;
        const int wi = wo * g.stride_w - g.pad_left + j * g.dil_w;
        if (!valid_pixel || hi < 0 || hi >= g.fm_h || wi < 0 || wi >= g.fm_w) {
          std::memset(d, 0, 32);
          continue;
        }
        const int hs = hi - g.slab_row0;
        if (hs < 0 || hs >= g.slab_h)
          throw std::runtime_error("load3d: image row " + std::to_string(hi) + " is not in the L1 slab (rows " +
                                   std::to_string(g.slab_row0) + ".." + std::to_string(g.slab_row0 + g.slab_h - 1) +
                                   ")");
        std::memcpy(d, fmp + ((std::size_t(c1) * g.slab_h + hs) * g.fm_w + wi) * 16, 32);
      }
    }
  }
}

static void fixpipe_nz_to_nd(f16* dst, std::size_t ld, const float* c, int m, int n, int m1_stride, bool relu) {
  for (int i = 0; i < m; ++i) {
    const int m1 = i / 16, r = i % 16;
    for (int j = 0; j < n; ++j) {
      float v = c[(std::size_t(j / 16) * m1_stride + m1) * 256 + r * 16 + (j % 16)];
      if (relu && !(v > 0.f)) v = 0.f;
      dst[std::size_t(i) * ld + j] = f32_to_f16(v);
    }
  }
}

static void fixpipe_nz_to_nc1hwc0(f16* dst, std::size_t plane, const float* c, int m, int n1_count, int m1_stride,
                                  bool relu) {
  float tmp[16];
  for (int n1 = 0; n1 < n1_count; ++n1)
    for (int i = 0; i < m; ++i) {
      const float* src = c + (std::size_t(n1) * m1_stride + i / 16) * 256 + (i % 16) * 16;
      for (int q = 0; q < 16; ++q) tmp[q] = relu ? (src[q] > 0.f ? src[q] : 0.f) : src[q];
      f32_to_f16(tmp, dst + n1 * plane + std::size_t(i) * 16, 16);
    }
}

static float load(f16 h) { return f16_to_f32(h); }
static float load(float f) { return f; }
template <class T>
static T store(float v) {
  if constexpr (std::is_same_v<T, f16>) return f32_to_f16(v);
  else return v;
}

template <class D, class S, class F>
static void vec_apply(const Repeat& rp, Mask mask, F&& f, unsigned lanes = 256 / sizeof(D)) {
  const std::size_t Ed = 32 / sizeof(D), Es = 32 / sizeof(S);
  const int prefix = mask.prefix(lanes);
  for (unsigned r = 0; r < rp.times; ++r) {
    const std::size_t d0 = std::size_t(r) * rp.dst_rep * Ed, a0 = std::size_t(r) * rp.src0_rep * Es,
                      b0 = std::size_t(r) * rp.src1_rep * Es;
    for (unsigned i = 0; i < lanes; ++i) {
      if (prefix >= 0 ? i >= unsigned(prefix) : !mask.test(i)) {
        if (prefix >= 0) break;
        continue;
      }
      f(d0 + (i / Ed) * rp.dst_blk * Ed + i % Ed, a0 + (i / Es) * rp.src0_blk * Es + i % Es,
        b0 + (i / Es) * rp.src1_blk * Es + i % Es);
    }
  }
}

template <class T>
static void vbinary(VecOp op, T* dst, const T* s0, const T* s1, Mask mask, Repeat rp) {
  vec_apply<T, T>(rp, mask, [&](std::size_t d, std::size_t i0, std::size_t i1) {
    const float a = load(s0[i0]), b = load(s1[i1]);
    float r;
    switch (op) {
      case VecOp::Add: r = a + b; break;
      case VecOp::Sub: r = a - b; break;
      case VecOp::Mul: r = a * b; break;
      case VecOp::Div: r = a / b; break;
      case VecOp::Max: r = a > b ? a : b; break;
      case VecOp::Min: r = a < b ? a : b; break;
      case VecOp::MulAddDst: r = std::fma(a, b, load(dst[d])); break;
      default: throw std::runtime_error("vbinary: not a binary op");
    }
    dst[d] = store<T>(r);
  });
}

template <class T>
static void vunary(VecOp op, T* dst, const T* src, Mask mask, Repeat rp, float scalar) {
  vec_apply<T, T>(rp, mask, [&](std::size_t d, std::size_t i0, std::size_t) {
    const float a = load(src[i0]);
    float r;
    switch (op) {
      case VecOp::Relu: r = a > 0.f ? a : 0.f; break;
      case VecOp::Exp: r = std::exp(a); break;
      case VecOp::Abs: r = std::fabs(a); break;
      case VecOp::Reciprocal: r = 1.0f / a; break;
      case VecOp::Copy: r = a; break;
      case VecOp::Adds: r = a + scalar; break;
      case VecOp::Muls: r = a * scalar; break;
      case VecOp::Maxs: r = a > scalar ? a : scalar; break;
      case VecOp::Mins: r = a < scalar ? a : scalar; break;
      default: throw std::runtime_error("vunary: not a unary op");
    }
    dst[d] = store<T>(r);
  });
}

template <class D, class S>
static void vcast(D* dst, const S* src, Mask mask, Repeat rp) {
  vec_apply<D, S>(rp, mask, [&](std::size_t d, std::size_t i0, std::size_t) { dst[d] = store<D>(load(src[i0])); }, 64);
}

}  // namespace ref

// ============================================================================
// Helpers
// ============================================================================
static std::mt19937_64 rng(12345);

static f16 rand_f16(float lo = -2.f, float hi = 2.f) {
  std::uniform_real_distribution<float> u(lo, hi);
  return f32_to_f16(u(rng));
}
static f16 rand_bf16(float lo = -2.f, float hi = 2.f) {
  std::uniform_real_distribution<float> u(lo, hi);
  const float f = u(rng);
  std::uint32_t b;
  std::memcpy(&b, &f, 4);
  return f16(b >> 16);
}
static float rand_f32(float lo = -2.f, float hi = 2.f) { return std::uniform_real_distribution<float>(lo, hi)(rng); }

template <class T>
static T store0() {
  return T(0);
}

template <class T>
static void fill_rand(T* p, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    if constexpr (sizeof(T) == 2) p[i] = rand_f16();
    else p[i] = rand_f32();
  }
}

static int g_fail = 0;
static void expect_same(const void* a, const void* b, std::size_t bytes, const std::string& what) {
  if (std::memcmp(a, b, bytes) != 0) {
    if (g_fail < 20) {
      const auto* x = static_cast<const unsigned char*>(a);
      const auto* y = static_cast<const unsigned char*>(b);
      std::size_t i = 0;
      while (x[i] == y[i]) ++i;
      std::printf("MISMATCH: %s (first at byte %zu", what.c_str(), i);
      for (std::size_t j = i & ~std::size_t(3); j < (i & ~std::size_t(3)) + 4 && j < bytes; ++j)
        std::printf(" %02x/%02x", x[j], y[j]);
      std::printf(")\n");
    }
    ++g_fail;
  }
}

// Bitwise, except that any two NaNs match: with two NaN operands x86 returns the
// first source's NaN, and which operand gcc puts first in a commutative op
// (mul, add, fma forms) varies between compilations of the same expression,
// so the sign/payload of a NaN result is not stable even for the reference code.
template <class T>
static void expect_same_nan(const T* a, const T* b, std::size_t n, const std::string& what) {
  for (std::size_t i = 0; i < n; ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(T)) == 0) continue;
    const float x = ref::load(a[i]), y = ref::load(b[i]);
    if (std::isnan(x) && std::isnan(y)) continue;
    expect_same(a + i, b + i, sizeof(T), what + " element " + std::to_string(i));
    return;
  }
}

// Best-of-5 seconds per call, each sample running the call for >= min_s.
static double time_it(const std::function<void()>& fn, double min_s) {
  using clk = std::chrono::steady_clock;
  fn();
  double best = 1e30;
  for (int s = 0; s < 5; ++s) {
    long iters = 0;
    const auto t0 = clk::now();
    double el = 0;
    do {
      fn();
      ++iters;
      el = std::chrono::duration<double>(clk::now() - t0).count();
    } while (el < min_s);
    best = std::min(best, el / iters);
  }
  return best;
}

static bool g_quick = false;
static double min_s() { return g_quick ? 0.02 : 0.08; }

// ============================================================================
// Checks
// ============================================================================
static int check_mmad(Core& core) {
  core.start("check_mmad", 0);
  auto A = core.alloc<f16>(Pos::L0A, 1 << 18, "A");
  auto B = core.alloc<f16>(Pos::L0B, 1 << 18, "B");
  auto C = core.alloc<float>(Pos::L0C, 1 << 17, "C");
  auto bt = core.alloc<float>(Pos::BT, 256, "bias");
  std::vector<float> cref(C.count);
  const int ms[] = {1, 5, 16, 17, 33, 48, 100, 128, 131, 200, 256};
  const int ns[] = {1, 7, 16, 20, 32, 48, 64, 65, 80, 96, 112, 128, 160, 250, 256};
  const int ks[] = {1, 9, 16, 31, 64, 100, 128, 256};
  int shapes = 0;
  for (int m : ms)
    for (int n : ns)
      for (int k : ks) {
        const int M1 = (m + 15) / 16, N1 = (n + 15) / 16, K1 = (k + 15) / 16;
        if (std::size_t(M1) * N1 * 256 > C.count || std::size_t(M1) * K1 * 256 > A.count) continue;
        if (g_quick && (m + n + k) % 3) continue;
        for (int variant = 0; variant < 6; ++variant) {
          const bool init = variant & 1, use_bias = variant & 2, bf16 = variant >= 4;
          const CubeIn in = bf16 ? CubeIn::BF16 : CubeIn::F16;
          // Whole fractals are random (padding rows/cols included: they take part in the sum).
          for (std::size_t i = 0; i < std::size_t(M1) * K1 * 256; ++i) A.ptr[i] = bf16 ? rand_bf16() : rand_f16();
          for (std::size_t i = 0; i < std::size_t(K1) * N1 * 256; ++i) B.ptr[i] = bf16 ? rand_bf16() : rand_f16();
          for (std::size_t i = 0; i < std::size_t(M1) * N1 * 256; ++i) C.ptr[i] = rand_f32(-50, 50);
          for (int i = 0; i < 256; ++i) bt.ptr[i] = rand_f32(-5, 5);
          std::memcpy(cref.data(), C.ptr, std::size_t(M1) * N1 * 256 * 4);
          // Two calls: the second accumulates onto the first (K continues).
          for (int call = 0; call < 2; ++call) {
            const bool in_init = call == 0 && init;
            ref::mmad(cref.data(), A.ptr, B.ptr, m, n, k, in_init, use_bias ? bt.ptr : nullptr, in);
            core.mmad(C, 0, A, 0, B, 0, m, n, k, in_init, use_bias ? &bt : nullptr, 0, in);
          }
          expect_same(cref.data(), C.ptr, std::size_t(M1) * N1 * 256 * 4,
                      "mmad m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k) +
                          " variant=" + std::to_string(variant));
          ++shapes;
        }
      }
  return shapes;
}

static int check_load2d(Core& core) {
  core.start("check_load2d", 0);
  auto L1 = core.alloc<f16>(Pos::L1, 1 << 16, "l1");
  auto A = core.alloc<f16>(Pos::L0A, 1 << 16, "a");
  std::vector<f16> ref(A.count);
  int cases = 0;
  for (int tr = 0; tr < 2; ++tr)
    for (std::size_t rep : {1, 3, 8, 20})
      for (std::size_t ss : {1, 2, 5})
        for (std::size_t ds : {1, 3}) {
          fill_rand(L1.ptr, L1.count);
          fill_rand(A.ptr, A.count);
          std::memcpy(ref.data(), A.ptr, A.count * 2);
          ref::load2d(ref.data() + 256, L1.ptr + 512, rep, ss, ds, tr);
          core.load2d(A, 256, L1, 512, rep, ss, ds, tr);
          expect_same(ref.data(), A.ptr, A.count * 2, "load2d");
          ++cases;
        }
  return cases;
}

static int check_load3d(Core& core) {
  core.start("check_load3d", 0);
  auto L1 = core.alloc<f16>(Pos::L1, 1 << 19, "fm");
  auto A = core.alloc<f16>(Pos::L0A, 1 << 18, "a");
  std::vector<f16> ref(A.count);
  int cases = 0, errors = 0;
  struct Geo { int c1, h, w, kh, kw, sh, sw, dh, dw, pt, pl; };
  const Geo geos[] = {{4, 14, 14, 3, 3, 1, 1, 1, 1, 1, 1}, {2, 9, 13, 3, 3, 2, 2, 1, 1, 1, 1},
                      {3, 7, 7, 1, 1, 1, 1, 1, 1, 0, 0},   {2, 12, 11, 5, 5, 1, 2, 1, 1, 2, 2},
                      {1, 10, 10, 3, 3, 1, 1, 2, 2, 2, 2}, {2, 8, 30, 7, 7, 2, 2, 1, 1, 3, 3},
                      {2, 6, 5, 3, 2, 1, 1, 1, 1, 0, 1},   {2, 11, 17, 3, 3, 3, 3, 1, 2, 1, 0}};
  for (const Geo& q : geos) {
    const int ho = (q.h + 2 * q.pt - q.dh * (q.kh - 1) - 1) / q.sh + 1;
    const int wo = (q.w + 2 * q.pl - q.dw * (q.kw - 1) - 1) / q.sw + 1;
    const long M = long(ho) * wo;
    const int K1 = q.c1 * q.kh * q.kw;
    // Slabs: the whole image (fast path), and partial row ranges (checked path:
    // some calls read only slab rows and succeed, others must raise the same error).
    const int slabs[][2] = {{0, q.h}, {2, q.h - 4}, {1, q.h - 1}, {0, q.h / 2}, {q.h / 3, q.h - q.h / 3}};
    for (const auto& sl : slabs) {
      if (sl[1] <= 0) continue;
      fill_rand(L1.ptr, std::size_t(q.c1) * sl[1] * q.w * 16);
      const Img2col g{q.c1, sl[1], sl[0], q.h, q.w, q.pt, q.pl, q.sh, q.sw, q.dh, q.dw, q.kh, q.kw, wo, M};
      for (long m_start : {0L, 16L, 3L, M / 2, M - 5})
        for (int m1c : {1, 3, int((M + 15) / 16)})
          for (int k1s : {0, 1, q.kw, K1 / 2})
            for (int k1c : {1, q.kw, K1 - k1s}) {
              if (k1c <= 0 || k1s + k1c > K1 || m_start < 0 || std::size_t(m1c) * k1c * 256 > A.count) continue;
              fill_rand(A.ptr, std::size_t(m1c) * k1c * 256);
              std::memcpy(ref.data(), A.ptr, std::size_t(m1c) * k1c * 512);
              std::string ref_err, new_err;
              try {
                ref::load3d(ref.data(), L1.ptr, g, m_start, m1c, k1s, k1c);
              } catch (const std::runtime_error& e) {
                ref_err = e.what();
              }
              try {
                core.load3d(A, 0, L1, 0, g, m_start, m1c, k1s, k1c);
              } catch (const BoundsError& e) {
                new_err = e.what();
              }
              const bool same_err = ref_err.empty() ? new_err.empty()
                                                    : new_err.size() >= ref_err.size() &&
                                                          new_err.compare(new_err.size() - ref_err.size(),
                                                                          ref_err.size(), ref_err) == 0;
              if (!same_err) {
                std::printf("MISMATCH: load3d error '%s' vs '%s'\n", ref_err.c_str(), new_err.c_str());
                ++g_fail;
              }
              if (ref_err.empty()) expect_same(ref.data(), A.ptr, std::size_t(m1c) * k1c * 512, "load3d");
              ++cases;
              errors += !ref_err.empty();
            }
    }
  }
  std::printf("load3d: %d of the cases raise the slab error\n", errors);
  return cases;
}

static int check_fixpipe(Core& core) {
  core.start("check_fixpipe", 0);
  auto C = core.alloc<float>(Pos::L0C, 1 << 17, "c");
  std::vector<f16> out(1 << 18), ref(1 << 18);
  int cases = 0;
  for (int relu = 0; relu < 2; ++relu)
    for (int m : {1, 5, 16, 31, 64, 100, 128})
      for (int n : {1, 9, 16, 33, 64, 200})
        for (int extra : {0, 1}) {
          const int m1s = (m + 15) / 16 + extra, N1 = (n + 15) / 16;
          for (std::size_t i = 0; i < std::size_t(N1) * m1s * 256; ++i)
            C.ptr[i] = i % 7 == 0    ? 0.f
                       : i % 11 == 0 ? -0.f
                       : i % 13 == 0 ? (i % 2 ? NAN : -INFINITY)
                                     : rand_f32(-70000, 70000) * (i % 3 ? (i % 5 ? 1e-3f : 1e-8f) : 1.f);
          // ND
          const std::size_t ld = n + 3 * extra;
          std::fill(out.begin(), out.end(), 0x1234);
          std::fill(ref.begin(), ref.end(), 0x1234);
          Global<f16> g{out.data(), out.size(), "y"};
          core.fixpipe_nz_to_nd(g, 7, ld, C, 0, m, n, m1s, relu);
          ref::fixpipe_nz_to_nd(ref.data() + 7, ld, C.ptr, m, n, m1s, relu);
          expect_same(ref.data(), out.data(), out.size() * 2, "fixpipe_nz_to_nd");
          // NC1HWC0
          const std::size_t plane = std::size_t(m) * 16 + 32 * extra;
          std::fill(out.begin(), out.end(), 0x1234);
          std::fill(ref.begin(), ref.end(), 0x1234);
          core.fixpipe_nz_to_nc1hwc0(g, 16, plane, C, 0, m, N1, m1s, relu);
          ref::fixpipe_nz_to_nc1hwc0(ref.data() + 16, plane, C.ptr, m, N1, m1s, relu);
          expect_same(ref.data(), out.data(), out.size() * 2, "fixpipe_nz_to_nc1hwc0");
          cases += 2;
        }
  return cases;
}

template <class T>
static int check_vec_type(Core& core) {
  core.start("check_vec", 0);
  constexpr std::size_t N = 16384;
  auto U = core.alloc<T>(Pos::UB, 3 * N, "ub");
  std::vector<T> ref(U.count);
  const unsigned lanes = 256 / sizeof(T), E = 32 / sizeof(T);
  int cases = 0;
  const VecOp bin[] = {VecOp::Add, VecOp::Sub, VecOp::Mul, VecOp::Div, VecOp::Max, VecOp::Min, VecOp::MulAddDst};
  const VecOp un[] = {VecOp::Relu, VecOp::Exp, VecOp::Abs, VecOp::Reciprocal, VecOp::Copy,
                      VecOp::Adds, VecOp::Muls, VecOp::Maxs, VecOp::Mins};
  // times, then block / repeat stride of dst, src0, src1
  struct Lay { unsigned times, dblk, drep, ablk, arep, bblk, brep; };
  const Lay lays[] = {{1, 1, 8, 1, 8, 1, 8},   {7, 1, 8, 1, 8, 1, 8},   {40, 1, 8, 1, 8, 1, 8},
                      {5, 2, 16, 2, 16, 2, 16}, {6, 1, 10, 1, 10, 1, 10}, {4, 1, 0, 1, 0, 1, 0},
                      {9, 1, 4, 1, 4, 1, 4},    {6, 1, 8, 2, 16, 1, 0},   {5, 3, 24, 1, 8, 4, 32},
                      {4, 0, 1, 1, 8, 1, 8},    {3, 1, 8, 0, 0, 1, 8}};
  auto masks = [&](std::vector<Mask>& v) {
    v = {Mask{}, Mask::first(lanes), Mask::first(lanes - 1), Mask::first(E), Mask::first(3), Mask::first(E + 5)};
    Mask odd;
    odd.lo = 0xaaaaaaaaaaaaaaaaull;
    odd.hi = sizeof(T) == 2 ? 0x00ff00ff00ff00ffull : 0;
    v.push_back(odd);
  };
  std::vector<Mask> ms;
  masks(ms);
  // Operand placements: separate, in place (dst == src0), dst == src1, overlapping at an offset.
  struct Place { std::size_t d, s0, s1; };
  const Place places[] = {{0, N, 2 * N}, {N, N, 2 * N}, {0, N, 0}, {E, 0, N}, {0, E, N}};
  for (const Lay& l : lays)
    for (const Mask& mk : ms)
      for (const Place& pl : places) {
        Repeat rp;
        rp.times = l.times;
        rp.dst_blk = l.dblk;
        rp.dst_rep = l.drep;
        rp.src0_blk = l.ablk;
        rp.src0_rep = l.arep;
        rp.src1_blk = l.bblk;
        rp.src1_rep = l.brep;
        for (int which = 0; which < 2; ++which) {
          const VecOp* ops = which ? un : bin;
          const int nops = which ? 9 : 7;
          for (int o = 0; o < nops; ++o) {
            fill_rand(U.ptr, U.count);
            // Zeros (Div/Reciprocal), -0, inf and NaN (Max/Min/Relu semantics) sprinkled in.
            for (std::size_t i = 0; i < U.count; i += 37) U.ptr[i] = store0<T>();
            for (std::size_t i = 5; i < U.count; i += 41) U.ptr[i] = ref::store<T>(-0.f);
            for (std::size_t i = 7; i < U.count; i += 43) U.ptr[i] = ref::store<T>(-INFINITY);
            for (std::size_t i = 11; i < U.count; i += 47) U.ptr[i] = ref::store<T>(NAN);
            std::memcpy(ref.data(), U.ptr, U.count * sizeof(T));
            const float scalar = 0.37f;
            try {
              if (which) {
                ref::vunary(ops[o], ref.data() + pl.d, ref.data() + pl.s0, mk, rp, scalar);
                core.vunary(ops[o], U, pl.d, U, pl.s0, mk, rp, scalar);
              } else {
                ref::vbinary(ops[o], ref.data() + pl.d, ref.data() + pl.s0, ref.data() + pl.s1, mk, rp);
                core.vbinary(ops[o], U, pl.d, U, pl.s0, U, pl.s1, mk, rp);
              }
            } catch (const EmulationError&) {
              continue;  // geometry out of bounds for this placement
            }
            expect_same_nan(ref.data(), U.ptr, U.count,
                        std::string(which ? "vunary" : "vbinary") + " op=" + std::to_string(int(ops[o])) +
                            " elem=" + std::to_string(sizeof(T)) + " times=" + std::to_string(l.times) +
                            " dblk=" + std::to_string(l.dblk) + " ablk=" + std::to_string(l.ablk) + " place d=" +
                            std::to_string(pl.d) + " s0=" + std::to_string(pl.s0));
            ++cases;
          }
        }
      }
  return cases;
}

static int check_vcast(Core& core) {
  core.start("check_vcast", 0);
  auto H = core.alloc<f16>(Pos::UB, 32768, "h");
  auto F = core.alloc<float>(Pos::UB, 32768, "f");
  std::vector<f16> href(H.count);
  std::vector<float> fref(F.count);
  int cases = 0;
  struct Lay { unsigned times, dblk, drep, sblk, srep; };
  for (const Mask& mk : {Mask{}, Mask::first(64), Mask::first(40), Mask::first(8), Mask::first(5)})
    for (int dir = 0; dir < 2; ++dir)
      for (const Lay& l : {Lay{1, 1, 8, 1, 4}, Lay{100, 1, 8, 1, 4}, Lay{30, 1, 10, 1, 6}, Lay{7, 2, 16, 2, 8},
                           Lay{255, 1, 8, 1, 4}, Lay{16, 1, 8, 2, 8}, Lay{16, 1, 8, 4, 16}, Lay{9, 1, 8, 3, 12},
                           Lay{12, 2, 8, 1, 4}, Lay{5, 1, 8, 0, 4}}) {
        // dir 0: f16 -> f32 (dst steps dst_rep fp32 blocks); dir 1: f32 -> f16 (strides swapped).
        Repeat rp;
        rp.times = l.times;
        rp.dst_blk = dir ? l.sblk : l.dblk;
        rp.dst_rep = dir ? l.srep : l.drep;
        rp.src0_blk = dir ? l.dblk : l.sblk;
        rp.src0_rep = dir ? l.drep : l.srep;
        for (std::size_t i = 0; i < H.count; ++i) H.ptr[i] = rand_f16(-70000, 70000);
        for (std::size_t i = 0; i < F.count; ++i) F.ptr[i] = rand_f32(-70000, 70000) * (i % 3 ? 1e-4f : 1.f);
        std::memcpy(href.data(), H.ptr, H.count * 2);
        std::memcpy(fref.data(), F.ptr, F.count * 4);
        try {
          if (dir == 0) {
            ref::vcast<float, f16>(fref.data() + 16, href.data() + 32, mk, rp);
            core.vcast(F, 16, H, 32, mk, rp);
          } else {
            ref::vcast<f16, float>(href.data() + 32, fref.data() + 16, mk, rp);
            core.vcast(H, 32, F, 16, mk, rp);
          }
        } catch (const EmulationError&) {
          continue;
        }
        expect_same(href.data(), H.ptr, H.count * 2, "vcast f16");
        expect_same(fref.data(), F.ptr, F.count * 4, "vcast f32");
        ++cases;
      }
  return cases;
}

// ============================================================================
// Timings
// ============================================================================
struct Row {
  std::string name, unit;
  double before, after;
};
static std::vector<Row> rows;
static void report(const std::string& name, const std::string& unit, double work, double t_ref, double t_new) {
  rows.push_back({name, unit, work / t_ref / 1e9, work / t_new / 1e9});
  std::printf("%-46s %8.2f -> %8.2f %s  (x%.1f)\n", name.c_str(), work / t_ref / 1e9, work / t_new / 1e9, unit.c_str(),
              t_ref / t_new);
  std::fflush(stdout);
}

static void bench_mmad(Core& core) {
  core.start("bench_mmad", 0);
  auto A = core.alloc<f16>(Pos::L0A, 1 << 18, "A");
  auto B = core.alloc<f16>(Pos::L0B, 1 << 18, "B");
  auto C = core.alloc<float>(Pos::L0C, 1 << 17, "C");
  auto bt = core.alloc<float>(Pos::BT, 256, "bias");
  fill_rand(A.ptr, A.count);
  fill_rand(B.ptr, B.count);
  fill_rand(bt.ptr, 256);
  struct S { int m, n, k; };
  // k = 16 * BASE_K1; the first block fits the real 64 KB L0A/L0B (one ping-pong half is 32 KB).
  const S shapes[] = {{128, 64, 64}, {128, 128, 128}, {128, 256, 64}, {256, 64, 64}, {128, 64, 256},
                      {256, 128, 128}, {256, 256, 256}, {200, 96, 144}, {16, 64, 64}, {64, 16, 128}};
  for (const S& s : shapes)
    for (int init = 1; init >= 0; --init) {
      if (g_quick && !init) continue;
      const double flops = 2.0 * s.m * s.n * s.k;
      const double tr = time_it([&] { ref::mmad(C.ptr, A.ptr, B.ptr, s.m, s.n, s.k, init, bt.ptr, CubeIn::F16); },
                                min_s());
      const double tn = time_it([&] { core.mmad(C, 0, A, 0, B, 0, s.m, s.n, s.k, init, &bt); }, min_s());
      char name[96];
      std::snprintf(name, sizeof name, "mmad m=%d n=%d k=%d %s", s.m, s.n, s.k, init ? "init+bias" : "accumulate");
      report(name, "GFLOP/s", flops, tr, tn);
    }
  // bf16 inputs
  const double flops = 2.0 * 128 * 128 * 128;
  const double tr = time_it([&] { ref::mmad(C.ptr, A.ptr, B.ptr, 128, 128, 128, false, nullptr, CubeIn::BF16); },
                            min_s());
  const double tn = time_it([&] { core.mmad(C, 0, A, 0, B, 0, 128, 128, 128, false, nullptr, 0, CubeIn::BF16); },
                            min_s());
  report("mmad m=128 n=128 k=128 accumulate bf16", "GFLOP/s", flops, tr, tn);
}

static void bench_moves(Core& core) {
  core.start("bench_moves", 0);
  auto L1 = core.alloc<f16>(Pos::L1, 1 << 18, "fm");
  auto A = core.alloc<f16>(Pos::L0A, 1 << 17, "a");
  auto C = core.alloc<float>(Pos::L0C, 1 << 17, "c");
  std::vector<f16> out(1 << 20);
  fill_rand(L1.ptr, L1.count);
  fill_rand(C.ptr, C.count);
  {  // 3x3 stride-1 pad-1 conv on a 56x56 map, 4 channel blocks in the slab; 8 pixel fractals x 8 k fractals
    const Img2col gs{4, 10, 0, 56, 56, 1, 1, 1, 1, 1, 1, 3, 3, 56, 56 * 56};
    const double bytes = 8.0 * 8 * 512;
    const double tr = time_it([&] { ref::load3d(A.ptr, L1.ptr, gs, 112, 8, 4, 8); }, min_s());
    const double tn = time_it([&] { core.load3d(A, 0, L1, 0, gs, 112, 8, 4, 8); }, min_s());
    report("load3d 3x3 s1 56x56, m1=8 k1=8 (bytes out)", "GB/s", bytes, tr, tn);
    // stride 2 (28x28 out): pixel by pixel
    const Img2col g2{4, 16, 0, 56, 56, 1, 1, 2, 2, 1, 1, 3, 3, 28, 28 * 28};
    const double tr2 = time_it([&] { ref::load3d(A.ptr, L1.ptr, g2, 56, 8, 4, 8); }, min_s());
    const double tn2 = time_it([&] { core.load3d(A, 0, L1, 0, g2, 56, 8, 4, 8); }, min_s());
    report("load3d 3x3 s2 56x56, m1=8 k1=8 (bytes out)", "GB/s", bytes, tr2, tn2);
    // 1x1 (pointwise) on 56x56, 8 channel blocks
    const Img2col g1{8, 4, 2, 56, 56, 0, 0, 1, 1, 1, 1, 1, 1, 56, 56 * 56};
    const double tr1 = time_it([&] { ref::load3d(A.ptr, L1.ptr, g1, 112, 8, 0, 8); }, min_s());
    const double tn1 = time_it([&] { core.load3d(A, 0, L1, 0, g1, 112, 8, 0, 8); }, min_s());
    report("load3d 1x1 56x56, m1=8 k1=8 (bytes out)", "GB/s", bytes, tr1, tn1);
  }
  {
    const double bytes = 64.0 * 512;
    const double tr = time_it([&] { ref::load2d(A.ptr, L1.ptr, 64, 1, 1, false); }, min_s());
    const double tn = time_it([&] { core.load2d(A, 0, L1, 0, 64, 1, 1, false); }, min_s());
    report("load2d 64 fractals (bytes out)", "GB/s", bytes, tr, tn);
    const double tr2 = time_it([&] { ref::load2d(A.ptr, L1.ptr, 64, 1, 1, true); }, min_s());
    const double tn2 = time_it([&] { core.load2d(A, 0, L1, 0, 64, 1, 1, true); }, min_s());
    report("load2d 64 fractals transposed (bytes out)", "GB/s", bytes, tr2, tn2);
  }
  {  // m=128 pixels x 4 channel blocks, relu
    Global<f16> g{out.data(), out.size(), "y"};
    const double bytes = 128.0 * 64 * 2;
    const double tr = time_it([&] { ref::fixpipe_nz_to_nc1hwc0(out.data(), 128 * 16, C.ptr, 128, 4, 8, true); },
                              min_s());
    const double tn = time_it([&] { core.fixpipe_nz_to_nc1hwc0(g, 0, 128 * 16, C, 0, 128, 4, 8, true); }, min_s());
    report("fixpipe_nz_to_nc1hwc0 m=128 n=64 relu (bytes out)", "GB/s", bytes, tr, tn);
    const double bytes2 = 128.0 * 256 * 2;
    const double tr2 = time_it([&] { ref::fixpipe_nz_to_nd(out.data(), 1024, C.ptr, 128, 256, 8, false); }, min_s());
    const double tn2 = time_it([&] { core.fixpipe_nz_to_nd(g, 0, 1024, C, 0, 128, 256, 8, false); }, min_s());
    report("fixpipe_nz_to_nd m=128 n=256 (bytes out)", "GB/s", bytes2, tr2, tn2);
  }
}

static void bench_vec(Core& core) {
  core.start("bench_vec", 0);
  auto X = core.alloc<f16>(Pos::UB, 128 * 255, "x");
  auto Y = core.alloc<f16>(Pos::UB, 128 * 255, "y");
  auto Z = core.alloc<f16>(Pos::UB, 128 * 255, "z");
  fill_rand(X.ptr, X.count);
  fill_rand(Y.ptr, Y.count);
  Repeat rp;
  rp.times = 255;
  const double n = 128.0 * 255;
  {
    const double tr = time_it([&] { ref::vbinary(VecOp::Add, Z.ptr, X.ptr, Y.ptr, Mask{}, rp); }, min_s());
    const double tn = time_it([&] { core.vbinary(VecOp::Add, Z, 0, X, 0, Y, 0, Mask{}, rp); }, min_s());
    report("vbinary Add fp16 255x128 (elements)", "Gelem/s", n, tr, tn);
  }
  {
    const double tr = time_it([&] { ref::vbinary(VecOp::MulAddDst, Z.ptr, X.ptr, Y.ptr, Mask{}, rp); }, min_s());
    const double tn = time_it([&] { core.vbinary(VecOp::MulAddDst, Z, 0, X, 0, Y, 0, Mask{}, rp); }, min_s());
    report("vbinary MulAddDst fp16 255x128 (elements)", "Gelem/s", n, tr, tn);
  }
  {
    const double tr = time_it([&] { ref::vunary(VecOp::Relu, Z.ptr, X.ptr, Mask{}, rp, 0.f); }, min_s());
    const double tn = time_it([&] { core.vunary(VecOp::Relu, Z, 0, X, 0, Mask{}, rp); }, min_s());
    report("vunary Relu fp16 255x128 (elements)", "Gelem/s", n, tr, tn);
  }
  {
    const double tr = time_it([&] { ref::vunary(VecOp::Exp, Z.ptr, X.ptr, Mask{}, rp, 0.f); }, min_s());
    const double tn = time_it([&] { core.vunary(VecOp::Exp, Z, 0, X, 0, Mask{}, rp); }, min_s());
    report("vunary Exp fp16 255x128 (elements)", "Gelem/s", n, tr, tn);
  }
  {  // fp32 operands (the softmax / layernorm / gelu passes): 255 repeats of 64
    Local<float> F0{reinterpret_cast<float*>(X.ptr), Pos::UB, X.byte_off, X.count / 2, "xf"};
    Local<float> F1{reinterpret_cast<float*>(Y.ptr), Pos::UB, Y.byte_off, Y.count / 2, "yf"};
    Local<float> F2{reinterpret_cast<float*>(Z.ptr), Pos::UB, Z.byte_off, Z.count / 2, "zf"};
    fill_rand(F0.ptr, F0.count);
    fill_rand(F1.ptr, F1.count);
    const double m = 64.0 * 255;
    const double tr = time_it([&] { ref::vbinary(VecOp::Mul, F2.ptr, F0.ptr, F1.ptr, Mask{}, rp); }, min_s());
    const double tn = time_it([&] { core.vbinary(VecOp::Mul, F2, 0, F0, 0, F1, 0, Mask{}, rp); }, min_s());
    report("vbinary Mul fp32 255x64 (elements)", "Gelem/s", m, tr, tn);
    const double tr2 = time_it([&] { ref::vunary(VecOp::Adds, F2.ptr, F0.ptr, Mask{}, rp, 0.5f); }, min_s());
    const double tn2 = time_it([&] { core.vunary(VecOp::Adds, F2, 0, F0, 0, Mask{}, rp, 0.5f); }, min_s());
    report("vunary Adds fp32 255x64 (elements)", "Gelem/s", m, tr2, tn2);
    const double tr3 = time_it([&] { ref::vunary(VecOp::Exp, F2.ptr, F0.ptr, Mask{}, rp, 0.f); }, min_s());
    const double tn3 = time_it([&] { core.vunary(VecOp::Exp, F2, 0, F0, 0, Mask{}, rp); }, min_s());
    report("vunary Exp fp32 255x64 (elements)", "Gelem/s", m, tr3, tn3);
    Mask odd;  // every other lane: the lane-by-lane path
    odd.lo = odd.hi = 0x5555555555555555ull;
    const double tr4 = time_it([&] { ref::vbinary(VecOp::Add, Z.ptr, X.ptr, Y.ptr, odd, rp); }, min_s());
    const double tn4 = time_it([&] { core.vbinary(VecOp::Add, Z, 0, X, 0, Y, 0, odd, rp); }, min_s());
    report("vbinary Add fp16 255x128, odd-lane mask (lanes)", "Gelem/s", n / 2, tr4, tn4);
  }
  {
    Local<float> F{reinterpret_cast<float*>(Y.ptr), Pos::UB, Y.byte_off, Y.count / 2, "yf"};
    Repeat cr;
    cr.times = 255;
    cr.dst_rep = 8;
    cr.src0_rep = 4;
    const double m = 64.0 * 255;
    const double tr = time_it([&] { ref::vcast<float, f16>(F.ptr, X.ptr, Mask{}, cr); }, min_s());
    const double tn = time_it([&] { core.vcast(F, 0, X, 0, Mask{}, cr); }, min_s());
    report("vcast fp16->fp32 255x64 (elements)", "Gelem/s", m, tr, tn);
    Repeat cr2;
    cr2.times = 255;
    cr2.dst_rep = 4;
    cr2.src0_rep = 8;
    const double tr2 = time_it([&] { ref::vcast<f16, float>(Z.ptr, F.ptr, Mask{}, cr2); }, min_s());
    const double tn2 = time_it([&] { core.vcast(Z, 0, F, 0, Mask{}, cr2); }, min_s());
    report("vcast fp32->fp16 255x64 (elements)", "Gelem/s", m, tr2, tn2);
    Repeat cw;  // Winograd's patch gather: fp16 source blocks 4 apart (src0_blk = TILE)
    cw.times = 120;
    cw.src0_blk = 4;
    cw.src0_rep = 16;
    const double mw = 64.0 * 120;
    const double tr3 = time_it([&] { ref::vcast<float, f16>(F.ptr, X.ptr, Mask{}, cw); }, min_s());
    const double tn3 = time_it([&] { core.vcast(F, 0, X, 0, Mask{}, cw); }, min_s());
    report("vcast fp16->fp32 120x64, src block stride 4 (elements)", "Gelem/s", mw, tr3, tn3);
  }
}

int main(int argc, char** argv) {
  bool check_only = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--check-only")) check_only = true;
    if (!std::strcmp(argv[i], "--quick")) g_quick = true;
  }
#if defined(__AVX512F__)
  std::printf("ISA: AVX-512");
#elif defined(__AVX2__)
  std::printf("ISA: AVX2");
#else
  std::printf("ISA: portable");
#endif
#if defined(__FMA__)
  std::printf(" + FMA\n");
#else
  std::printf(" (no FMA)\n");
#endif
  Core core(kBench, CoreKind::AIC);
  const int nm = check_mmad(core);
  const int n2 = check_load2d(core);
  const int n3 = check_load3d(core);
  const int nf = check_fixpipe(core);
  const int nv = check_vec_type<f16>(core) + check_vec_type<float>(core);
  const int nc = check_vcast(core);
  std::printf("bit-identity: mmad %d shape/variant cases, load2d %d, load3d %d, fixpipe %d, vector %d, vcast %d: %s\n",
              nm, n2, n3, nf, nv, nc, g_fail ? "FAILED" : "all identical");
  if (g_fail) return 1;
  if (check_only) return 0;
  bench_mmad(core);
  bench_moves(core);
  bench_vec(core);
  return 0;
}
