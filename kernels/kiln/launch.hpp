// Runs a kernel's blocks over the profile's emulated AI cores. Block b goes to
// virtual core b % cores (as a static block_dim split does on the device); the
// virtual cores run on the host's threads, each thread owning one Core's
// buffers. A launch's simulated time is its slowest core's timeline, or longer
// where the chip's HBM or L2 cannot carry all its cores' GM traffic in that time.
#pragma once
#include <algorithm>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include "kiln/core.hpp"

namespace kiln::emu {

struct KernelStats {
  const Profile* profile = nullptr;
  CoreKind kind = CoreKind::AIC;
  int blocks = 0;
  int cores = 0;                    // virtual cores that received work
  int cores_available = 0;          // cores of this kind on the profile
  double cycles = 0;                // the launch's time: the slowest core, or the chip's memory bound
  double core_cycles = 0;           // the slowest core (summed over chained launches)
  std::vector<const char*> limits;  // per launch: "cores", "HBM" or "L2", what set its cycles
  CoreStats total;                  // counters summed over cores (end_cycle = max)
  std::vector<CoreStats> per_core;
};

// The L2 plan of the step whose kernel this host thread is calling (core.hpp L2View), or nullptr.
inline const L2View*& current_l2() {
  thread_local const L2View* view = nullptr;
  return view;
}

// Sets current_l2() for one kernel call (the executor, around a model step).
class L2Scope {
 public:
  explicit L2Scope(const L2View* view) : saved_(current_l2()) { current_l2() = view; }
  ~L2Scope() { current_l2() = saved_; }
  L2Scope(const L2Scope&) = delete;
  L2Scope& operator=(const L2Scope&) = delete;

