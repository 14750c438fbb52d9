"""The natural-layout operands a baked kernel takes (`kiln.kernel(name)(*args)`), checked where they enter.

Packing hides a wrong operand: channels pad up to the next 16 (a 3-channel and a 5-channel input pack to the
same NC1HWC0 block), a short bias would be zero-padded and a flat array reshaped to whatever the kernel takes.
So each operand's natural shape is derived from the kernel's spec and compared before anything is packed."""
from __future__ import annotations

import math

import numpy as np

ANY_SHAPE = "any shape"  # elementwise: only the number of values matters
ROWS = "rows"  # a row-wise op: any shape whose last dimension is the row length and holds as many values


def _conv2d(s: dict, out_hw: tuple[int, int]) -> list[tuple[str, tuple[int, ...]]]:
    n, cin, cout = s["n"], s["cin"], s["cout"]
    residual = [("residual", (n, cout, *out_hw))] if s.get("residual") else []
    if s.get("mid"):  # a chain: the window conv to `mid` channels, then a 1x1 to cout
        return ([("x", (n, cin, s["h"], s["w"])), ("w", (s["mid"], cin, s["kh"], s["kw"]))]
                + ([("mid_bias", (s["mid"],))] if s["mid_bias"] else [])
                + [("w_mid", (cout, s["mid"], 1, 1))] + ([("bias", (cout,))] if s["bias"] else []) + residual)
    second = [("x2", (n, s["cin2"], s["h2"], s["w2"])), ("w2", (cout, s["cin2"], 1, 1))] if s.get("cin2") else []
    per_group = cin // s.get("group", 1)  # a grouped conv's weight: (Cout, Cin/group, kh, kw), as ONNX holds it
    return ([("x", (n, cin, s["h"], s["w"])), ("w", (cout, per_group, s["kh"], s["kw"]))]
            + ([("bias", (cout,))] if s["bias"] else []) + residual + second)


def natural_shapes(record: dict) -> list[tuple[str, tuple[int, ...] | str]]:
    """(operand name, natural shape or ANY_SHAPE) of each argument the kernel's __call__ takes, in order."""
    s, kind, inputs = record["spec"], record["features"]["kind"], record["inputs"]
    if kind == "conv2d":
        out = record["output"]["shape"]  # NC1HWC0: (N, C1, OH, OW, 16)
        return _conv2d(s, (out[2], out[3]))
    if kind == "dwconv2d":
        return [("x", (s["n"], s["c"], s["h"], s["w"])), ("w", (s["c"], 1, s["kh"], s["kw"]))] + \
            ([("bias", (s["c"],))] if s["bias"] else [])
    if kind == "col2im":  # the GEMM's columns: kh kw channel-padded blocks of C channels per pixel
        cols = ("cols", (s["n"], s["kh"] * s["kw"] * -(-s["c"] // 16) * 16, s["h"], s["w"]))
        return [cols] + ([("bias", (s["c"],))] if s["bias"] else [])
    if kind == "channel_layernorm":  # NCHW in (rows of the NHWC transpose out), gamma and beta per channel
        return [("x", (s["n"], s["c"], s["h"], s["w"])), ("gamma", (s["c"],)), ("beta", (s["c"],))]
    if kind in ("pool2d", "avgpool2d", "resize"):
        return [("x", (s["n"], s["c"], s["h"], s["w"]))]
    if kind == "gemm":
        return [("a", (s["m"], s["k"])), ("b", (s["k"], s["n"]))] + ([("bias", (s["n"],))] if s["bias"] else [])
    if kind == "eltwise":
        return [(t["name"], ANY_SHAPE) for t in inputs]
    if kind == "channel_gather":  # NCHW inputs of their own channel counts
        chans = [int(c) for c in s["in_channels"].split(",")]
        return [(t["name"], (s["n"], c, s["h"], s["w"])) for t, c in zip(inputs, chans)]
    if kind in ("softmax", "logsoftmax", "layernorm"):  # rows of `length`: any leading shape with as many rows
        return [(inputs[0]["name"], ROWS)] + [(t["name"], tuple(t["shape"])) for t in inputs[1:]]
    return [(t["name"], tuple(t["shape"])) for t in inputs]  # softmax, layernorm, transpose, attention, bgemm


def check_operands(record: dict, args: tuple) -> list[np.ndarray]:
    """The arguments as arrays, each checked against its natural shape: TypeError for the wrong number of
    arguments or a non-numeric one, ValueError naming the kernel, the operand and both shapes otherwise."""
    want = natural_shapes(record)
    name = record["name"]
    if len(args) != len(want):
        raise TypeError(f"kernel {name} takes {len(want)} arguments ({', '.join(n for n, _ in want)}), "
                        f"got {len(args)}")
    arrays = []
    # the packed tensor beside each operand where they pair up (all kinds but the conv chains and the 1x1 pair)
    packed_inputs = record["inputs"] if len(record["inputs"]) == len(want) else [None] * len(want)
    for (operand, shape), packed, a in zip(want, packed_inputs, args):
        try:
            arr = np.asarray(a)
        except (TypeError, ValueError) as e:
            raise TypeError(f"kernel {name}, argument {operand!r}: not an array ({e})") from None
        if arr.dtype.kind not in "biuf":
            raise TypeError(f"kernel {name}, argument {operand!r}: expected real numbers, got {arr.dtype} "
                            f"({type(a).__name__})")
        if shape == ANY_SHAPE:
            count = math.prod(packed["shape"]) if packed else arr.size
            if arr.size != count:
                raise ValueError(f"kernel {name}, argument {operand!r}: expected {count} values (any shape), got "
                                 f"{arr.size} in shape {arr.shape}")
        elif shape == ROWS:
            rows, length = packed["shape"][0], packed["shape"][-1]
            if arr.size != rows * length or arr.shape[-1:] != (length,):
                raise ValueError(f"kernel {name}, argument {operand!r}: expected {rows} rows of {length} (any shape "
                                 f"ending in {length} with {rows * length} values), got shape {arr.shape}")
        elif arr.shape != shape:
            raise ValueError(f"kernel {name}, argument {operand!r}: expected shape {shape}, got {arr.shape}")
        arrays.append(arr)
    return arrays
