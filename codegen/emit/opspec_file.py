"""The .opspec file: one per unique fused kernel, the features the variant search reads.

Format `kiln-opspec/1` (documented field by field, with units, in docs/opspec.md): UTF-8 text, one
`key = value` per line in a fixed order, `#` comments ignored:

    format = kiln-opspec/1
    hash = 3f2a...            16 hex digits: sha256 of the canonical spec (kind + dims), names the spec
    name = conv2d_1x64x56x56_o64_k3x3_s1_p1_bias_relu
    kind = conv2d
    dim.<field> = <int | float | 0/1>      the Opspec's fields
    feature.<name> = <value>               FEATURES below, in that order
    input.<tensor> = <dtype> <layout> <shape>
    output.<tensor> = <dtype> <layout> <shape>
    instances = <op instance labels>

`parse_opspec` rejects a file that is not exactly what `render_opspec` would write for the spec it
describes (a hand edit or a corruption), naming the field and the reason.
"""
from __future__ import annotations

from dataclasses import fields
from math import ceil, prod
from typing import Any

from .. import KilnError
from ..ir.opspec import (
    SPEC_CLASSES,
    Conv2dSpec,
    EltwiseProgramSpec,
    EltwiseSpec,
    Opspec,
    Pool2dSpec,
    bytes_moved,
    spec_hash,
)
from ..ir.profiles import Profile

FORMAT = "kiln-opspec/1"
# inputs baked at build time (not activations)
WEIGHT_TENSORS = ("w", "w2", "w_mid", "b", "bias", "mid_bias", "gamma", "beta")
CUBE_KINDS = ("conv2d", "gemm", "bgemm", "attention", "lstm_loop", "gru_loop")

# name -> unit; the order is the file's order (docs/opspec.md explains each).
FEATURES: dict[str, str] = {
    "fused_chain": "ops", "unit": "enum", "dtype_in": "enum", "dtype_cube": "enum", "dtype_out": "enum",
    "dtype_acc": "enum",
    "layout_in": "enum", "layout_out": "enum", "layout_weight": "enum",
    "flops": "FLOP", "macs": "MAC", "bytes_in": "B", "bytes_weights": "B", "bytes_out": "B", "bytes_total": "B",
    "arithmetic_intensity": "FLOP/B", "reduction_length": "elements", "output_elements": "elements",
    "spatial": "pixels", "c0_padding_waste": "fraction", "m_padding_waste": "fraction", "channels_aligned": "bool",
    "weight_reuse": "uses/element", "input_reuse": "uses/element", "fits_l1": "bool", "fits_l0": "bool",
    "fits_ub": "bool", "winograd_legal": "bool", "ridge_ratio": "ratio",
}


def _fused_chain(spec: Opspec) -> str:
    if isinstance(spec, EltwiseSpec):
        chain = spec.op.capitalize()
    elif isinstance(spec, Pool2dSpec):
        chain = "MaxPool" if spec.op == "max" else "AvgPool"
    elif isinstance(spec, EltwiseProgramSpec):
        chain = "+".join(op.capitalize() for op, _, _ in spec.steps)
    else:
        chain = {"conv2d": "Conv", "dwconv2d": "DwConv", "gemm": "Gemm", "bgemm": "BatchedMatMul",
                 "softmax": "Softmax", "logsoftmax": "LogSoftmax", "layernorm": "LayerNorm", "transpose": "Transpose",
                 "attention": "MatMul+Scale+Softmax+MatMul", "channel_gather": "ChannelGather",
                 "copy": "Copy", "resize": "Resize", "reduce": "Reduce", "gather": "Gather",
                 "lstm_loop": "LSTM", "col2im": "Col2im", "gru_loop": "GRU",
                 "channel_layernorm": "Transpose+LayerNorm"}[spec.kind]
    parts = [chain]
    if isinstance(spec, Conv2dSpec) and spec.mid:  # the window conv's epilogue, then the chained 1x1 conv
        parts += (["Bias"] if spec.mid_bias else []) + (["Relu"] if spec.mid_relu else []) + ["Conv1x1"]
    if getattr(spec, "bias", False):
        parts.append("Bias")
    if getattr(spec, "cin2", 0):
        parts.append("Conv1x1")  # the accumulated second source
    if getattr(spec, "residual", False):
        parts.append("Add")
    act = getattr(spec, "act", getattr(spec, "activation", "")).lower()  # col2im: activation Relu / Clip
    if getattr(spec, "clip_hi", 0.0) or act == "clip":
        parts.append("Clip")
    elif getattr(spec, "relu", False) or act == "relu":
        parts.append("Relu")
    return "+".join(parts)


