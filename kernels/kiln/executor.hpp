// The graph executor: runs a baked model's steps in order, kernels on the
// emulator and glue (layout changes at the graph boundary) on the host.
// Intermediate tensors live in one arena at offsets planned at build time;
// weights live in one read-only blob packed at build time. Each run gets its
// own arena, so concurrent runs of one model from several threads are safe.
#pragma once
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "kiln/kernel_abi.hpp"
#include "kiln/layouts.hpp"

namespace kiln {

enum class Space : int { Arena = 0, Weights = 1, Input = 2, Output = 3 };

struct TensorRef {
  Space space;
  std::size_t offset;  // bytes into the arena or the weights; index for inputs/outputs
  std::size_t bytes;
};

enum class Glue : int {
  InputNCHW = 0,
  InputND = 1,
  ToNCHW = 2,
  OutputND = 3,
  OutputNCHW = 4,
  ToNC1HWC0 = 5,
  HostOp = 6,       // the AI CPU fallback: a node evaluated on the host between AI Core launches (HostFn)
  InputIndex = 7,   // a graph input of indices (Gather): its fp32 values kept as they are (integers, exact < 2^24)
  InputNCHWC04 = 8  // a small-channel image (C <= 4) for a conv's Load3D channelSize 4: (N, 1, H, W, 4)
};

// Evaluates an AI CPU step: (step index, its inputs: ND fp16 arena tensors, its output: ND fp16). The Python
// module installs one (kiln/aicpu.py, onnx's reference evaluator); a model with such steps has no C++-only run.
using HostFn = std::function<void(std::size_t step, const std::vector<const void*>& inputs, void* output)>;

struct StepPlan {
  const KernelEntry* kernel = nullptr;          // kernel step, or
  const GenericKernelEntry* generic = nullptr;  // kernel step on a generic kernel, with
  RuntimeShape shape;                           // the shape of this launch, or
  Glue glue = Glue::InputND;                    // glue step
  std::vector<long> params;                     // glue shape parameters
  std::vector<TensorRef> inputs;
  TensorRef output;
  std::string name;
  std::vector<std::pair<std::size_t, std::size_t>> frees;  // arena (offset, bytes) dead after this step
  bool has_l2 = false;                                     // the build's L2 plan for this step:
  std::vector<bool> l2_hits;                               // per input, does a read of it hit L2
  std::vector<std::uint64_t> l2_reads;  // per input, the bytes the step's cores read of it (empty: each once)
};

struct StepResult {
  double cycles = 0;
  double seconds = 0;  // host wall time of the step (emulation, not the simulated hardware)
  bool is_kernel = false;
  std::vector<std::uint8_t> output;  // a copy of the step's output, when captured
};

// Every reference of a plan checked once, before any run: tensors inside the arena, the weights, the model's
// inputs and outputs; kernel operands of the kernel's sizes; an L2 plan entry per input. The codegen writes
// consistent plans; this guards a stale or mixed build. Throws std::invalid_argument naming model and step.
inline void check_plan(const std::string& model, const std::vector<StepPlan>& steps, std::size_t arena_bytes,
                       std::size_t weight_bytes, std::size_t inputs, std::size_t outputs) {
  for (const StepPlan& s : steps) {
    const std::string where = "model '" + model + "', step '" + s.name + "'";
    auto fits = [&](const TensorRef& r) {
      return r.space == Space::Arena     ? r.offset + r.bytes <= arena_bytes
             : r.space == Space::Weights ? r.offset + r.bytes <= weight_bytes
             : r.space == Space::Input   ? r.offset < inputs
                                         : r.offset < outputs;
    };
    for (const TensorRef& r : s.inputs)
      if (!fits(r)) throw std::invalid_argument(where + ": tensor reference out of range");
    if (!fits(s.output)) throw std::invalid_argument(where + ": tensor reference out of range");
    for (const auto& [off, bytes] : s.frees)
      if (off + bytes > arena_bytes) throw std::invalid_argument(where + ": freed region out of the arena");
    if (s.has_l2 && s.l2_hits.size() != s.inputs.size())
      throw std::invalid_argument(where + ": l2_hits has " + std::to_string(s.l2_hits.size()) + " entries for " +
                                  std::to_string(s.inputs.size()) + " inputs");
    if (!s.l2_reads.empty() && s.l2_reads.size() != s.inputs.size())
      throw std::invalid_argument(where + ": l2_reads has " + std::to_string(s.l2_reads.size()) + " entries for " +
                                  std::to_string(s.inputs.size()) + " inputs");
    if (s.generic && s.inputs.size() != s.generic->inputs)
      throw std::invalid_argument(where + ": input count differs from the kernel's");
    if (!s.kernel) continue;
    if (s.inputs.size() != s.kernel->inputs.size())
      throw std::invalid_argument(where + ": input count differs from the kernel's");
    for (std::size_t i = 0; i < s.inputs.size(); ++i) {
      const TensorDesc& t = s.kernel->inputs[i];
      if (s.inputs[i].bytes != t.numel() * dtype_bytes(t.dtype))
        throw std::invalid_argument(where + ": input '" + t.name + "' size differs from kernel " + s.kernel->name);
    }
    if (s.output.bytes != s.kernel->output.numel() * 2)
      throw std::invalid_argument(where + ": output size differs from kernel");
  }
}

class Executor {
 public:
  Executor(std::vector<StepPlan> steps, std::size_t arena_bytes, const std::uint8_t* weights, std::size_t weight_bytes)
      : steps_(std::move(steps)), arena_bytes_(arena_bytes), weights_(weights), weight_bytes_(weight_bytes) {}

  std::size_t arena_bytes() const { return arena_bytes_; }
  void set_host(HostFn host) { host_ = std::move(host); }