 private:
  const L2View* saved_;
};

// HBM and L2 cycles the chip needs for a launch's GM traffic: HBM reads alone, writes alone and both together
// each have a chip-wide rate; all traffic passes the L2 (codegen/cost/model.py chip_cycles, the same formula).
struct ChipCycles {
  double hbm, l2;
};
inline ChipCycles chip_cycles(const Profile& p, double reads, double writes, double hits) {
  ChipCycles c{0, 0};
  if (p.hbm_mixed_gbps)
    c.hbm = std::max({reads / (p.hbm_read_gbps / p.clock_ghz), writes / (p.hbm_write_gbps / p.clock_ghz),
                      (reads + writes) / (p.hbm_mixed_gbps / p.clock_ghz)});
  if (p.l2_gbps) c.l2 = (hits + reads + writes) / (p.l2_gbps / p.clock_ghz);
  return c;
}

// A launch ends no earlier than the chip's memory allows: cycles = max(slowest core, HBM, L2).
inline void bound_by_chip(KernelStats& ks) {
  ks.core_cycles = ks.cycles;
  const ChipCycles c = chip_cycles(*ks.profile, double(ks.total.hbm_read_bytes), double(ks.total.gm_write_bytes),
                                   double(ks.total.l2_hit_bytes));
  if (ks.cycles >= c.hbm && ks.cycles >= c.l2) {
    ks.limits = {"cores"};
  } else if (c.hbm >= c.l2) {
    ks.cycles = c.hbm;
    ks.limits = {"HBM"};
  } else {
    ks.cycles = c.l2;
    ks.limits = {"L2"};
  }
  ks.total.end_cycle = ks.cycles;
}

inline int cores_of(const Profile& p, CoreKind kind) {
  if (p.coupled) return p.cube_cores;
  return kind == CoreKind::AIC ? p.cube_cores : p.vector_cores;
}

// One Core per host thread and (profile, kind, slot), reused across calls so a call
// does not pay for allocating the local buffers (slot: a second core of the same kind, as the
// two Vector cores beside one Cube core on 910B).
inline Core& thread_core(const Profile& p, CoreKind kind, int slot = 0) {
  struct Entry {
    int slot;
    std::unique_ptr<Core> core;
  };
  thread_local std::vector<Entry> cache;
  for (auto& e : cache)
    if (&e.core->profile() == &p && e.core->kind() == kind && e.slot == slot) return *e.core;
  cache.push_back(Entry{slot, std::make_unique<Core>(p, kind)});
  return *cache.back().core;
}

// The most host threads the emulated cores may run on: 4 per CPU core. The one bound of every way a thread
// count comes in (kiln.set_num_threads, KILN_NUM_THREADS, OMP_NUM_THREADS, kiln bench --threads); beyond it
// a parallel region only costs memory (OpenMP gives each thread a stack), and 10^5 of them crash it.
inline int max_host_threads() {
  const unsigned cpus = std::thread::hardware_concurrency();
  return 4 * (cpus > 0 ? static_cast<int>(cpus) : 1);
}

// fn(v) for v in [0, n) over the host threads (one virtual core each); the first exception any of them
// throws is rethrown once all are done. The team is never larger than the n virtual cores nor the bound
// above, whatever OMP_NUM_THREADS said before kiln could check it.
template <class F>
void for_each_core(int n, F&& fn) {
  std::exception_ptr error;
  std::mutex error_mutex;
#if defined(_OPENMP)
  int team = omp_get_max_threads();
  team = team < n ? team : n;
  team = team < max_host_threads() ? team : max_host_threads();
#pragma omp parallel for schedule(dynamic, 1) num_threads(team > 0 ? team : 1)
#endif
  for (int v = 0; v < n; ++v) {
    try {
      fn(v);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}

// Reuse within one launch (docs/ascend-model.md section 12): the first read of a byte brings it into L2, later
// reads of it in the same launch hit, whichever core reads it. A core does not know what the others read, so its
// own reads keep the step's plan (a cold input streams at the miss rate); at the chip, the launch's reads of its
// cold inputs cost HBM only up to those inputs' total size, the rest are L2 hits. That never counts a read of a
// byte not read before as a hit (reads beyond the size are re-reads), and equals the bytes read at least once
// when each cold input is read in full (weights). No view (a kernel called on its own): every read misses.
// codegen/cost/model.py reused(), the same rule.
inline void reuse_within_launch(CoreStats& total, const L2View* l2) {
  if (!l2) return;
  std::uint64_t cold = 0;
  for (const GmRegion& r : l2->regions)
    if (!r.hit) cold += static_cast<std::uint64_t>(r.hi - r.lo);
  const std::uint64_t again = total.hbm_read_bytes > cold ? total.hbm_read_bytes - cold : 0;
  total.hbm_read_bytes -= again;
  total.l2_hit_bytes += again;
}

// The kernel's cycles (slowest core) and its counters summed over ks.per_core, its reads as the chip serves them.
inline void sum_cores(KernelStats& ks, const L2View* l2) {
  for (const auto& c : ks.per_core) {
    ks.cycles = std::max(ks.cycles, c.end_cycle);
    for (int i = 0; i < kNumPipes; ++i) {
      ks.total.pipe[i].instrs += c.pipe[i].instrs;
      ks.total.pipe[i].bytes += c.pipe[i].bytes;
      ks.total.pipe[i].busy += c.pipe[i].busy;
    }
    ks.total.cube_macs += c.cube_macs;
    ks.total.cube_useful_macs += c.cube_useful_macs;
    ks.total.vec_repeats += c.vec_repeats;
    ks.total.blocks += c.blocks;
    ks.total.l2_hit_bytes += c.l2_hit_bytes;
    ks.total.hbm_read_bytes += c.hbm_read_bytes;
    ks.total.gm_write_bytes += c.gm_write_bytes;
  }
  ks.total.end_cycle = ks.cycles;
  reuse_within_launch(ks.total, l2);
  bound_by_chip(ks);
}

// A launch's fixed cost (scheduling the kernel onto the cores and collecting its end, the profile's
// launch_cycles; more when Cube and Vector cores start together): the kernel's time, not any pipe's.
inline void add_launch_overhead(KernelStats& ks, double cycles) {
  ks.cycles += cycles;
  ks.total.end_cycle = ks.cycles;
}

template <class Body>
KernelStats launch(const Profile& p, CoreKind kind, const char* kernel, int blocks, Body&& body) {
  KernelStats ks;
  ks.profile = &p;
  ks.kind = kind;
  ks.blocks = blocks;
  ks.cores_available = cores_of(p, kind);
  const int cores = std::max(1, std::min(blocks, ks.cores_available));
  ks.cores = cores;
  ks.per_core.resize(cores);
  const L2View* l2 = current_l2();  // the caller's thread: the workers see it through the cores
  for_each_core(cores, [&](int v) {
    Core& core = thread_core(p, kind);
    core.start(kernel, v, l2);
    for (int b = v; b < blocks; b += cores) {
      body(core, b);
      core.stats().blocks += 1;
    }
    ks.per_core[v] = core.finish();
  });
  sum_cores(ks, l2);
  add_launch_overhead(ks, p.launch_cycles);
  return ks;
}

// A kernel whose every block uses a Cube core and Vector cores together, exchanging tiles (flash attention:
// S = Q.K^T on the Cube, the online softmax on the Vector unit, P.V on the Cube). Group v is AIC v with its
// two AIVs (910B pairs 2 Vector cores with each Cube core); body(aic, aiv0, aiv1, group, block). On coupled
// profiles all three roles are the same AI core. The kernel's time is the slowest core of either kind.
template <class Body>
KernelStats launch_group(const Profile& p, const char* kernel, int blocks, Body&& body) {
  KernelStats ks;
  ks.profile = &p;
  ks.kind = CoreKind::AIC;
  ks.blocks = blocks;
  const int groups = std::max(1, std::min(blocks, p.cube_cores));
  ks.cores = p.coupled ? groups : 3 * groups;
  ks.cores_available = p.coupled ? p.cube_cores : p.cube_cores + p.vector_cores;
  ks.per_core.resize(ks.cores);
  const L2View* l2 = current_l2();
  for_each_core(groups, [&](int v) {
    Core& aic = thread_core(p, CoreKind::AIC);
    Core& aiv0 = p.coupled ? aic : thread_core(p, CoreKind::AIV, 0);
    Core& aiv1 = p.coupled ? aic : thread_core(p, CoreKind::AIV, 1);
    aic.start(kernel, v, l2);
    if (!p.coupled) {
      aiv0.start(kernel, 2 * v, l2);
      aiv1.start(kernel, 2 * v + 1, l2);
    }
    for (int b = v; b < blocks; b += groups) {
      body(aic, aiv0, aiv1, v, b);
      aic.stats().blocks += 1;
    }
    ks.per_core[v] = aic.finish();
    if (!p.coupled) {
      ks.per_core[groups + 2 * v] = aiv0.finish();
      ks.per_core[groups + 2 * v + 1] = aiv1.finish();
    }
  });
  sum_cores(ks, l2);
  add_launch_overhead(ks, p.launch_cycles + (p.coupled ? 0.0 : p.mixed_launch_cycles));
  return ks;
}

// Two launches of one kernel that run one after the other (a Cube phase, then a
// Vector-core pass that waits for every Cube block through a cross-core flag):
// the cycles add up and the counters are summed over both sets of cores.
inline KernelStats then(KernelStats first, const KernelStats& second) {
  first.cycles += second.cycles;
  first.core_cycles += second.core_cycles;
  first.limits.insert(first.limits.end(), second.limits.begin(), second.limits.end());
  first.blocks += second.blocks;
  first.cores = std::max(first.cores, second.cores);
  // On a coupled profile both launches ran on the same AI cores; on a split one they are different cores.
  first.cores_available = first.profile && first.profile->coupled
                              ? std::max(first.cores_available, second.cores_available)
                              : first.cores_available + second.cores_available;
  for (int i = 0; i < kNumPipes; ++i) {
    first.total.pipe[i].instrs += second.total.pipe[i].instrs;
    first.total.pipe[i].bytes += second.total.pipe[i].bytes;
    first.total.pipe[i].busy += second.total.pipe[i].busy;
  }
  first.total.cube_macs += second.total.cube_macs;
  first.total.cube_useful_macs += second.total.cube_useful_macs;
  first.total.vec_repeats += second.total.vec_repeats;
  first.total.blocks += second.total.blocks;
  first.total.l2_hit_bytes += second.total.l2_hit_bytes;
  first.total.hbm_read_bytes += second.total.hbm_read_bytes;
  first.total.gm_write_bytes += second.total.gm_write_bytes;
  first.total.end_cycle = first.cycles;
  first.per_core.insert(first.per_core.end(), second.per_core.begin(), second.per_core.end());
  return first;
}

}  // namespace kiln::emu
