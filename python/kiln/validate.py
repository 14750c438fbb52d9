"""`kiln validate`: a baked model against ONNX Runtime on the same ONNX file.

Both run the same seeded standard-normal inputs (fp32 at the boundary); kiln's
result went through fp16 weights and activations with fp32 accumulation, so
it is compared with thresholds, not bitwise: cosine similarity >= 0.999 on every
output (0.995 in a KILN_DTYPE=bf16 build, below), and for classifiers (a last
dimension of 1000) the same top-1 class on every seed. Errors are relative to the
largest reference magnitude.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

from . import isolate
from .codegen.ir.manifest import ModelRecord
from .isolate import compare, ort_feeds
from .npyfile import read_npy

COSINE_MIN = 0.999
# bf16 Cube operands round at 2^-8, 8x fp16's unit roundoff, and 1 - cosine grows with the square of the relative
# error: ResNet-50 of the zoo measured 1 - cosine 4.1e-5 (fp16) and 2.2e-3 (bf16), 54x. 0.995 allows about 10%
# RMS relative error (0.999: 4.5%); top-1 agreement is required as for fp16.
COSINE_MIN_BY_DTYPE = {"fp16": COSINE_MIN, "bf16": 0.995}


def cosine_min(model=None) -> float:
    """The cosine gate of the KILN_DTYPE `model` was baked with (without one: the installed build's)."""
    from . import build_info
    return COSINE_MIN_BY_DTYPE.get(build_info(model)["dtype"], COSINE_MIN)
LOW_SIGNAL_STD = 1e-3  # a reference output with less spread than this says little: check every kernel


def onnx_path_of(record: ModelRecord) -> Path:
    """The ONNX file a model was baked from; zoo models are rebuilt (same seed) if the build dir is gone."""
    p = Path(record.onnx)
    if p.is_file():
        return p
    from .codegen.frontend import zoo
    from .codegen.pipeline import ZOO_SEED
    if record.name in zoo.ZOO:
        out = Path(tempfile.gettempdir()) / "kiln-zoo" / f"{record.name}.onnx"
        if not out.is_file():
            zoo.write(record.name, out, seed=ZOO_SEED)
        return out
    raise FileNotFoundError(f"model {record.name}: its ONNX file {p} no longer exists")


def ort_session(path, extra_outputs: list[str] | None = None, threads: int = 2,
                input_shapes: dict[str, tuple[int, ...]] | None = None):
    """An ONNX Runtime session on the file (a Path, or a parsed model: edited in place); `input_shapes` re-declares
    inputs at other shapes (the file's input dims are fixed, and ONNX Runtime checks them), dropping the stored
    shapes of everything downstream."""
    import onnx
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.log_severity_level = 3
    if not extra_outputs and not input_shapes and isinstance(path, (str, Path)):
        return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    model = onnx.load(str(path)) if isinstance(path, (str, Path)) else path
    if input_shapes:
        for inp in model.graph.input:
            if inp.name in input_shapes:
                for dim, d in zip(inp.type.tensor_type.shape.dim, input_shapes[inp.name]):
                    dim.Clear()
                    dim.dim_value = int(d)
        del model.graph.value_info[:]
        for out in model.graph.output:
            out.type.tensor_type.ClearField("shape")
    have = {o.name for o in model.graph.output}
    for name in extra_outputs or []:
        if name not in have:
            model.graph.output.append(onnx.helper.make_empty_tensor_value_info(name))
    return ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])


def _input_shapes(model, input_size: tuple[int, int] | None) -> list[tuple[int, ...]]:
    """The model's input shapes, with the (single, NCHW) image input at `input_size` = (H, W) when given."""
    shapes = [tuple(shape) for _, shape in model.inputs]
    if input_size is None:
        return shapes
    if len(shapes) != 1 or len(shapes[0]) != 4:
        raise ValueError(f"model {model.name}: an input size applies to one NCHW input, it has {shapes}")
    return [shapes[0][:2] + tuple(int(d) for d in input_size)]


def seeded_inputs(shapes: list[tuple[int, ...]], seed: int, bounds: list[int] | None = None) -> list[np.ndarray]:
    """The standard-normal fp32 inputs of one seed, one array per input shape; an input with a bound (Gather
    indices, index_bounds) as integers in [-bound, bound), negative ones counting from the end as the spec says."""
    rng = np.random.default_rng(seed)
    bounds = bounds or [0] * len(shapes)
    return [(rng.integers(-b, b, shape) if b else rng.standard_normal(shape)).astype(np.float32)
            for shape, b in zip(shapes, bounds)]


def index_bounds(model) -> list[int]:
    """Per model input: the size of the axis its values index when Gathers read it as indices (the smallest such
    size), else 0."""
    from .codegen.frontend.onnx_import import load_onnx
    from .codegen.ir.manifest import GLUE_CODES
    bounds = dict.fromkeys((n for n, _ in model.inputs), 0)
    if not any(s.glue == GLUE_CODES["input_index"] for s in model.plan_entry.steps):  # no index input: no parse
        return list(bounds.values())
    g = load_onnx(onnx_path_of(model.entry))
    for node in g.nodes:
        if node.op_type == "Gather" and len(node.inputs) > 1 and node.inputs[1] in bounds:
            size = g.values[node.inputs[0]].shape[node.attrs["axis"]]
            bounds[node.inputs[1]] = min(bounds[node.inputs[1]] or size, size)
    return list(bounds.values())


