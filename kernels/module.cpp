// The kiln._core extension: the baked kernel table, the host-side layout
// conversions, and the emulator itself (for inspecting single instructions).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "kiln/baked.hpp"  // not kiln_kernel_table.hpp: see there
#include "kiln/executor.hpp"
#include "kiln/kernel_abi.hpp"
#include "kiln/layouts.hpp"
#include "kiln_profiles.hpp"

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace py = pybind11;
using namespace kiln;
using namespace kiln::emu;

#ifndef KILN_ISA_NAME
#define KILN_ISA_NAME "portable"
#endif

namespace {

const char* dtype_name(DType d) {
  return d == DType::F16 ? "float16" : d == DType::BF16 ? "bfloat16 bits (uint16)" : "float32";
}

bool dtype_matches(const py::array& a, DType d) {
  if (d == DType::BF16) return a.dtype().kind() == 'u' && a.itemsize() == 2;
  return a.dtype().kind() == 'f' && a.itemsize() == int(dtype_bytes(d));
}

std::string shape_text(const std::vector<std::size_t>& s) {
  std::string out = "(";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + (s.size() == 1 ? ",)" : ")");
}

std::string shape_text(const py::array& a) {
  std::vector<std::size_t> s(a.shape(), a.shape() + a.ndim());
  return shape_text(s);
}

void check_arg(const KernelEntry& k, const TensorDesc& t, const py::array& a) {
  const std::string where = "kernel '" + std::string(k.name) + "', argument '" + t.name + "'";
  if (!dtype_matches(a, t.dtype))
    throw py::type_error(where + ": expected " + dtype_name(t.dtype) + ", got " + std::string(py::str(a.dtype())));
  std::vector<std::size_t> s(a.shape(), a.shape() + a.ndim());
  if (s != t.shape)
    throw py::value_error(where + ": expected " + t.layout + " shape " + shape_text(t.shape) + ", got " +
                          shape_text(a));
  if (!(a.flags() & py::array::c_style)) throw py::value_error(where + ": array must be C-contiguous");
}

py::dict pipe_dict(const PipeCounters& c, double cycles, int cores) {
  py::dict d;
  d["instructions"] = c.instrs;
  d["bytes"] = c.bytes;
  d["busy_cycles"] = c.busy;
  d["utilisation"] = cycles > 0 ? c.busy / (cycles * cores) : 0.0;
  return d;
}

py::dict stats_dict(const KernelStats& ks) {
  py::dict d;
  d["profile"] = ks.profile->name;
  d["core_kind"] = ks.profile->coupled ? "AICore" : (ks.kind == CoreKind::AIC ? "AIC" : "AIV");
  d["blocks"] = ks.blocks;
  d["cores_used"] = ks.cores;
  d["cores_available"] = ks.cores_available;
  d["cycles"] = ks.cycles;
  d["simulated_us"] = ks.cycles / (ks.profile->clock_ghz * 1e3);
  // The memory system: the slowest cores' cycles without the chip's bound, what set each launch's cycles, and
  // the GM traffic (reads served by L2, reads from HBM, writes).
  d["core_cycles"] = ks.core_cycles;
  py::list limits;
  for (const char* l : ks.limits) limits.append(l);
  d["limits"] = limits;
  d["l2_hit_bytes"] = ks.total.l2_hit_bytes;
  d["hbm_read_bytes"] = ks.total.hbm_read_bytes;
  d["gm_write_bytes"] = ks.total.gm_write_bytes;
  d["cube_macs"] = ks.total.cube_macs;
  d["cube_useful_macs"] = ks.total.cube_useful_macs;
  d["vector_repeats"] = ks.total.vec_repeats;
  py::dict pipes;
  for (int i = 0; i < kNumPipes; ++i)
    pipes[pipe_name(static_cast<Pipe>(i))] = pipe_dict(ks.total.pipe[i], ks.cycles, ks.cores_available);
  d["pipes"] = pipes;
  py::list per_core;
  for (const auto& c : ks.per_core) per_core.append(py::make_tuple(c.blocks, c.end_cycle));
  d["per_core_blocks_cycles"] = per_core;
  return d;
}

const KernelEntry& find_kernel(const std::string& name) {
  for (const auto& k : kernels::baked_table())
    if (name == k.name) return k;
  throw py::key_error("no baked kernel named '" + name + "'");
}

const GenericKernelEntry& find_generic(const std::string& name) {
  for (const auto& k : kernels::baked_generic_table())
    if (name == k.name) return k;
  throw py::key_error("no generic kernel named '" + name + "' in this build");
}

// A generic step's RuntimeShape from its plan: only fields the kernel reads, each a positive integer
// (the planner leaves out a tiling parameter the template defaults).
RuntimeShape parse_runtime_shape(const std::string& where, const GenericKernelEntry& k, py::dict d) {
  const std::string fields = std::string(" ") + k.runtime_fields + " ";
  RuntimeShape rs;
  for (auto item : d) {
    const std::string key = py::str(item.first);
    const long value = item.second.cast<long>();
    if (fields.find(" " + key + " ") == std::string::npos)
      throw py::value_error(where + ": generic kernel '" + k.name + "' reads no runtime field '" + key +
                            "' (it reads:" + fields + ")");
    if (value < 1) throw py::value_error(where + ": runtime field '" + key + "' must be positive");
    bool known = false;
#define KILN_SET_FIELD(name) \
  if (key == #name) {        \
    rs.name = value;         \
    known = true;            \
  }
    KILN_RUNTIME_SHAPE_FIELDS(KILN_SET_FIELD)
#undef KILN_SET_FIELD
    if (!known) throw py::value_error(where + ": '" + key + "' is not a RuntimeShape field");
  }
  return rs;
}

// l2_hits: a model step's L2 plan for these inputs (one per input), as the executor applies it; none: the
// kernel called on its own, every GM read misses L2. l2_reads (with l2_hits): the bytes the step's cores read
// of each input (the manifest's), whose excess over the input's size are re-reads; none: each is read once.
py::dict run_kernel(const std::string& name, const std::vector<py::array>& inputs, py::array out,
                    const std::optional<std::vector<bool>>& l2_hits,
                    const std::optional<std::vector<std::uint64_t>>& l2_reads) {
  const KernelEntry& k = find_kernel(name);
  if (inputs.size() != k.inputs.size())
    throw py::value_error("kernel '" + name + "' takes " + std::to_string(k.inputs.size()) + " inputs, got " +
                          std::to_string(inputs.size()));
  std::vector<const void*> ptrs;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    check_arg(k, k.inputs[i], inputs[i]);
    ptrs.push_back(inputs[i].data());
  }
  check_arg(k, k.output, out);
  if (!out.writeable()) throw py::value_error("kernel '" + name + "': output array is read-only");
  void* optr = out.mutable_data();
  L2View view;
  if (l2_reads && !l2_hits) throw py::value_error("kernel '" + name + "': l2_reads needs l2_hits");
  if (l2_hits) {
    if (l2_hits->size() != inputs.size())
      throw py::value_error("kernel '" + name + "': l2_hits needs one entry per input (" +
                            std::to_string(inputs.size()) + "), got " + std::to_string(l2_hits->size()));
    if (l2_reads && l2_reads->size() != inputs.size())
      throw py::value_error("kernel '" + name + "': l2_reads needs one entry per input (" +
                            std::to_string(inputs.size()) + "), got " + std::to_string(l2_reads->size()));
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const auto* p = static_cast<const std::uint8_t*>(ptrs[i]);
      const auto n = static_cast<std::uint64_t>(inputs[i].nbytes());
      view.regions.push_back({p, p + n, (*l2_hits)[i], l2_reads ? first_share(n, (*l2_reads)[i]) : 1.0});
    }
    const auto* o = static_cast<const std::uint8_t*>(optr);
    view.regions.push_back({o, o + out.nbytes(), true});
  }
  KernelStats ks;
  {
    py::gil_scoped_release release;
    L2Scope scope(l2_hits ? &view : nullptr);
    ks = k.fn(ptrs.data(), optr);
  }
  return stats_dict(ks);
}