def features(spec: Opspec, profile: Profile) -> dict:
    """The search's view of a kernel: FEATURES, computed from the spec and the profile's buffer sizes."""
    ins, out = spec.inputs(), spec.output()
    acts = [t for t in ins if t.name not in WEIGHT_TENSORS]
    weights = [t for t in ins if t.name in WEIGHT_TENSORS]
    b_in, b_w, b_out = sum(t.nbytes for t in acts), sum(t.nbytes for t in weights), out.nbytes
    cube = spec.kind in CUBE_KINDS
    macs = spec.flops // 2 if cube else 0
    out_elems = prod(out.shape)
    # rows of the Cube's M dimension (output pixels of one image, or GEMM rows), padded to 16-row fractals
    rows = spec.ho * spec.wo if spec.kind == "conv2d" else spec.m if spec.kind in ("gemm", "bgemm") else \
        spec.q if spec.kind == "attention" else 0
    m_waste = 1 - rows / (ceil(rows / 16) * 16) if rows else 0.0
    in_elems = sum(prod(t.shape) for t in acts) or 1
    w_elems = sum(prod(t.shape) for t in weights)
    cap = profile.capacity
    working = b_in + b_w + b_out
    # FLOP/B where the unit's peak (a 16x16x16 mmad per cycle per Cube core; one 128-lane fp16 repeat per
    # cycle per Vector core) meets the cores' GM bandwidth: above 1 the kernel can be compute-bound
    if cube:
        ridge = (16 * 16 * 16 * 2) / profile.gm_to_l1_bpc
    else:
        ridge = 128 / profile.gm_to_ub_bpc
    aligned = {"conv2d": lambda s: s.cin % 16 == 0 and s.cout % 16 == 0,
               "gemm": lambda s: s.k % 16 == 0 and s.n % 16 == 0,
               "bgemm": lambda s: s.k % 16 == 0 and s.n % 16 == 0}.get(spec.kind, lambda s: True)(spec)
    winograd = (spec.kind == "conv2d" and not spec.cin2 and not spec.mid
                and (spec.kh, spec.kw, spec.sh, spec.sw, spec.dh, spec.dw) == (3, 3, 1, 1, 1, 1))
    intensity = spec.flops / bytes_moved(spec)
    return {
        "fused_chain": _fused_chain(spec), "unit": "cube" if cube else "vector",
        "dtype_in": acts[0].dtype if acts else "fp16", "dtype_cube": getattr(spec, "dtype", "fp16") if cube else "none",
        "dtype_out": out.dtype, "dtype_acc": "fp32",
        "layout_in": acts[0].layout if acts else "ND", "layout_out": out.layout,
        "layout_weight": weights[0].layout if weights and weights[0].name == "w" else "none",
        "flops": spec.flops, "macs": macs, "bytes_in": b_in, "bytes_weights": b_w, "bytes_out": b_out,
        "bytes_total": working, "arithmetic_intensity": round(intensity, 4),
        "reduction_length": spec.reduction_length, "output_elements": out_elems,
        "spatial": getattr(spec, "h", 0) * getattr(spec, "w", 0),
        "c0_padding_waste": round(spec.channel_padding, 4), "m_padding_waste": round(m_waste, 4),
        "channels_aligned": aligned,
        "weight_reuse": round(macs / w_elems, 3) if w_elems and cube else 0.0,
        "input_reuse": round(macs / in_elems, 3) if cube else 1.0,
        "fits_l1": working <= cap["L1"], "fits_l0": b_w <= cap["L0B"] and b_in <= cap["L0A"],
        "fits_ub": working <= cap["UB"], "winograd_legal": winograd,
        "ridge_ratio": round(intensity / ridge, 4),
    }


