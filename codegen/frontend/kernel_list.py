"""Frontend: what to bake, as op instances.

Until the ONNX frontend lands, the input is a TOML kernel list
(kernels/default.toml): one [[op]] table per op instance, written with ONNX op
names and attributes, each with a label saying where it comes from. Every
field is checked here; an error names the entry and the field.
"""
from __future__ import annotations

import tomllib
from math import prod
from pathlib import Path
from typing import Any, TypeGuard

from .. import KilnError
from ..ir.copy_spec import concat_copy, transpose_copy
from ..ir.eltwise_program import decode
from ..ir.graph import OpInstance
from ..ir.recurrent_spec import LOOP_SPECS
from ..ir.resize_spec import ResizeSpec
from .onnx_resize import scaled_size
from .onnx_rules import ceil_extra

SUPPORTED = {
    "Conv": ("2-D convolution, NCHW, any group count (1: dense, C_in = C_out: depthwise, else grouped); optional bias; "
             "activation '' or 'Relu'; 'program', an elementwise program of its output (input 0) run in its epilogue"),
    "Gemm": "Y = A[M,K] * B[K,N] (+ bias[N]); activation '' or 'Relu'",
    "MatMul": "Y = A[M,K] * B[K,N]",
    "Relu": "elementwise max(x, 0)",
    "Clip": "elementwise min(max(x, min), max)",
    "Add": "elementwise x + y (same shape); activation '', 'Relu' or 'Clip' (with min, max)",
    "Mul": "elementwise x * y (same shape)",
    "Muls": "elementwise x * scalar",
    "Adds": "elementwise x + scalar",
    "Gelu": "elementwise x/2 (1 + erf(x/sqrt 2))",
    "Softmax": "softmax over the last axis of 'shape'",
    "LogSoftmax": "log-softmax over the last axis of 'shape'",
    "LayerNormalization": "layer norm over the last axis of 'shape' with fp32 gamma/beta, 'epsilon'",
    "ChannelLayerNorm": "layer norm over the channels of NCHW 'input' [n, c, h, w] read as NC1HWC0, written as the "
                        "rows [n*h*w, c] of its NHWC transpose; fp32 gamma/beta, 'epsilon'",
    **{op: f"{op} over the last axis of 'shape' (fp16 rows, fp32 math, one fp16 value per row)"
       for op in ("ReduceMax", "ReduceMin", "ReduceL2")},
    "BatchedMatMul": "Y[b] = A[b] B[b] for activations a [batch,m,k], b [batch,k,n] ([batch,n,k] with trans_b)",
    "Transpose0213": "swap axes 1 and 2 of a 4-D 'input'",
    "Attention": "softmax(Q K^T * scale [+ mask]) V per (batch, head): 'q' = [batch, heads, seq_q, d], 'kv' = seq_kv, "
                 "'scale', 'mask' (true: an additive [batch, kv] input)",
    "MaxPool": "max pooling over NCHW, kernel_shape, strides, pads",
    "GlobalAveragePool": "mean over H and W of NCHW",
    "AveragePool": "average pooling over NCHW, kernel_shape, strides, pads, count_include_pad (0/1), ceil_mode (0/1)",
    "ChannelGather": "NC1HWC0 channels gathered from inputs: 'input' = [n, h, w], 'in_channels' (one per input), and "
                     "'table' (\"t:c\" per output channel), 'shuffle' = groups (one input), or neither (a Concat)",
    "Copy": "fp16 data movement as one copy_mte kernel: a transpose of row-major 'input' by 'perm' (any permutation), "
            "or a concat of row-major 'inputs' (a list of shapes) along 'axis'",
    "Gather": "ONNX Gather with run-time indices as one gather_mte kernel: 'input' = [outer, axis, inner] (row-major "
              "fp16), 'count' indices (fp32 integers)",
    "Resize": "Resize over H and W of NCHW 'input' by 'scales' [h, w] (the output floor(size * scale)) or to 'sizes' "
              "[h, w]; 'mode' nearest or linear, 'coordinate_transformation_mode', 'nearest_mode' (ONNX names); "
              "'program', an elementwise program of its output (input 0) run before the store",
    "Col2im": "a ConvTranspose's col2im scatter-add (col2im_vector): its GEMM's columns for NCHW 'input' [n, c_out, "
              "h, w] added into the output per 'kernel_shape', 'strides', 'pads' [t, l, b, r], 'dilations'; optional "
              "bias; activation '', 'Relu' or 'Clip'",
    "LSTMLoop": "an LSTM's recurrence looped over 'seq' steps in one kernel (lstm_loop_mixed): 'batch', 'hidden' (a "
                "multiple of 16), 'direction' (forward, reverse, bidirectional), 'h0', 'c0' (true: the initial "
                "states are inputs); it reads the input projection [seq*batch, dirs*4*hidden] and R^T as ZN",
    "GRULoop": "a GRU's recurrence looped over 'seq' steps in one kernel (gru_loop_mixed): 'batch', 'hidden' (a "
               "multiple of 16), 'direction', 'h0' as LSTMLoop, 'linear_before_reset' (0 or 1); it reads the input "
               "projection [seq*batch, dirs*3*hidden] and R^T as ZN",
    "EltwiseProgram": "a fused elementwise program (codegen/ir/eltwise_program.py): output 'shape', 'layout' NC1HWC0 "
                      "(4-D) or ND, 'forms' (one per input: full, channel, channel1, row, scalar), 'program' as "
                      "text, e.g. 'sigmoid(1);mul(0,2)'",
}
ACTIVATIONS = ("", "Relu", "Clip")