// ---- layouts ------------------------------------------------------------------
template <class T>
py::array_t<std::uint16_t> nchw_to_nc1hwc0_t(py::array_t<T, py::array::c_style | py::array::forcecast> x) {
  if (x.ndim() != 4) throw py::value_error("nchw_to_nc1hwc0: expected a 4-D NCHW array, got " + shape_text(x));
  const int n = x.shape(0), c = x.shape(1), h = x.shape(2), w = x.shape(3);
  py::array_t<std::uint16_t> out({n, layout::blocks16(c), h, w, 16});
  {
    py::gil_scoped_release r;
    layout::nchw_to_nc1hwc0(x.data(), out.mutable_data(), n, c, h, w);
  }
  return out;
}

// ---- emulator inspection API ------------------------------------------------------
Pos parse_pos(const std::string& s) {
  for (int p = 1; p < kNumPos; ++p)
    if (s == pos_name(static_cast<Pos>(p))) return static_cast<Pos>(p);
  throw py::value_error("unknown buffer '" + s + "'; expected one of L1, L0A, L0B, L0C, UB, BT");
}
Pipe parse_pipe(const std::string& s) {
  for (int p = 0; p < kNumPipes; ++p)
    if (s == pipe_name(static_cast<Pipe>(p))) return static_cast<Pipe>(p);
  throw py::value_error("unknown pipe '" + s + "'; expected one of S, V, M, MTE1, MTE2, MTE3, FIX");
}

