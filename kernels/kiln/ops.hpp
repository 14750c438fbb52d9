// Small building blocks the kernel templates share (the "tile" layer above the
// instruction set): double-buffer event bookkeeping and vector instructions
// over a flat element range split into full repeats plus a masked tail.
#pragma once
#include <algorithm>

#include "kiln/core.hpp"

namespace kiln::emu {

// Ping-pong buffers between a producer and a consumer pipe. Before writing
// buffer i the producer waits until the consumer released it; after writing it
// signals the consumer, which waits before reading and releases after.
class PingPong {
 public:
  // fresh = false: the queue goes on from an earlier one on the same events (a conv's L1 queue across its core's
  // blocks): its free buffers are the flags that one's consumer left set, none are set anew.
  PingPong(Core& core, Pipe producer, Pipe consumer, int first_event, int depth = 2, bool fresh = true)
      : core_(core), prod_(producer), cons_(consumer), ev0_(first_event), depth_(depth) {
    if (fresh)
      for (int i = 0; i < depth_; ++i) core_.set_flag(cons_, prod_, ev0_ + i);  // all buffers start free
  }
  // Waits for the consumer to release every buffer (end of the pipeline).
  void drain() {
    for (int i = 0; i < depth_; ++i) core_.wait_flag(cons_, prod_, ev0_ + i);
  }
  int slot(long iteration) const { return int(iteration % depth_); }
  void acquire_for_write(int s) { core_.wait_flag(cons_, prod_, ev0_ + s); }
  void written(int s) { core_.set_flag(prod_, cons_, ev0_ + s); }
  void acquire_for_read(int s) { core_.wait_flag(prod_, cons_, ev0_ + s); }
  void released(int s) { core_.set_flag(cons_, prod_, ev0_ + s); }

 private:
  Core& core_;
  Pipe prod_, cons_;
  int ev0_, depth_;
};

// A flag between two cores (CrossCoreSetFlag / CrossCoreWaitFlag): on split profiles (910B) the Cube core
// (AIC) and a Vector core (AIV) hand tiles over through GM and signal each other this way; the signal
// arrives the profile's cross_core_cycles after the setting pipe is done (docs/ascend-model.md: half of a
// fitted Cube <-> Vector tile round trip). On coupled profiles both sides are one core and it is an ordinary
// flag (no latency). Counters are up to 15 deep, as on hardware.
class CrossFlag {
 public:
  CrossFlag(bool same_core, const Profile& p) : latency_(same_core ? 0.0 : p.cross_core_cycles) {}
  void set(Core& from, Pipe src) {
    if (times_.size() >= 15) from.raise_sync("cross-core flag set more than 15 times without a wait");
    times_.push_back(from.pipe_done(src) + latency_);
  }
  void wait(Core& to, Pipe dst) {
    if (times_.empty()) to.raise_sync("cross-core flag waited on but never set");
    to.wait_until(dst, times_.front());
    times_.pop_front();
  }