# "": the build's options decide
CONV_ALGORITHMS = ("", "direct_img2col", "winograd_f2", "winograd_f4", "vector_direct")


def _ints(entry: str, key: str, value: Any, length: int | None = None, lo: int = 0) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise KilnError("frontend", entry, f"'{key}' must be a list of integers, got {value!r}")
    if length is not None and len(value) != length:
        raise KilnError("frontend", entry, f"'{key}' must have {length} entries, got {len(value)}")
    if any(v < lo for v in value):
        raise KilnError("frontend", entry, f"'{key}' entries must be >= {lo}, got {value}")
    return tuple(value)


def _number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# ---------------------------------------------------------------- per-op parsers
# Each takes the entry's name (for errors), its raw table and the attributes parsed so far ("activation", "bias"),
# and adds the op's own attributes to `a` in place.

def _parse_conv(entry: str, raw: dict[str, Any], a: dict[str, Any]) -> None:
    x = _ints(entry, "input", raw.get("input"), 4, lo=1)
    w = _ints(entry, "weight", raw.get("weight"), 4, lo=1)
    a.update(input=x, weight=w, strides=_ints(entry, "strides", raw.get("strides", [1, 1]), 2, lo=1),
             pads=_ints(entry, "pads", raw.get("pads", [0, 0, 0, 0]), 4),
             dilations=_ints(entry, "dilations", raw.get("dilations", [1, 1]), 2, lo=1),
             group=raw.get("group", 1))
    if not isinstance(a["group"], int) or isinstance(a["group"], bool) or a["group"] < 1:
        raise KilnError("frontend", entry, f"'group' must be a positive integer, got {a['group']!r}")
    a["algorithm"] = raw.get("algorithm", "")  # pins the algorithm, like a tuning record (benchmarks, tests)
    if a["algorithm"] not in CONV_ALGORITHMS:
        raise KilnError("frontend", entry, f"algorithm {a['algorithm']!r} is not one of "
                        f"{', '.join(repr(x) for x in CONV_ALGORITHMS)}")
    a["residual"] = raw.get("residual", False)
    if not isinstance(a["residual"], bool) or (a["residual"] and raw.get("group", 1) != 1):
        raise KilnError("frontend", entry, "'residual' must be true or false, and needs group 1")
    g = a["group"]
    if g != 1 and (a["algorithm"] or "tiling" in raw):
        raise KilnError("frontend", entry, "'algorithm' and 'tiling' pins apply to dense convolutions (group 1) "
                        "only; a depthwise convolution has one kernel family")
    if w[1] * g != x[1] or w[0] % g:
        raise KilnError("frontend", entry, f"weight {list(w)} with group={g} expects {w[1] * g} input channels and "
                        f"an output channel count divisible by {g}; input {list(x)}")
    _check_conv_window(entry, x, w, a)
    if "program" in raw:  # a program epilogue (codegen/passes/program_epilogue.py), in fp32 before the store
        if not isinstance(raw["program"], str):
            raise KilnError("frontend", entry, "'program' must be a string, e.g. \"sigmoid(0);mul(0,1)\" (an "
                            "elementwise program of the conv's output)")
        try:
            decode(raw["program"], 1)
        except ValueError as e:
            raise KilnError("frontend", entry, f"'program': {e}") from None
        a["program"] = raw["program"]