// A core you drive by hand, one instruction at a time (like a CPU twin-debug run).
// Tensors are referred to by (buffer, byte offset, element count, dtype).
struct Handle {
  std::string pos;
  std::size_t byte_offset;
  std::size_t count;
  std::string dtype;  // float16 | float32
  std::string name;
};

class InteractiveCore {
 public:
  InteractiveCore(const std::string& profile, const std::string& kind, const std::string& label) : label_(label) {
    const Profile* p = profiles::find(profile.c_str());
    if (!p) throw py::value_error("unknown profile '" + profile + "'");
    CoreKind k;
    if (kind == "AIC") k = CoreKind::AIC;
    else if (kind == "AIV") k = CoreKind::AIV;
    else throw py::value_error("core kind must be 'AIC' or 'AIV', got '" + kind + "'");
    core_ = std::make_unique<Core>(*p, k);
    core_->start(label_.c_str(), 0);
  }

  static void check_dtype(const std::string& dtype) {
    if (dtype != "float16" && dtype != "bfloat16" && dtype != "float32")
      throw py::value_error("dtype must be float16, bfloat16 or float32, got '" + dtype + "'");
  }

  Handle alloc(const std::string& pos, std::size_t count, const std::string& dtype, const std::string& name) {
    check_dtype(dtype);
    names_.push_back(name);
    const Pos p = parse_pos(pos);
    std::size_t off = dtype == "float32" ? core_->alloc<float>(p, count, names_.back().c_str()).byte_off
                                         : core_->alloc<f16>(p, count, names_.back().c_str()).byte_off;
    return Handle{pos, off, count, dtype, name};
  }
  Handle at(const std::string& pos, std::size_t byte_offset, std::size_t count, const std::string& dtype,
            const std::string& name) {
    check_dtype(dtype);
    names_.push_back(name);
    const Pos p = parse_pos(pos);
    if (dtype == "float32") core_->at<float>(p, byte_offset, count, names_.back().c_str());
    else core_->at<f16>(p, byte_offset, count, names_.back().c_str());
    return Handle{pos, byte_offset, count, dtype, name};
  }

  template <class T>
  Local<T> local(const Handle& h) {
    const bool want_f32 = std::is_same_v<T, float>;
    if ((h.dtype == "float32") != want_f32)
      throw py::type_error("tensor '" + h.name + "' is " + h.dtype + ", this operand needs " +
                           (want_f32 ? "float32" : "a 16-bit type"));
    return core_->at<T>(parse_pos(h.pos), h.byte_offset, h.count, h.name.c_str());
  }

