"""`kiln validate --per-kernel`: every kernel checked on its own, as benchdnn checks a primitive.

Comparing kiln's chained intermediates with ONNX Runtime's measures the divergence a kernel inherits from every
kernel before it, not its own error: in ONNX Runtime itself, rounding a ResNet-50's input to fp16 moves layer4's
cosine to 0.9994. So each kernel is run alone on ONNX Runtime's values of its inputs, rounded to fp16 and packed
in the layouts it reads (the weights are the build's own packed blob), and its output is compared element by
element with ONNX Runtime's value of the same tensor:

    max |got - ref| <= C_BOUND * u * sqrt(K) * max |ref| + FLOOR

u the unit roundoff of the kernel's operand type (fp16 2^-11, bf16 2^-8), K its reduction length (the spec's
`reduction_length`: cin*kh*kw for a convolution, k for a GEMM, the row length for softmax and layernorm, 1 for
an elementwise op). The chained (accumulated) cosine is reported beside it, as before.

The walk keeps an "ideal arena": the plan's arena as it would be if every step before had been exact (ONNX
Runtime's values, in the device layout and type). A kernel's packed inputs are read from it at the offsets its
step reads, so views, slices and in-place outputs resolve as they do in the executor. Values that exist only on
the device have their ONNX counterpart derived (DEVICE_ONLY); a value with none is said in the row's `note`,
and the rows that read it are not gated (their error is not only their own).
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from importlib import resources
from pathlib import Path

import numpy as np

from . import _core
from .codegen.ir import layouts
from .codegen.ir.manifest import SPACE_ARENA, SPACE_WEIGHTS, KernelRecord, ModelRecord, StepRecord
from .model import _unpack

# c (docs/numerics.md, "Isolated per-kernel check"): an elementwise op (K=1) rounds its inputs and its output, up
# to 3u max|ref| when its operands are no larger than its result; measured, the largest err / (u sqrt(K) max|ref|)
# was 1.45 (the zoo bert_layer's residual Add), the Cube and window kernels' at most 0.63. c = 3 covers the
# elementwise worst case and still fails a 1% error in the output tile holding the largest value for K < 46.
C_BOUND = 3.0
UNIT_ROUNDOFF = {"fp16": 2.0 ** -11, "bf16": 2.0 ** -8}
FLOOR = 2.0 ** -24  # fp16's smallest subnormal: an all-zero reference still allows the device's zero-rounding

# The values a plan holds only on the device (named `<base>@<kind>`) and how their ONNX counterpart follows
DEVICE_ONLY = {
    "staged": "a graph input copied into its device layout: the input itself",
    "nchw": "an NC1HWC0 value relaid out as rows (N, C*H*W): the same values",
    "nd": "an NC1HWC0 value read as rows through a view: the same values",
    "bt": "a MatMul's B operand stored transposed: the ONNX value with its last two axes swapped",
    "siblings": "sibling GEMMs' results side by side: the members' ONNX outputs stacked",
    # ReduceMean lowered onto the GlobalAveragePool and GEMM kernels (issue 17's pooling work)
    "pooled": "a ReduceMean over H, W held as NC1HWC0 (N, C, 1, 1): the same values",
    "rows": "a ReduceMean over the last axis held as (M, 1) rows: the same values",
    "affine": "a standalone BatchNormalization (and its fused activation) on the depthwise kernel: the same values",
    "nc1hwc0": "a row-major 4-D value relaid out as NC1HWC0 for a Conv or pool: the same values",
    "crop_<begins>_<ends>": "a reflect or edge Pad's result before its last padded axis: the output with the "
                            "pads of the axes not yet padded cropped back",
    "perm_<axes>": "a value with axes moved last (a Reduce op's input, a Softmax's input and result over another "
                   "axis): the value transposed by <axes>",
    "phase_<ph>_<pw>_<sh>_<sw>": "one stride phase of a ConvTranspose (and its fused activation): the output's rows "
                                 "ph::sh, columns pw::sw",
    "shape_<dims>": "a value read with another shape (a view; nn.MultiheadAttention's packed Q/K/V projection as "
                    "[seq, batch, 3, heads, head_dim]): the value reshaped",
    "cols_<kh>_<kw>_<cpad>": "a ConvTranspose's GEMM before its col2im: channel (a kw + b) cpad + c of pixel (h, w) "
                             "is sum over ci of x[ci, h, w] W[ci, c, a, b] (its input and weight), padded lanes 0",
    "d2s_<kh>_<kw>_<cpad>": "a ConvTranspose's GEMM before its depth-to-space: the output's pixel (h kh + a, "
                            "w kw + b) of channel c as channel (a kw + b) cpad + c of pixel (h, w), padded lanes 0",
}

Perturb = Callable[[np.ndarray], np.ndarray]


class _Counterparts:
    """ONNX Runtime's value of each device value of a plan (None where there is no counterpart)."""

    def __init__(self, graph, values: dict[str, np.ndarray]):
        self.values = values
        self.node_outputs = {n.name: list(n.output) for n in graph.node}
        self.consumers: dict[str, set[str]] = {}
        for n in graph.node:
            for i in n.input:
                self.consumers.setdefault(i, set()).add(n.name)
        self.graph_outputs = {o.name for o in graph.output}
        self.producer = {o: n for n in graph.node for o in n.output}
        self.initializers = {i.name: i for i in graph.initializer}

    def members(self, ops: tuple[str, ...]) -> list[str] | None:
        """The outputs of a fused step's ONNX nodes that leave it (read outside `ops` or graph outputs), in op
        order: a sibling GEMM's members' results."""
        if any(o not in self.node_outputs for o in ops):
            return None
        inside = set(ops)
        return [v for o in ops for v in self.node_outputs[o]
                if v in self.graph_outputs or self.consumers.get(v, set()) - inside]

    def base_names(self, value: str, ops: tuple[str, ...]) -> list[str]:
        """The ONNX values `value`'s counterpart is made from."""
        if "@" not in value:
            return [value]
        base, kind = value.rsplit("@", 1)
        if kind == "siblings":
            return self.members(ops) or []
        if _phase(kind, "cols", 3) is not None:  # made from the ConvTranspose's input
            node, _ = self._conv_transpose(base)
            return [] if node is None else self.base_names(node.input[0], ops)
        return self.base_names(base, ops)

    def natural(self, value: str, step: StepRecord) -> np.ndarray | None:
        """The counterpart of the step's output value, in its device logical shape (step.shape), as fp32."""
        arr = self._natural(value, step.ops, step.shape)
        if arr is None or arr.size != math.prod(step.shape):
            return None
        return np.asarray(arr, np.float32).reshape(step.shape)

    def _natural(self, value: str, ops: tuple[str, ...], shape: tuple[int, ...]) -> np.ndarray | None:
        if value in self.values:
            return self.values[value]
        if "@" not in value:
            return None
        base, kind = value.rsplit("@", 1)
        if kind == "siblings":
            members = self.members(ops)
            if not members or len(members) != shape[0] or any(m not in self.values for m in members):
                return None
            return np.stack([self.values[m].reshape(shape[1:]) for m in members])
        cols = _phase(kind, "cols", 3)
        if cols is not None:
            return self._columns(base, *cols)
        phase, d2s = _phase(kind, "phase", 4), _phase(kind, "d2s", 3)
        if phase is not None or d2s is not None:
            b = self._natural(base, ops, shape)
            if b is None or b.ndim != 4:
                return None
            if phase is not None:
                return b[:, :, phase[0]::phase[2], phase[1]::phase[3]]
            return _space_to_depth(b, *d2s)
        crop = _crop(kind)
        if crop is not None:
            b = self._natural(base, ops, shape)
            if b is None or len(crop) != 2 * b.ndim:
                return None
            return b[tuple(slice(lo, b.shape[i] - hi) for i, (lo, hi) in enumerate(zip(crop[:b.ndim], crop[b.ndim:])))]
        dims = _phase(kind, "shape", len(kind.split("_")) - 1)
        if dims is not None:
            b = self._natural(base, ops, shape)
            return b.reshape(dims) if b is not None and b.size == math.prod(dims) else None
        perm = _permutation(kind)
        if kind not in DEVICE_ONLY and perm is None:
            return None
        b = self._natural(base, ops, shape)
        if b is None or (perm is not None and sorted(perm) != list(range(b.ndim))):
            return None
        return np.transpose(b, perm) if perm is not None else np.swapaxes(b, -1, -2) if kind == "bt" else b


    def _conv_transpose(self, out: str):
        """The ConvTranspose whose fused chain writes `out` (through the BatchNormalization, ReLU or Clip folded
        into it) and the per-output-channel factor the folded BatchNormalizations give its weight; (None, None)."""
        from onnx import helper, numpy_helper
        node, scale = self.producer.get(out), np.ones(1)
        while node is not None and node.op_type in ("Relu", "Clip", "BatchNormalization"):
            if node.op_type == "BatchNormalization":
                if not all(i in self.initializers for i in node.input[1:5]):
                    return None, None
                gamma, _, _, var = (numpy_helper.to_array(self.initializers[i]).astype(np.float64)
                                    for i in node.input[1:5])
                eps = next((helper.get_attribute_value(a) for a in node.attribute if a.name == "epsilon"), 1e-5)
                scale = scale * gamma / np.sqrt(var + eps)
            node = self.producer.get(node.input[0])
        if node is None or node.op_type != "ConvTranspose" or node.input[1] not in self.initializers:
            return None, None
        return node, scale

    def _columns(self, out: str, kh: int, kw: int, cpad: int) -> np.ndarray | None:
        """The GEMM of the ConvTranspose writing `out`: (N, kh kw cpad, H, W) from its input and weight (times the
        factor of a BatchNormalization folded into it)."""
        from onnx import numpy_helper
        node, scale = self._conv_transpose(out)
        if node is None:
            return None
        x = self.values.get(node.input[0])
        w = numpy_helper.to_array(self.initializers[node.input[1]]).astype(np.float64)
        if x is None or x.ndim != 4 or w.shape[2:] != (kh, kw) or w.shape[1] > cpad:
            return None
        w = w * scale.reshape(1, -1, 1, 1) if scale.size in (1, w.shape[1]) else w[:0]
        if not w.size:
            return None
        t = np.einsum("nihw,icab->nabchw", np.asarray(x, np.float64), w)
        out_ = np.zeros((x.shape[0], kh, kw, cpad, x.shape[2], x.shape[3]))
        out_[:, :, :, :w.shape[1]] = t
        return out_.reshape(x.shape[0], kh * kw * cpad, x.shape[2], x.shape[3])