def _check_conv_window(entry: str, x: tuple[int, ...], w: tuple[int, ...], a: dict[str, Any]) -> None:
    (pt, pl, pb, pr), (sh, sw), (dh, dw) = a["pads"], a["strides"], a["dilations"]
    ho = (x[2] + pt + pb - dh * (w[2] - 1) - 1) // sh + 1
    wo = (x[3] + pl + pr - dw * (w[3] - 1) - 1) // sw + 1
    if ho < 1 or wo < 1:
        raise KilnError("frontend", entry, f"output would be {ho}x{wo}: kernel larger than the padded input")
    if max(pt, pb) > dh * (w[2] - 1) + 1 or max(pl, pr) > dw * (w[3] - 1) + 1:
        raise KilnError("frontend", entry, f"pads {list(a['pads'])} larger than the dilated kernel extent "
                        f"({dh * (w[2] - 1) + 1}x{dw * (w[3] - 1) + 1}) are not supported")


def _parse_matrix(entry: str, raw: dict[str, Any], a: dict[str, Any]) -> None:
    """Gemm and MatMul."""
    av = _ints(entry, "a", raw.get("a"), 2, lo=1)
    bv = _ints(entry, "b", raw.get("b"), 2, lo=1)
    if av[1] != bv[0]:
        raise KilnError("frontend", entry, f"inner dimensions differ: a {list(av)} x b {list(bv)}")
    if raw.get("type") == "MatMul" and (a["bias"] or a["activation"]):
        raise KilnError("frontend", entry, "MatMul takes no bias or activation; use Gemm")
    a.update(a=av, b=bv)


def _parse_batched_matmul(entry: str, raw: dict[str, Any], a: dict[str, Any]) -> None:
    av = _ints(entry, "a", raw.get("a"), 3, lo=1)
    bv = _ints(entry, "b", raw.get("b"), 3, lo=1)
    tb = raw.get("trans_b", False)
    k = bv[2] if tb else bv[1]
    if av[0] != bv[0] or av[2] != k:
        raise KilnError("frontend", entry, f"shapes do not multiply: a {list(av)} x b {list(bv)} (trans_b={tb})")
    a.update(batch=av[0], m=av[1], k=av[2], n=bv[1] if tb else bv[2], trans_b=bool(tb))


def _parse_transpose0213(entry: str, raw: dict[str, Any], a: dict[str, Any]) -> None:
    a["input"] = _ints(entry, "input", raw.get("input"), 4, lo=1)


def _parse_copy(entry: str, raw: dict[str, Any], a: dict[str, Any]) -> None:
    """A Transpose (input, perm) or a Concat (inputs, axis) as one copy_mte kernel over row-major fp16."""
    if "perm" in raw:
        shape = _ints(entry, "input", raw.get("input"), None, lo=1)
        perm = _ints(entry, "perm", raw.get("perm"), len(shape), lo=0)
        if sorted(perm) != list(range(len(shape))):
            raise KilnError("frontend", entry, f"'perm' {list(perm)} is not a permutation of {len(shape)} axes")
        spec = transpose_copy(tuple(shape), tuple(perm))
    else:
        shapes = raw.get("inputs")
        if not isinstance(shapes, list) or not shapes:
            raise KilnError("frontend", entry, "a Copy needs 'input' and 'perm' (a transpose) or 'inputs' (a list "
                            "of shapes) and 'axis' (a concat)")
        dims = [_ints(entry, "inputs", s, len(shapes[0]), lo=1) for s in shapes]
        axis = _ints(entry, "axis", [raw.get("axis")], 1, lo=0)[0]
        if axis >= len(dims[0]) or any(d[:axis] + d[axis + 1:] != dims[0][:axis] + dims[0][axis + 1:] for d in dims):
            raise KilnError("frontend", entry, f"inputs {[list(d) for d in dims]} do not concatenate along {axis}")
        spec = concat_copy([tuple(d) for d in dims], axis)
    a.update(out_numel=spec.out_numel, moves=spec.moves)


def _parse_gather(entry: str, raw: dict[str, Any], a: dict[str, Any]) -> None:
    outer, axis, inner = _ints(entry, "input", raw.get("input"), 3, lo=1)
    a["gather"] = (outer, axis, _ints(entry, "count", [raw.get("count")], 1, lo=1)[0], inner)