  // MTE2: copy a host array (as GM) into L1 or UB. bfloat16 tensors take float32
  // values, rounded to nearest even.
  void copy_in(const Handle& dst, py::array src) {
    if (h_is_f32(dst)) {
      auto a = py::array_t<float, py::array::c_style | py::array::forcecast>(src);
      core_->copy_gm_to_local(local<float>(dst), 0, Global<const float>{a.data(), std::size_t(a.size()), "host"}, 0, 1,
                              a.size(), 0, 0);
      return;
    }
    std::vector<f16> bits;
    if (dst.dtype == "bfloat16") {
      auto a = py::array_t<float, py::array::c_style | py::array::forcecast>(src);
      bits.resize(a.size());
      for (py::ssize_t i = 0; i < a.size(); ++i) {
        std::uint32_t u;
        std::memcpy(&u, a.data() + i, 4);
        bits[i] = f16((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
      }
    } else {
      auto a = as_f16(src);
      bits.assign(a.data(), a.data() + a.size());
    }
    core_->copy_gm_to_local(local<f16>(dst), 0, Global<const f16>{bits.data(), bits.size(), "host"}, 0, 1, bits.size(),
                            0, 0);
  }
  // Debug read of any local tensor (not an instruction: costs no cycles).
  // bfloat16 tensors read back as float32.
  py::array peek(const Handle& h) {
    if (h_is_f32(h)) {
      auto t = local<float>(h);
      py::array_t<float> out(h.count);
      std::memcpy(out.mutable_data(), t.ptr, h.count * 4);
      return out;
    }
    auto t = local<f16>(h);
    if (h.dtype == "bfloat16") {
      py::array_t<float> out(h.count);
      for (std::size_t i = 0; i < h.count; ++i) out.mutable_data()[i] = bf16_to_f32(t.ptr[i]);
      return out;
    }
    py::array out(py::dtype("float16"), std::vector<py::ssize_t>{py::ssize_t(h.count)});
    std::memcpy(out.mutable_data(), t.ptr, h.count * 2);
    return out;
  }
  void load2d(const Handle& dst, const Handle& src, std::size_t repeat, std::size_t src_stride, std::size_t dst_stride,
              bool transpose) {
    core_->load2d(local<f16>(dst), 0, local<f16>(src), 0, repeat, src_stride, dst_stride, transpose);
  }
  void mmad(const Handle& c, const Handle& a, const Handle& b, int m, int n, int k, bool init) {
    if (a.dtype != b.dtype) throw py::type_error("mmad: A is " + a.dtype + " but B is " + b.dtype);
    core_->mmad(local<float>(c), 0, local<f16>(a), 0, local<f16>(b), 0, m, n, k, init, nullptr, 0,
                a.dtype == "bfloat16" ? CubeIn::BF16 : CubeIn::F16);
  }
  void fixpipe_to_ub(const Handle& dst, const Handle& c, std::size_t count, bool relu) {
    core_->fixpipe_to_ub(local<float>(dst), 0, local<float>(c), 0, count, relu);
  }

  // One level-0 vector instruction. strides: dst_blk, src0_blk, src1_blk, dst_rep, src0_rep, src1_rep.
  void vector(const std::string& op, const Handle& dst, const Handle& src0, py::object src1, unsigned repeat,
              unsigned mask, float scalar, py::dict strides) {
    for (const Handle* h : {&dst, &src0})
      if (h->dtype == "bfloat16")
        throw py::type_error("vector ops take float16 or float32 tensors; '" + h->name +
                             "' is bfloat16 (Cube input only)");
    Repeat rp;
    rp.times = repeat;
    for (auto item : strides) {
      const std::string key = py::str(item.first);
      const unsigned v = item.second.cast<unsigned>();
      if (key == "dst_blk") rp.dst_blk = v;
      else if (key == "src0_blk") rp.src0_blk = v;
      else if (key == "src1_blk") rp.src1_blk = v;
      else if (key == "dst_rep") rp.dst_rep = v;
      else if (key == "src0_rep") rp.src0_rep = v;
      else if (key == "src1_rep") rp.src1_rep = v;
      else throw py::value_error("unknown stride '" + key + "'");
    }
    const Mask mk = mask ? Mask::first(mask) : Mask{};
    static const std::map<std::string, VecOp> binary = {
        {"add", VecOp::Add}, {"sub", VecOp::Sub}, {"mul", VecOp::Mul},         {"div", VecOp::Div},
        {"max", VecOp::Max}, {"min", VecOp::Min}, {"muladd", VecOp::MulAddDst}};
    static const std::map<std::string, VecOp> unary = {
        {"relu", VecOp::Relu}, {"exp", VecOp::Exp},   {"abs", VecOp::Abs},   {"reciprocal", VecOp::Reciprocal},
        {"copy", VecOp::Copy}, {"adds", VecOp::Adds}, {"muls", VecOp::Muls}, {"maxs", VecOp::Maxs},
        {"mins", VecOp::Mins}};
    const bool f32 = h_is_f32(dst);
    if (auto it = binary.find(op); it != binary.end()) {
      if (src1.is_none()) throw py::value_error("vector op '" + op + "' needs src1");
      const Handle h1 = src1.cast<Handle>();
      if (f32) core_->vbinary(it->second, local<float>(dst), 0, local<float>(src0), 0, local<float>(h1), 0, mk, rp);
      else core_->vbinary(it->second, local<f16>(dst), 0, local<f16>(src0), 0, local<f16>(h1), 0, mk, rp);
    } else if (auto it = unary.find(op); it != unary.end()) {
      if (f32) core_->vunary(it->second, local<float>(dst), 0, local<float>(src0), 0, mk, rp, scalar);
      else core_->vunary(it->second, local<f16>(dst), 0, local<f16>(src0), 0, mk, rp, scalar);
    } else if (op == "dup") {
      if (f32) core_->vdup(local<float>(dst), 0, scalar, mk, rp);
      else core_->vdup(local<f16>(dst), 0, scalar, mk, rp);
    } else if (op == "reduce_sum" || op == "reduce_max") {
      const VecOp o = op == "reduce_sum" ? VecOp::ReduceSum : VecOp::ReduceMax;
      if (f32) core_->vreduce(o, local<float>(dst), 0, local<float>(src0), 0, mk, rp);
      else core_->vreduce(o, local<f16>(dst), 0, local<f16>(src0), 0, mk, rp);
    } else if (op == "cast") {
      if (f32) core_->vcast(local<float>(dst), 0, local<f16>(src0), 0, mk, rp);
      else core_->vcast(local<f16>(dst), 0, local<float>(src0), 0, mk, rp);
    } else {
      throw py::value_error("unknown vector op '" + op +
                            "'; expected add, sub, mul, max, min, muladd, relu, exp, copy, adds, muls, maxs, dup, "
                            "reduce_sum, reduce_max or cast");
    }
  }
  void set_flag(const std::string& s, const std::string& d, int id) {
    core_->set_flag(parse_pipe(s), parse_pipe(d), id);
  }
  void wait_flag(const std::string& s, const std::string& d, int id) {
    core_->wait_flag(parse_pipe(s), parse_pipe(d), id);
  }
  py::dict stats() {
    KernelStats ks;
    ks.profile = &core_->profile();
    ks.kind = core_->kind();
    ks.cores = ks.cores_available = 1;
    ks.blocks = 0;
    CoreStats cs = core_->finish();
    ks.total = cs;
    ks.cycles = ks.core_cycles = cs.end_cycle;
    ks.limits = {"cores"};
    ks.per_core = {cs};
    return stats_dict(ks);
  }
  std::uint32_t capacity(const std::string& pos) { return core_->capacity(parse_pos(pos)); }

 private:
  static bool h_is_f32(const Handle& h) { return h.dtype == "float32"; }
  static py::array_t<std::uint16_t> as_f16(py::array src) {
    py::array h = src.attr("astype")("float16");
    return py::array_t<std::uint16_t, py::array::c_style | py::array::forcecast>(h.attr("view")("uint16"));
  }
  std::string label_;
  std::deque<std::string> names_;  // stable storage for tensor names used in messages
  std::unique_ptr<Core> core_;
};

// ---- model executor ------------------------------------------------------------
// Built from the model's plan in the manifest (Python passes it as plain lists);
// every reference is checked against the kernel table, the arena and the weights
// once here, so a run does no checking beyond the input shapes.
class PyExecutor {
 public:
  PyExecutor(const std::string& model, py::list steps, std::size_t arena_bytes, py::array_t<std::uint8_t> weights,
             std::vector<std::vector<std::size_t>> input_shapes, std::vector<std::vector<std::size_t>> output_shapes,
             py::object host)
      : model_(model),
        weights_(weights),
        in_shapes_(std::move(input_shapes)),
        out_shapes_(std::move(output_shapes)),
        host_(std::move(host)) {
    std::vector<StepPlan> plan;
    const std::size_t wbytes = weights.size();
    auto ref = [](py::handle r) {
      auto t = r.cast<std::vector<std::size_t>>();
      return TensorRef{static_cast<Space>(t.at(0)), t.at(1), t.at(2)};
    };
    for (py::handle h : steps) {
      py::dict d = py::reinterpret_borrow<py::dict>(h);
      StepPlan s;
      s.name = d["name"].cast<std::string>();
      for (py::handle r : d["inputs"].cast<py::list>()) s.inputs.push_back(ref(r));
      s.output = ref(d["output"]);
      for (py::handle f : d["frees"].cast<py::list>()) {
        auto t = f.cast<std::vector<std::size_t>>();
        if (t.size() != 2)
          throw py::value_error("model '" + model + "', step '" + s.name +
                                "': a freed region is "
                                "(offset, bytes)");
        s.frees.emplace_back(t[0], t[1]);
      }
      if (d.contains("l2_hits") && !d["l2_hits"].is_none()) {  // the build's L2 plan for this step's inputs
        s.l2_hits = d["l2_hits"].cast<std::vector<bool>>();
        s.has_l2 = true;
        if (d.contains("l2_reads") && !d["l2_reads"].is_none())
          s.l2_reads = d["l2_reads"].cast<std::vector<std::uint64_t>>();
      }
      if (!d["kernel"].is_none() && d.contains("runtime_shape")) {  // a generic kernel at this step's size
        s.generic = &find_generic(d["kernel"].cast<std::string>());
        s.shape = parse_runtime_shape("model '" + model + "', step '" + s.name + "'", *s.generic,
                                      d["runtime_shape"].cast<py::dict>());
      } else if (!d["kernel"].is_none()) {
        s.kernel = &find_kernel(d["kernel"].cast<std::string>());
      } else {
        s.glue = static_cast<Glue>(d["glue"].cast<int>());
        s.params = d["params"].cast<std::vector<long>>();
      }
      plan.push_back(std::move(s));
    }
    check_plan(model, plan, arena_bytes, wbytes, in_shapes_.size(), out_shapes_.size());  // ValueError in Python
    install_host(plan);
    exec_ = std::make_unique<Executor>(std::move(plan), arena_bytes, weights.data(), wbytes);
    if (!host_.is_none())
      exec_->set_host(
          [this](std::size_t step, const std::vector<const void*>& in, void* out) { run_host(step, in, out); });
  }

  py::list run(const std::vector<py::array>& inputs, const std::vector<py::array>& outputs, bool capture, bool poison) {
    if (inputs.size() != in_shapes_.size())
      throw py::value_error("model '" + model_ + "' takes " + std::to_string(in_shapes_.size()) + " inputs, got " +
                            std::to_string(inputs.size()));
    std::vector<const float*> in;
    std::vector<float*> out;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const py::array& a = inputs[i];
      std::vector<std::size_t> s(a.shape(), a.shape() + a.ndim());
      if (s != in_shapes_[i])
        throw py::value_error("model '" + model_ + "': input " + std::to_string(i) + " must have shape " +
                              shape_text(in_shapes_[i]) + ", got " + shape_text(a));
      if (!(a.dtype().kind() == 'f' && a.itemsize() == 4) || !(a.flags() & py::array::c_style))
        throw py::type_error("model '" + model_ + "': inputs must be C-contiguous float32");
      in.push_back(static_cast<const float*>(a.data()));
    }
    if (outputs.size() != out_shapes_.size())
      throw py::value_error("model '" + model_ + "' has " + std::to_string(out_shapes_.size()) + " outputs, got " +
                            std::to_string(outputs.size()) + " output arrays");
    for (std::size_t i = 0; i < outputs.size(); ++i)
      for (std::size_t j = 0; j < i; ++j)
        if (outputs[i].data() == outputs[j].data())
          throw py::value_error("model '" + model_ + "': output arrays must be distinct");
    for (std::size_t i = 0; i < outputs.size(); ++i) {
      py::array a = outputs[i];
      std::vector<std::size_t> s(a.shape(), a.shape() + a.ndim());
      if (s != out_shapes_.at(i) || !(a.dtype().kind() == 'f' && a.itemsize() == 4) || !a.writeable() ||
          !(a.flags() & py::array::c_style))
        throw py::value_error("model '" + model_ + "': output " + std::to_string(i) +
                              " must be a writable C-contiguous float32 array of shape " + shape_text(out_shapes_[i]));
      out.push_back(static_cast<float*>(a.mutable_data()));
    }
    std::vector<StepResult> res;
    {
      py::gil_scoped_release release;
      res = exec_->run(in, out, capture, poison);
    }
    {
      std::lock_guard<std::mutex> lock(seconds_mutex_);
      last_seconds_.clear();
      for (const auto& r : res) last_seconds_.push_back(r.seconds);
    }
    py::list steps;
    for (const auto& r : res) {
      if (!r.is_kernel) {
        steps.append(py::none());
      } else if (capture) {
        steps.append(
            py::make_tuple(r.cycles, py::bytes(reinterpret_cast<const char*>(r.output.data()), r.output.size())));
      } else {
        steps.append(py::float_(r.cycles));
      }
    }
    return steps;
  }

  std::size_t arena_bytes() const { return exec_->arena_bytes(); }
  std::vector<double> last_step_seconds() {
    std::lock_guard<std::mutex> lock(seconds_mutex_);
    return last_seconds_;
  }

 private:
  // The AI CPU steps' tensor sizes (fp16 elements of each input, then of the output), for the host callback.
  void install_host(const std::vector<StepPlan>& plan) {
    for (std::size_t i = 0; i < plan.size(); ++i) {
      const StepPlan& s = plan[i];
      if (s.kernel || s.generic || s.glue != Glue::HostOp) continue;
      if (host_.is_none())
        throw py::value_error("model '" + model_ + "', step '" + s.name +
                              "': an AI CPU step, but the executor was given no host function");
      std::vector<std::size_t> sizes;
      for (const auto& r : s.inputs) sizes.push_back(r.bytes / 2);
      sizes.push_back(s.output.bytes / 2);
      host_sizes_[i] = sizes;
    }
  }
  // One AI CPU step: host_(step, [fp16 inputs as uint16]) returns the output's fp16 bits (uint16), copied back.
  void run_host(std::size_t step, const std::vector<const void*>& in, void* out) {
    py::gil_scoped_acquire gil;
    const std::vector<std::size_t>& sizes = host_sizes_.at(step);
    try {
      py::list arrays;
      for (std::size_t k = 0; k + 1 < sizes.size(); ++k)
        arrays.append(py::array_t<std::uint16_t>(sizes[k], static_cast<const std::uint16_t*>(in[k])));
      auto r = py::array_t<std::uint16_t, py::array::c_style | py::array::forcecast>(host_(step, arrays));
      if (static_cast<std::size_t>(r.size()) != sizes.back())
        throw std::runtime_error("the host returned " + std::to_string(r.size()) + " elements, expected " +
                                 std::to_string(sizes.back()));
      std::memcpy(out, r.data(), sizes.back() * 2);
    } catch (py::error_already_set& e) {
      throw std::runtime_error("model '" + model_ + "', AI CPU step " + std::to_string(step) + ": " + e.what());
    }
  }

  std::mutex seconds_mutex_;
  std::vector<double> last_seconds_;  // host wall time per step of the latest run (any thread's)
  std::string model_;
  py::array_t<std::uint8_t> weights_;  // keeps the blob alive
  std::vector<std::vector<std::size_t>> in_shapes_, out_shapes_;
  py::object host_;                                             // the AI CPU steps' evaluator, or None
  std::map<std::size_t, std::vector<std::size_t>> host_sizes_;  // AI CPU step -> its tensors' fp16 counts
  std::unique_ptr<Executor> exec_;
};

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "kiln baked kernels and the emulated Ascend AI Core";

