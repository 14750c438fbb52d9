// One emulated AI Core: sized local buffers, per-pipe timelines, set/wait
// flags, and the instruction set the generated kernels are written against.
// Every instruction does its real work on the buffers (so results are exact
// emulations of the fp16/fp32 datapath) and advances the timeline of its pipe
// by the profile's cost, so a kernel call yields simulated cycles beside its
// numbers. Bounds, capacity and alignment are checked per instruction, never
// per element, and violations raise an EmulationError naming the kernel.
//
// Only the class and its small per-call helpers (allocation, flags, the pipe
// timeline) are defined here. The instruction bodies live in core.cpp, which is
// compiled once into the kiln_emu library instead of into every generated
// kernel (they are most of each kernel's compile time otherwise); an
// instruction works on a whole tile, so the call costs nothing measurable.
#pragma once
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "kiln/arch.hpp"
#include "kiln/f16.hpp"

namespace kiln::emu {

// A tensor in a core-local buffer (L1, L0A, L0B, L0C, UB, BT).
template <class T>
struct Local {
  T* ptr = nullptr;
  Pos pos = Pos::GM;
  std::uint32_t byte_off = 0;  // offset inside the buffer, for alignment checks
  std::size_t count = 0;       // elements
  const char* name = "";
};

// A tensor in global memory (host memory in the emulation).
template <class T>
struct Global {
  T* ptr = nullptr;
  std::size_t count = 0;
  const char* name = "";
};

struct PipeCounters {
  std::uint64_t instrs = 0;
  std::uint64_t bytes = 0;
  double busy = 0;  // cycles the pipe was executing
};

struct CoreStats {
  std::array<PipeCounters, kNumPipes> pipe{};
  // GM traffic for the chip's memory bound (launch.hpp): reads served by L2, reads from HBM, writes. A core's own
  // count follows the step's L2 plan; a launch's total also counts re-reads of its cold inputs as hits
  // (launch.hpp reuse_within_launch).
  std::uint64_t l2_hit_bytes = 0, hbm_read_bytes = 0, gm_write_bytes = 0;
  std::uint64_t cube_macs = 0;         // MACs issued on the 16x16x16 fractal grid
  std::uint64_t cube_useful_macs = 0;  // m*n*k as asked, without fractal padding
  std::uint64_t vec_repeats = 0;
  double end_cycle = 0;
  int blocks = 0;
};

// The GM tensors of one model step and whether a read of each hits L2, from the build's L2 plan (the
// executor sets it around the step's kernel call, launch() hands it to the cores). A read of an address in
// none of them is of the kernel's own workspace, which it wrote just before: a hit. A kernel called on its
// own has no view: every read misses. codegen/cost/model.py SimCore.hits is the same rule.
// first: of a missed region, the share of the step's reads of it that are first reads (first_share); the
// others are re-reads of bytes a core brought into L2 before, in the same launch (docs/ascend-model.md §12).
struct GmRegion {
  const std::uint8_t* lo;
  const std::uint8_t* hi;
  bool hit;
  double first = 1.0;
};

// A cold input of `bytes` of which the step's cores read `reads` bytes in all: the share of first reads
// (each byte is read once at least; whatever exceeds the size is a re-read). codegen/cost/model.py first_shares.
inline double first_share(std::uint64_t bytes, std::uint64_t reads) {
  return reads > bytes ? double(bytes) / double(reads) : 1.0;
}

// A core's GM read rate, B/cycle, when `first` of the bytes it reads are first reads (at the miss rate) and the
// rest re-reads (at the hit rate), spread evenly over the reads. codegen/cost/model.py read_rate.
inline double read_rate(double first, double hit_bpc, double miss_bpc) {
  if (first <= 0.0) return hit_bpc;
  if (first >= 1.0) return miss_bpc;
  return 1.0 / (first / miss_bpc + (1.0 - first) / hit_bpc);
}
struct L2View {
  std::vector<GmRegion> regions;  // the step's inputs in order, then its output (always a hit)
};

// Operand format of the Cube's 16-bit inputs.
enum class CubeIn : std::uint8_t { F16, BF16 };

// Vector mask: up to 128 lanes (fp16), 64 (fp32). Bit i enables element i of a repeat.
struct Mask {
  std::uint64_t lo = ~0ull, hi = ~0ull;
  static Mask first(unsigned n) {
    Mask m;
    m.lo = n >= 64 ? ~0ull : ((1ull << n) - 1);
    m.hi = n >= 128 ? ~0ull : (n <= 64 ? 0ull : ((1ull << (n - 64)) - 1));
    return m;
  }
  bool test(unsigned i) const { return i < 64 ? (lo >> i) & 1 : (hi >> (i - 64)) & 1; }
  // Both below run once per vector instruction, now out of line in core.cpp where the mask is not a
  // compile-time constant any more: word operations instead of a loop over up to 128 lanes. lanes <= 128.
  // One past the highest enabled lane among the first `lanes`.
  unsigned extent(unsigned lanes) const {
    const Mask in = first(lanes);
    if (const std::uint64_t h = hi & in.hi) return 128 - unsigned(__builtin_clzll(h));
    if (const std::uint64_t l = lo & in.lo) return 64 - unsigned(__builtin_clzll(l));
    return 0;
  }
  // Number of leading enabled lanes if the mask is a contiguous prefix, else -1.
  int prefix(unsigned lanes) const {
    const unsigned ones = ~lo ? unsigned(__builtin_ctzll(~lo)) : 64 + (~hi ? unsigned(__builtin_ctzll(~hi)) : 64);
    const unsigned n = ones < lanes ? ones : lanes;
    const Mask in = first(lanes), want = first(n);  // the first `lanes` lanes must be exactly the first n
    return ((lo & in.lo) == want.lo && (hi & in.hi) == want.hi) ? static_cast<int>(n) : -1;
  }
};

// Strides of a level-0 vector instruction, in 32-byte blocks (Ascend semantics:
// block stride inside one 256-byte repeat, repeat stride between repeats).
struct Repeat {
  unsigned times = 1;  // 1..255
  unsigned dst_blk = 1, src0_blk = 1, src1_blk = 1;
  unsigned dst_rep = 8, src0_rep = 8, src1_rep = 8;
};

// Geometry of an img2col load (Load3D): feature map slab in L1 laid out
// [slab_c1][slab_h][fm_w][16] fp16, rows are image rows slab_row0 .. +slab_h.
// c0 = 4: a small-channel map (Load3D's channelSize 4), [slab_h][fm_w][4], one slab_c1; its K runs over
// tap * 4 + channel, 16 to a fractal (docs/ascend-model.md section 12).
struct Img2col {
  int slab_c1, slab_h, slab_row0, fm_h, fm_w;
  int pad_top, pad_left, stride_h, stride_w, dil_h, dil_w, kh, kw;
  int out_w;
  long m_total;  // output pixels of one image; rows beyond are padding rows of the fractal
  int c0 = 16;   // channels per pixel in the slab: 16, or 4 (small-channel)
};

// The element types on-chip instructions are instantiated for (core.cpp); any
// other type is a compile error at the call instead of a missing symbol at import.
template <class T>
using OnChip = std::enable_if_t<std::is_same_v<T, f16> || std::is_same_v<T, float>>;
template <class D, class S>
using OnChipCast = std::enable_if_t<(std::is_same_v<D, f16> && std::is_same_v<S, float>) ||
                                    (std::is_same_v<D, float> && std::is_same_v<S, f16>)>;

class Core {
 public:
  Core(const Profile& profile, CoreKind kind);