def gather_table(in_channels: list[int], shuffle: int = 0) -> str:
    """The ChannelGather table of a channel Concat of the inputs, or (shuffle = groups) of one input's channel
    shuffle: output channel j = c * groups + g reads input channel g * (C / groups) + c."""
    if shuffle:
        per = in_channels[0] // shuffle
        return ",".join(f"0:{(j % shuffle) * per + j // shuffle}" for j in range(in_channels[0]))
    return ",".join(f"{t}:{c}" for t, n in enumerate(in_channels) for c in range(n))


def _parse_channel_gather(entry: str, raw: dict[str, Any], a: dict[str, Any]) -> None:
    a["n"], a["h"], a["w"] = _ints(entry, "input", raw.get("input"), 3, lo=1)
    chans = _ints(entry, "in_channels", raw.get("in_channels"), None, lo=1)
    table, shuffle = raw.get("table"), raw.get("shuffle", 0)
    if shuffle and (len(chans) != 1 or not isinstance(shuffle, int) or shuffle < 1 or chans[0] % shuffle):
        raise KilnError("frontend", entry, f"'shuffle' (groups) must divide the one input's {chans} channels")
    if table is not None and not isinstance(table, str):
        raise KilnError("frontend", entry, "'table' must be a string of \"input:channel\" per output channel")
    a["in_channels"] = ",".join(str(c) for c in chans)
    a["table"] = table if table is not None else gather_table(list(chans), shuffle)


def _parse_resize(entry: str, raw: dict[str, Any], a: dict[str, Any]) -> None:
    n, c, h, w = a["input"] = _ints(entry, "input", raw.get("input"), 4, lo=1)
    scales, sizes = raw.get("scales"), raw.get("sizes")
    if sizes is not None and scales is None:
        ho, wo = _ints(entry, "sizes", sizes, 2, lo=1)
        factors = (ho / h, wo / w)
    elif sizes is None and isinstance(scales, list) and len(scales) == 2 and all(
            _number(v) and v > 0 for v in scales):
        factors = (float(scales[0]), float(scales[1]))
        ho, wo = scaled_size(h, factors[0]), scaled_size(w, factors[1])
    else:
        raise KilnError("frontend", entry, "give 'scales' (two numbers > 0, for H and W) or 'sizes', not both")
    mode = raw.get("mode", "nearest")
    a.update(out_hw=(ho, wo), scales=factors, mode=mode, coord=raw.get("coordinate_transformation_mode", "half_pixel"),
             nearest=raw.get("nearest_mode", "round_prefer_floor") if mode == "nearest" else "")
    if "program" in raw:  # a program epilogue of the output (codegen/passes/program_epilogue.py)
        if not isinstance(raw["program"], str):
            raise KilnError("frontend", entry, "'program' must be a string, e.g. \"sigmoid(0)\"")
        a["program"] = raw["program"]
    try:
        ResizeSpec(n, c, h, w, ho, wo, mode, a["coord"], a["nearest"], *factors, a.get("program", ""))
    except ValueError as e:
        raise KilnError("frontend", entry, str(e)) from None


def _parse_col2im(entry: str, raw: dict[str, Any], a: dict[str, Any]) -> None:
    n, c, h, w = _ints(entry, "input", raw.get("input"), 4, lo=1)
    kh, kw = _ints(entry, "kernel_shape", raw.get("kernel_shape"), 2, lo=1)
    sh, sw = _ints(entry, "strides", raw.get("strides", [1, 1]), 2, lo=1)
    dh, dw = _ints(entry, "dilations", raw.get("dilations", [1, 1]), 2, lo=1)
    pt, pl, pb, pr = _ints(entry, "pads", raw.get("pads", [0, 0, 0, 0]), 4)
    ho, wo = (h - 1) * sh - pt - pb + dh * (kh - 1) + 1, (w - 1) * sw - pl - pr + dw * (kw - 1) + 1
    if min(ho, wo) < 1:
        raise KilnError("frontend", entry, f"the pads leave an output of {ho}x{wo}")
    a["geometry"] = (n, c, h, w, ho, wo, kh, kw, sh, sw, dh, dw, pt, pl)