  auto base = py::register_exception<EmulationError>(m, "EmulationError", PyExc_RuntimeError);
  py::register_exception<CapacityError>(m, "CapacityError", base.ptr());
  py::register_exception<AlignmentError>(m, "AlignmentError", base.ptr());
  py::register_exception<SyncError>(m, "SyncError", base.ptr());
  py::register_exception<BoundsError>(m, "BoundsError", base.ptr());

  m.def("manifest_json", [] { return std::string(kernels::baked_manifest_json()); });
  m.def("kernel_names", [] {
    std::vector<std::string> out;
    for (const auto& k : kernels::baked_table()) out.emplace_back(k.name);
    return out;
  });
  m.def("generic_kernel_names", [] {
    std::vector<std::string> out;
    for (const auto& k : kernels::baked_generic_table()) out.emplace_back(k.name);
    return out;
  });
  m.def("run", &run_kernel, py::arg("name"), py::arg("inputs"), py::arg("out"), py::arg("l2_hits") = py::none(),
        py::arg("l2_reads") = py::none(),
        "Run a baked kernel on packed inputs, writing `out`; returns the simulated statistics. l2_hits: one bool "
        "per input, a model step's L2 plan (default: every GM read misses L2); l2_reads: with it, the bytes the "
        "step reads of each input (default: each input read once).");
  m.def("build_info", [] {
    py::dict d;
    d["isa"] = KILN_ISA_NAME;
    d["profile"] = profiles::baked.name;
#if defined(_OPENMP)
    d["threads"] = omp_get_max_threads();
#else
    d["threads"] = 1;
#endif
    return d;
  });
  m.def("max_threads", &max_host_threads, "The most host threads set_num_threads takes (4 per CPU core).");
  m.def(
      "set_num_threads",
      [](py::object n) {
        // Checked here too, not only in kiln.set_num_threads: this is where the value reaches OpenMP. Taken as
        // an object so that a float or a huge int gets this message, not pybind11's signature dump.
        const long long limit = max_host_threads();
        int overflow = 0;
        const long long v =
            PyLong_Check(n.ptr()) && !PyBool_Check(n.ptr()) ? PyLong_AsLongLongAndOverflow(n.ptr(), &overflow) : 0;
        if (v < 1 || v > limit || overflow)
          throw py::value_error("number of threads must be an integer 1.." + std::to_string(limit) +
                                " (4 per CPU core), got " + std::string(py::repr(n)));
#if defined(_OPENMP)
        omp_set_num_threads(static_cast<int>(v));
#endif
      },
      py::arg("n"), "Host threads the emulated AI cores run on, 1..max_threads().");