def validate(model, seeds=(0, 1, 2), input_size: tuple[int, int] | None = None, force_generic: bool = False,
             inputs: list[np.ndarray] | None = None) -> dict:
    """model: a kiln.Model. Returns the report dict (see docs/cli.md). input_size (H, W): run
    at that input size (a model baked with KILN_SHAPE_BUCKETS); force_generic: on the generic kernels;
    inputs: the user's own inputs (one array per model input, read_inputs), run once instead of the seeds."""
    path = onnx_path_of(model.entry)
    shapes = _input_shapes(model, input_size)
    sess = ort_session(path, input_shapes=dict(zip([n for n, _ in model.inputs], shapes)) if input_size else None)
    outputs: dict[str, dict] = {}
    top1, low_signal = [], [float("inf")]
    dispatch = None
    bounds = index_bounds(model)
    runs = [list(inputs)] if inputs is not None else [seeded_inputs(shapes, seed, bounds) for seed in seeds]
    for xs in runs:
        got = model.run(*xs, force_generic=force_generic)
        dispatch = model.last_dispatch
        got = [got] if isinstance(got, np.ndarray) else got
        want = sess.run([n for n, _ in model.outputs], ort_feeds(sess, xs))
        for (name, _), g, w in zip(model.outputs, got, want):
            low_signal.append(float(np.std(w)))
            c = compare(g, w)
            o = outputs.setdefault(name, {"name": name, "cosine": 1.0, "max_abs_err": 0.0, "max_rel_err": 0.0,
                                          "nonfinite": 0})
            o["cosine"] = min(o["cosine"], c["cosine"])
            o["max_abs_err"] = max(o["max_abs_err"], c["max_abs_err"])
            o["max_rel_err"] = max(o["max_rel_err"], c["max_rel_err"])
            o["nonfinite"] += c["nonfinite"]
            if g.shape[-1] == 1000:  # a classifier head
                top1.append(bool(np.array_equal(g.reshape(-1, 1000).argmax(1), w.reshape(-1, 1000).argmax(1))))
    outs = list(outputs.values())
    gate = cosine_min(model)
    passed = all(o["cosine"] >= gate and not o["nonfinite"] for o in outs) and all(top1)
    report = {"model": model.name, "onnx": str(path), "passed": passed,
              "seeds": [] if inputs is not None else list(seeds), "outputs": outs,
              "top1_agreement": (sum(top1) / len(top1)) if top1 else None, "thresholds": {"cosine": gate}}
    if input_size is not None or (dispatch and dispatch["path"] != "baked"):
        report["dispatch"] = {k: dispatch[k] for k in ("path", "input_size", "kernels", "generic_kernels")}
    if min(low_signal) < LOW_SIGNAL_STD:
        # The final output barely depends on anything: agreement there proves little, so every kernel is compared.
        report["low_signal_output"] = True
        report["kernels"] = per_kernel(model, input_size=input_size, force_generic=force_generic, inputs=runs[0])
        report["passed"] = passed and kernels_passed(report["kernels"])
    return report


def per_kernel(model, seed: int = 0, input_size: tuple[int, int] | None = None, force_generic: bool = False,
               inputs: list[np.ndarray] | None = None, perturb=None) -> list[dict]:
    """Every kernel checked alone on ONNX Runtime's values of its inputs (kiln/isolate.py), in launch order, with
    the chained cosine beside it. inputs: the model's inputs (default: seeded standard normal); perturb: fault
    injection for tests, {step name: f(packed output)}."""
    path = onnx_path_of(model.entry)
    shapes = _input_shapes(model, input_size)
    if inputs is None:
        inputs = seeded_inputs(shapes, seed, index_bounds(model))
    pins = dict(zip([n for n, _ in model.inputs], shapes)) if input_size else None
    reference = _reference(path, dict(zip([n for n, _ in model.inputs], shapes)), model)
    return isolate.per_kernel(model, list(inputs), reference,
                              lambda names: ort_session(reference, extra_outputs=names, input_shapes=pins),
                              force_generic=force_generic, perturb=perturb)


def _reference(path: Path, shapes: dict[str, tuple[int, ...]], baked):
    """What ONNX Runtime runs for the isolated check: the file, or with its LSTM / GRU nodes unrolled as the build
    unrolls them (the unrolled kernels' values exist in ONNX Runtime only then; looped or unrolled as the build's
    cost model chose, on the build's profile)."""
    import onnx

    from . import build_info
    from .codegen.frontend.onnx_import import unrolled_reference
    from .codegen.ir.optlog import OptLog
    from .codegen.ir.profiles import PROFILES
    from .codegen.select.recurrent import chooser
    model = onnx.load(str(path), load_external_data=False)
    recurrence = chooser(baked.name, PROFILES[build_info(baked)["profile"]], OptLog())
    unrolled = unrolled_reference(model, shapes, recurrence)
    return path if unrolled is model else unrolled


