// Ascend data layouts on the host side. NC1HWC0 (C0 = 16 fp16 channels, one
// 32-byte block per pixel) is the activation layout of every conv kernel;
// FRACTAL_Z is the convolution weight layout that L0B consumes as ZN fractals;
// the GEMM weight uses the same ZN fractals. Padded channels are zero.
#pragma once
#include <cstddef>
#include <cstring>

#include "kiln/half.hpp"

namespace kiln::layout {

constexpr int C0 = 16;
inline int blocks16(int c) { return (c + C0 - 1) / C0; }

inline f16 to_f16(float v) { return f32_to_f16(v); }
inline f16 to_f16(f16 v) { return v; }

// (N, C, H, W) -> (N, C1, H, W, 16)
template <class T>
void nchw_to_nc1hwc0(const T* src, f16* dst, int n, int c, int h, int w) {
  const int c1 = blocks16(c);
  const std::size_t hw = std::size_t(h) * w;
  std::memset(dst, 0, sizeof(f16) * std::size_t(n) * c1 * hw * C0);
  for (int b = 0; b < n; ++b)
    for (int ch = 0; ch < c; ++ch) {
      const T* s = src + (std::size_t(b) * c + ch) * hw;
      f16* d = dst + ((std::size_t(b) * c1 + ch / C0) * hw) * C0 + ch % C0;
      for (std::size_t p = 0; p < hw; ++p) d[p * C0] = to_f16(s[p]);
    }
}

// (N, C <= 4, H, W) -> (N, 1, H, W, 4): a small-channel map, each pixel's channels padded to 4
template <class T>
void nchw_to_nc1hwc0_c04(const T* src, f16* dst, int n, int c, int h, int w) {
  const std::size_t hw = std::size_t(h) * w;
  std::memset(dst, 0, sizeof(f16) * std::size_t(n) * hw * 4);
  for (int b = 0; b < n; ++b)
    for (int ch = 0; ch < c; ++ch) {
      const T* s = src + (std::size_t(b) * c + ch) * hw;
      f16* d = dst + std::size_t(b) * hw * 4 + ch;
      for (std::size_t p = 0; p < hw; ++p) d[p * 4] = to_f16(s[p]);
    }
}

// (N, C1, H, W, 16) -> (N, C, H, W), dropping padded channels
inline void nc1hwc0_to_nchw(const f16* src, f16* dst, int n, int c, int h, int w) {
  const int c1 = blocks16(c);
  const std::size_t hw = std::size_t(h) * w;
  for (int b = 0; b < n; ++b)
    for (int ch = 0; ch < c; ++ch) {
      const f16* s = src + ((std::size_t(b) * c1 + ch / C0) * hw) * C0 + ch % C0;
      f16* d = dst + (std::size_t(b) * c + ch) * hw;
      for (std::size_t p = 0; p < hw; ++p) d[p] = s[p * C0];
    }
}

// Conv weight (Cout, Cin, Kh, Kw) -> FRACTAL_Z (Cin1*Kh*Kw, Cout1, 16 cout, 16 cin)
template <class T>
void oihw_to_fractal_z(const T* src, f16* dst, int cout, int cin, int kh, int kw) {
  const int ci1 = blocks16(cin), co1 = blocks16(cout);
  std::memset(dst, 0, sizeof(f16) * std::size_t(ci1) * kh * kw * co1 * 256);
  for (int o = 0; o < cout; ++o)
    for (int i = 0; i < cin; ++i)
      for (int y = 0; y < kh; ++y)
        for (int x = 0; x < kw; ++x) {
          const std::size_t k1 = (std::size_t(i / C0) * kh + y) * kw + x;
          dst[((k1 * co1 + o / C0) * 16 + o % C0) * 16 + i % C0] =
              to_f16(src[((std::size_t(o) * cin + i) * kh + y) * kw + x]);
        }
}

// GEMM weight (K, N) row-major -> ZN fractals (K1, N1, 16 n, 16 k)
template <class T>
void kn_to_zn(const T* src, f16* dst, int k, int n) {
  const int k1 = blocks16(k), n1 = blocks16(n);
  std::memset(dst, 0, sizeof(f16) * std::size_t(k1) * n1 * 256);
  for (int r = 0; r < k; ++r)
    for (int c = 0; c < n; ++c)
      dst[((std::size_t(r / 16) * n1 + c / 16) * 16 + c % 16) * 16 + r % 16] = to_f16(src[std::size_t(r) * n + c]);
}

// Depthwise weight (C, 1, Kh, Kw) -> (C1, Kh, Kw, 16)
template <class T>
void dw_weight_to_c1hwc0(const T* src, f16* dst, int c, int kh, int kw) {
  const int c1 = blocks16(c);
  std::memset(dst, 0, sizeof(f16) * std::size_t(c1) * kh * kw * C0);
  for (int ch = 0; ch < c; ++ch)
    for (int t = 0; t < kh * kw; ++t)
      dst[(std::size_t(ch / C0) * kh * kw + t) * C0 + ch % C0] = to_f16(src[std::size_t(ch) * kh * kw + t]);
}

}  // namespace kiln::layout
