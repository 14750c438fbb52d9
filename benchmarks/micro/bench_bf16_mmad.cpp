// The Cube mmad's bf16 routes side by side, on one L0-sized tile (simd.hpp microkernels, one thread):
//   fp16 exact   fp16 operands widened to fp32, one FMA per k (the fp16 path of every ISA)
//   bf16 exact   bf16 operands widened to fp32, one FMA per k (the bf16 path without AVX512_BF16)
//   bf16 dp      vdpbf16ps, two k per instruction (the bf16 path with AVX512_BF16)
//   fp16 hi+lo   each fp16 operand split into bf16 hi + lo (exact: 11 = 8 + 3 significant bits) and the
//                four partial products accumulated with vdpbf16ps (the route the issue names for AMX)
// Accuracy: each route against the exact sum in double, in units of the reduction's scale
// sum_k |a_k b_k| times fp32's unit roundoff 2^-24, and bit identity against its exact (FMA) path.
// Denormals: vdpbf16ps on bf16 inputs below 2^-126 and on results below it.
//
//   g++ -O3 -std=c++17 -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512bf16 -mfma -mf16c \
//       -I kernels benchmarks/micro/bench_bf16_mmad.cpp -o bench_bf16_mmad && ./bench_bf16_mmad
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "kiln/half.hpp"
#include "kiln/simd.hpp"

#if !defined(KILN_SIMD_DPBF16)
#error "build with the AVX512_BF16 flags (-mavx512bf16 and the avx512 set)"
#endif

using namespace kiln;