  m.def("nchw_to_nc1hwc0", &nchw_to_nc1hwc0_t<float>, py::arg("x"));
  m.def("nc1hwc0_to_nchw", [](py::array_t<std::uint16_t, py::array::c_style> y, int c) {
    if (y.ndim() != 5 || y.shape(4) != 16 || y.shape(1) != layout::blocks16(c))
      throw py::value_error("nc1hwc0_to_nchw: expected (N, C1, H, W, 16) with C1 = ceil(C/16), got " + shape_text(y));
    const int n = y.shape(0), h = y.shape(2), w = y.shape(3);
    py::array_t<std::uint16_t> out({n, c, h, w});
    layout::nc1hwc0_to_nchw(y.data(), out.mutable_data(), n, c, h, w);
    return out;
  });
  m.def("oihw_to_fractal_z", [](py::array_t<float, py::array::c_style | py::array::forcecast> w) {
    if (w.ndim() != 4) throw py::value_error("oihw_to_fractal_z: expected (Cout, Cin, Kh, Kw), got " + shape_text(w));
    const int co = w.shape(0), ci = w.shape(1), kh = w.shape(2), kw = w.shape(3);
    py::array_t<std::uint16_t> out({layout::blocks16(ci) * kh * kw, layout::blocks16(co), 16, 16});
    layout::oihw_to_fractal_z(w.data(), out.mutable_data(), co, ci, kh, kw);
    return out;
  });
  m.def("kn_to_zn", [](py::array_t<float, py::array::c_style | py::array::forcecast> b) {
    if (b.ndim() != 2) throw py::value_error("kn_to_zn: expected (K, N), got " + shape_text(b));
    const int k = b.shape(0), n = b.shape(1);
    py::array_t<std::uint16_t> out({layout::blocks16(k), layout::blocks16(n), 16, 16});
    layout::kn_to_zn(b.data(), out.mutable_data(), k, n);
    return out;
  });
  m.def("dw_weight_to_c1hwc0", [](py::array_t<float, py::array::c_style | py::array::forcecast> w) {
    if (w.ndim() != 4 || w.shape(1) != 1)
      throw py::value_error("dw_weight_to_c1hwc0: expected (C, 1, Kh, Kw), got " + shape_text(w));
    const int c = w.shape(0), kh = w.shape(2), kw = w.shape(3);
    py::array_t<std::uint16_t> out({layout::blocks16(c), kh, kw, 16});
    layout::dw_weight_to_c1hwc0(w.data(), out.mutable_data(), c, kh, kw);
    return out;
  });