def _parse_recurrent_loop(entry: str, raw: dict[str, Any], a: dict[str, Any]) -> None:
    """LSTMLoop (initial states 'h0', 'c0') and GRULoop ('h0', 'linear_before_reset')."""
    seq, batch, hidden = (_ints(entry, k, [raw.get(k)], 1, lo=1)[0] for k in ("seq", "batch", "hidden"))
    lstm = raw["type"] == "LSTMLoop"
    direction, h0 = raw.get("direction", "forward"), raw.get("h0", False)
    other = raw.get("c0", False) if lstm else bool(raw.get("linear_before_reset", 0) == 1)
    if (direction not in ("forward", "reverse", "bidirectional") or not all(isinstance(v, bool) for v in (h0, other))
            or raw.get("linear_before_reset", 0) not in (0, 1)):
        raise KilnError("frontend", entry, f"'direction' must be forward, reverse or bidirectional, 'h0', 'c0' true "
                        f"or false and 'linear_before_reset' 0 or 1, got {direction!r}, {h0!r}, {other!r}")
    a.update(seq=seq, batch=batch, hidden=hidden, dirs=2 if direction == "bidirectional" else 1,
             reverse=direction == "reverse", h0=h0, **({"c0": other} if lstm else {"lbr": other}))
    try:
        LOOP_SPECS[raw["type"]](a)
    except ValueError as e:
        raise KilnError("frontend", entry, str(e)) from None


def _parse_attention(entry: str, raw: dict[str, Any], a: dict[str, Any]) -> None:
    b, h, sq, d = _ints(entry, "q", raw.get("q"), 4, lo=1)
    kv = raw.get("kv")
    scale = raw.get("scale", 1.0 / d ** 0.5)
    if not isinstance(kv, int) or isinstance(kv, bool) or kv < 1:
        raise KilnError("frontend", entry,
                        f"'kv' (the key/value sequence length) must be a positive integer, got {kv!r}")
    if not _number(scale):
        raise KilnError("frontend", entry, f"'scale' must be a number, got {scale!r}")
    if a["bias"] or a["activation"]:
        raise KilnError("frontend", entry, "Attention takes no bias or activation")
    mask = raw.get("mask", False)
    if not isinstance(mask, bool):
        raise KilnError("frontend", entry, f"'mask' must be true or false, got {mask!r}")
    a.update(batch=b, heads=h, q=sq, kv=kv, d=d, scale=float(scale), mask=mask)


def _parse_rows(entry: str, raw: dict[str, Any], a: dict[str, Any]) -> None:
    """Softmax, LayerNormalization, ReduceMax/Min/L2: over the last axis of 'shape'."""
    shape = _ints(entry, "shape", raw.get("shape"), None, lo=1)
    a.update(rows=prod(shape[:-1]), length=shape[-1],
             epsilon=float(raw.get("epsilon", 1e-5)))


def _parse_channel_norm(entry: str, raw: dict[str, Any], a: dict[str, Any]) -> None:
    a.update(input=_ints(entry, "input", raw.get("input"), 4, lo=1), epsilon=float(raw.get("epsilon", 1e-5)))


def _parse_pool(entry: str, raw: dict[str, Any], a: dict[str, Any]) -> None:
    """MaxPool and GlobalAveragePool."""
    a["input"] = _ints(entry, "input", raw.get("input"), 4, lo=1)
    if raw.get("type") == "MaxPool":
        a.update(kernel_shape=_ints(entry, "kernel_shape", raw.get("kernel_shape"), 2, lo=1),
                 strides=_ints(entry, "strides", raw.get("strides", [1, 1]), 2, lo=1),
                 pads=_ints(entry, "pads", raw.get("pads", [0, 0, 0, 0]), 4))
        if raw.get("dilations", [1, 1]) != [1, 1]:
            a["dilations"] = _ints(entry, "dilations", raw.get("dilations"), 2, lo=1)
        if max(a["pads"]) >= max(a["kernel_shape"]):
            raise KilnError("frontend", entry, f"pads {list(a['pads'])} must be smaller than the kernel")