  const Profile& profile() const { return prof_; }
  CoreKind kind() const { return kind_; }
  const char* kernel() const { return kernel_; }

  // Starts one virtual core's run: clears allocations, timeline and counters. l2: the step's L2 plan, or
  // nullptr (the kernel called on its own: every GM read misses L2).
  void start(const char* kernel, int core_id, const L2View* l2 = nullptr);
  const CoreStats& finish();
  CoreStats& stats() { return stats_; }

  // ---- buffers -------------------------------------------------------------
  template <class T>
  Local<T> alloc(Pos pos, std::size_t count, const char* what) {
    const int p = static_cast<int>(pos);
    if (!cap_[p]) no_buffer(pos, what);
    const std::uint32_t off = round_up(top_[p], prof_.alignment[p]);
    // Compared without forming count*sizeof(T) or off+bytes, which could wrap for huge counts.
    if (count > cap_[p] / sizeof(T) || off > cap_[p] || count * sizeof(T) > cap_[p] - off)
      alloc_overflow(pos, count, sizeof(T), off, what);
    const std::size_t bytes = count * sizeof(T);
    top_[p] = off + static_cast<std::uint32_t>(bytes);
    return Local<T>{reinterpret_cast<T*>(mem_[p].get() + off), pos, off, count, what};
  }