namespace {

struct Tile {
  int M1, N1, K1;
  std::vector<f16> a, b;  // L0A ZZ [M1][K1][16][16], L0B ZN [K1][N1][16 n][16 k]
};

float val_a(const Tile& t, bool bf, int m, int k) {
  const f16 h = t.a[((std::size_t(m / 16) * t.K1 + k / 16) * 16 + m % 16) * 16 + k % 16];
  return bf ? bf16_to_f32(h) : f16_to_f32(h);
}
float val_b(const Tile& t, bool bf, int k, int n) {
  const f16 h = t.b[((std::size_t(k / 16) * t.N1 + n / 16) * 16 + n % 16) * 16 + k % 16];
  return bf ? bf16_to_f32(h) : f16_to_f32(h);
}

Tile random_tile(int M1, int N1, int K1, bool bf, std::mt19937& rng) {
  std::normal_distribution<float> g(0.f, 1.f);
  Tile t{M1, N1, K1, std::vector<f16>(std::size_t(M1) * K1 * 256), std::vector<f16>(std::size_t(K1) * N1 * 256)};
  for (auto& x : t.a) x = bf ? f32_to_bf16(g(rng)) : f32_to_f16(g(rng));
  for (auto& x : t.b) x = bf ? f32_to_bf16(g(rng)) : f32_to_f16(g(rng));
  return t;
}

// C in NZ: element (m, n) at ((n/16)*M1 + m/16)*256 + (m%16)*16 + n%16.
std::size_t c_at(const Tile& t, int m, int n) { return ((std::size_t(n / 16) * t.M1 + m / 16) * 16 + m % 16) * 16 + n % 16; }

struct Scratch {
  std::vector<float> af, bf, c;
  std::vector<std::uint32_t> bp;
  std::vector<f16> a4, b4;  // hi+lo operands
};

void exact(const Tile& t, bool bf, Scratch& s) {
  float* af = simd::scratch64(s.af, t.a.size());
  float* bfp = simd::scratch64(s.bf, t.b.size());
  simd::widen_a(t.a.data(), af, t.a.size(), bf);
  simd::widen_b_t(t.b.data(), bfp, std::size_t(t.K1) * t.N1, bf);
  simd::mmad_f32(s.c.data(), af, bfp, t.M1, t.N1, t.K1, true, nullptr);
}

void dp(const Tile& t, Scratch& s) {
  std::uint32_t* bp = reinterpret_cast<std::uint32_t*>(simd::scratch64(s.af, t.b.size() / 2 + 128));
  simd::pair_b_bf16(t.b.data(), bp, std::size_t(t.K1) * t.N1);
  simd::mmad_bf16_dp(s.c.data(), t.a.data(), bp, t.M1, t.N1, t.K1, true, nullptr);
}

// fp16 a = ah + al, b = bh + bl (bf16, exact). Along k each fp16 step becomes four bf16 steps
// A: (ah, al, ah, al), B: (bh, bh, bl, bl), so one bf16 mmad over 4K sums ah bh + al bh + ah bl + al bl.
void hilo(const Tile& t, Scratch& s, bool include_split) {
  const int K4 = t.K1 * 4;
  if (include_split || s.a4.empty()) {
    s.a4.assign(std::size_t(t.M1) * K4 * 256, 0);
    s.b4.assign(std::size_t(K4) * t.N1 * 256, 0);
    auto split = [](f16 h, f16& hi, f16& lo) {
      const float v = f16_to_f32(h);
      hi = f32_to_bf16(v);
      lo = f32_to_bf16(v - bf16_to_f32(hi));  // exact: the remaining <= 3 significant bits
    };
    for (int m1 = 0; m1 < t.M1; ++m1)
      for (int k1 = 0; k1 < t.K1; ++k1)
        for (int r = 0; r < 16; ++r)
          for (int kk = 0; kk < 16; ++kk) {
            f16 hi, lo;
            split(t.a[((std::size_t(m1) * t.K1 + k1) * 16 + r) * 16 + kk], hi, lo);
            const int k = (k1 * 16 + kk) * 4;
            f16* row = &s.a4[((std::size_t(m1) * K4 + k / 16) * 16 + r) * 16];
            row[k % 16] = hi, row[k % 16 + 1] = lo, row[k % 16 + 2] = hi, row[k % 16 + 3] = lo;
          }
    for (int k1 = 0; k1 < t.K1; ++k1)
      for (int n1 = 0; n1 < t.N1; ++n1)
        for (int nn = 0; nn < 16; ++nn)
          for (int kk = 0; kk < 16; ++kk) {
            f16 hi, lo;
            split(t.b[((std::size_t(k1) * t.N1 + n1) * 16 + nn) * 16 + kk], hi, lo);
            const int k = (k1 * 16 + kk) * 4;
            f16* row = &s.b4[((std::size_t(k / 16) * t.N1 + n1) * 16 + nn) * 16];
            row[k % 16] = hi, row[k % 16 + 1] = hi, row[k % 16 + 2] = lo, row[k % 16 + 3] = lo;
          }
  }
  std::uint32_t* bp = reinterpret_cast<std::uint32_t*>(simd::scratch64(s.af, s.b4.size() / 2 + 128));
  simd::pair_b_bf16(s.b4.data(), bp, std::size_t(K4) * t.N1);
  simd::mmad_bf16_dp(s.c.data(), s.a4.data(), bp, t.M1, t.N1, K4, true, nullptr);
}

template <class F>
double median_us(F&& f, int reps) {
  std::vector<double> ts;
  f();
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    ts.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ts.begin(), ts.end());
  return ts[ts.size() / 2];
}

struct Err {
  double max_scaled = 0;  // max |c - exact| / (sum |ab| * 2^-24)
  double identical = 0;   // fraction bit-identical to the other result
};

Err compare(const Tile& t, bool bf, const std::vector<float>& c, const std::vector<float>& other) {
  Err e;
  std::size_t same = 0, n = 0;
  for (int m = 0; m < t.M1 * 16; ++m)
    for (int j = 0; j < t.N1 * 16; ++j) {
      double sum = 0, mag = 0;
      for (int k = 0; k < t.K1 * 16; ++k) {
        const double p = double(val_a(t, bf, m, k)) * val_b(t, bf, k, j);
        sum += p, mag += std::fabs(p);
      }
      const std::size_t i = c_at(t, m, j);
      e.max_scaled = std::max(e.max_scaled, std::fabs(c[i] - sum) / (mag * std::ldexp(1.0, -24)));
      same += std::memcmp(&c[i], &other[i], 4) == 0;
      ++n;
    }
  e.identical = double(same) / n;
  return e;
}

}  // namespace