def _parse_avgpool(entry: str, raw: dict[str, Any], a: dict[str, Any]) -> None:
    """AveragePool: MaxPool's window, count_include_pad, and ceil_mode (its extra rows/columns as ceil_extra)."""
    raw = {**raw, "type": "MaxPool"}
    _parse_pool(entry, raw, a)
    flags = {}
    for key in ("count_include_pad", "ceil_mode"):
        flags[key] = raw.get(key, 0)
        if flags[key] not in (0, 1) or isinstance(flags[key], bool):
            raise KilnError("frontend", entry, f"'{key}' must be 0 or 1, got {flags[key]!r}")
    (_, _, h, w), (kh, kw), (sh, sw), (pt, pl, pb, pr) = a["input"], a["kernel_shape"], a["strides"], a["pads"]
    extra = (ceil_extra(h, pt, pb, kh, sh), ceil_extra(w, pl, pr, kw, sw)) if flags["ceil_mode"] else (0, 0)
    a.update(pads=(pt, pl, pb + extra[0], pr + extra[1]), count_include_pad=flags["count_include_pad"],
             ceil_extra=extra)


def _parse_elementwise(entry: str, raw: dict[str, Any], a: dict[str, Any]) -> None:
    """Relu, Clip, Add, Mul, Muls, Adds, Gelu: a 'shape' (and a 'scalar' for Muls/Adds)."""
    op = raw.get("type")
    a["shape"] = _ints(entry, "shape", raw.get("shape"), None, lo=1)
    if not a["shape"]:
        raise KilnError("frontend", entry, "'shape' must not be empty")
    if op in ("Relu", "Clip", "Gelu", "Muls", "Adds", "Mul") and (a["bias"] or a["activation"]):
        raise KilnError("frontend", entry, f"{op} takes no bias or activation")
    if op in ("Muls", "Adds"):
        v = raw.get("scalar")
        if not _number(v):
            raise KilnError("frontend", entry, f"{op} needs a number 'scalar', got {v!r}")
        a["scalar"] = float(v)


def _parse_eltwise_program(entry: str, raw: dict[str, Any], a: dict[str, Any]) -> None:
    a["shape"] = _ints(entry, "shape", raw.get("shape"), None, lo=1)
    layout, forms, program = raw.get("layout", "ND"), raw.get("forms"), raw.get("program")
    if layout not in ("NC1HWC0", "ND") or (layout == "NC1HWC0" and len(a["shape"]) != 4):
        raise KilnError("frontend", entry, f"'layout' must be NC1HWC0 (with a 4-D shape) or ND, got {layout!r}")
    if not isinstance(forms, str) or not isinstance(program, str):
        raise KilnError("frontend", entry, "'forms' and 'program' must be strings, e.g. forms = \"full,channel\", "
                        "program = \"sigmoid(1);mul(0,2)\"")
    try:
        decode(program, len(forms.split(",")))
    except ValueError as e:
        raise KilnError("frontend", entry, f"'program': {e}") from None
    a.update(layout=layout, forms=forms, program=program)


_PARSERS = {
    "Conv": _parse_conv,
    "Gemm": _parse_matrix,
    "MatMul": _parse_matrix,
    "BatchedMatMul": _parse_batched_matmul,
    "Transpose0213": _parse_transpose0213,
    "ChannelGather": _parse_channel_gather,
    "Copy": _parse_copy,
    "Gather": _parse_gather,
    "Attention": _parse_attention,
    "Softmax": _parse_rows,
    "LogSoftmax": _parse_rows,
    "LayerNormalization": _parse_rows,
    "ChannelLayerNorm": _parse_channel_norm,
    **dict.fromkeys(("ReduceMax", "ReduceMin", "ReduceL2"), _parse_rows),
    "MaxPool": _parse_pool,
    "GlobalAveragePool": _parse_pool,
    "AveragePool": _parse_avgpool,
    "Relu": _parse_elementwise,
    "Clip": _parse_elementwise,
    "Add": _parse_elementwise,
    "Mul": _parse_elementwise,
    "Muls": _parse_elementwise,
    "Adds": _parse_elementwise,
    "Gelu": _parse_elementwise,
    "EltwiseProgram": _parse_eltwise_program,
    "Resize": _parse_resize,
    "LSTMLoop": _parse_recurrent_loop,
    "GRULoop": _parse_recurrent_loop,
    "Col2im": _parse_col2im,
}
assert set(_PARSERS) == set(SUPPORTED), "every supported op type needs its parser"

_TAKES_ACTIVATION = {"Conv": ("", "Relu", "Clip"), "Gemm": ("", "Relu"), "Add": ("", "Relu", "Clip"),
                     "Col2im": ("", "Relu", "Clip")}