  // A tensor at an explicit byte offset (as kernels that manage buffers by hand do).
  template <class T>
  Local<T> at(Pos pos, std::size_t byte_off, std::size_t count, const char* what) {
    const int p = static_cast<int>(pos);
    if (!cap_[p] || byte_off > cap_[p] || count > (cap_[p] - byte_off) / sizeof(T))
      at_overflow(pos, byte_off, count, sizeof(T), what);
    return Local<T>{reinterpret_cast<T*>(mem_[p].get() + byte_off), pos, static_cast<std::uint32_t>(byte_off), count,
                    what};
  }

  void free_all(Pos pos) { top_[static_cast<int>(pos)] = 0; }
  std::uint32_t used(Pos pos) const { return top_[static_cast<int>(pos)]; }
  std::uint32_t capacity(Pos pos) const { return cap_[static_cast<int>(pos)]; }

  // ---- synchronisation -----------------------------------------------------
  // set_flag(src, dst, id): the flag rises when every src instruction issued so
  // far has finished (its result ready: the pipe's latency after its body).
  // wait_flag(src, dst, id): dst instructions issued after it start no earlier
  // than that. Counters are up to 15 deep, as on hardware.
  void set_flag(Pipe src, Pipe dst, int id) {
    auto& q = flag(src, dst, id);
    if (q.size() >= 15) flag_overflow(src, dst, id);
    q.push_back(done_at_[static_cast<int>(src)]);
  }
  void wait_flag(Pipe src, Pipe dst, int id) {
    auto& q = flag(src, dst, id);
    if (q.empty()) flag_never_set(src, dst, id);
    double& w = wait_until_[static_cast<int>(dst)];
    w = std::max(w, q.front());
    q.pop_front();
  }
  // Cross-core synchronisation (CrossCoreSetFlag / WaitFlag, kiln/ops.hpp CrossFlag) needs the two halves of
  // a flag on two cores' timelines: when `src` has finished everything issued so far, and a wait of `dst`.
  double pipe_done(Pipe src) const { return done_at_[static_cast<int>(src)]; }
  void wait_until(Pipe dst, double t) {
    double& w = wait_until_[static_cast<int>(dst)];
    w = std::max(w, t);
  }
  // All pipes wait for all pipes (PipeBarrier<PIPE_ALL>): for every result, so the barrier drains each pipe's
  // latency, and the next instruction of every pipe starts a new burst.
  void barrier_all() {
    const double t = *std::max_element(done_at_.begin(), done_at_.end());
    wait_until_.fill(t);
  }

  // ---- MTE2: GM -> L1 / UB -------------------------------------------------
  // nburst bursts of burst elements; the k-th burst reads src+soff+k*src_stride
  // and writes dst+doff+k*dst_stride (strides in elements).
  template <class T, class = OnChip<T>>
  void copy_gm_to_local(Local<T> dst, std::size_t doff, Global<const T> src, std::size_t soff, std::size_t nburst,
                        std::size_t burst, std::size_t src_stride, std::size_t dst_stride);