  // inputs/outputs: host fp32 buffers in the model's logical shapes.
  // capture: keep a copy of every kernel step's output (for per-kernel validation).
  // poison: after each step, fill the arena bytes of tensors that just died with 0xFF (fp16 NaN),
  // so a kernel that reads a dead tensor produces NaNs (a debugging check of the memory plan).
  std::vector<StepResult> run(const std::vector<const float*>& inputs, const std::vector<float*>& outputs,
                              bool capture = false, bool poison = false) const {
    struct Free {
      void operator()(std::uint8_t* p) const { std::free(p); }
    };
    std::unique_ptr<std::uint8_t, Free> arena(
        static_cast<std::uint8_t*>(std::aligned_alloc(128, ((arena_bytes_ + 127) / 128) * 128 + 128)));
    if (!arena) throw std::bad_alloc();
    std::vector<StepResult> results(steps_.size());
    std::vector<const void*> in_ptrs;
    for (std::size_t i = 0; i < steps_.size(); ++i) {
      const StepPlan& s = steps_[i];
      const auto t0 = std::chrono::steady_clock::now();
      in_ptrs.clear();
      for (const auto& r : s.inputs) in_ptrs.push_back(resolve(r, arena.get(), inputs, outputs));
      void* out = const_cast<void*>(resolve(s.output, arena.get(), inputs, outputs));
      if (s.kernel || s.generic) {
        emu::L2View view;
        if (s.has_l2) l2_view(s, in_ptrs, out, view);
        emu::L2Scope scope(s.has_l2 ? &view : nullptr);
        emu::KernelStats ks =
            s.kernel ? s.kernel->fn(in_ptrs.data(), out) : s.generic->fn(in_ptrs.data(), out, s.shape);
        results[i].cycles = ks.cycles;
        results[i].is_kernel = true;
        if (capture) {
          const auto* o = static_cast<const std::uint8_t*>(out);
          results[i].output.assign(o, o + s.output.bytes);
        }
      } else if (s.glue == Glue::HostOp) {
        if (!host_) throw std::runtime_error("step '" + s.name + "' runs on the AI CPU fallback, which needs a host");
        host_(i, in_ptrs, out);
      } else {
        run_glue(s, in_ptrs[0], out);
      }
      results[i].seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (poison)
        for (const auto& [off, bytes] : s.frees) std::memset(arena.get() + off, 0xFF, bytes);
    }
    return results;
  }

 private:
  // The step's inputs at this run's addresses with their planned L2 hits and first-read shares, then its output
  // (a read of it, in the same call, follows this kernel's own write: a hit).
  static void l2_view(const StepPlan& s, const std::vector<const void*>& in, const void* out, emu::L2View& view) {
    for (std::size_t i = 0; i < s.inputs.size(); ++i) {
      const auto* p = static_cast<const std::uint8_t*>(in[i]);
      const double first = s.l2_reads.empty() ? 1.0 : emu::first_share(s.inputs[i].bytes, s.l2_reads[i]);
      view.regions.push_back({p, p + s.inputs[i].bytes, s.l2_hits[i], first});
    }
    const auto* o = static_cast<const std::uint8_t*>(out);
    view.regions.push_back({o, o + s.output.bytes, true});
  }

  const void* resolve(const TensorRef& r, std::uint8_t* arena, const std::vector<const float*>& inputs,
                      const std::vector<float*>& outputs) const {
    switch (r.space) {
      case Space::Arena: return arena + r.offset;
      case Space::Weights: return weights_ + r.offset;
      case Space::Input: return inputs.at(r.offset);
      case Space::Output: return outputs.at(r.offset);
    }
    throw std::logic_error("bad tensor space");
  }

  static void run_glue(const StepPlan& s, const void* in, void* out) {
    const auto& p = s.params;
    auto count = [&] {
      std::size_t n = 1;
      for (long d : p) n *= std::size_t(d);
      return n;
    };
    switch (s.glue) {
      case Glue::InputNCHW:
        layout::nchw_to_nc1hwc0(static_cast<const float*>(in), static_cast<f16*>(out), p[0], p[1], p[2], p[3]);
        break;
      case Glue::InputNCHWC04:
        layout::nchw_to_nc1hwc0_c04(static_cast<const float*>(in), static_cast<f16*>(out), p[0], p[1], p[2], p[3]);
        break;
      case Glue::InputND: f32_to_f16(static_cast<const float*>(in), static_cast<f16*>(out), count()); break;
      case Glue::InputIndex: std::memcpy(out, in, count() * sizeof(float)); break;
      case Glue::ToNCHW:
        layout::nc1hwc0_to_nchw(static_cast<const f16*>(in), static_cast<f16*>(out), p[0], p[1], p[2], p[3]);
        break;
      case Glue::ToNC1HWC0:
        layout::nchw_to_nc1hwc0(static_cast<const f16*>(in), static_cast<f16*>(out), p[0], p[1], p[2], p[3]);
        break;
      case Glue::OutputND: f16_to_f32(static_cast<const f16*>(in), static_cast<float*>(out), count()); break;
      case Glue::OutputNCHW: {
        const std::size_t n = count();
        std::vector<f16> tmp(n);
        layout::nc1hwc0_to_nchw(static_cast<const f16*>(in), tmp.data(), p[0], p[1], p[2], p[3]);
        f16_to_f32(tmp.data(), static_cast<float*>(out), n);
        break;
      }
      case Glue::HostOp: break;  // run() calls the host function
    }
  }

  std::vector<StepPlan> steps_;
  HostFn host_;
  std::size_t arena_bytes_;
  const std::uint8_t* weights_;
  std::size_t weight_bytes_;
};

}  // namespace kiln