_KNOWN_FIELDS = {"label", "type", "activation", "bias", "input", "weight", "strides", "pads", "dilations", "group",
                 "a", "b", "shape", "min", "max", "kernel_shape", "scalar", "trans_b", "epsilon", "residual",
                 "algorithm", "tiling", "q", "kv", "scale", "mask", "count_include_pad", "ceil_mode", "layout",
                 "forms", "program", "in_channels", "table", "shuffle", "perm", "inputs", "axis", "scales", "sizes",
                 "mode", "coordinate_transformation_mode", "nearest_mode", "count", "seq", "batch", "hidden",
                 "direction", "h0", "c0", "linear_before_reset"}


# ---------------------------------------------------------------- fields every op shares

def _parse_common(entry: str, raw: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The op type and the attributes every entry has: activation and bias."""
    op = raw.get("type")
    if op not in SUPPORTED:
        supported = "; ".join(f"{k}: {v}" for k, v in SUPPORTED.items())
        raise KilnError("frontend", entry, f"unsupported op type {op!r}. Supported: {supported}")
    act = raw.get("activation", "")
    if act not in ACTIVATIONS:
        raise KilnError("frontend", entry, f"activation {act!r} not supported; accepted: {ACTIVATIONS}")
    bias = raw.get("bias", False)
    if not isinstance(bias, bool):
        raise KilnError("frontend", entry, f"'bias' must be true or false, got {bias!r}")
    return op, {"activation": act, "bias": bias}


def _parse_activation(entry: str, op: str, raw: dict[str, Any], a: dict[str, Any]) -> None:
    """Clip's bounds (the op or the epilogue), and which ops take which activation."""
    act = a["activation"]
    if act == "Clip" or op == "Clip":  # every op that takes an activation
        lo, hi = raw.get("min"), raw.get("max")
        if not (_number(lo) and _number(hi)) or lo > hi:
            raise KilnError("frontend", entry, f"Clip needs numbers min <= max, got min={lo!r} max={hi!r}")
        a.update(min=float(lo), max=float(hi))
    takes = _TAKES_ACTIVATION.get(op, ("",))
    if act and act not in takes:
        raise KilnError("frontend", entry, f"{op} takes activation {takes}, not {act!r}")
    if op == "Conv" and act == "Clip" and not (a["min"] == 0.0 and a["max"] > 0):
        raise KilnError("frontend", entry, "a Conv's Clip epilogue must be min 0, max > 0 (ReLU6-like), got "
                        f"min={a['min']} max={a['max']}")


def _parse_tiling(entry: str, op: str, raw: dict[str, Any], a: dict[str, Any]) -> None:
    """A 'tiling' table pins the variant's tiling parameters (`kiln tune` bakes candidates this way)."""
    if "tiling" not in raw:
        return
    t = raw["tiling"]
    if op not in ("Conv", "Gemm") or not isinstance(t, dict) or not t or not all(
            isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) and v > 0 for k, v in t.items()):
        raise KilnError("frontend", entry, "'tiling' must be a table of positive integers (Conv and Gemm only), "
                        f"e.g. {{ base_m = 64, base_n = 64, base_k1 = 4, c1_step = 2 }}; got {t!r}")
    a["tiling"] = tuple(sorted(t.items()))


def _parse_op(idx: int, raw: dict[str, Any]) -> OpInstance:
    label = str(raw.get("label", f"op[{idx}]"))
    entry = f"kernel list entry {label!r}"
    op, a = _parse_common(entry, raw)
    _PARSERS[op](entry, raw, a)
    _parse_activation(entry, op, raw, a)
    _parse_tiling(entry, op, raw, a)
    extra = sorted(set(raw) - _KNOWN_FIELDS)
    if extra:
        raise KilnError("frontend", entry, f"unknown field(s) {extra}; known fields: {sorted(_KNOWN_FIELDS)}")
    return OpInstance(label=label, type=op, attrs=a)


def load_kernel_list(path: str | Path) -> list[OpInstance]:
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text())
    except OSError as e:
        raise KilnError("frontend", str(p), f"cannot read kernel list: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise KilnError("frontend", str(p), f"not valid TOML: {e}") from None
    ops = data.get("op")
    if not isinstance(ops, list) or not ops:
        raise KilnError("frontend", str(p), "expected one or more [[op]] tables")
    return [_parse_op(i, raw) for i, raw in enumerate(ops)]