  py::class_<PyExecutor>(m, "Executor")
      .def(py::init<const std::string&, py::list, std::size_t, py::array_t<std::uint8_t>,
                    std::vector<std::vector<std::size_t>>, std::vector<std::vector<std::size_t>>, py::object>(),
           py::arg("model"), py::arg("steps"), py::arg("arena_bytes"), py::arg("weights"), py::arg("input_shapes"),
           py::arg("output_shapes"), py::arg("host") = py::none(),
           "host: the AI CPU steps' evaluator, host(step index, [fp16 inputs as uint16]) -> the output's fp16 bits")
      .def("run", &PyExecutor::run, py::arg("inputs"), py::arg("outputs"), py::arg("capture") = false,
           py::arg("poison") = false,
           "Runs every step; returns per step the simulated cycles of a kernel (None for glue steps), "
           "or (cycles, output bytes) with capture=True.")
      .def_property_readonly("arena_bytes", &PyExecutor::arena_bytes)
      .def_property_readonly("last_step_seconds", &PyExecutor::last_step_seconds,
                             "Host wall time of every step of the latest run, in seconds (the emulation's cost)");

  py::class_<Handle>(m, "Tensor")
      .def_readonly("buffer", &Handle::pos)
      .def_readonly("byte_offset", &Handle::byte_offset)
      .def_readonly("count", &Handle::count)
      .def_readonly("dtype", &Handle::dtype)
      .def_readonly("name", &Handle::name)
      .def("__repr__", [](const Handle& h) {
        return "<Tensor '" + h.name + "' " + h.pos + "+" + std::to_string(h.byte_offset) + " " + h.dtype + "[" +
               std::to_string(h.count) + "]>";
      });
  py::class_<InteractiveCore>(m, "Core")
      .def(py::init<const std::string&, const std::string&, const std::string&>(), py::arg("profile") = "ascend910b",
           py::arg("kind") = "AIC", py::arg("label") = "interactive")
      .def("alloc", &InteractiveCore::alloc, py::arg("buffer"), py::arg("count"), py::arg("dtype") = "float16",
           py::arg("name") = "t")
      .def("at", &InteractiveCore::at, py::arg("buffer"), py::arg("byte_offset"), py::arg("count"),
           py::arg("dtype") = "float16", py::arg("name") = "t")
      .def("capacity", &InteractiveCore::capacity)
      .def("copy_in", &InteractiveCore::copy_in)
      .def("peek", &InteractiveCore::peek)
      .def("load2d", &InteractiveCore::load2d, py::arg("dst"), py::arg("src"), py::arg("repeat"),
           py::arg("src_stride") = 1, py::arg("dst_stride") = 1, py::arg("transpose") = false)
      .def("mmad", &InteractiveCore::mmad, py::arg("c"), py::arg("a"), py::arg("b"), py::arg("m"), py::arg("n"),
           py::arg("k"), py::arg("init") = true)
      .def("fixpipe_to_ub", &InteractiveCore::fixpipe_to_ub, py::arg("dst"), py::arg("c"), py::arg("count"),
           py::arg("relu") = false)
      .def("vector", &InteractiveCore::vector, py::arg("op"), py::arg("dst"), py::arg("src0"),
           py::arg("src1") = py::none(), py::arg("repeat") = 1, py::arg("mask") = 0, py::arg("scalar") = 0.f,
           py::arg("strides") = py::dict(),
           "One vector instruction; mask = number of leading lanes (0 = all), strides in 32-byte blocks.")
      .def("set_flag", &InteractiveCore::set_flag)
      .def("wait_flag", &InteractiveCore::wait_flag)
      .def("stats", &InteractiveCore::stats);
}