  // The same for a Cube operand that GM holds as fp16 (an activation), landing in L1 as `as`. KILN_DTYPE=bf16
  // builds keep the arena in fp16 (the Vector kernels stay as they are) and round activations to bf16 here,
  // where they enter the Cube, at the fp16 copy's bytes and cycles: on the 910B the same data would sit in GM
  // as bf16, written by the producer's Fixpipe (fp32 -> bf16); the emulation differs from that by the fp16
  // range and one extra rounding (fp32 -> fp16 -> bf16), which changes a value only at a rare tie.
  void copy_gm_to_local(Local<f16> dst, std::size_t doff, Global<const f16> src, std::size_t soff, std::size_t nburst,
                        std::size_t burst, std::size_t src_stride, std::size_t dst_stride, CubeIn as);

  // GM (row-major rows x cols, row stride ld) -> L1 in NZ: column blocks of 16,
  // each [dst_rows][16]; rows >= rows and cols >= cols are zero-filled. as: as above.
  void copy_gm_to_l1_nd2nz(Local<f16> dst, std::size_t doff, Global<const f16> src, std::size_t soff, std::size_t rows,
                           std::size_t cols, std::size_t ld, std::size_t dst_rows, CubeIn as = CubeIn::F16);

  // ---- MTE3: UB -> GM ------------------------------------------------------
  template <class T, class = OnChip<T>>
  void copy_ub_to_gm(Global<T> dst, std::size_t doff, Local<T> src, std::size_t soff, std::size_t nburst,
                     std::size_t burst, std::size_t src_stride, std::size_t dst_stride);

  // ---- MTE1: L1 -> L0A / L0B / BT ------------------------------------------
  // repeat fractals of 16x16 fp16 (512 B); fractal r is read at src+soff+r*src_stride*256
  // and written at dst+doff+r*dst_stride*256 (strides in fractals). transpose swaps the
  // two axes inside each fractal (LoadData2D ifTranspose).
  void load2d(Local<f16> dst, std::size_t doff, Local<f16> src, std::size_t soff, std::size_t repeat,
              std::size_t src_stride, std::size_t dst_stride, bool transpose = false);

  // img2col on the way L1 -> L0A: writes m1_count x k1_count fractals in ZZ order
  // (row of fractals = 16 output pixels starting at m_start, column = one (c1,kh,kw)
  // triple k1 = c1*kh*kw + i*kw + j, counted from k1_start).
  void load3d(Local<f16> dst, std::size_t doff, Local<f16> fm, std::size_t foff, const Img2col& g, long m_start,
              int m1_count, int k1_start, int k1_count);

  void load_bias_table(Local<float> dst, std::size_t doff, Local<float> src, std::size_t soff, std::size_t n);

  // ---- Cube ----------------------------------------------------------------
  // C[m,n] (+)= A[m,k] B[k,n]. A in L0A as ZZ fractals (M1,K1,16,16), B in L0B as
  // ZN fractals (K1,N1,16 n,16 k), C in L0C as NZ fractals (N1,M1,16,16) fp32.
  // init: C = bias (from BT, if given) or 0 before accumulating.
  // in_type: the 16-bit operand format in L0A/L0B (fp16 or bf16); both widen exactly to fp32.
  void mmad(Local<float> c, std::size_t coff, Local<f16> a, std::size_t aoff, Local<f16> b, std::size_t boff, int m,
            int n, int k, bool init, const Local<float>* bias = nullptr, std::size_t bias_off = 0,
            CubeIn in_type = CubeIn::F16);

