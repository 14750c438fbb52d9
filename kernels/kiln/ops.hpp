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

}  // namespace kiln::emu