def kernels_passed(rows: list[dict]) -> bool:
    """The isolated check of every kernel row (rows that could not be isolated say why and pass)."""
    return all(r["passed"] for r in rows)


def read_inputs(model, directory, input_size: tuple[int, int] | None = None) -> list[np.ndarray]:
    """`kiln validate --inputs DIR`: one .npy file per graph input, named by the input (DIR/<name>.npy), float32
    in the input's shape; ValueError naming the file for a missing input, an extra file, a wrong shape or dtype."""
    d = Path(directory)
    if not d.is_dir():
        raise ValueError(f"--inputs {d}: not a directory (expected one .npy file per model input)")
    names = [n for n, _ in model.inputs]
    extra = sorted(p.name for p in d.iterdir() if p.suffix == ".npy" and p.stem not in names)
    if extra:
        raise ValueError(f"--inputs {d}: {d / extra[0]} names no input of model {model.name} (its inputs: "
                         f"{', '.join(names)}; one file <input name>.npy each)")
    arrays = []
    for name, shape in zip(names, _input_shapes(model, input_size)):
        f = d / f"{name}.npy"
        if not f.exists() and not f.is_symlink():
            raise ValueError(f"--inputs {d}: missing {f} for input {name!r} of model {model.name} "
                             f"(float32, shape {list(shape)})")
        x = read_npy(str(f), f"--inputs {d}: {f}")
        if not isinstance(x, np.ndarray) or x.dtype != np.float32:
            what = x.dtype if isinstance(x, np.ndarray) else type(x).__name__
            raise ValueError(f"--inputs {d}: {f} holds {what} values; input {name!r} is float32 (save it as "
                             f"x.astype(np.float32))")
        if tuple(x.shape) != tuple(shape):
            raise ValueError(f"--inputs {d}: {f} has shape {list(x.shape)}; input {name!r} takes {list(shape)}")
        arrays.append(x)
    return arrays


def _kernel_lines(rows: list[dict], gate: float) -> list[str]:
    """The per-kernel summary: the isolated check (its worst kernel, what failed, what was not gated) and the
    accumulated cosine beside it."""
    checked = [k for k in rows if k["checked"]]
    lines = [f"  per kernel: {len(rows)} kernels, each alone on ONNX Runtime's inputs (|err| <= c u sqrt(K) max|ref|, "
             f"c = {isolate.C_BOUND:g})"]
    if checked:
        worst = max(checked, key=lambda k: k["error_ratio"])
        lines.append(f"    worst isolated error {worst['error_ratio']:.3f} of its bound at {worst['step']} "
                     f"({worst['name']}, K={worst['reduction_length']}, max rel err {worst['max_rel_err']:.3g})")
    chained = [k for k in checked if k.get("cosine") is not None]
    if chained:
        w = min(chained, key=lambda k: k["cosine"])
        lines.append(f"    accumulated (chained) cosine: worst {w['cosine']:.6f} at {w['step']} "
                     f"({'below' if w['cosine'] < gate else 'at or above'} {gate}; inherited error, not gated)")
    for k in rows:
        if not k["passed"]:
            lines.append(f"    FAILED {k['step']} ({k['name']}): max err {k['max_abs_err']:.3g} > bound "
                         f"{k['bound']:.3g} ({k['error_ratio']:.2f}x)"
                         + (f", {k['nonfinite']} NaN/inf" if k.get("nonfinite") else ""))
        elif k.get("note"):
            lines.append(f"    not gated: {k['step']} ({k['name']}): {k['note']}")
    return lines


def format_text(r: dict) -> str:
    given = f"inputs from {r['inputs']}" if r.get("inputs") else f"seeds {r['seeds']}"
    lines = [f"{r['model']}: {'PASSED' if r['passed'] else 'FAILED'} against ONNX Runtime on {r['onnx']} "
             f"({given})"]
    gate = r["thresholds"]["cosine"]
    for o in r["outputs"]:
        lines.append(f"  {o['name']}: cosine {o['cosine']:.6f} (>= {gate}), max abs err {o['max_abs_err']:.3g}, "
                     f"max rel err {o['max_rel_err']:.3g}"
                     + (f"; {o['nonfinite']} NaN/inf values where ONNX Runtime's are finite or differ"
                        if o.get("nonfinite") else ""))
    if r.get("dispatch"):
        d = r["dispatch"]
        lines.append(f"  served by the {d['path']} plan at input size {d['input_size'][0]}x{d['input_size'][1]}: "
                     f"{d['kernels']} kernel launches, {d['generic_kernels']} on generic kernels")
    if r["top1_agreement"] is not None:
        lines.append(f"  top-1 agreement {100 * r['top1_agreement']:.0f}%")
    if r.get("kernels"):
        lines += _kernel_lines(r["kernels"], gate)
    return "\n".join(lines)