  // ---- Fixpipe: L0C -> UB (coupled profiles only) ----------------------------
  // Moves the NZ tile unchanged (fp32) into UB so Vector epilogues run on chip.
  // On split profiles (910B) L0C and UB sit in different cores: the data has to
  // go through GM, so this instruction does not exist there.
  void fixpipe_to_ub(Local<float> dst, std::size_t doff, Local<float> c, std::size_t coff, std::size_t count,
                     bool relu);

  // ---- Fixpipe: L0C -> GM --------------------------------------------------
  // Row-major out: rows m x cols n of the NZ tile (tile has m1_stride row fractals)
  // go to dst[doff + i*ld + j], fp32 -> fp16, optional ReLU on the way.
  void fixpipe_nz_to_nd(Global<f16> dst, std::size_t doff, std::size_t ld, Local<float> c, std::size_t coff, int m,
                        int n, int m1_stride, bool relu);

  // The same rows x cols unrounded in fp32 (a GM workspace another core reads back, e.g. attention's score
  // and P.V tiles on split profiles). No activation.
  void fixpipe_nz_to_nd_f32(Global<float> dst, std::size_t doff, std::size_t ld, Local<float> c, std::size_t coff,
                            int m, int n, int m1_stride);

  // Channel-blocked out: the NZ tile (n1_count channel blocks x m pixels) maps to
  // NC1HWC0 directly: block n1, pixel i -> dst[doff + n1*plane + i*16 + c0].
  void fixpipe_nz_to_nc1hwc0(Global<f16> dst, std::size_t doff, std::size_t plane, Local<float> c, std::size_t coff,
                             int m, int n1_count, int m1_stride, bool relu);

  // L0C -> L1 (a chained Cube stage's operand): the NZ tile is rounded to fp16 (ReLU first) and kept in NZ
  // order, so its fractal (n1, m1) is the next GEMM's A fractal (m1, k1 = n1), which load2d picks up with a
  // stride of the tile's m1 count. The result never leaves the core.
  // as = BF16: rounded to bf16 instead (the next stage of a bf16 chain reads bf16).
  void fixpipe_nz_to_l1(Local<f16> dst, std::size_t doff, Local<float> c, std::size_t coff, std::size_t count,
                        bool relu, CubeIn as = CubeIn::F16);

  // Channel-blocked fp32 out (a GM workspace that a Vector pass reads back): block n1, row i of the NZ
  // tile -> dst[doff + n1*plane + i*16 + c0], unrounded. No activation: the consumer applies it.
  void fixpipe_nz_to_blocked_f32(Global<float> dst, std::size_t doff, std::size_t plane, Local<float> c,
                                 std::size_t coff, int m, int n1_count, int m1_stride);

  // ---- Vector (UB only) ----------------------------------------------------
  template <class T, class = OnChip<T>>
  void vbinary(VecOp op, Local<T> dst, std::size_t doff, Local<T> s0, std::size_t s0off, Local<T> s1, std::size_t s1off,
               Mask mask, Repeat rp);

  // Unary (Relu, Exp, Copy) and scalar forms (Adds, Muls, Maxs, Mins take `scalar`).
  template <class T, class = OnChip<T>>
  void vunary(VecOp op, Local<T> dst, std::size_t doff, Local<T> src, std::size_t soff, Mask mask, Repeat rp,
              float scalar = 0.f);

  template <class T, class = OnChip<T>>
  void vdup(Local<T> dst, std::size_t doff, float value, Mask mask, Repeat rp);

  // fp16 <-> fp32. One repeat covers 64 elements (the fp32 side fills 256 B);
  // each operand steps through its own 32-byte blocks.
  template <class D, class S, class = OnChipCast<D, S>>
  void vcast(Local<D> dst, std::size_t doff, Local<S> src, std::size_t soff, Mask mask, Repeat rp);

  // One result per repeat (WholeReduceSum/Max); results land contiguously at dst.
  template <class T, class = OnChip<T>>
  void vreduce(VecOp op, Local<T> dst, std::size_t doff, Local<T> src, std::size_t soff, Mask mask, Repeat rp);