int main() {
  std::mt19937 rng(7);
  std::printf("%-22s %10s %10s %10s %10s %12s\n", "tile MxNxK", "fp16 us", "bf16 us", "bf16dp us", "hi+lo us",
              "GMAC/s dp");
  const int shapes[][3] = {{8, 16, 4}, {8, 16, 16}, {8, 8, 48}, {4, 16, 4}};
  for (const auto& sh : shapes) {
    const Tile t16 = random_tile(sh[0], sh[1], sh[2], false, rng), tb = random_tile(sh[0], sh[1], sh[2], true, rng);
    Scratch s;
    s.c.assign(std::size_t(sh[0]) * sh[1] * 256, 0.f);
    const int reps = 301;
    const double us16 = median_us([&] { exact(t16, false, s); }, reps);
    const double usb = median_us([&] { exact(tb, true, s); }, reps);
    const double usdp = median_us([&] { dp(tb, s); }, reps);
    hilo(t16, s, true);
    const double ushl = median_us([&] { hilo(t16, s, false); }, reps);
    const double macs = double(sh[0]) * sh[1] * sh[2] * 4096;
    std::printf("%4dx%4dx%4d          %10.2f %10.2f %10.2f %10.2f %12.1f\n", sh[0] * 16, sh[1] * 16, sh[2] * 16, us16,
                usb, usdp, ushl, macs / usdp / 1e3);
  }
  // Accuracy on one tile per route (K = 768: the largest reduction of one GEMM tile in the zoo)
  const Tile tb = random_tile(4, 4, 48, true, rng), t16 = random_tile(4, 4, 48, false, rng);
  Scratch s;
  s.c.assign(std::size_t(4) * 4 * 256, 0.f);
  exact(tb, true, s);
  const std::vector<float> cb_exact = s.c;
  dp(tb, s);
  const std::vector<float> cb_dp = s.c;
  exact(t16, false, s);
  const std::vector<float> c16_exact = s.c;
  hilo(t16, s, true);
  const std::vector<float> c16_hilo = s.c;
  const Err e1 = compare(tb, true, cb_exact, cb_dp), e2 = compare(tb, true, cb_dp, cb_exact);
  const Err e3 = compare(t16, false, c16_exact, c16_hilo), e4 = compare(t16, false, c16_hilo, c16_exact);
  std::printf("\naccuracy, K=768, error in units of sum|ab| * 2^-24 (max over 64x64 outputs):\n");
  std::printf("  bf16 exact (FMA) %.3f   bf16 dp %.3f   dp bit-identical to FMA: %.1f%%\n", e1.max_scaled, e2.max_scaled,
              100 * e1.identical);
  std::printf("  fp16 exact (FMA) %.3f   fp16 hi+lo %.3f   hi+lo bit-identical to FMA: %.1f%%\n", e3.max_scaled,
              e4.max_scaled, 100 * e3.identical);

  // Denormals: bf16 denormal inputs (< 2^-126) and a result that would be denormal.
  Tile d{1, 1, 1, std::vector<f16>(256, 0), std::vector<f16>(256, 0)};
  d.a[0] = f32_to_bf16(std::ldexp(1.0f, -130));  // bf16 denormal
  d.b[0] = f32_to_bf16(1.0f);
  d.a[1] = f32_to_bf16(std::ldexp(1.0f, -70));    // normal x normal = 2^-140, a denormal result
  d.b[1] = f32_to_bf16(std::ldexp(1.0f, -70));
  exact(d, true, s);
  const float fe = s.c[0];
  dp(d, s);
  std::printf("\ndenormals: 2^-130 * 1 + 2^-70 * 2^-70: FMA path %g, vdpbf16ps %g\n", fe, s.c[0]);
  return 0;
}