 private:
  double latency_;
  std::deque<double> times_;
};

// Contiguous elementwise op over n elements at the given offsets: full repeats
// of 256 B (at most 255 per instruction) and one masked tail instruction.
// lanes: elements per repeat (128 for fp16, 64 for fp32 and for casts).
template <class Emit>
void vec_flat(std::size_t n, std::size_t lanes, Emit&& emit) {
  std::size_t done = 0;
  while (n - done >= lanes) {
    const std::size_t reps = std::min<std::size_t>(255, (n - done) / lanes);
    Repeat rp;
    rp.times = unsigned(reps);
    emit(done, Mask{}, rp);
    done += reps * lanes;
  }
  if (done < n) {
    Repeat rp;
    emit(done, Mask::first(unsigned(n - done)), rp);
  }
}

// A window kernel's UB slabs (the pools' bands). queue (PREFETCH): two, a queue running on across the core's blocks
// (block b on core b % cores) on events 4 and 5, so the next band's rows load while this one computes: its slots
// start free on the core's first block and are drained after its last. Else one, whose copy waits for the previous
// block's Vector work (event 1). cost/blocks.py SlabQueue, window_block_prologue / window_rows_ready / _done.
class WindowSlabs {
 public:
  WindowSlabs(Core& core, bool queue, int b, int blocks, int cores, std::size_t elems)
      : core_(core),
        queue_(queue),
        slot_(queue ? (b / cores) % 2 : 0),
        last_(b + cores >= blocks),
        q_(core, Pipe::MTE2, Pipe::V, 4, 2, queue && b < cores) {
    for (int i = 0; i < (queue ? 2 : 1); ++i)
      slabs_[i] = core.alloc<f16>(Pos::UB, elems, queue ? (i ? "slab_pong" : "slab_ping") : "slab");
  }
  Local<f16> slab() const { return slabs_[slot_]; }
  // Before the copy: the slab is free (the core's block two before, or the previous one, is done with it).
  void acquire() {
    if (queue_) q_.acquire_for_write(slot_);
    else if (core_.stats().blocks > 0) core_.wait_flag(Pipe::V, Pipe::MTE2, 1);
  }
  // After the copy: the Vector unit waits for the rows.
  void ready() {
    if (queue_) {
      q_.written(slot_);
      q_.acquire_for_read(slot_);
    } else {
      core_.set_flag(Pipe::MTE2, Pipe::V, 0);
      core_.wait_flag(Pipe::MTE2, Pipe::V, 0);
    }
  }
  // After the block's Vector work.
  void done() {
    if (!queue_) {
      core_.set_flag(Pipe::V, Pipe::MTE2, 1);
      return;
    }
    q_.released(slot_);
    if (last_) q_.drain();
  }

 private:
  Core& core_;
  bool queue_;
  int slot_;
  bool last_;
  PingPong q_;
  Local<f16> slabs_[2];
};

// The padding of a window kernel's UB slab: `rows` rows of wp pixels x 16 channels whose rows [lo, hi) hold image
// rows, which MTE2 writes at pixels [pl, wp - pr). Filled with `value`: the rows outside [lo, hi) whole, and in
// [lo, hi) the pl left and pr right pixels, each side one Dup with a repeat a row (its mask the side's pixels,
// repeat stride wp blocks: a pixel of 16 fp16 values is one 32-byte block). The fill never writes what the copy
// writes, so the two may run on their pipes in either order (no flag between them).
template <class T>
void fill_slab_padding(Core& core, Local<T> slab, int rows, int lo, int hi, int wp, int pl, int pr, float value) {
  const std::size_t row = std::size_t(wp) * 16;
  lo = std::clamp(lo, 0, rows);  // a band of padding only: [lo, hi) empty
  hi = std::clamp(hi, lo, rows);
  auto whole = [&](int r0, int r1) {
    if (r1 > r0)
      vec_flat(std::size_t(r1 - r0) * row, 128, [&](std::size_t off, Mask mk, Repeat rp) {
        core.vdup(slab, std::size_t(r0) * row + off, value, mk, rp);
      });
  };
  auto side = [&](int first, int pixels) {  // pixels [first, first + pixels) of rows [lo, hi)
    for (int r = lo; pixels > 0 && r < hi; r += 255) {
      Repeat rp;
      rp.times = unsigned(std::min(255, hi - r));
      rp.dst_rep = unsigned(wp);
      for (int p = 0; p < pixels; p += 8)  // a mask covers 128 lanes: 8 pixels
        core.vdup(slab, std::size_t(r) * row + std::size_t(first + p) * 16, value,
                  Mask::first(unsigned(std::min(8, pixels - p)) * 16), rp);
    }
  };
  whole(0, lo);
  whole(hi, rows);
  side(0, pl);
  side(wp - pr, pr);
}

}  // namespace kiln::emu