  // 16x16 transpose of 16-bit elements (the TransDataTo5HD/vnchwconv data movement, its 16 source and 16
  // destination addresses given as a start and a stride): in repeat r, destination row i, column j is
  // dst[doff + r*dst_rep + i*dst_stride + j] = src[soff + r*src_rep + j*src_stride + i]. Strides are in
  // elements and, like every Vector operand, keep each 32-byte row aligned.
  void vtranspose(Local<f16> dst, std::size_t doff, std::size_t dst_stride, Local<f16> src, std::size_t soff,
                  std::size_t src_stride, unsigned times, std::size_t dst_rep, std::size_t src_rep);

  // Brcb: each repeat reads 8 consecutive elements of src and fills 8 destination 32-byte blocks, block b
  // with element b (blocks dst_blk blocks apart, repeats dst_rep blocks apart; src advances 8 per repeat).
  template <class T, class = OnChip<T>>
  void vbrcb(Local<T> dst, std::size_t doff, Local<T> src, std::size_t soff, unsigned times, unsigned dst_blk,
             unsigned dst_rep);

  // Scalar unit reads one value from UB (GetValue): the result feeds scalar
  // operands of later vector instructions. The S pipe waits for the vector pipe
  // to have written it (the kernel sets/waits V->S before calling this).
  template <class T, class = OnChip<T>>
  float scalar_read(Local<T> src, std::size_t idx);

  [[noreturn]] void raise_sync(const std::string& msg);

 private:
  struct FreeDeleter {
    void operator()(std::uint8_t* p) const { std::free(p); }
  };

  static std::uint32_t round_up(std::uint32_t x, std::uint32_t a) { return a ? (x + a - 1) / a * a : x; }

  bool present(Pos pos) const;
  std::string core_kind_name() const;
  template <class E>
  [[noreturn]] void fail(const std::string& msg) const;
  std::string flag_text(Pipe s, Pipe d, int id) const;
  // The error paths of the inline helpers above, out of line so the message
  // building is not compiled into every kernel.
  [[noreturn]] void no_buffer(Pos pos, const char* what) const;
  [[noreturn]] void alloc_overflow(Pos pos, std::size_t count, std::size_t elem, std::uint32_t off,
                                   const char* what) const;
  [[noreturn]] void at_overflow(Pos pos, std::size_t byte_off, std::size_t count, std::size_t elem,
                                const char* what) const;
  [[noreturn]] void bad_event(Pipe s, Pipe d, int id) const;
  [[noreturn]] void flag_overflow(Pipe s, Pipe d, int id) const;
  [[noreturn]] void flag_never_set(Pipe s, Pipe d, int id) const;
  // ... and of the operand checks (core.cpp), so those stay small enough to inline into every instruction.
  [[noreturn]] void unallocated(const char* instr, const char* operand) const;
  [[noreturn]] void out_of_range(const char* instr, const char* operand, const char* name, const char* where,
                                 std::size_t off, std::size_t n, std::size_t count) const;
  [[noreturn]] void misaligned(const char* instr, const char* operand, const char* name, Pos pos, std::size_t addr,
                               std::uint32_t align) const;
  [[noreturn]] void not_in_ub(const char* instr) const;
  [[noreturn]] void bad_vector_operand(const char* instr, unsigned times, unsigned lanes) const;

  std::deque<double>& flag(Pipe s, Pipe d, int id) {
    if (id < 0 || id >= 8) bad_event(s, d, id);
    return flags_[(static_cast<int>(s) * kNumPipes + static_cast<int>(d)) * 8 + id];
  }

