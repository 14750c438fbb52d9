// Bodies of the emulated AI Core's instructions (kiln/core.hpp declares them).
// Compiled once per build into the kiln_emu static library with the build's
// instruction-set flags, instead of inline into each of the ~100 generated
// kernel translation units, where they were most of the compile time. The code
// is the former inline code unchanged, so results stay bit-identical.
#include "kiln/core.hpp"

#include "kiln/half.hpp"
#include "kiln/simd.hpp"

namespace kiln::emu {
namespace {

// (count - 1) * stride + last, saturating instead of wrapping, so absurd strides fail the bounds check.
std::size_t span(std::size_t count, std::size_t stride, std::size_t last) {
  if (count == 0) return 0;
  const std::size_t limit = std::size_t(1) << 48;
  if (stride && (count - 1) > limit / stride) return limit;
  return std::min(limit, (count - 1) * stride + last);
}

[[maybe_unused]] void widen16(CubeIn t, const f16* src, float* dst, std::size_t n) {
  if (t == CubeIn::F16) {
    f16_to_f32(src, dst, n);
  } else {
    for (std::size_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(src[i]);
  }
}

float load(f16 h) { return f16_to_f32(h); }
float load(float f) { return f; }
template <class T>
T store(float v) {
  if constexpr (std::is_same_v<T, f16>) return f32_to_f16(v);
  else return v;
}

}  // namespace

Core::Core(const Profile& profile, CoreKind kind) : prof_(profile), kind_(kind) {
  for (int p = 0; p < kNumPos; ++p) {
    const Pos pos = static_cast<Pos>(p);
    cap_[p] = present(pos) ? profile.capacity[p] : 0;
    if (cap_[p]) {
      mem_[p].reset(static_cast<std::uint8_t*>(std::aligned_alloc(1024, round_up(cap_[p], 1024))));
      std::memset(mem_[p].get(), 0, cap_[p]);
    }
  }
}

void Core::start(const char* kernel, int core_id, const L2View* l2) {
  kernel_ = kernel;
  core_id_ = core_id;
  l2_ = l2;
  top_.fill(0);
  free_at_.fill(0);
  wait_until_.fill(0);
  done_at_.fill(0);
  for (auto& q : flags_) q.clear();
  stats_ = CoreStats{};
}

const CoreStats& Core::finish() {
  for (int p = 0; p < kNumPipes; ++p) stats_.end_cycle = std::max(stats_.end_cycle, done_at_[p]);
  // flags_ needs no check here: a set without a wait is legal, the flag just stays set.
  return stats_;
}

void Core::raise_sync(const std::string& msg) { fail<SyncError>(msg); }

bool Core::present(Pos pos) const {
  if (pos == Pos::GM) return false;
  if (prof_.coupled) return true;
  const bool cube_side = pos == Pos::L1 || pos == Pos::L0A || pos == Pos::L0B || pos == Pos::L0C || pos == Pos::BT;
  return kind_ == CoreKind::AIC ? cube_side : pos == Pos::UB;
}

std::string Core::core_kind_name() const {
  if (prof_.coupled) return "AI core";
  return kind_ == CoreKind::AIC ? "Cube core (AIC)" : "Vector core (AIV)";
}

template <class E>
void Core::fail(const std::string& msg) const {
  throw E("kernel '" + std::string(kernel_) + "' (core " + std::to_string(core_id_) + "): " + msg);
}

std::string Core::flag_text(Pipe s, Pipe d, int id) const {
  return std::string("flag ") + pipe_name(s) + "->" + pipe_name(d) + " #" + std::to_string(id);
}

// ---- error paths of the inline helpers (core.hpp) -----------------------------
void Core::no_buffer(Pos pos, const char* what) const {
  fail<CapacityError>(std::string(pos_name(pos)) + " does not exist on this core (" + core_kind_name() + " of " +
                      prof_.name + "); cannot allocate '" + what + "'");
}

void Core::alloc_overflow(Pos pos, std::size_t count, std::size_t elem, std::uint32_t off, const char* what) const {
  fail<CapacityError>(std::string(pos_name(pos)) + " overflow: '" + what + "' needs " + std::to_string(count) + " x " +
                      std::to_string(elem) + " B at offset " + std::to_string(off) + ", capacity " +
                      std::to_string(cap_[static_cast<int>(pos)]) + " B on " + prof_.name);
}

void Core::at_overflow(Pos pos, std::size_t byte_off, std::size_t count, std::size_t elem, const char* what) const {
  fail<CapacityError>(std::string(pos_name(pos)) + " overflow: '" + what + "' of " + std::to_string(count) + " x " +
                      std::to_string(elem) + " B at byte " + std::to_string(byte_off) + " does not fit, capacity " +
                      std::to_string(cap_[static_cast<int>(pos)]) + " B on " + prof_.name);
}

void Core::bad_event(Pipe s, Pipe d, int id) const { fail<SyncError>(flag_text(s, d, id) + ": event id must be 0..7"); }

void Core::flag_overflow(Pipe s, Pipe d, int id) const {
  fail<SyncError>(flag_text(s, d, id) + " set more than 15 times without a wait");
}

void Core::flag_never_set(Pipe s, Pipe d, int id) const {
  fail<SyncError>("wait on " + flag_text(s, d, id) + " that was never set: the core would hang");
}

void Core::unallocated(const char* instr, const char* operand) const {
  fail<EmulationError>(std::string(instr) + ": operand " + operand + " is not allocated");
}

// where: the local buffer's position name, or nullptr for a GM tensor.
void Core::out_of_range(const char* instr, const char* operand, const char* name, const char* where, std::size_t off,
                        std::size_t n, std::size_t count) const {
  if (where)
    fail<BoundsError>(std::string(instr) + ": operand " + operand + " ('" + name + "' in " + where +
                      ") accesses elements [" + std::to_string(off) + ", " + std::to_string(off + n) +
                      ") of a tensor of " + std::to_string(count));
  fail<BoundsError>(std::string(instr) + ": operand " + operand + " (GM '" + name + "') accesses elements [" +
                    std::to_string(off) + ", " + std::to_string(off + n) + ") of " + std::to_string(count));
}

void Core::misaligned(const char* instr, const char* operand, const char* name, Pos pos, std::size_t addr,
                      std::uint32_t align) const {
  fail<AlignmentError>(std::string(instr) + ": operand " + operand + " ('" + name + "') starts at " + pos_name(pos) +
                       " byte " + std::to_string(addr) + ", not " + std::to_string(align) + "-byte aligned");
}

void Core::not_in_ub(const char* instr) const {
  fail<EmulationError>(std::string(instr) + ": vector operands must be in UB");
}

// The first of the vector prologue's conditions that fails, in the order they were checked.
void Core::bad_vector_operand(const char* instr, unsigned times, unsigned lanes) const {
  if (times < 1 || times > 255)
    fail<EmulationError>(std::string(instr) + ": repeat must be 1..255, got " + std::to_string(times));
  if (lanes == 0) fail<EmulationError>(std::string(instr) + ": mask enables no lane");
  fail<EmulationError>(std::string(instr) + ": block stride must be <= 255 and repeat stride <= 65535");
}

// ---- operand checks ------------------------------------------------------------
template <class T>
void Core::check_local(const Local<T>& t, std::size_t off, std::size_t n, const char* instr,
                       const char* operand) const {
  if (!t.ptr) unallocated(instr, operand);
  if (n > t.count || off > t.count - n) out_of_range(instr, operand, t.name, pos_name(t.pos), off, n, t.count);
  const std::uint32_t align = prof_.alignment[static_cast<int>(t.pos)];
  const std::size_t addr = t.byte_off + off * sizeof(T);
  if (align && addr % align) misaligned(instr, operand, t.name, t.pos, addr, align);
}
template <class T>
void Core::check_global(const Global<T>& t, std::size_t off, std::size_t n, const char* instr,
                        const char* operand) const {
  if (n > t.count || off > t.count - n) out_of_range(instr, operand, t.name, nullptr, off, n, t.count);
}
template <class T>
void Core::check_ub(const Local<T>& t, const char* instr) const {
  if (t.pos != Pos::UB) not_in_ub(instr);
}

template <class T>
void Core::vec_prologue(const Repeat& rp, const char* instr, const Local<T>& t, std::size_t off, unsigned blk,
                        unsigned rep, unsigned lanes) {
  if (rp.times < 1 || rp.times > 255) bad_vector_operand(instr, rp.times, lanes);
  vec_operand(rp, instr, t, off, blk, rep, lanes);
}
template <class T>
void Core::vec_operand(const Repeat& rp, const char* instr, const Local<T>& t, std::size_t off, unsigned blk,
                       unsigned rep, unsigned lanes) const {
  check_ub(t, instr);
  if (lanes == 0 || blk > 255 || rep > 65535)
    bad_vector_operand(instr, 1, lanes);  // (repeat count: checked by the caller)
  const std::size_t E = 32 / sizeof(T);
  const std::size_t blocks = (lanes + E - 1) / E;
  const std::size_t last = (lanes - 1) % E + 1;  // lanes used in the last block
  const std::size_t span = std::size_t(rp.times - 1) * rep * E + (blocks - 1) * blk * E + last;
  check_local(t, off, span, instr, "vector operand");
}

// Walks the enabled lanes of every repeat; f(dst_index, src0_index, src1_index).
template <class D, class S, class F>
void Core::vec_apply(const Repeat& rp, Mask mask, F&& f, unsigned lanes) {
  const std::size_t Ed = 32 / sizeof(D), Es = 32 / sizeof(S);
  // The enabled lanes and their offsets inside a repeat, once per instruction
  // rather than a mask test and block arithmetic per lane and repeat.
  std::uint32_t od[128], oa[128], ob[128];
  unsigned n = 0;
  for (unsigned i = 0; i < lanes && i < 128; ++i) {
    if (!mask.test(i)) continue;
    od[n] = std::uint32_t((i / Ed) * rp.dst_blk * Ed + i % Ed);
    oa[n] = std::uint32_t((i / Es) * rp.src0_blk * Es + i % Es);
    ob[n] = std::uint32_t((i / Es) * rp.src1_blk * Es + i % Es);
    ++n;
  }
  for (unsigned r = 0; r < rp.times; ++r) {
    const std::size_t d0 = std::size_t(r) * rp.dst_rep * Ed, a0 = std::size_t(r) * rp.src0_rep * Es,
                      b0 = std::size_t(r) * rp.src1_rep * Es;
    for (unsigned j = 0; j < n; ++j) f(d0 + od[j], a0 + oa[j], b0 + ob[j]);
  }
  stats_.vec_repeats += rp.times;
}

template <class T>
void Core::vec_cost(VecOp op, const Repeat& rp) {
  const double cpr = sizeof(T) == 2 ? prof_.vec_cpr_f16[static_cast<int>(op)] : prof_.vec_cpr_f32[static_cast<int>(op)];
  issue(Pipe::V, prof_.vec_head, std::max(prof_.vec_min_cycles, cpr * rp.times), std::uint64_t(rp.times) * 256);
}

// ---- MTE2: GM -> L1 / UB -------------------------------------------------
// nburst bursts of burst elements; the k-th burst reads src+soff+k*src_stride
// and writes dst+doff+k*dst_stride (strides in elements).
template <class T, class>
void Core::copy_gm_to_local(Local<T> dst, std::size_t doff, Global<const T> src, std::size_t soff, std::size_t nburst,
                            std::size_t burst, std::size_t src_stride, std::size_t dst_stride) {
  if (dst.pos != Pos::L1 && dst.pos != Pos::UB) fail<EmulationError>("copy_gm_to_local: destination must be L1 or UB");
  if (nburst == 0 || burst == 0) return;
  check_local(dst, doff, span(nburst, dst_stride, burst), "copy_gm_to_local", "dst");
  if ((dst_stride * sizeof(T)) % 32 && nburst > 1)
    fail<AlignmentError>("copy_gm_to_local: destination burst stride " + std::to_string(dst_stride * sizeof(T)) +
                         " B is not a multiple of 32 B");
  check_global(src, soff, span(nburst, src_stride, burst), "copy_gm_to_local", "src");
  for (std::size_t b = 0; b < nburst; ++b)
    std::memcpy(dst.ptr + doff + b * dst_stride, src.ptr + soff + b * src_stride, burst * sizeof(T));
  const std::uint64_t bytes = nburst * burst * sizeof(T);
  const bool l1 = dst.pos == Pos::L1;
  // An L2 hit streams at the measured L2 rate, a miss at the core's HBM rate (docs/ascend-model.md §0, §12).
  const double first = gm_read(src.ptr + soff, bytes);
  const double rate = l1 ? read_rate(first, prof_.l2_to_l1_bpc, prof_.gm_to_l1_bpc)
                         : read_rate(first, prof_.l2_to_ub_bpc, prof_.gm_to_ub_bpc);
  issue(Pipe::MTE2, prof_.mte2_head, (l1 ? prof_.gm_to_l1_copy : prof_.gm_to_ub_copy) + bytes / rate, bytes);
}

// A Cube operand held in GM as fp16 (an activation) -> L1 as `as`: bf16 rounds each value on the way, at the
// fp16 copy's bytes and cost (the arena stays fp16; see core.hpp).
void Core::copy_gm_to_local(Local<f16> dst, std::size_t doff, Global<const f16> src, std::size_t soff,
                            std::size_t nburst, std::size_t burst, std::size_t src_stride, std::size_t dst_stride,
                            CubeIn as) {
  copy_gm_to_local<f16>(dst, doff, src, soff, nburst, burst, src_stride, dst_stride);
  if (as != CubeIn::BF16) return;
  if (dst.pos != Pos::L1) fail<EmulationError>("copy_gm_to_local: a bf16 Cube operand goes to L1");
  if (dst_stride == burst || nburst == 1) simd::f16_to_bf16_inplace(dst.ptr + doff, nburst * burst);
  else
    for (std::size_t b = 0; b < nburst; ++b) simd::f16_to_bf16_inplace(dst.ptr + doff + b * dst_stride, burst);
}

// GM (row-major rows x cols, row stride ld) -> L1 in NZ: column blocks of 16,
// each [dst_rows][16]; rows >= rows and cols >= cols are zero-filled.
void Core::copy_gm_to_l1_nd2nz(Local<f16> dst, std::size_t doff, Global<const f16> src, std::size_t soff,
                               std::size_t rows, std::size_t cols, std::size_t ld, std::size_t dst_rows, CubeIn as) {
  if (dst.pos != Pos::L1) fail<EmulationError>("copy_gm_to_l1_nd2nz: destination must be L1");
  const std::size_t c1 = (cols + 15) / 16;
  check_local(dst, doff, c1 * dst_rows * 16, "copy_gm_to_l1_nd2nz", "dst");
  if (rows) check_global(src, soff, (rows - 1) * ld + cols, "copy_gm_to_l1_nd2nz", "src");
  for (std::size_t j = 0; j < c1; ++j) {
    f16* blk = dst.ptr + doff + j * dst_rows * 16;
    const std::size_t w = std::min<std::size_t>(16, cols - j * 16);
    const std::size_t full = std::min(rows, dst_rows);
    if (w == 16)  // whole 32-byte rows: a fixed-size copy the compiler inlines (not a libc call per row)
      for (std::size_t r = 0; r < full; ++r) std::memcpy(blk + r * 16, src.ptr + soff + r * ld + j * 16, 32);
    else
      for (std::size_t r = 0; r < full; ++r) {
        std::memcpy(blk + r * 16, src.ptr + soff + r * ld + j * 16, w * sizeof(f16));
        std::memset(blk + r * 16 + w, 0, (16 - w) * sizeof(f16));
      }
    if (dst_rows > full) std::memset(blk + full * 16, 0, (dst_rows - full) * 16 * sizeof(f16));
    if (as == CubeIn::BF16) simd::f16_to_bf16_inplace(blk, full * 16);  // zero padding is zero in both formats
  }
  const std::uint64_t bytes = rows * cols * sizeof(f16);
  const double first = gm_read(src.ptr + soff, bytes);
  issue(Pipe::MTE2, prof_.mte2_head,
        prof_.gm_to_l1_copy + bytes / read_rate(first, prof_.l2_to_l1_bpc, prof_.gm_to_l1_bpc), bytes);
}

// ---- MTE3: UB -> GM ------------------------------------------------------
template <class T, class>
void Core::copy_ub_to_gm(Global<T> dst, std::size_t doff, Local<T> src, std::size_t soff, std::size_t nburst,
                         std::size_t burst, std::size_t src_stride, std::size_t dst_stride) {
  if (src.pos != Pos::UB) fail<EmulationError>("copy_ub_to_gm: source must be UB");
  if (nburst == 0 || burst == 0) return;
  check_local(src, soff, span(nburst, src_stride, burst), "copy_ub_to_gm", "src");
  check_global(dst, doff, span(nburst, dst_stride, burst), "copy_ub_to_gm", "dst");
  for (std::size_t b = 0; b < nburst; ++b)
    std::memcpy(dst.ptr + doff + b * dst_stride, src.ptr + soff + b * src_stride, burst * sizeof(T));
  const std::uint64_t bytes = nburst * burst * sizeof(T);
  gm_written(bytes);
  issue(Pipe::MTE3, prof_.mte3_head, prof_.ub_to_gm_copy + bytes / prof_.ub_to_gm_bpc, bytes);
}

// ---- MTE1: L1 -> L0A / L0B / BT ------------------------------------------
// repeat fractals of 16x16 fp16 (512 B); fractal r is read at src+soff+r*src_stride*256
// and written at dst+doff+r*dst_stride*256 (strides in fractals). transpose swaps the
// two axes inside each fractal (LoadData2D ifTranspose).
void Core::load2d(Local<f16> dst, std::size_t doff, Local<f16> src, std::size_t soff, std::size_t repeat,
                  std::size_t src_stride, std::size_t dst_stride, bool transpose) {
  if (src.pos != Pos::L1 || (dst.pos != Pos::L0A && dst.pos != Pos::L0B))
    fail<EmulationError>("load2d: moves L1 -> L0A/L0B");
  if (!repeat) return;
  if (repeat > 65535) fail<EmulationError>("load2d: repeat must be <= 65535");
  check_local(src, soff,
              span(repeat, src_stride > (std::size_t(1) << 40) ? (std::size_t(1) << 40) : src_stride * 256, 256),
              "load2d", "src");
  check_local(dst, doff,
              span(repeat, dst_stride > (std::size_t(1) << 40) ? (std::size_t(1) << 40) : dst_stride * 256, 256),
              "load2d", "dst");
  for (std::size_t r = 0; r < repeat; ++r) {
    const f16* s = src.ptr + soff + r * src_stride * 256;
    f16* d = dst.ptr + doff + r * dst_stride * 256;
    if (!transpose) std::memcpy(d, s, 512);
    else simd::transpose_fractal16(s, d);
  }
  const std::uint64_t bytes = repeat * 512;
  const double rate = dst.pos == Pos::L0A ? prof_.l1_to_l0a_bpc : prof_.l1_to_l0b_bpc;
  issue(Pipe::MTE1, prof_.mte1_head, prof_.mte1_issue + bytes / rate, bytes);
}

// img2col on the way L1 -> L0A: writes m1_count x k1_count fractals in ZZ order
// (row of fractals = 16 output pixels starting at m_start, column = one (c1,kh,kw)
// triple k1 = c1*kh*kw + i*kw + j, counted from k1_start).
namespace {
// Load3D of a small-channel map (channelSize 4): fractal (mi, ki) row r is pixel m_start + 16 mi + r, its 16 k values
// k = 16 (k1_start + ki) + kk are tap k / 4 (row-major over the window), channel k % 4; zeros in the padding, past
// the last tap and in the fractal's padding rows. Returns an image row a tap needs that the slab lacks, or -1.
int img2col_c04(f16* dst, const f16* fm, const Img2col& g, long m_start, int m1_count, int k1_start, int k1_count) {
  const int taps = g.kh * g.kw;
  for (int mi = 0; mi < m1_count; ++mi)
    for (int r = 0; r < 16; ++r) {
      const long p = m_start + mi * 16 + r;
      const int ho = int(p / g.out_w), wo = int(p % g.out_w);
      const int h0 = ho * g.stride_h - g.pad_top, w0 = wo * g.stride_w - g.pad_left;
      for (int ki = 0; ki < k1_count; ++ki) {
        f16* d = dst + (std::size_t(mi) * k1_count + ki) * 256 + r * 16;
        for (int q = 0; q < 4; ++q) {  // four taps of four channels
          const int tap = (k1_start + ki) * 4 + q, hi = h0 + tap / g.kw * g.dil_h, wi = w0 + tap % g.kw * g.dil_w;
          if (p >= g.m_total || tap >= taps || hi < 0 || hi >= g.fm_h || wi < 0 || wi >= g.fm_w) {
            std::memset(d + q * 4, 0, 8);
          } else if (hi < g.slab_row0 || hi >= g.slab_row0 + g.slab_h) {
            return hi;
          } else {
            std::memcpy(d + q * 4, fm + (std::size_t(hi - g.slab_row0) * g.fm_w + wi) * 4, 8);
          }
        }
      }
    }
  return -1;
}

std::string slab_miss(int row, const Img2col& g) {
  return "load3d: image row " + std::to_string(row) + " is not in the L1 slab (rows " + std::to_string(g.slab_row0) +
         ".." + std::to_string(g.slab_row0 + g.slab_h - 1) + ")";
}
}  // namespace

void Core::load3d(Local<f16> dst, std::size_t doff, Local<f16> fm, std::size_t foff, const Img2col& g, long m_start,
                  int m1_count, int k1_start, int k1_count) {
  if (fm.pos != Pos::L1 || dst.pos != Pos::L0A) fail<EmulationError>("load3d: moves L1 -> L0A");
  if (g.c0 != 16 && (g.c0 != 4 || g.slab_c1 != 1))
    fail<EmulationError>("load3d: a feature map of " + std::to_string(g.c0) +
                         " channels a pixel (16, or 4 in one "
                         "block: channelSize 4)");
  check_local(dst, doff, std::size_t(m1_count) * k1_count * 256, "load3d", "dst");
  check_local(fm, foff, std::size_t(g.slab_c1) * g.slab_h * g.fm_w * g.c0, "load3d", "src");
  const int taps = g.kh * g.kw;
  const int k1_max = g.c0 == 4 ? (taps * 4 + 15) / 16 : g.slab_c1 * taps;  // K fractals the slab holds
  if (taps <= 0 || g.out_w <= 0 || k1_start < 0 || k1_count < 0 || m1_count < 0 || k1_start + k1_count > k1_max)
    fail<BoundsError>("load3d: K fractal range beyond the slab's channels, or an empty geometry");
  const std::uint64_t bytes = std::uint64_t(m1_count) * k1_count * 512;
  if (g.c0 == 4) {  // (at Load3D's rate for the window: docs/ascend-model.md section 0, assumed for 4 channels)
    const int missing = img2col_c04(dst.ptr + doff, fm.ptr + foff, g, m_start, m1_count, k1_start, k1_count);
    if (missing >= 0) fail<BoundsError>(slab_miss(missing, g));
    issue(Pipe::MTE1, prof_.load3d_head, prof_.mte1_issue + bytes / load3d_rate(prof_, g.kh, g.stride_w), bytes);
    return;
  }
  const int c1_0 = k1_start / taps, t0 = k1_start % taps;
  const f16* fm0 = fm.ptr + foff;
  // Fast path when no image row that these pixels' taps can reach lies outside
  // the slab (so the slab error below cannot fire): fractal by fractal, each run
  // of pixels on one output row reads C0 rows stride_w apart (one block copy for
  // stride_w 1), zeros where the taps fall in the padding.
  bool fast = m_start >= 0 && g.kh > 0 && g.kw > 0 && g.stride_h > 0 && g.stride_w > 0 && g.dil_h > 0 && g.dil_w > 0;
  const long p_end = std::min<long>(m_start + long(m1_count) * 16, g.m_total);
  if (fast && p_end > m_start) {
    const long ho_lo = m_start / g.out_w, ho_hi = (p_end - 1) / g.out_w;
    const long h_lo = std::max<long>(0, ho_lo * g.stride_h - g.pad_top);
    const long h_hi = std::min<long>(g.fm_h - 1, ho_hi * g.stride_h - g.pad_top + long(g.kh - 1) * g.dil_h);
    fast = h_lo > h_hi || (h_lo >= g.slab_row0 && h_hi < long(g.slab_row0) + g.slab_h);
  }
  if (fast) {
    struct Run {
      int rb, re, h0, w0;
      bool valid;
    };  // fractal rows [rb, re): pixels on one output row
    for (int mi = 0; mi < m1_count; ++mi) {
      Run runs[16];
      int nruns = 0;
      for (int r = 0; r < 16;) {
        const long p = m_start + mi * 16 + r;
        if (p >= g.m_total) {  // padding rows of the fractal
          runs[nruns++] = {r, 16, 0, 0, false};
          break;
        }
        const int ho = int(p / g.out_w), wo = int(p % g.out_w);
        const int len = int(std::min<long>({16 - r, g.out_w - wo, g.m_total - p}));
        runs[nruns++] = {r, r + len, ho * g.stride_h - g.pad_top, wo * g.stride_w - g.pad_left, true};
        r += len;
      }
      int c1 = c1_0, i = t0 / g.kw, j = t0 % g.kw;
      for (int ki = 0; ki < k1_count; ++ki) {
        f16* frac = dst.ptr + doff + (std::size_t(mi) * k1_count + ki) * 256;
        for (int q = 0; q < nruns; ++q) {
          const Run& u = runs[q];
          f16* d = frac + u.rb * 16;
          const int len = u.re - u.rb, hi = u.h0 + i * g.dil_h, wi = u.w0 + j * g.dil_w;
          // Pixels [a, b) of the run read image columns wi + t*stride_w inside the image.
          const int sw = g.stride_w;
          int a = len, b = len;
          if (u.valid && hi >= 0 && hi < g.fm_h) {
            a = wi >= 0 ? 0 : std::min(len, (-wi + sw - 1) / sw);
            b = std::max(a, g.fm_w - wi <= 0 ? 0 : std::min(len, (g.fm_w - wi + sw - 1) / sw));
          }
          if (a) std::memset(d, 0, std::size_t(a) * 32);
          if (b > a) {
            const f16* src = fm0 + ((std::size_t(c1) * g.slab_h + (hi - g.slab_row0)) * g.fm_w + wi + a * sw) * 16;
            if (sw == 1) std::memcpy(d + a * 16, src, std::size_t(b - a) * 32);
            else
              for (int t = a; t < b; ++t, src += sw * 16) std::memcpy(d + t * 16, src, 32);
          }
          if (b < len) std::memset(d + b * 16, 0, std::size_t(len - b) * 32);
        }
        if (++j == g.kw) {  // next tap: column, then row, then channel block
          j = 0;
          if (++i == g.kh) i = 0, ++c1;
        }
      }
    }
  } else {
    // Checked path, in the original visiting order (pixel rows, then k) so the
    // same slab error comes first; (ho, wo) once per pixel, taps stepped incrementally.
    for (int mi = 0; mi < m1_count; ++mi) {
      for (int r = 0; r < 16; ++r) {
        const long p = m_start + mi * 16 + r;
        f16* drow = dst.ptr + doff + std::size_t(mi) * k1_count * 256 + r * 16;  // k fractal ki at + ki*256
        if (p >= g.m_total) {                                                    // padding row of the fractal
          for (int ki = 0; ki < k1_count; ++ki) std::memset(drow + std::size_t(ki) * 256, 0, 32);
          continue;
        }
        const int ho = int(p / g.out_w), wo = int(p % g.out_w);
        const int h0 = ho * g.stride_h - g.pad_top, w0 = wo * g.stride_w - g.pad_left;
        int c1 = c1_0, i = t0 / g.kw, j = t0 % g.kw;
        for (int ki = 0; ki < k1_count; ++ki) {
          f16* d = drow + std::size_t(ki) * 256;
          const int hi = h0 + i * g.dil_h, wi = w0 + j * g.dil_w;
          if (hi < 0 || hi >= g.fm_h || wi < 0 || wi >= g.fm_w) {
            std::memset(d, 0, 32);
          } else {
            const int hs = hi - g.slab_row0;
            if (hs < 0 || hs >= g.slab_h) fail<BoundsError>(slab_miss(hi, g));
            std::memcpy(d, fm0 + ((std::size_t(c1) * g.slab_h + hs) * g.fm_w + wi) * 16, 32);
          }
          if (++j == g.kw) {  // next tap: column, then row, then channel block
            j = 0;
            if (++i == g.kh) i = 0, ++c1;
          }
        }
      }
    }
  }
  issue(Pipe::MTE1, prof_.load3d_head, prof_.mte1_issue + bytes / load3d_rate(prof_, g.kh, g.stride_w), bytes);
}

void Core::load_bias_table(Local<float> dst, std::size_t doff, Local<float> src, std::size_t soff, std::size_t n) {
  if (src.pos != Pos::L1 || dst.pos != Pos::BT) fail<EmulationError>("load_bias_table: moves L1 -> BT");
  check_local(src, soff, n, "load_bias_table", "src");
  check_local(dst, doff, n, "load_bias_table", "dst");
  std::memcpy(dst.ptr + doff, src.ptr + soff, n * sizeof(float));
  issue(Pipe::MTE1, prof_.bt_head, prof_.bt_issue + n * 4.0 / prof_.l1_to_bt_bpc, n * 4);
}

// ---- Cube ----------------------------------------------------------------
// C[m,n] (+)= A[m,k] B[k,n]. A in L0A as ZZ fractals (M1,K1,16,16), B in L0B as
// ZN fractals (K1,N1,16 n,16 k), C in L0C as NZ fractals (N1,M1,16,16) fp32.
// init: C = bias (from BT, if given) or 0 before accumulating.
// in_type: the 16-bit operand format in L0A/L0B (fp16 or bf16); both widen exactly to fp32.
void Core::mmad(Local<float> c, std::size_t coff, Local<f16> a, std::size_t aoff, Local<f16> b, std::size_t boff, int m,
                int n, int k, bool init, const Local<float>* bias, std::size_t bias_off, CubeIn in_type) {
  if (a.pos != Pos::L0A || b.pos != Pos::L0B || c.pos != Pos::L0C)
    fail<EmulationError>("mmad: operands must be L0A, L0B, L0C");
  if (m <= 0 || n <= 0 || k <= 0 || m > 4095 || n > 4095 || k > 4095)
    fail<EmulationError>("mmad: m, n, k must be in 1..4095, got " + std::to_string(m) + "," + std::to_string(n) + "," +
                         std::to_string(k));
  const int M1 = (m + 15) / 16, N1 = (n + 15) / 16, K1 = (k + 15) / 16;
  check_local(a, aoff, std::size_t(M1) * K1 * 256, "mmad", "A");
  check_local(b, boff, std::size_t(K1) * N1 * 256, "mmad", "B");
  check_local(c, coff, std::size_t(N1) * M1 * 256, "mmad", "C");
  if (bias) {
    if (bias->pos != Pos::BT) fail<EmulationError>("mmad: bias must come from BT");
    check_local(*bias, bias_off, std::size_t(N1) * 16, "mmad", "bias");
  }
  // Operands are converted to fp32 once per instruction (exact for fp16), B is
  // transposed inside its fractals so the inner loop is a 16-wide FMA row.
#if KILN_SIMD_BITS
  // Register-blocked AVX-512/AVX2 microkernel (simd.hpp): per output element the
  // same FMAs in the same k order as the plain loop below (which -mfma contracts
  // to FMAs), so results are bit-identical. Portable builds keep the plain loop.
#if defined(KILN_SIMD_DPBF16)
  if (in_type == CubeIn::BF16) {  // two k per instruction on vdpbf16ps (simd.hpp: what differs from the FMA path)
    auto* bp = reinterpret_cast<std::uint32_t*>(simd::scratch64(scratch_b_, std::size_t(K1) * N1 * 128 + 128));
    simd::pair_b_bf16(b.ptr + boff, bp, std::size_t(K1) * N1);
    simd::mmad_bf16_dp(c.ptr + coff, a.ptr + aoff, bp, M1, N1, K1, init, bias ? bias->ptr + bias_off : nullptr);
  } else
#endif
  {
    float* afp = simd::scratch64(scratch_a_, std::size_t(M1) * K1 * 256);
    float* bfp = simd::scratch64(scratch_b_, std::size_t(K1) * N1 * 256);
    const bool bf16 = in_type == CubeIn::BF16;
    simd::widen_a(a.ptr + aoff, afp, std::size_t(M1) * K1 * 256, bf16);
    simd::widen_b_t(b.ptr + boff, bfp, std::size_t(K1) * N1, bf16);
    simd::mmad_f32(c.ptr + coff, afp, bfp, M1, N1, K1, init, bias ? bias->ptr + bias_off : nullptr);
  }
#else
  std::vector<float>& af = scratch_a_;
  std::vector<float>& bf = scratch_b_;
  af.resize(std::size_t(M1) * K1 * 256);
  bf.resize(std::size_t(K1) * N1 * 256);
  widen16(in_type, a.ptr + aoff, af.data(), af.size());
  for (std::size_t f = 0; f < std::size_t(K1) * N1; ++f) {
    const f16* src = b.ptr + boff + f * 256;
    float* dst = bf.data() + f * 256;
    float tmp[256];
    widen16(in_type, src, tmp, 256);
    for (int nn = 0; nn < 16; ++nn)
      for (int kk = 0; kk < 16; ++kk) dst[kk * 16 + nn] = tmp[nn * 16 + kk];
  }
  for (int n1 = 0; n1 < N1; ++n1) {
    for (int m1 = 0; m1 < M1; ++m1) {
      float* cf = c.ptr + coff + (std::size_t(n1) * M1 + m1) * 256;
      alignas(64) float acc[16][16];
      if (init) {
        for (int r = 0; r < 16; ++r)
          for (int q = 0; q < 16; ++q) acc[r][q] = bias ? bias->ptr[bias_off + n1 * 16 + q] : 0.f;
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
#endif
  const std::uint64_t fractals = std::uint64_t(M1) * N1 * K1;
  stats_.cube_macs += fractals * 4096;
  stats_.cube_useful_macs += std::uint64_t(m) * n * k;
  issue(Pipe::M, prof_.mmad_head, prof_.mmad_issue + double(fractals), 0);
}

// ---- Fixpipe: L0C -> UB (coupled profiles only) ----------------------------
// Moves the NZ tile unchanged (fp32) into UB so Vector epilogues run on chip.
// On split profiles (910B) L0C and UB sit in different cores: the data has to
// go through GM, so this instruction does not exist there.
void Core::fixpipe_to_ub(Local<float> dst, std::size_t doff, Local<float> c, std::size_t coff, std::size_t count,
                         bool relu) {
  if (!prof_.coupled)
    fail<EmulationError>(std::string("fixpipe_to_ub: L0C cannot drain into UB on ") + prof_.name +
                         " (Cube and Vector are separate cores; go through GM)");
  if (c.pos != Pos::L0C || dst.pos != Pos::UB) fail<EmulationError>("fixpipe_to_ub: moves L0C -> UB");
  check_local(c, coff, count, "fixpipe_to_ub", "src");
  check_local(dst, doff, count, "fixpipe_to_ub", "dst");
  for (std::size_t i = 0; i < count; ++i) {
    const float v = c.ptr[coff + i];
    dst.ptr[doff + i] = relu && v < 0.f ? 0.f : v;  // NaN kept, as ONNX Relu (docs/numerics.md)
  }
  fixpipe_cost(count, true, false);
}

// ---- Fixpipe: L0C -> GM --------------------------------------------------
// Row-major out: rows m x cols n of the NZ tile (tile has m1_stride row fractals)
// go to dst[doff + i*ld + j], fp32 -> fp16, optional ReLU on the way.
void Core::fixpipe_nz_to_nd(Global<f16> dst, std::size_t doff, std::size_t ld, Local<float> c, std::size_t coff, int m,
                            int n, int m1_stride, bool relu) {
  if (c.pos != Pos::L0C) fail<EmulationError>("fixpipe: source must be L0C");
  const int N1 = (n + 15) / 16;
  if (m <= 0 || n <= 0 || m > 16 * m1_stride) fail<EmulationError>("fixpipe_nz_to_nd: m must be in 1..16*m1_stride");
  check_local(c, coff, std::size_t(N1) * m1_stride * 256, "fixpipe_nz_to_nd", "src");
  check_global(dst, doff, std::size_t(m - 1) * ld + n, "fixpipe_nz_to_nd", "dst");
  // Row i of the output is 16-column pieces of row i%16 in fractals (j1, i/16):
  // vector converts of 16 (ReLU then round to nearest even, as f32_to_f16).
  // The full pieces go with a constant length and ReLU flag (so the convert is
  // specialised here as it was when this body was inlined into each kernel).
  const int full = n / 16;
  for (int i = 0; i < m; ++i) {
    const float* src = c.ptr + coff + std::size_t(i / 16) * 256 + (i % 16) * 16;
    f16* out = dst.ptr + doff + std::size_t(i) * ld;
    if (relu)
      for (int j1 = 0; j1 < full; ++j1)
        simd::f32_to_f16_run(src + std::size_t(j1) * m1_stride * 256, out + j1 * 16, 16, true);
    else
      for (int j1 = 0; j1 < full; ++j1)
        simd::f32_to_f16_run(src + std::size_t(j1) * m1_stride * 256, out + j1 * 16, 16, false);
    if (full < N1)
      simd::f32_to_f16_run(src + std::size_t(full) * m1_stride * 256, out + full * 16, n - full * 16, relu);
  }
  fixpipe_cost(std::uint64_t(m) * n, false, true);
  gm_written(std::uint64_t(m) * n * sizeof(f16));
}

void Core::fixpipe_nz_to_nd_f32(Global<float> dst, std::size_t doff, std::size_t ld, Local<float> c, std::size_t coff,
                                int m, int n, int m1_stride) {
  if (c.pos != Pos::L0C) fail<EmulationError>("fixpipe: source must be L0C");
  const int N1 = (n + 15) / 16;
  if (m <= 0 || n <= 0 || m > 16 * m1_stride)
    fail<EmulationError>("fixpipe_nz_to_nd_f32: m must be in 1..16*m1_stride");
  check_local(c, coff, std::size_t(N1) * m1_stride * 256, "fixpipe_nz_to_nd_f32", "src");
  check_global(dst, doff, std::size_t(m - 1) * ld + n, "fixpipe_nz_to_nd_f32", "dst");
  for (int i = 0; i < m; ++i) {  // row i: 16-column pieces of row i%16 of fractals (j1, i/16)
    const float* src = c.ptr + coff + std::size_t(i / 16) * 256 + (i % 16) * 16;
    float* out = dst.ptr + doff + std::size_t(i) * ld;
    for (int j1 = 0; j1 < N1; ++j1)
      std::memcpy(out + j1 * 16, src + std::size_t(j1) * m1_stride * 256,
                  std::size_t(std::min(16, n - j1 * 16)) * sizeof(float));
  }
  fixpipe_cost(std::uint64_t(m) * n, true, true);
  gm_written(std::uint64_t(m) * n * sizeof(float));
}

// Channel-blocked out: the NZ tile (n1_count channel blocks x m pixels) maps to
// NC1HWC0 directly: block n1, pixel i -> dst[doff + n1*plane + i*16 + c0].
void Core::fixpipe_nz_to_nc1hwc0(Global<f16> dst, std::size_t doff, std::size_t plane, Local<float> c, std::size_t coff,
                                 int m, int n1_count, int m1_stride, bool relu) {
  if (c.pos != Pos::L0C) fail<EmulationError>("fixpipe: source must be L0C");
  if (m <= 0 || n1_count <= 0 || m > 16 * m1_stride)
    fail<EmulationError>("fixpipe_nz_to_nc1hwc0: m must be in 1..16*m1_stride");
  check_local(c, coff, std::size_t(n1_count) * m1_stride * 256, "fixpipe_nz_to_nc1hwc0", "src");
  check_global(dst, doff, std::size_t(n1_count - 1) * plane + std::size_t(m) * 16, "fixpipe_nz_to_nc1hwc0", "dst");
  // The m rows of an NZ block are m pixels x 16 channels, contiguous on both
  // sides: one fp32 -> fp16 run (ReLU first) per channel block.
  for (int n1 = 0; n1 < n1_count; ++n1)
    simd::f32_to_f16_run(c.ptr + coff + std::size_t(n1) * m1_stride * 256, dst.ptr + doff + n1 * plane,
                         std::size_t(m) * 16, relu);
  fixpipe_cost(std::uint64_t(m) * n1_count * 16, false, true);
  gm_written(std::uint64_t(m) * n1_count * 16 * sizeof(f16));
}

// L0C -> L1, fp16 in NZ order (see core.hpp): a chained Cube stage's A operand, kept on chip.
void Core::fixpipe_nz_to_l1(Local<f16> dst, std::size_t doff, Local<float> c, std::size_t coff, std::size_t count,
                            bool relu, CubeIn as) {
  if (c.pos != Pos::L0C || dst.pos != Pos::L1) fail<EmulationError>("fixpipe_nz_to_l1: moves L0C -> L1");
  check_local(c, coff, count, "fixpipe_nz_to_l1", "src");
  check_local(dst, doff, count, "fixpipe_nz_to_l1", "dst");
  if (as == CubeIn::BF16) simd::f32_to_bf16_run(c.ptr + coff, dst.ptr + doff, count, relu);
  else simd::f32_to_f16_run(c.ptr + coff, dst.ptr + doff, count, relu);
  fixpipe_cost(count, false, false);
}

// Channel-blocked fp32 out (a GM workspace that a Vector pass reads back): block n1, row i of the NZ
// tile -> dst[doff + n1*plane + i*16 + c0], unrounded. No activation: the consumer applies it.
void Core::fixpipe_nz_to_blocked_f32(Global<float> dst, std::size_t doff, std::size_t plane, Local<float> c,
                                     std::size_t coff, int m, int n1_count, int m1_stride) {
  if (c.pos != Pos::L0C) fail<EmulationError>("fixpipe: source must be L0C");
  if (m <= 0 || n1_count <= 0 || m > 16 * m1_stride)
    fail<EmulationError>("fixpipe_nz_to_blocked_f32: m must be in 1..16*m1_stride");
  check_local(c, coff, std::size_t(n1_count) * m1_stride * 256, "fixpipe_nz_to_blocked_f32", "src");
  check_global(dst, doff, std::size_t(n1_count - 1) * plane + std::size_t(m) * 16, "fixpipe_nz_to_blocked_f32", "dst");
  for (int n1 = 0; n1 < n1_count; ++n1)  // an NZ block's rows are already 16 contiguous channels
    std::memcpy(dst.ptr + doff + n1 * plane, c.ptr + coff + std::size_t(n1) * m1_stride * 256,
                std::size_t(m) * 16 * sizeof(float));
  fixpipe_cost(std::uint64_t(m) * n1_count * 16, true, true);
  gm_written(std::uint64_t(m) * n1_count * 16 * sizeof(float));
}

// ---- Vector (UB only) ----------------------------------------------------
template <class T, class>
void Core::vbinary(VecOp op, Local<T> dst, std::size_t doff, Local<T> s0, std::size_t s0off, Local<T> s1,
                   std::size_t s1off, Mask mask, Repeat rp) {
  const unsigned ext = mask.extent(256 / sizeof(T));
  vec_prologue(rp, "vbinary", dst, doff, rp.dst_blk, rp.dst_rep, ext);
  vec_operand(rp, "vbinary", s0, s0off, rp.src0_blk, rp.src0_rep, ext);
  vec_operand(rp, "vbinary", s1, s1off, rp.src1_blk, rp.src1_rep, ext);
  // The op is picked once per instruction (simd.hpp kernels), not per lane.
  // Contiguous lanes (prefix mask, runs per block or repeat) go as whole
  // vectors; any other mask/stride/overlap pattern walks lane by lane.
  const simd::VecKernel<T> k = simd::binary_kernel<T>(op);
  if (!k.run) fail<EmulationError>("vbinary: not a binary op");
  const simd::RunOperand ops[3] = {{dst.ptr + doff, sizeof(T), rp.dst_blk, rp.dst_rep},
                                   {s0.ptr + s0off, sizeof(T), rp.src0_blk, rp.src0_rep},
                                   {s1.ptr + s1off, sizeof(T), rp.src1_blk, rp.src1_rep}};
  const simd::Runs runs = simd::plan_runs(mask.prefix(256 / sizeof(T)), rp.times, ops, 3);
  if (runs.ok) {
    simd::for_runs(runs, rp.times, [&](std::size_t d, std::size_t i0, std::size_t i1, std::size_t n) {
      k.run(k, dst.ptr + doff + d, s0.ptr + s0off + i0, s1.ptr + s1off + i1, n);
    });
    stats_.vec_repeats += rp.times;
  } else {
    vec_apply<T, T>(rp, mask, [&](std::size_t d, std::size_t i0, std::size_t i1) {
      const float c = k.reads_dst ? load(dst.ptr[doff + d]) : 0.f;
      dst.ptr[doff + d] = store<T>(k.lane(k, load(s0.ptr[s0off + i0]), load(s1.ptr[s1off + i1]), c));
    });
  }
  vec_cost<T>(op, rp);
}

// Unary (Relu, Exp, Copy) and scalar forms (Adds, Muls, Maxs, Mins take `scalar`).
template <class T, class>
void Core::vunary(VecOp op, Local<T> dst, std::size_t doff, Local<T> src, std::size_t soff, Mask mask, Repeat rp,
                  float scalar) {
  const unsigned ext = mask.extent(256 / sizeof(T));
  vec_prologue(rp, "vunary", dst, doff, rp.dst_blk, rp.dst_rep, ext);
  vec_operand(rp, "vunary", src, soff, rp.src0_blk, rp.src0_rep, ext);
  // As vbinary: op picked once, contiguous lanes as whole vectors, else lane by lane.
  const simd::VecKernel<T> k = simd::unary_kernel<T>(op, scalar);
  if (!k.run) fail<EmulationError>("vunary: not a unary op");
  const simd::RunOperand ops[2] = {{dst.ptr + doff, sizeof(T), rp.dst_blk, rp.dst_rep},
                                   {src.ptr + soff, sizeof(T), rp.src0_blk, rp.src0_rep}};
  const simd::Runs runs = simd::plan_runs(mask.prefix(256 / sizeof(T)), rp.times, ops, 2);
  if (runs.ok) {
    simd::for_runs(runs, rp.times, [&](std::size_t d, std::size_t i0, std::size_t, std::size_t n) {
      k.run(k, dst.ptr + doff + d, src.ptr + soff + i0, nullptr, n);
    });
    stats_.vec_repeats += rp.times;
  } else {
    vec_apply<T, T>(rp, mask, [&](std::size_t d, std::size_t i0, std::size_t) {
      dst.ptr[doff + d] = store<T>(k.lane(k, load(src.ptr[soff + i0]), 0.f, 0.f));
    });
  }
  vec_cost<T>(op, rp);
}

template <class T, class>
void Core::vdup(Local<T> dst, std::size_t doff, float value, Mask mask, Repeat rp) {
  vec_prologue(rp, "vdup", dst, doff, rp.dst_blk, rp.dst_rep, mask.extent(256 / sizeof(T)));
  const T v = store<T>(value);
  // Contiguous lanes are filled as runs, the rest lane by lane; every enabled lane gets the same value,
  // so the order of the stores does not matter.
  const simd::RunOperand ops[1] = {{dst.ptr + doff, sizeof(T), rp.dst_blk, rp.dst_rep}};
  const simd::Runs runs = simd::plan_runs(mask.prefix(256 / sizeof(T)), rp.times, ops, 1);
  if (runs.ok) {
    simd::for_runs(runs, rp.times, [&](std::size_t d, std::size_t, std::size_t, std::size_t n) {
      std::fill_n(dst.ptr + doff + d, n, v);
    });
    stats_.vec_repeats += rp.times;
  } else {
    vec_apply<T, T>(rp, mask, [&](std::size_t d, std::size_t, std::size_t) { dst.ptr[doff + d] = v; });
  }
  vec_cost<T>(VecOp::Dup, rp);
}

// fp16 <-> fp32. One repeat covers 64 elements (the fp32 side fills 256 B);
// each operand steps through its own 32-byte blocks.
template <class D, class S, class>
void Core::vcast(Local<D> dst, std::size_t doff, Local<S> src, std::size_t soff, Mask mask, Repeat rp) {
  static_assert(sizeof(D) != sizeof(S), "vcast converts between fp16 and fp32");
  const unsigned ext = mask.extent(64);
  vec_prologue(rp, "vcast", dst, doff, rp.dst_blk, rp.dst_rep, ext);
  vec_operand(rp, "vcast", src, soff, rp.src0_blk, rp.src0_rep, ext);
  // Contiguous lanes convert as whole vectors (same rounding), else lane by lane.
  const simd::RunOperand ops[2] = {{dst.ptr + doff, sizeof(D), rp.dst_blk, rp.dst_rep},
                                   {src.ptr + soff, sizeof(S), rp.src0_blk, rp.src0_rep}};
  const simd::Runs runs = simd::plan_runs(mask.prefix(64), rp.times, ops, 2);
  if (runs.ok) {
    simd::for_runs(runs, rp.times, [&](std::size_t d, std::size_t i0, std::size_t, std::size_t n) {
      simd::run_unary(simd::OpCopy{}, dst.ptr + doff + d, src.ptr + soff + i0, n);
    });
    stats_.vec_repeats += rp.times;
  } else {
    vec_apply<D, S>(
        rp, mask,
        [&](std::size_t d, std::size_t i0, std::size_t) { dst.ptr[doff + d] = store<D>(load(src.ptr[soff + i0])); },
        64);
  }
  vec_cost<float>(VecOp::Cast, rp);
}

// One result per repeat (WholeReduceSum/Max); results land contiguously at dst.
template <class T, class>
void Core::vreduce(VecOp op, Local<T> dst, std::size_t doff, Local<T> src, std::size_t soff, Mask mask, Repeat rp) {
  if (op != VecOp::ReduceSum && op != VecOp::ReduceMax) fail<EmulationError>("vreduce: not a reduction");
  if (rp.times < 1 || rp.times > 255) fail<EmulationError>("vreduce: repeat must be 1..255");
  check_ub(dst, "vreduce");
  check_local(dst, doff, rp.times, "vreduce", "dst");
  vec_operand(rp, "vreduce", src, soff, rp.src0_blk, rp.src0_rep, mask.extent(256 / sizeof(T)));
  const unsigned lanes = 256 / sizeof(T), E = 32 / sizeof(T);
  const int prefix = rp.src0_blk == 1 ? mask.prefix(lanes) : -1;
  if (prefix >= 0) {
    // Contiguous lanes [0, prefix) of each repeat: the same operations in the same lane order as the
    // general loop below, without a mask test and block arithmetic per lane.
    for (unsigned r = 0; r < rp.times; ++r) {
      const T* p = src.ptr + soff + std::size_t(r) * rp.src0_rep * E;
      float acc;
      if (op == VecOp::ReduceSum) {
        acc = 0.f;
        for (int i = 0; i < prefix; ++i) acc = acc + load(p[i]);
      } else {
        acc = -INFINITY;
        for (int i = 0; i < prefix; ++i) acc = std::max(acc, load(p[i]));
      }
      dst.ptr[doff + r] = store<T>(acc);
    }
  } else {
    for (unsigned r = 0; r < rp.times; ++r) {
      float acc = op == VecOp::ReduceSum ? 0.f : -INFINITY;
      for (unsigned i = 0; i < lanes; ++i) {
        if (!mask.test(i)) continue;
        const float v = load(src.ptr[soff + std::size_t(r) * rp.src0_rep * E + (i / E) * rp.src0_blk * E + i % E]);
        acc = op == VecOp::ReduceSum ? acc + v : std::max(acc, v);
      }
      dst.ptr[doff + r] = store<T>(acc);
    }
  }
  vec_cost<T>(op, rp);
}

void Core::vtranspose(Local<f16> dst, std::size_t doff, std::size_t dst_stride, Local<f16> src, std::size_t soff,
                      std::size_t src_stride, unsigned times, std::size_t dst_rep, std::size_t src_rep) {
  if (times < 1 || times > 255) fail<EmulationError>("vtranspose: repeat must be 1..255");
  if (dst_stride % 16 || src_stride % 16 || dst_rep % 16 || src_rep % 16)
    fail<EmulationError>("vtranspose: row strides and repeat strides must be multiples of 16 elements (32 B)");
  check_ub(dst, "vtranspose");
  check_ub(src, "vtranspose");
  const std::size_t last = std::size_t(times - 1);
  check_local(dst, doff, last * dst_rep + 15 * dst_stride + 16, "vtranspose", "dst");
  check_local(src, soff, last * src_rep + 15 * src_stride + 16, "vtranspose", "src");
  for (unsigned r = 0; r < times; ++r) {
    f16 tile[256];  // through a copy: a transpose in place (dst == src) is legal
    for (int j = 0; j < 16; ++j) std::copy_n(src.ptr + soff + r * src_rep + j * src_stride, 16, tile + j * 16);
    for (int i = 0; i < 16; ++i)
      for (int j = 0; j < 16; ++j) dst.ptr[doff + r * dst_rep + i * dst_stride + j] = tile[j * 16 + i];
  }
  stats_.vec_repeats += 2 * times;
  // One 16x16 tile is 512 bytes: two 256-byte repeats of the Vector pipe.
  Repeat cost;
  cost.times = 2 * times;
  vec_cost<f16>(VecOp::Transpose, cost);
}

template <class T, class>
void Core::vbrcb(Local<T> dst, std::size_t doff, Local<T> src, std::size_t soff, unsigned times, unsigned dst_blk,
                 unsigned dst_rep) {
  if (times < 1 || times > 255) fail<EmulationError>("vbrcb: repeat must be 1..255");
  check_ub(dst, "vbrcb");
  check_ub(src, "vbrcb");
  constexpr std::size_t E = 32 / sizeof(T);
  check_local(src, soff, std::size_t(times) * 8, "vbrcb", "src");
  check_local(dst, doff, (std::size_t(times - 1) * dst_rep + 7 * dst_blk) * E + E, "vbrcb", "dst");
  for (unsigned r = 0; r < times; ++r)
    for (unsigned b = 0; b < 8; ++b)
      std::fill_n(dst.ptr + doff + (std::size_t(r) * dst_rep + b * dst_blk) * E, E, src.ptr[soff + r * 8 + b]);
  stats_.vec_repeats += times;
  Repeat cost;
  cost.times = times;
  vec_cost<T>(VecOp::Brcb, cost);
}

// Scalar unit reads one value from UB (GetValue): the result feeds scalar
// operands of later vector instructions. The S pipe waits for the vector pipe
// to have written it (the kernel sets/waits V->S before calling this).
template <class T, class>
float Core::scalar_read(Local<T> src, std::size_t idx) {
  // GetValue reads any element: the tensor's start is checked (alignment), the element only for bounds
  check_local(src, 0, 1, "scalar_read", "src");
  if (idx >= src.count) out_of_range("scalar_read", "src", src.name, pos_name(src.pos), idx, 1, src.count);
  issue(Pipe::S, 0, 1, sizeof(T));
  return load(src.ptr[idx]);
}

// ---- the element types the kernels use (core.hpp: OnChip, OnChipCast) ----------
#define KILN_INSTANTIATE(T)                                                                                        \
  template void Core::copy_gm_to_local<T>(Local<T>, std::size_t, Global<const T>, std::size_t, std::size_t,        \
                                          std::size_t, std::size_t, std::size_t);                                  \
  template void Core::copy_ub_to_gm<T>(Global<T>, std::size_t, Local<T>, std::size_t, std::size_t, std::size_t,    \
                                       std::size_t, std::size_t);                                                  \
  template void Core::vbinary<T>(VecOp, Local<T>, std::size_t, Local<T>, std::size_t, Local<T>, std::size_t, Mask, \
                                 Repeat);                                                                          \
  template void Core::vunary<T>(VecOp, Local<T>, std::size_t, Local<T>, std::size_t, Mask, Repeat, float);         \
  template void Core::vdup<T>(Local<T>, std::size_t, float, Mask, Repeat);                                         \
  template void Core::vreduce<T>(VecOp, Local<T>, std::size_t, Local<T>, std::size_t, Mask, Repeat);               \
  template void Core::vbrcb<T>(Local<T>, std::size_t, Local<T>, std::size_t, unsigned, unsigned, unsigned);        \
  template float Core::scalar_read<T>(Local<T>, std::size_t);
KILN_INSTANTIATE(f16)
KILN_INSTANTIATE(float)
#undef KILN_INSTANTIATE
template void Core::vcast<f16, float>(Local<f16>, std::size_t, Local<float>, std::size_t, Mask, Repeat);
template void Core::vcast<float, f16>(Local<float>, std::size_t, Local<f16>, std::size_t, Mask, Repeat);

}  // namespace kiln::emu
