// The C++ API of a model baked by kiln_add_model() (cmake/KilnAddModel.cmake): the generated header
// <target>.hpp derives its Model class from BakedModel and adds typed Inputs/Outputs structs. No Python: the
// plan comes from generated tables, the kernels and the executor are the same code the Python module runs.
//
// Errors are exceptions (kiln::ModelError, a std::runtime_error) naming the model, the input or output at
// fault and what it accepts: a wrong name, a wrong buffer size, a null or overlapping buffer.
#pragma once
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kiln/executor.hpp"

namespace kiln {

class ModelError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A model input or output: its ONNX name and shape (fp32 elements, C order).
struct TensorInfo {
  std::string name;
  std::vector<std::size_t> shape;

  std::size_t size() const {
    std::size_t n = 1;
    for (auto d : shape) n *= d;
    return n;
  }
  std::string shape_text() const {
    std::string s = "[";
    for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
  }
};

// Caller-owned fp32 buffers: `size` is the number of floats the buffer holds.
struct ConstBuffer {
  const float* data = nullptr;
  std::size_t size = 0;
};
struct Buffer {
  float* data = nullptr;
  std::size_t size = 0;
};

// What a run simulated (on the profile the model was baked for): the kernel launches' cycles.
struct RunStats {
  std::string profile;
  double clock_ghz = 0;
  double cycles = 0;                // the launches' simulated cycles, summed
  std::vector<double> step_cycles;  // per kernel launch, in plan order
  double microseconds() const { return clock_ghz > 0 ? cycles / (clock_ghz * 1e3) : 0; }
};

// What the generated code hands BakedModel: the model's tables.
struct ModelTables {
  std::string name;
  std::vector<TensorInfo> inputs, outputs;
  std::vector<StepPlan> steps;
  std::size_t arena_bytes = 0;
  const std::uint8_t* weights = nullptr;
  std::size_t weight_bytes = 0;
  std::string profile;
  double clock_ghz = 0;
};

class BakedModel {
 public:
  explicit BakedModel(ModelTables t)
      : name_(std::move(t.name)),
        inputs_(std::move(t.inputs)),
        outputs_(std::move(t.outputs)),
        profile_(std::move(t.profile)),
        clock_ghz_(t.clock_ghz) {
    check_plan(name_, t.steps, t.arena_bytes, t.weight_bytes, inputs_.size(), outputs_.size());
    exec_ = std::make_unique<Executor>(std::move(t.steps), t.arena_bytes, t.weights, t.weight_bytes);
  }

  const std::string& name() const { return name_; }
  const std::vector<TensorInfo>& inputs() const { return inputs_; }
  const std::vector<TensorInfo>& outputs() const { return outputs_; }
  std::size_t arena_bytes() const { return exec_->arena_bytes(); }

  // Inputs and outputs by name, each exactly once. Thread-safe: each run has its own arena.
  RunStats run(const std::vector<std::pair<std::string, ConstBuffer>>& inputs,
               const std::vector<std::pair<std::string, Buffer>>& outputs) const {
    std::vector<ConstBuffer> in(inputs_.size());
    std::vector<Buffer> out(outputs_.size());
    place(inputs, inputs_, "input", in);
    place(outputs, outputs_, "output", out);
    return run_ordered(in, out);
  }

  // Inputs and outputs in the model's order (inputs(), outputs()).
  RunStats run_ordered(const std::vector<ConstBuffer>& inputs, const std::vector<Buffer>& outputs) const {
    if (inputs.size() != inputs_.size() || outputs.size() != outputs_.size())
      throw ModelError("model '" + name_ + "' takes " + std::to_string(inputs_.size()) + " input(s) and " +
                       std::to_string(outputs_.size()) + " output(s), got " + std::to_string(inputs.size()) + " and " +
                       std::to_string(outputs.size()));
    std::vector<const float*> in;
    std::vector<float*> out;
    for (std::size_t i = 0; i < inputs.size(); ++i) in.push_back(checked(inputs[i], inputs_[i], "input"));
    for (std::size_t i = 0; i < outputs.size(); ++i) out.push_back(checked(outputs[i], outputs_[i], "output"));
    check_no_overlap(inputs, outputs);
    RunStats stats{profile_, clock_ghz_, 0, {}};
    for (const StepResult& r : exec_->run(in, out)) {
      if (!r.is_kernel) continue;
      stats.step_cycles.push_back(r.cycles);
      stats.cycles += r.cycles;
    }
    return stats;
  }

 private:
  template <class B>
  void place(const std::vector<std::pair<std::string, B>>& given, const std::vector<TensorInfo>& infos,
             const char* what, std::vector<B>& slots) const {
    std::vector<bool> seen(infos.size(), false);
    for (const auto& [name, buf] : given) {
      std::size_t i = 0;
      while (i < infos.size() && infos[i].name != name) ++i;
      if (i == infos.size())
        throw ModelError("model '" + name_ + "' has no " + what + " named '" + name + "'; its " + what +
                         "s: " + listing(infos));
      if (seen[i]) throw ModelError("model '" + name_ + "': " + what + " '" + name + "' given twice");
      seen[i] = true;
      slots[i] = buf;
    }
    for (std::size_t i = 0; i < infos.size(); ++i)
      if (!seen[i])
        throw ModelError("model '" + name_ + "': " + what + " '" + infos[i].name + "' " + infos[i].shape_text() +
                         " not given; its " + what + "s: " + listing(infos));
  }

  template <class B>
  auto checked(const B& buf, const TensorInfo& info, const char* what) const -> decltype(buf.data) {
    if (buf.data == nullptr)
      throw ModelError("model '" + name_ + "': " + what + " '" + info.name + "' is a null buffer; expected " +
                       std::to_string(info.size()) + " floats, shape " + info.shape_text());
    if (buf.size != info.size())
      throw ModelError("model '" + name_ + "': " + what + " '" + info.name + "' has " + std::to_string(buf.size) +
                       " floats; expected " + std::to_string(info.size()) + ", shape " + info.shape_text());
    return buf.data;
  }

  // An output may not overlap another output or an input: the executor writes outputs while inputs are read.
  void check_no_overlap(const std::vector<ConstBuffer>& in, const std::vector<Buffer>& out) const {
    auto overlaps = [](const float* a, std::size_t na, const float* b, std::size_t nb) {
      return a < b + nb && b < a + na;
    };
    for (std::size_t i = 0; i < out.size(); ++i) {
      for (std::size_t j = 0; j < i; ++j)
        if (overlaps(out[i].data, out[i].size, out[j].data, out[j].size))
          throw ModelError("model '" + name_ + "': outputs '" + outputs_[j].name + "' and '" + outputs_[i].name +
                           "' overlap; give distinct buffers");
      for (std::size_t j = 0; j < in.size(); ++j)
        if (overlaps(out[i].data, out[i].size, in[j].data, in[j].size))
          throw ModelError("model '" + name_ + "': output '" + outputs_[i].name + "' overlaps input '" +
                           inputs_[j].name + "'; give distinct buffers");
    }
  }

  static std::string listing(const std::vector<TensorInfo>& infos) {
    std::string s;
    for (const auto& t : infos) s += (s.empty() ? "" : ", ") + t.name + " " + t.shape_text();
    return s;
  }

  std::string name_;
  std::vector<TensorInfo> inputs_, outputs_;
  std::string profile_;
  double clock_ghz_;
  std::unique_ptr<Executor> exec_;
};

}  // namespace kiln