  // An instruction occupies pipe p for `body` cycles and its result is ready `head` cycles (the pipe's
  // latency) after that: back-to-back instructions overlap their heads, so a burst pays one head, and a
  // flag, barrier or the core's end waits for the results (done_at_). codegen/cost/model.py SimCore.issue.
  double issue(Pipe p, double head, double body, std::uint64_t bytes) {
    const int i = static_cast<int>(p);
    const double start = std::max(free_at_[i], wait_until_[i]);
    free_at_[i] = start + body;
    done_at_[i] = std::max(done_at_[i], free_at_[i] + head);
    auto& pc = stats_.pipe[i];
    pc.instrs += 1;
    pc.bytes += bytes;
    pc.busy += body;
    return done_at_[i];
  }

  // Fixpipe of elems results: 16-bit outputs at fix_elems_pc, fp32 at fix_f32_elems_pc (elements per cycle);
  // to GM it takes at least fix_gm_min_cycles (the write's latency, hidden by a long transfer), to L1/UB it pays
  // fix_local_issue on top of the transfer.
  void fixpipe_cost(std::uint64_t elems, bool fp32_out, bool to_gm) {
    const double move = double(elems) / (fp32_out ? prof_.fix_f32_elems_pc : prof_.fix_elems_pc);
    issue(Pipe::FIX, prof_.fix_head, to_gm ? std::max(prof_.fix_gm_min_cycles, move) : prof_.fix_local_issue + move,
          elems * (fp32_out ? sizeof(float) : sizeof(f16)));
  }

  // A GM read starting at p (L2View above): counts its bytes as a hit or an HBM read.
  // Returns the share of first reads among its bytes: 0 on a hit, the region's first share on a miss.
  double gm_read(const void* p, std::uint64_t bytes) {
    double first = 1.0;
    if (l2_) {
      first = 0.0;  // not a step tensor: the kernel's own workspace
      const auto* a = static_cast<const std::uint8_t*>(p);
      for (const GmRegion& r : l2_->regions)
        if (a >= r.lo && a < r.hi) {
          first = r.hit ? 0.0 : r.first;
          break;
        }
    }
    (first > 0.0 ? stats_.hbm_read_bytes : stats_.l2_hit_bytes) += bytes;
    return first;
  }
  void gm_written(std::uint64_t bytes) { stats_.gm_write_bytes += bytes; }

  // Operand checks and the lane walker of the instructions (core.cpp).
  template <class T>
  void check_local(const Local<T>& t, std::size_t off, std::size_t n, const char* instr, const char* operand) const;
  template <class T>
  void check_global(const Global<T>& t, std::size_t off, std::size_t n, const char* instr, const char* operand) const;
  template <class T>
  void check_ub(const Local<T>& t, const char* instr) const;
  template <class T>
  void vec_prologue(const Repeat& rp, const char* instr, const Local<T>& t, std::size_t off, unsigned blk, unsigned rep,
                    unsigned lanes = 256 / sizeof(T));
  template <class T>
  void vec_operand(const Repeat& rp, const char* instr, const Local<T>& t, std::size_t off, unsigned blk, unsigned rep,
                   unsigned lanes = 256 / sizeof(T)) const;
  template <class D, class S, class F>
  void vec_apply(const Repeat& rp, Mask mask, F&& f, unsigned lanes = 256 / sizeof(D));
  template <class T>
  void vec_cost(VecOp op, const Repeat& rp);

  const Profile& prof_;
  CoreKind kind_;
  const char* kernel_ = "";
  int core_id_ = 0;
  const L2View* l2_ = nullptr;
  std::array<std::unique_ptr<std::uint8_t, FreeDeleter>, kNumPos> mem_{};
  std::array<std::uint32_t, kNumPos> cap_{};
  std::array<std::uint32_t, kNumPos> top_{};
  std::array<double, kNumPipes> free_at_{};
  std::array<double, kNumPipes> wait_until_{};
  std::array<double, kNumPipes> done_at_{};  // when every result issued so far on the pipe is ready
  std::array<std::deque<double>, kNumPipes * kNumPipes * 8> flags_{};
  CoreStats stats_{};
  std::vector<float> scratch_a_, scratch_b_;
};

}  // namespace kiln::emu