def _crop(kind: str) -> tuple[int, ...] | None:
    """The begins then ends of a `crop_<b0>_..._<e0>_...` device-only kind, else None."""
    parts = kind.split("_")
    if parts[0] != "crop" or len(parts) < 3 or len(parts) % 2 == 0 or not all(p.isdigit() for p in parts[1:]):
        return None
    return tuple(int(p) for p in parts[1:])


def _phase(kind: str, prefix: str, count: int) -> tuple[int, ...] | None:
    """The integers of a `<prefix>_<i>_<j>...` device-only kind (a ConvTranspose's phase or GEMM), else None."""
    parts = kind.split("_")
    if parts[0] != prefix or len(parts) != count + 1 or not all(p.isdigit() for p in parts[1:]):
        return None
    return tuple(int(p) for p in parts[1:])


def _space_to_depth(y: np.ndarray, kh: int, kw: int, cpad: int) -> np.ndarray | None:
    """(N, C, H kh, W kw) -> (N, kh kw cpad, H, W): channel (a kw + b) cpad + c of pixel (h, w) is y[c, h kh + a,
    w kw + b]; channels c >= C are zeros."""
    n, c, ho, wo = y.shape
    if ho % kh or wo % kw or c > cpad:
        return None
    t = y.reshape(n, c, ho // kh, kh, wo // kw, kw).transpose(0, 3, 5, 1, 2, 4)
    out = np.zeros((n, kh, kw, cpad, ho // kh, wo // kw), np.float32)
    out[:, :, :, :c] = t
    return out.reshape(n, kh * kw * cpad, ho // kh, wo // kw)


def _permutation(kind: str) -> tuple[int, ...] | None:
    """The axes of a `perm_<a>_<b>_...` device-only kind (a value transposed by them), else None."""
    parts = kind.split("_")
    if parts[0] != "perm" or len(parts) < 2 or not all(p.isdigit() for p in parts[1:]):
        return None
    return tuple(int(p) for p in parts[1:])


def device_bytes(values: np.ndarray, layout: str) -> np.ndarray:
    """fp32 values in a device value's layout, as the fp16 bytes the arena holds (uint8)."""
    x = np.ascontiguousarray(values, np.float32)
    if layout == "NC1HWC0":
        return np.frombuffer(_core.nchw_to_nc1hwc0(x).tobytes(), np.uint8)
    if layout == "NC1HWC0_C04":  # a small-channel graph input (codegen/ir/layouts.py)
        return np.frombuffer(layouts.nchw_to_nc1hwc0_c04(x).tobytes(), np.uint8)
    return np.frombuffer(x.astype(np.float16).tobytes(), np.uint8)


_NP_DTYPE = {"fp16": np.float16, "fp32": np.float32, "bf16": np.uint16}


def _operand(src: np.ndarray, at: int, nbytes: int, desc) -> np.ndarray:
    """The packed operand `desc` read from `nbytes` bytes of `src` at `at` (a copy: the emulator checks alignment)."""
    dt = np.dtype(_NP_DTYPE[desc.dtype])
    if nbytes != math.prod(desc.shape) * dt.itemsize:
        raise ValueError(f"operand {desc.name}: the step reads {nbytes} bytes, the kernel takes "
                         f"{math.prod(desc.shape) * dt.itemsize} ({list(desc.shape)} {desc.dtype})")
    return src[at:at + nbytes].copy().view(dt).reshape(desc.shape)


def ort_feeds(sess, xs: list[np.ndarray]) -> dict[str, np.ndarray]:
    """ONNX Runtime's feeds of kiln's fp32 inputs: an int64/int32 input (indices) as the integers it holds."""
    types = {"tensor(int64)": np.int64, "tensor(int32)": np.int32}
    return {i.name: np.asarray(x).astype(types[i.type]) if i.type in types else x
            for i, x in zip(sess.get_inputs(), xs)}


def compare(got: np.ndarray, want: np.ndarray) -> dict:
    """Cosine and errors over the elements both engines computed finite; `nonfinite` counts the elements where
    kiln's value is NaN or inf and ONNX Runtime's is not the same (any such element fails validation: the errors
    of the rest say nothing about it, and NaN would otherwise compare as no error at all)."""
    g, w = got.astype(np.float64).ravel(), want.astype(np.float64).ravel()
    both = np.isfinite(g) & np.isfinite(w)
    same = (g == w) | (np.isnan(g) & np.isnan(w))  # the same inf, or NaN on both sides, is agreement
    nonfinite = int(np.count_nonzero(~both & ~same))
    g, w = g[both], w[both]
    denom = np.linalg.norm(g) * np.linalg.norm(w)
    cosine = float(g @ w / denom) if denom > 0 else float(np.array_equal(g, w))
    if nonfinite:
        cosine = min(cosine, 0.0)  # fails every gate, in a number JSON can carry
    scale = float(np.abs(w).max()) if w.size else 0.0
    err = np.abs(g - w)
    max_abs = float(err.max()) if err.size else 0.0
    return {"cosine": cosine, "max_abs_err": max_abs, "max_rel_err": max_abs / (scale or 1.0),
            "nonfinite": nonfinite}


def bound_of(record: KernelRecord, ref: np.ndarray) -> float:
    """C_BOUND * u * sqrt(K) * max|ref| + FLOOR for this kernel's output reference."""
    u = UNIT_ROUNDOFF.get(record.spec.get("dtype", "fp16"), UNIT_ROUNDOFF["fp16"])
    k = max(int(record.features.get("reduction_length") or 1), 1)
    finite = np.abs(ref[np.isfinite(ref)])  # NaN/inf in the reference are compared one by one (isolated_error)
    scale = float(finite.max()) if finite.size else 0.0
    return C_BOUND * u * math.sqrt(k) * scale + FLOOR


def isolated_error(got: np.ndarray, ref: np.ndarray) -> tuple[float, int]:
    """max |got - ref| over the elements both have finite, and the count where only one side is finite or they
    differ in a non-finite value (each fails the check)."""
    g, w = got.astype(np.float64).ravel(), ref.astype(np.float64).ravel()
    both = np.isfinite(g) & np.isfinite(w)
    same = (g == w) | (np.isnan(g) & np.isnan(w))
    err = np.abs(g[both] - w[both])
    return (float(err.max()) if err.size else 0.0), int(np.count_nonzero(~both & ~same))


class _Walk:
    """One pass over a plan's steps with the ideal arena; `rows` collects one dict per kernel launch."""

    def __init__(self, rec: ModelRecord, weights: np.ndarray, model, cp: _Counterparts,
                 captured: dict[str, np.ndarray], perturb: Mapping[str, Perturb]):
        self.rec, self.weights, self.cp = rec, weights, cp
        self.kernels: Mapping[str, KernelRecord] = model.kernel_records
        self.kernel = model.kernel  # from the extension that baked the model (installed, or a compiled dir's)
        self.captured, self.perturb = captured, perturb
        self.arena = np.zeros(rec.arena_bytes, np.uint8)
        self.tainted: list[tuple[int, int, str]] = []  # arena ranges holding a value with no ONNX counterpart
        self.rows: list[dict] = []
        self.index_glue = -1  # the glue code of a staged index input (run() reads it from the manifest's table)

    def run(self) -> list[dict]:
        from .codegen.ir.manifest import GLUE_CODES
        outputs = {GLUE_CODES["output_nd"], GLUE_CODES["output_nchw"]}
        self.index_glue = GLUE_CODES["input_index"]
        for step in self.rec.steps:
            if step.is_kernel:
                self.kernel_step(step)
            elif step.glue not in outputs:
                self.store(step, self.cp.natural(step.value, step), None)
        return self.rows

    def store(self, step: StepRecord, ideal: np.ndarray | None, fallback: np.ndarray | None) -> None:
        """Writes the step's ideal output into the arena; without one, `fallback` (kiln's own bytes) and a taint."""
        out = step.output
        if out.space != SPACE_ARENA:
            return
        lo, hi = out.at, out.at + out.nbytes
        self.tainted = [t for t in self.tainted if not (lo <= t[0] and t[1] <= hi)]  # overwritten
        if ideal is not None and step.glue == self.index_glue:  # Gather indices: held as fp32
            data = np.frombuffer(np.ascontiguousarray(ideal, np.float32).tobytes(), np.uint8)
        elif ideal is not None:
            data = device_bytes(ideal, step.layout)
        else:
            data = fallback if fallback is not None else np.zeros(out.nbytes, np.uint8)
            self.tainted.append((lo, hi, step.value))
        self.arena[lo:lo + min(out.nbytes, data.size)] = data[:out.nbytes]

    def inherited(self, step: StepRecord) -> list[str]:
        return sorted({v for r in step.inputs if r.space == SPACE_ARENA for lo, hi, v in self.tainted
                       if lo < r.at + r.nbytes and r.at < hi})

    def source(self, step: StepRecord, ref) -> np.ndarray:
        """The bytes a kernel operand is read from: the ideal arena or the weights blob."""
        if ref.space == SPACE_ARENA:
            return self.arena
        if ref.space == SPACE_WEIGHTS:
            return self.weights
        raise ValueError(f"step {step.name}: a kernel operand in space {ref.space} (kernels read the arena and "
                         f"the weights; the glue steps read the call's inputs)")

    def kernel_step(self, step: StepRecord) -> None:
        row: dict = {"name": step.kernel, "step": step.name, "ops": list(step.ops), "value": step.value,
                     "cosine": None, "error_ratio": None}
        self.rows.append(row)
        ref = self.cp.natural(step.value, step)
        record = self.kernels.get(step.kernel or "")
        if step.generic or record is None:
            row.update(checked=False, passed=True, note="a generic kernel (runtime shapes): the isolated check runs "
                       "baked kernels only")
            self.store(step, ref, None)
            return
        arrays = [_operand(self.source(step, r), r.at, r.nbytes, desc) for r, desc in zip(step.inputs, record.inputs)]
        packed = self.kernel(record.name).run_packed(*arrays)
        if step.name in self.perturb:  # fault injection (tests): what a broken kernel would have written
            packed = self.perturb[step.name](packed)
        got = _unpack(packed.ravel(), step.layout, list(step.shape))
        self.compare(row, record, got, ref, self.inherited(step))
        self.store(step, ref, np.frombuffer(np.ascontiguousarray(packed).tobytes(), np.uint8))

    def compare(self, row: dict, record: KernelRecord, got: np.ndarray, ref: np.ndarray | None,
                inherited: list[str]) -> None:
        if ref is None:
            row.update(checked=False, passed=True,
                       note=f"its output {row['value']} has no ONNX counterpart (known device-only values: "
                            f"{', '.join(sorted(DEVICE_ONLY))}); its result feeds the kernels after it")
            return
        err, nonfinite = isolated_error(got, ref)
        bound = bound_of(record, ref)
        scale = float(np.abs(ref).max()) if ref.size else 0.0
        chained = self.captured.get(row["value"])
        acc = compare(chained, ref) if chained is not None else None
        row.update(checked=not inherited, max_abs_err=err, bound=bound, error_ratio=err / bound,
                   reduction_length=int(record.features.get("reduction_length") or 1),
                   ref_scale=scale, max_rel_err=err / (scale or 1.0), nonfinite=nonfinite,
                   cosine=acc["cosine"] if acc else None)
        row["passed"] = bool(err <= bound and not nonfinite) or bool(inherited)
        if inherited:
            row["note"] = (f"reads {', '.join(inherited)}, which has no ONNX counterpart: compared, not gated "
                           f"(its error is not only its own)")


def weights_of(rec: ModelRecord, root: Path | None = None) -> np.ndarray:
    """The plan's packed weights blob (installed beside the package, or in a `kiln compile` directory `root`)."""
    base = resources.files("kiln") if root is None else root
    with resources.as_file(base / rec.weights_file) as p:
        return np.fromfile(p, dtype=np.uint8)


def per_kernel(model, xs: list[np.ndarray], path, sess_factory, force_generic: bool = False,
               perturb: Mapping[str, Perturb] | None = None) -> list[dict]:
    """Every kernel launch of the plan serving `xs`, checked alone (module docstring), in launch order. `path`: the
    ONNX file, or the parsed model ONNX Runtime runs (validate.py's: LSTM / GRU unrolled).
    perturb: {step name: f(packed output) -> packed output}, fault injection for tests: the check must fail
    exactly the kernels given."""
    import onnx
    _, captured = model.run_capture(*xs, force_generic=force_generic)
    rec: ModelRecord = model.plan_entry
    graph = (onnx.load(str(path), load_external_data=False) if isinstance(path, (str, Path)) else path).graph
    cp = _Counterparts(graph, {})
    produced = {o for n in graph.node for o in n.output}
    names = sorted({b for s in rec.steps for b in cp.base_names(s.value, s.ops) if b in produced})
    sess = sess_factory(names)
    feeds = ort_feeds(sess, xs)
    cp.values = {**feeds, **dict(zip(names, sess.run(names, feeds)))}
    return _Walk(rec, weights_of(rec, model.package.root), model, cp, captured, perturb or {}).run()