def _fmt(v) -> str:
    if isinstance(v, bool):
        return "1" if v else "0"
    return str(v)


def render_opspec(spec: Opspec, instances: list[str], profile: Profile) -> str:
    lines = [f"format = {FORMAT}", f"hash = {spec_hash(spec)}", f"name = {spec.name}", f"kind = {spec.kind}"]
    lines += [f"dim.{f.name} = {_fmt(getattr(spec, f.name))}" for f in fields(spec)]
    lines += [f"feature.{k} = {_fmt(v)}" for k, v in features(spec, profile).items()]
    for t in spec.inputs():
        lines.append(f"input.{t.name} = {t.dtype} {t.layout} {'x'.join(map(str, t.shape))}")
    o = spec.output()
    lines.append(f"output.{o.name} = {o.dtype} {o.layout} {'x'.join(map(str, o.shape))}")
    lines.append(f"instances = {', '.join(instances)}")
    return "\n".join(lines) + "\n"


def _bad(source: str, field: str, why: str) -> KilnError:
    return KilnError("opspec", f"{source} field '{field}'", why)


def parse_opspec(text: str, profile: Profile, source: str = "<opspec>") -> dict:
    """{"hash", "name", "kind", "spec", "features", "instances"} from a .opspec file; raises KilnError naming
    the field and the reason when the file is not exactly what the build writes for that spec."""
    kv: dict[str, str] = {}
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, eq, value = line.partition("=")
        if not eq:
            raise _bad(source, f"line {n}", f"expected 'key = value', got {raw!r}")
        key = key.strip()
        if key in kv:
            raise _bad(source, key, f"appears twice (line {n})")
        kv[key] = value.strip()
    if kv.get("format") != FORMAT:
        raise _bad(source, "format", f"is {kv.get('format')!r}; this kiln reads {FORMAT}")
    kind = kv.get("kind", "")
    cls = SPEC_CLASSES.get(kind)
    if cls is None:
        raise _bad(source, "kind", f"{kind!r} is not one of {', '.join(SPEC_CLASSES)}")
    args: dict[str, Any] = {}  # field -> value, each parsed by its field's type
    for f in fields(cls):
        key = f"dim.{f.name}"
        if key not in kv:
            raise _bad(source, key, "is missing")
        raw = kv[key]
        try:
            args[f.name] = (raw == "1" if raw in ("0", "1") else _bool(raw)) if f.type in ("bool", bool) else (
                float(raw) if f.type in ("float", float) else int(raw) if f.type in ("int", int) else raw)
        except ValueError:
            raise _bad(source, key, f"{raw!r} is not a valid {f.type}") from None
    try:
        spec = cls(**args)
        if spec.kind != kind:
            raise ValueError(f"the dims describe a {spec.kind} spec, not {kind}")
        expected = render_opspec(spec, [s.strip() for s in kv.get("instances", "").split(",") if s.strip()], profile)
    except (ValueError, TypeError, ZeroDivisionError, KeyError) as e:
        raise _bad(source, "dim", f"do not describe a valid {kind} kernel: {e}") from None
    for line in expected.splitlines():  # every field must be what the build computes for these dims
        key, _, value = line.partition(" = ")
        if key not in kv:
            raise _bad(source, key, "is missing")
        if kv[key] != value:
            raise _bad(source, key, f"is {kv[key]!r} but the dims give {value!r} (edited or corrupted)")
    extra = sorted(set(kv) - {ln.partition(" = ")[0] for ln in expected.splitlines()})
    if extra:
        raise _bad(source, extra[0], "is not a field of this format")
    feats = {k[len("feature."):]: v for k, v in kv.items() if k.startswith("feature.")}
    return {"hash": kv["hash"], "name": kv["name"], "kind": kind, "spec": args, "features": feats,
            "instances": [s.strip() for s in kv["instances"].split(",") if s.strip()]}


def _bool(raw: str) -> bool:
    raise ValueError("expected 0 or 1")
