"""Every baked kernel against a NumPy reference, and its pipe counters against
what its tiling implies. Inputs are random with fixed seeds; the tolerance is
the error model in kiln.reference (fp16 output rounding + fp32 accumulation
over the reduction length), evaluated per element."""
import math

import numpy as np
import pytest

import kiln
from codegen.ir.layouts import grouped_to_dense
from codegen.ir.opspec import AvgPool2dSpec, Conv2dSpec
from codegen.ir.resize_spec import ResizeSpec
from kiln import reference as ref

KERNELS = kiln.kernels()


def r16(x: int) -> int:
    return math.ceil(x / 16) * 16


def make_inputs(k: kiln.Kernel, seed: int):
    """Natural-layout inputs (NCHW / OIHW / [M,K],[K,N]) for the kernel's spec."""
    rng = np.random.default_rng(seed)
    s, kind = k.spec, k.record["features"]["kind"]
    if kind == "conv2d" and s.get("mid"):  # a chain: x, w, [mid_bias], w_mid, [bias], [residual]
        x = rng.standard_normal((s["n"], s["cin"], s["h"], s["w"]), np.float32)
        args = [x, rng.standard_normal((s["mid"], s["cin"], s["kh"], s["kw"]), np.float32)
                / math.sqrt(s["cin"] * s["kh"] * s["kw"])]
        if s["mid_bias"]:
            args.append(rng.standard_normal(s["mid"]).astype(np.float32))
        args.append(rng.standard_normal((s["cout"], s["mid"], 1, 1), np.float32) / math.sqrt(s["mid"]))
        if s["bias"]:
            args.append(rng.standard_normal(s["cout"]).astype(np.float32))
        if s.get("residual"):
            args.append(rng.standard_normal((s["n"], s["cout"], s_ho(s), s_wo(s))).astype(np.float32))
    elif kind == "conv2d":
        x = rng.standard_normal((s["n"], s["cin"], s["h"], s["w"]), np.float32)
        per_group = s["cin"] // s.get("group", 1)  # a grouped conv's weight: (Cout, Cin/group, kh, kw)
        w = (rng.standard_normal((s["cout"], per_group, s["kh"], s["kw"]), np.float32)
             / math.sqrt(per_group * s["kh"] * s["kw"]))
        args = [x, w]
        if s["bias"]:
            args.append(rng.standard_normal(s["cout"]).astype(np.float32))
        if s.get("residual"):
            args.append(rng.standard_normal((s["n"], s["cout"], s_ho(s), s_wo(s))).astype(np.float32))
        if s.get("cin2"):  # the accumulated 1x1 source
            args.append(rng.standard_normal((s["n"], s["cin2"], s["h2"], s["w2"]), np.float32))
            args.append(rng.standard_normal((s["cout"], s["cin2"], 1, 1), np.float32) / math.sqrt(s["cin2"]))
    elif kind == "dwconv2d":
        x = rng.standard_normal((s["n"], s["c"], s["h"], s["w"]), np.float32)
        w = rng.standard_normal((s["c"], 1, s["kh"], s["kw"]), np.float32) / 3
        args = [x, w]
        if s["bias"]:
            args.append(rng.standard_normal(s["c"]).astype(np.float32))
    elif kind == "gemm":
        a = rng.standard_normal((s["m"], s["k"]), np.float32)
        b = rng.standard_normal((s["k"], s["n"]), np.float32) / math.sqrt(s["k"])
        args = [a, b]
        if s["bias"]:
            args.append(rng.standard_normal(s["n"]).astype(np.float32))
    elif kind in ("pool2d", "avgpool2d", "resize"):
        args = [rng.standard_normal((s["n"], s["c"], s["h"], s["w"]), np.float32)]
    elif kind in ("softmax", "logsoftmax", "layernorm", "reduce"):
        args = [(2 * rng.standard_normal((s["rows"], s["length"]))).astype(np.float16)]
        if kind == "layernorm":
            args += [1 + 0.1 * rng.standard_normal(s["length"]).astype(np.float32),
                     0.1 * rng.standard_normal(s["length"]).astype(np.float32)]
    elif kind == "channel_layernorm":  # NCHW fp16, gamma and beta per channel
        args = [(2 * rng.standard_normal((s["n"], s["c"], s["h"], s["w"]))).astype(np.float16),
                1 + 0.1 * rng.standard_normal(s["c"]).astype(np.float32),
                0.1 * rng.standard_normal(s["c"]).astype(np.float32)]
    elif kind in ("bgemm", "attention", "transpose", "copy"):
        args = [rng.standard_normal(t["shape"]).astype(np.float16) for t in k.record["inputs"]]
    elif kind == "gather":  # indices of every form: negative ones (from the end), repeats
        idx = rng.integers(-s["axis"], s["axis"], s["count"]).astype(np.float32)
        args = [rng.standard_normal((s["outer"], s["axis"], s["inner"])).astype(np.float16), idx]
    elif kind == "channel_gather":
        chans = [int(c) for c in s["in_channels"].split(",")]
        args = [rng.standard_normal((s["n"], c, s["h"], s["w"])).astype(np.float16) for c in chans]
    elif kind == "eltwise_program":
        args = [(2 * rng.standard_normal(t["shape"])).astype(np.float16) for t in k.record["inputs"]]
    elif kind == "col2im":  # the GEMM's columns (kh kw padded channel blocks per pixel) and the bias
        args = [rng.standard_normal((s["n"], s["kh"] * s["kw"] * r16(s["c"]), s["h"], s["w"])).astype(np.float32)]
        if s["bias"]:
            args.append(rng.standard_normal(s["c"]).astype(np.float32))
    else:
        args = [(3 * rng.standard_normal(s["numel"])).astype(np.float16) for _ in k.record["inputs"]]
    return args


def chain_reference(s, args, absolute=False):
    """A chained conv: the window conv (+ bias, ReLU) rounded to fp16 as the kernel keeps it in L1, then the
    1x1 conv and its epilogue. With absolute=True: the magnitudes the error bound scales with."""
    dt = s.get("dtype", "fp16")  # KILN_DTYPE: x, w and w_mid as the Cube reads them; the rest is fp16/fp32
    q = [ref.f16(a) for a in args]
    q[0], q[1] = ref.cube_operand(args[0], dt), ref.cube_operand(args[1], dt, activation=False)
    i = 2
    b1 = np.asarray(args[i], np.float64) if s["mid_bias"] else None
    i += 1 if s["mid_bias"] else 0
    w2 = ref.cube_operand(args[i], dt, activation=False)
    b2 = np.asarray(args[i + 1], np.float64) if s["bias"] else None
    residual = q[-1] if s.get("residual") else None
    geometry = ((s["sh"], s["sw"]), (s["pt"], s["pl"], s["pb"], s["pr"]), (s["dh"], s["dw"]))
    if absolute:
        mid = ref.conv2d_nchw(np.abs(q[0]), np.abs(q[1]), None if b1 is None else np.abs(b1), *geometry)
        y = ref.conv2d_nchw(mid, np.abs(w2), None if b2 is None else np.abs(b2))
        return y + (np.abs(residual) if residual is not None else 0)
    mid = ref.f16(ref.conv2d_nchw(q[0], q[1], b1, *geometry, relu=s["mid_relu"]))
    if dt == "bf16":  # Fixpipe rounds the intermediate to bf16 (not through fp16)
        mid = ref.bf16(ref.conv2d_nchw(q[0], q[1], b1, *geometry, relu=s["mid_relu"]))
    vec = s.get("residual") or s.get("clip_hi")
    y = ref.conv2d_nchw(mid, w2, b2, relu=s["relu"] and not vec)
    if residual is not None:
        y = ref.f16(y) + residual
    if s.get("clip_hi"):
        y = np.clip(y, 0.0, s["clip_hi"])
    elif s["relu"] and vec:
        y = np.maximum(y, 0)
    return y


def reference(k: kiln.Kernel, args, absolute=False):
    s, kind = k.spec, k.record["features"]["kind"]
    if kind == "conv2d" and s.get("mid"):
        return chain_reference(s, args, absolute)
    dt = s.get("dtype", "fp16")  # KILN_DTYPE of a Cube kernel (depthwise: fp16)
    q = [ref.cube_operand(args[0], dt), ref.cube_operand(args[1], dt, activation=False)]  # as the kernel reads them
    if kind == "conv2d" and s.get("group", 1) > 1:  # grouped: the dense block-diagonal weight, same convolution
        q[1] = grouped_to_dense(q[1], s["group"])
    bias = np.asarray(args[2], np.float64) if s.get("bias") else None
    residual = ref.f16(args[3 if s.get("bias") else 2]) if s.get("residual") else None
    second = ([ref.cube_operand(args[-2], dt), ref.cube_operand(args[-1], dt, activation=False)]
              if s.get("cin2") else None)
    if absolute:
        q = [np.abs(t) for t in q]
        bias = None if bias is None else np.abs(bias)
    relu = s["relu"] and not absolute
    if kind in ("conv2d", "dwconv2d"):
        fn = ref.conv2d_nchw if kind == "conv2d" else ref.dwconv2d_nchw
        vec = s.get("residual") or s.get("clip_hi")
        if second is not None:  # conv(x, w) + conv1x1(x2, w2) + bias in one accumulation, then the activation
            if absolute:
                second = [np.abs(t) for t in second]
            y = ref.conv2d_nchw(q[0], q[1], None, (s["sh"], s["sw"]), (s["pt"], s["pl"], s["pb"], s["pr"]),
                                (s["dh"], s["dw"])) + ref.conv2d_nchw(second[0], second[1], bias, (s["s2"], s["s2"]))
            y = np.maximum(y, 0) if relu and not vec else y
        else:
            y = fn(q[0], q[1], bias, (s["sh"], s["sw"]), (s["pt"], s["pl"], s["pb"], s["pr"]), (s["dh"], s["dw"]),
                   relu and not vec)
        if residual is not None:  # the Cube result is rounded to fp16 before the Vector pass adds
            y = (ref.f16(y) if not absolute else y) + (np.abs(residual) if absolute else residual)
        if s.get("clip_hi") and not absolute:  # fused ReLU6-style epilogue
            y = np.clip(y, 0.0, s["clip_hi"])
        elif relu and vec:
            y = np.maximum(y, 0)
        return y
    y = ref.gemm(q[0], q[1], bias, relu)
    if s.get("split"):  # sibling GEMMs: result j is the j-th [m, split] slice of the output
        y = y.reshape(s["m"], s["n"] // s["split"], s["split"]).transpose(1, 0, 2)
    return y


def check_avgpool(s: dict, x: np.ndarray, y: np.ndarray) -> None:
    """AveragePool: the window sums over zero padding divided per output pixel by its row and column divisors
    (the spec's own rule, checked against ONNX Runtime by tests/kiln/op_cases/pooling.py). The kernel sums in
    fp16: K - 1 roundings of the running sum, then the two scalings and their factors, so
    |err| <= 2**-11 (K + 2) mean|x| per window (the same divisors)."""
    spec = AvgPool2dSpec(**s)
    div = np.outer(spec.divisors(0), spec.divisors(1))
    window, stride, pads = (spec.kh, spec.kw), (spec.sh, spec.sw), (spec.pt, spec.pl, spec.pb, spec.pr)
    taps = spec.kh * spec.kw
    want = ref.pool2d_nchw(x, "avg", window, stride, pads) * taps / div
    absmean = ref.pool2d_nchw(np.abs(x), "avg", window, stride, pads) * taps / div
    bound = 2.0 ** -11 * (taps + 2) * absmean + 2.0 ** -24
    assert y.shape == want.shape
    assert np.all(np.abs(y - want) <= bound), np.abs(y - want).max()
    assert np.count_nonzero(y) > 0.3 * y.size


def check_col2im(s: dict, args: list, y: np.ndarray) -> None:
    """The scatter-add in float64 from the fp16 columns and the bias as the kernel rounds it (fp16), then the
    activation; the kernel sums in fp16, one rounding per add: (terms + 1) u of the sum of the absolute terms."""
    from codegen.ir.col2im_spec import Col2imSpec
    spec = Col2imSpec(**s)
    cols = ref.f16(args[0]).astype(np.float64).reshape(spec.n, spec.kh, spec.kw, -1, spec.h, spec.w)[:, :, :, :spec.c]
    bias = ref.f16(args[1]).astype(np.float64) if spec.bias else np.zeros(spec.c)
    want = np.broadcast_to(bias[None, :, None, None], y.shape).copy()
    mag = np.abs(want)
    for oh in range(spec.ho):
        for a, ih in spec.row_taps(oh):
            for b, (iw0, cnt, ow0) in enumerate(spec.col_runs()):
                part = cols[:, a, b, :, ih, iw0:iw0 + cnt]
                want[:, :, oh, ow0:ow0 + cnt * spec.sw:spec.sw] += part
                mag[:, :, oh, ow0:ow0 + cnt * spec.sw:spec.sw] += np.abs(part)
    if spec.activation == "Relu":
        want = np.maximum(want, 0)
    elif spec.activation == "Clip":
        want = np.clip(want, ref.f16(np.float32(spec.clip_lo)), ref.f16(np.float32(spec.clip_hi)))
    tol = (spec.reduction_length + 1) * 2.0 ** -11 * mag + 2.0 ** -24
    assert np.all(np.abs(y - want) <= tol), (np.abs(y - want) / tol).max()
    assert np.count_nonzero(y) > 0.3 * y.size


def check_resize(s: dict, x: np.ndarray, y: np.ndarray) -> None:
    """Nearest: a gather, bit for bit. Bilinear: the separable 4-tap sum within its fp16 arithmetic: per pass
    the weights (rounded to fp16 in the per-column rows), both products and their sum round, 8u over both
    passes of the sum of the absolute terms. A program epilogue: that result's error carried through the
    program (check_program_epilogue)."""
    spec = ResizeSpec(**s)
    rows, cols = spec.taps(0), spec.taps(1)

    def interpolate(a):
        h = np.stack([a[..., c[0]] * c[2] + a[..., c[1]] * c[3] for c in cols], axis=-1)
        return np.stack([h[..., r[0], :] * r[2] + h[..., r[1], :] * r[3] for r in rows], axis=-2)
    want = interpolate(x.astype(np.float64))
    tol = 0.0 if spec.mode == "nearest" else 8 * 2.0 ** -11 * interpolate(np.abs(x.astype(np.float64))) + 2.0 ** -24
    if spec.program:
        check_program_epilogue(spec.program, want, tol, y)
    elif spec.mode == "nearest":
        np.testing.assert_array_equal(y, want)
    else:
        assert np.all(np.abs(y - want) <= tol), (np.abs(y - want) / tol).max()


@pytest.mark.parametrize("k", KERNELS, ids=[k.name for k in KERNELS])
def test_kernel_matches_reference(k):
    if k.record["features"]["kind"] in ("lstm_loop", "gru_loop"):
        check_recurrent_loop(k)
        return
    args = make_inputs(k, seed=1234)
    y = k(*args).astype(np.float64)
    kind = k.record["features"]["kind"]
    if kind == "transpose":
        np.testing.assert_array_equal(y, args[0].transpose(0, 2, 1, 3).astype(np.float64))
        return
    if kind == "copy":  # pure data movement: each input's elements at their output strides, bit for bit
        want = np.full(k.spec["out_numel"], np.nan)
        for x, move in zip(args, k.spec["moves"].split(";")):
            dims, strides, base = (part.split("x") for part in move.split(":"))
            view = np.lib.stride_tricks.as_strided(want[int(base[0]):], [int(d) for d in dims],
                                                   [int(st) * 8 for st in strides], writeable=True)
            view[...] = x.reshape([int(d) for d in dims])
        np.testing.assert_array_equal(y.reshape(-1), want)
        return
    if kind == "channel_gather":  # pure data movement: each output channel is its source channel, bit for bit
        sources = [tuple(int(v) for v in e.split(":")) for e in k.spec["table"].split(",")]
        want = np.stack([args[t][:, c] for t, c in sources], axis=1)
        np.testing.assert_array_equal(y, want.astype(np.float64))
        return
    if kind == "gather":  # pure data movement: each output row is the row its index names, bit for bit
        np.testing.assert_array_equal(y, np.take(args[0], args[1].astype(np.int64), axis=1).astype(np.float64))
        return
    if kind == "reduce" and k.spec["op"] != "l2":  # max and min of fp16 values are exact
        x = args[0].astype(np.float64)
        np.testing.assert_array_equal(y.reshape(-1), x.max(-1) if k.spec["op"] == "max" else x.min(-1))
        return
    if kind == "channel_layernorm":
        check_channel_layernorm(k, args, y)
        return
    if kind in ("softmax", "logsoftmax", "layernorm", "bgemm", "attention", "reduce") or (
            kind == "eltwise" and k.spec["op"] == "gelu"):
        check_fp32_math(k, args, y)
        return
    if kind == "eltwise_program":
        check_eltwise_program(k, args, y)
        return
    if kind in ("dwconv2d", "conv2d") and k.spec.get("program"):
        check_dw_program(k, args, y)
        return
    if kind == "eltwise":
        # fp16 add, mul, scalar ops, ReLU and clip: one exact op then one rounding: bit-exact.
        s = k.spec
        x = args[0]
        want = {"add": lambda: x + args[1], "mul": lambda: x * args[1],
                "muls": lambda: (x.astype(np.float32) * np.float32(s["scalar"])).astype(np.float16),
                "adds": lambda: (x.astype(np.float32) + np.float32(s["scalar"])).astype(np.float16),
                }.get(s["op"], lambda: x)()
        if "relu" in (s["op"], s["act"]):
            want = np.maximum(want, np.float16(0))
        if "clip" in (s["op"], s["act"]):
            want = np.minimum(np.maximum(want, np.float16(s["lo"])), np.float16(s["hi"]))
        np.testing.assert_array_equal(y, want.astype(np.float64))
        return
    if kind == "pool2d":
        x = ref.f16(args[0])
        want = ref.pool2d_nchw(x, k.spec["op"], (k.spec["kh"], k.spec["kw"]), (k.spec["sh"], k.spec["sw"]),
                               (k.spec["pt"], k.spec["pl"], k.spec["pb"], k.spec["pr"]),
                               (k.spec.get("dh", 1), k.spec.get("dw", 1)))
        if k.spec["op"] == "max":  # max is exact
            np.testing.assert_array_equal(y, want)
        else:
            bound = ref.bound(want, ref.pool2d_nchw(np.abs(x), "avg", (k.spec["kh"], k.spec["kw"]),
                                                    (k.spec["sh"], k.spec["sw"]), (0, 0, 0, 0)),
                              k.record["features"]["reduction_length"])
            assert np.all(np.abs(y - want) <= bound), np.abs(y - want).max()
        return
    if kind == "avgpool2d":
        check_avgpool(k.spec, ref.f16(args[0]), y)
        return
    if kind == "resize":
        check_resize(k.spec, ref.f16(args[0]), y)
        return
    if kind == "col2im":
        check_col2im(k.spec, args, y)
        return
    want = reference(k, args)
    bound = ref.bound(want, reference(k, args, absolute=True), k.record["features"]["reduction_length"])
    if k.spec.get("residual"):  # one more fp16 rounding: the conv result before the add
        bound = bound + 2.0 ** -11 * reference(k, args, absolute=True)
    if k.spec.get("mid"):  # the intermediate's own error (fp16 rounding + its accumulation) through the 1x1 conv
        s = k.spec
        bound = bound + (2.0 ** -11 + s["cin"] * s["kh"] * s["kw"] * 2.0 ** -23) * reference(k, args, absolute=True)
    if k.record.get("algorithm", "").startswith("winograd"):  # transforms round V and U to fp16
        from codegen.ir import winograd
        tile, reduction = k.tiling["tile"], k.record["features"]["reduction_length"]
        bound = bound + winograd.error_bound(tile, reduction) * np.abs(want).max()
    assert y.shape == want.shape
    err = np.abs(y - want)
    worst = np.unravel_index(np.argmax(err - bound), err.shape)
    assert np.all(err <= bound), f"max excess at {worst}: got {y[worst]}, want {want[worst]}, bound {bound[worst]}"
    # The check must be able to fail: the result is not trivially zero.
    assert np.count_nonzero(y) > 0.3 * y.size


def check_dw_program(k, args, y):
    """A depthwise (or Cube) convolution with a program epilogue: the convolution (and its residual, ReLU or clip)
    in float64 from the fp16 operands, then the program in float64. Its fp32 accumulation error (K terms, bounded
    by K 2^-23 of the sum of |terms|) carried through the program (the program's change over that interval), the
    program's fp32 steps (a few ulps of the largest value on the way) and one fp16 rounding of the result. A Cube
    conv's result is rounded to fp16 once more on a split profile (Fixpipe writes it for the Vector-core pass; the
    reference rounds it before a residual add, the on-chip epilogue does not): 2^-11 of it."""
    z, zabs = reference(k, args), reference(k, args, absolute=True)
    dz = (k.record["features"]["reduction_length"] * 2.0 ** -22 + (2.0 ** -11 if k.spec.get("cout") else 0)) * zabs
    check_program_epilogue(k.spec["program"], z, dz, y)


def check_program_epilogue(program: str, z: np.ndarray, dz, y: np.ndarray) -> None:
    """A kernel's program epilogue: the program in float64 of z, the kernel's result before it, whose error
    (at most dz) is carried through the program (the program's change over that interval), plus the program's
    fp32 steps (a few ulps of the largest value on the way) and one fp16 rounding of the result."""
    from codegen.ir.eltwise_program import decode, evaluate, evaluate_all
    steps = decode(program, 1)
    values = evaluate_all(steps, [z])
    want = values[-1]
    carried = np.maximum(np.abs(evaluate(steps, [z + dz]) - want), np.abs(evaluate(steps, [z - dz]) - want))
    tol = 2.0 ** -11 * np.abs(want) + 2.0 ** -18 * np.max(np.abs(np.stack(values)), axis=0) + carried + 2.0 ** -24
    assert y.shape == want.shape
    err = np.abs(y - want)
    assert np.all(err <= tol), f"max err {err.max()}, max err/tol {(err / tol).max()}"
    assert np.count_nonzero(y) > 0.3 * y.size


def check_eltwise_program(k, args, y):
    """An elementwise program in the packed layout: each input expanded as the kernel broadcasts it, the
    program in float64 (codegen/ir/eltwise_program.py). fp32 steps then one fp16 rounding: 2^-11 of the result
    plus a few fp32 ulps of the largest value on the way; padded channel lanes exactly zero."""
    from codegen.ir.eltwise_program import decode, evaluate_all
    s = k.spec
    forms = s["forms"].split(",")
    planes, per_plane = s["numel"] // s["plane"], s["plane"] // 16
    xs = []
    for a, f in zip(args, forms):
        a = ref.f16(a).reshape(-1)
        if f == "row":  # one row, the same for every plane (a plane is one row)
            a = np.tile(a, planes)
        elif f == "scalar":  # one value for every element
            a = np.full(s["numel"], a[0])
        elif f != "full":  # one C0 block per plane (per channel block of one image for channel1)
            idx = np.arange(planes) if f == "channel" else np.arange(planes) % s["c1"]
            a = np.broadcast_to(a.reshape(-1, 16)[idx][:, None, :], (planes, per_plane, 16)).reshape(-1)
        xs.append(a)
    values = evaluate_all(decode(s["program"], len(forms)), xs)
    want = values[-1]
    scale = np.max(np.abs(np.stack(values)), axis=0)
    pad = np.zeros(want.shape, bool)
    if s["c_tail"]:
        lanes = np.arange(want.size).reshape(planes, per_plane, 16)
        pad = ((lanes % 16 >= s["c_tail"]) & (np.arange(planes) % s["c1"] == s["c1"] - 1)[:, None, None]).reshape(-1)
    y = y.reshape(-1)
    assert np.all(y[pad] == 0), "padded channel lanes must be written as zero"
    tol = 2.0 ** -11 * np.abs(want) + 2.0 ** -18 * scale + 2.0 ** -24
    err = np.abs(y - want)[~pad]
    assert np.all(err <= tol[~pad]), f"max err {err.max()}, max err/tol {(err / tol[~pad]).max()}"
    assert np.count_nonzero(y) > 0.3 * y.size


def check_channel_layernorm(k, args, y):
    """The layernorm check on the rows of the NHWC transpose; then the padded lanes of the last channel block
    filled with large values must not change one output bit (they stay out of the statistics)."""
    s = k.spec
    rows = args[0].transpose(0, 2, 3, 1).reshape(-1, s["c"])
    check_fp32_math(k, [rows, *args[1:]], y)
    packed = k.pack(*args)
    if s["c"] % 16:
        x = np.array(packed[0], np.float16).reshape(s["n"], -1, s["h"], s["w"], 16)
        x[:, -1, :, :, s["c"] % 16:] = np.float16(1000.0)
        got = k.run_packed(x, *packed[1:])
        np.testing.assert_array_equal(np.asarray(got, np.float64).reshape(y.shape), y)


def check_fp32_math(k, args, y):
    """Kernels computing in fp32 from fp16 inputs, rounded once to fp16 at the end: the error is the
    final rounding plus the fp32 evaluation (reductions of `length` terms; exp/erf within a few ulp)."""
    s, kind = k.spec, k.record["features"]["kind"]
    x = [ref.f16(a) if a.dtype == np.float16 else np.asarray(a, np.float64) for a in args]
    if kind == "softmax":
        want = ref.softmax(x[0])
        tol = 2.0 ** -11 * np.abs(want) + 4 * s["length"] * 2.0 ** -24 * want + 2.0 ** -24
    elif kind == "logsoftmax":  # x - max - ln(sum exp): fp32 terms of |x - max| and ln(length)
        want = np.log(ref.softmax(x[0]))
        scale = np.abs(x[0] - x[0].max(-1, keepdims=True)) + np.log(s["length"])
        tol = 2.0 ** -11 * np.abs(want) + 4 * 2.0 ** -24 * scale + 2.0 ** -24
    elif kind in ("layernorm", "channel_layernorm"):
        want = ref.layernorm(x[0], x[1], x[2], s["eps"])
        scale = np.abs((x[0] - x[0].mean(-1, keepdims=True)) / x[0].std(-1, keepdims=True) * x[1]) + np.abs(x[2])
        tol = 2.0 ** -11 * np.abs(want) + 4 * x[0].shape[-1] * 2.0 ** -24 * scale + 2.0 ** -24
    elif kind == "reduce":  # l2: fp32 squares summed over `length`, a square root, one fp16 rounding
        want = np.sqrt(np.sum(x[0] ** 2, axis=-1, keepdims=True))
        tol = 2.0 ** -11 * want + (s["length"] + 2) * 2.0 ** -24 * want + 2.0 ** -24
    elif kind == "bgemm":
        x = [ref.cube_operand(a, s.get("dtype", "fp16")) for a in args]
        b = x[1].transpose(0, 2, 1) if s["trans_b"] else x[1]
        want = x[0] @ b
        tol = ref.bound(want, np.abs(x[0]) @ np.abs(b), s["k"])
    elif kind == "attention":
        # fp32 scores and statistics; P is rounded to fp16 for the Cube (2^-11 of each weight), the output once
        logits = np.float32(s["scale"]) * (x[0] @ x[1].transpose(0, 1, 3, 2))
        if s["mask"]:  # one additive row per batch, over the keys
            logits = logits + x[3][:, None, None, :]
        probs = ref.softmax(logits)
        want = probs @ x[2]
        spread = probs @ np.abs(x[2])
        tol = 2.0 ** -11 * np.abs(want) + (2 * 2.0 ** -11 + (s["kv"] + s["d"]) * 2.0 ** -22) * spread + 2.0 ** -24
    else:  # gelu: erf approximation error 1.5e-7 plus ~20 fp32 operations
        want = ref.gelu(x[0])
        tol = 2.0 ** -11 * np.abs(want) + (1.5e-7 + 20 * 2.0 ** -24) * (np.abs(x[0]) + 1) + 2.0 ** -24
    want = want.reshape(y.shape)
    err = np.abs(y - want)
    assert np.all(err <= tol.reshape(y.shape)), f"max err {err.max()}, max err/tol {(err / tol.reshape(y.shape)).max()}"
    assert np.count_nonzero(y) > 0.3 * y.size


@pytest.mark.parametrize("k", KERNELS, ids=[k.name for k in KERNELS])
def test_pipe_counters_match_tiling(k):
    if k.record["features"]["kind"] in ("lstm_loop", "gru_loop"):  # packed operands only (check_recurrent_loop)
        RUN_LOOP[k.record["features"]["kind"]](k, seed=7)
    else:
        k(*make_inputs(k, seed=7))
    st = k.last_stats
    assert st["pipes"]["MTE2"]["bytes"] == k.record["mte2_bytes"]
    s, kind = k.spec, k.record["features"]["kind"]
    if kind == "gemm":
        assert st["cube_macs"] == r16(s["m"]) * r16(s["n"]) * r16(s["k"])
    elif kind == "bgemm":
        bn = k.tiling["base_n"]
        n_padded = sum(r16(min(bn, s["n"] - n0)) for n0 in range(0, s["n"], bn))
        assert st["cube_macs"] == s["batch"] * r16(s["m"]) * n_padded * r16(s["k"])
    elif kind == "conv2d" and k.record["algorithm"] == "vector_direct":  # no Cube: every MAC on the Vector unit
        assert st["cube_macs"] == 0
        # per real input channel, tap and output row: one cast and one multiply-add (plus a masked tail)
        per_row = 2 * math.ceil(s_wo(s) * 16 / 64)
        assert st["vector_repeats"] >= (s["n"] * math.ceil(s["cout"] / 16) * s_ho(s) * s["cin"] * s["kh"] * s["kw"]
                                     * per_row)
    elif kind == "attention":  # S = Q.K^T and P.V per (q tile, kv tile), both on the fractal grid
        bq, bkv = k.tiling["base_q"], k.tiling["base_kv"]
        q_rows = sum(r16(min(bq, s["q"] - q0)) for q0 in range(0, s["q"], bq))
        kv_rows = sum(r16(min(bkv, s["kv"] - kv0)) for kv0 in range(0, s["kv"], bkv))
        assert st["cube_macs"] == s["batch"] * s["heads"] * q_rows * kv_rows * r16(s["d"]) * 2
        # MTE3 stores the output once and each P tile once (the workspace the Cube reads it from)
        kvp = math.ceil(bkv / 64) * 64
        p_tiles = sum(min(bq, s["q"] - q0) for q0 in range(0, s["q"], bq)) * kvp * math.ceil(s["kv"] / bkv) * 2
        assert st["pipes"]["MTE3"]["bytes"] == math.prod(k.record["output"]["shape"]) * 2 + \
            s["batch"] * s["heads"] * p_tiles
    elif kind == "conv2d" and k.record["algorithm"].startswith("winograd"):
        tile = k.tiling["tile"]
        tiles = s["n"] * math.ceil(s_ho(s) / tile) * math.ceil(s_wo(s) / tile)
        assert st["cube_macs"] == (tile + 2) ** 2 * r16(tiles) * r16(s["cout"]) * r16(s["cin"])
    elif kind == "conv2d" and s.get("mid"):  # both GEMMs of every M tile
        bm = k.tiling["base_m"]
        m = sum(r16(min(bm, s_ho(s) * s_wo(s) - p0)) for p0 in range(0, s_ho(s) * s_wo(s), bm))
        k1 = math.ceil(s["cin"] / 16) * s["kh"] * s["kw"] * 16
        split = k.tiling.get("n_split", 1)  # the window conv runs once per N split of the 1x1
        assert st["cube_macs"] == s["n"] * m * (split * r16(s["mid"]) * k1 + r16(s["cout"]) * r16(s["mid"]))
    elif kind == "conv2d" and s.get("group", 1) > 1:  # per N tile: its groups' input channel blocks only
        spec = Conv2dSpec(**s)
        n1 = k.tiling["base_n"] // 16
        tiles = [(n0, min(n1, math.ceil(s["cout"] / 16) - n0)) for n0 in range(0, math.ceil(s["cout"] / 16), n1)]
        k_work = sum(cnt * (hi - lo) for n0, cnt in tiles for lo, hi in [spec.group_c1_range(n0, cnt)])
        assert st["cube_macs"] == s["n"] * r16(s_ho(s) * s_wo(s)) * k_work * 256 * s["kh"] * s["kw"]
    elif kind == "conv2d":  # per tap a channel block, or (a small-channel input, c04) four taps to a K fractal
        taps = math.ceil(s["kh"] * s["kw"] * 4 / 16) if s.get("c04") else math.ceil(s["cin"] / 16) * s["kh"] * s["kw"]
        k1 = taps + math.ceil(s.get("cin2", 0) / 16)
        m = r16(s_ho(s) * s_wo(s))
        assert st["cube_macs"] == s["n"] * m * r16(s["cout"]) * k1 * 16
    elif kind == "lstm_loop":  # per direction and step with h: h [B, H] . R^T [H, 4H], B padded to a fractal
        steps = s["seq"] - (0 if s["h0"] else 1)
        assert st["cube_macs"] == s["dirs"] * steps * r16(s["batch"]) * 4 * s["hidden"] * s["hidden"]
        assert st["pipes"]["V"]["instructions"] > 0  # the gates
    elif kind == "gru_loop":  # per step with h: h . R^T over 3H columns (lbr), else over 2H and (r * h) . R_h^T
        steps = s["seq"] - (0 if s["h0"] else 1)
        assert st["cube_macs"] == s["dirs"] * steps * r16(s["batch"]) * 3 * s["hidden"] * s["hidden"]
        assert st["pipes"]["V"]["instructions"] > 0
    else:
        assert st["cube_macs"] == 0
        moved = st["pipes"]["MTE3"]["bytes"]
        assert moved == math.prod(k.record["output"]["shape"]) * 2  # every output byte stored once
        if kind not in ("transpose", "channel_gather", "copy", "gather"):
            assert st["pipes"]["V"]["instructions"] > 0
    assert st["cycles"] > 0
    if k.record.get("algorithm") == "vector_direct" or k.record["tiling"].get("mixed"):
        assert st["blocks"] == k.record["blocks"]  # the epilogue is on the Vector unit, or in the Cube's launch
    elif (k.spec.get("residual") or ((k.spec.get("clip_hi") or k.spec.get("program")) and kind == "conv2d")
            or k.record.get("algorithm", "").startswith("winograd")):  # + the Vector-core pass(es)
        assert st["blocks"] > k.record["blocks"]
    else:
        assert st["blocks"] == k.record["blocks"]
    for name, p in st["pipes"].items():
        assert 0.0 <= p["utilisation"] <= 1.0 + 1e-9, name


def s_ho(s):
    return (s["h"] + s["pt"] + s["pb"] - s["dh"] * (s["kh"] - 1) - 1) // s["sh"] + 1


def s_wo(s):
    return (s["w"] + s["pl"] + s["pr"] - s["dw"] * (s["kw"] - 1) - 1) // s["sw"] + 1


def test_identical_specs_are_generated_once():
    names = [k.name for k in KERNELS]
    assert len(names) == len(set(names))
    shared = [k for k in KERNELS if len(k.record["instances"]) > 1]
    assert shared, "the default kernel list has two instances with one spec (resnet50 layer1 conv2)"


def test_bad_arguments_name_the_kernel_and_argument():
    k = next(k for k in KERNELS if k.record["features"]["kind"] == "gemm")
    packed = k.pack(*make_inputs(k, 0))
    with pytest.raises(ValueError, match=rf"{k.name}.*'a'.*shape"):
        k.run_packed(packed[0][:, :-1].copy(), *packed[1:])
    with pytest.raises(TypeError, match=rf"{k.name}.*'a'.*float16"):
        k.run_packed(packed[0].astype(np.float32), *packed[1:])
    with pytest.raises(KeyError, match="no baked kernel"):
        kiln.kernel("gemm_cube_does_not_exist")


def test_a_gather_index_out_of_range_raises_naming_the_kernel():
    k = next(k for k in KERNELS if k.record["features"]["kind"] == "gather")
    x, idx = make_inputs(k, 0)
    for bad in (k.spec["axis"], -k.spec["axis"] - 1, 0.5):  # one past either end, not an integer
        idx[0] = bad
        with pytest.raises(IndexError, match=rf"{k.name}: index .* out of range for an axis of {k.spec['axis']}"):
            k(x, idx)


def check_recurrent_loop(k):
    """The looped LSTM / GRU recurrence (lstm_loop_mixed, gru_loop_mixed) against a float64 LSTM / GRU over the same
    fp16 operands (run_lstm_loop, run_gru_loop). h goes to the Cube as fp16 each step (the GRU's r * h too) and the
    state stays fp32: a few fp16 units of |h| <= 1 over the sequence."""
    got, want = RUN_LOOP[k.record["features"]["kind"]](k, seed=1234)
    err = np.abs(got - want)
    assert err.max() <= 8 * 2.0 ** -11 * max(1.0, np.abs(want).max()), err.max()
    assert np.count_nonzero(got) > 0.3 * got.size


def run_lstm_loop(k, seed: int):
    """Runs the kernel on packed operands: the input projection xw [T*B, D*4H] (gates i, o, f, c), R^T per
    direction in the Zn layout, h0/c0 when the spec takes them; its output packs Y per step and direction, then
    Y_h, then Y_c. Returns (output, the float64 LSTM's)."""
    from codegen.ir import layouts
    from kiln.runtime import as_packed
    s = k.record["spec"]
    T, B, H, D, rev = s["seq"], s["batch"], s["hidden"], s["dirs"], s["reverse"]
    rng = np.random.default_rng(seed)
    xw = (0.5 * rng.standard_normal((T * B, D * 4 * H))).astype(np.float16)
    R = (0.15 * rng.standard_normal((D, 4 * H, H))).astype(np.float32)
    packed = np.concatenate([layouts.kn_to_zn(R[d].T).reshape(-1) for d in range(D)])
    h0, c0 = ((0.5 * rng.standard_normal((D, B, H))).astype(np.float16) if s[n] else np.zeros((D, B, H), np.float16)
              for n in ("h0", "c0"))
    args = [xw, packed.reshape(D, H // 16, 4 * H // 16, 16, 16)] + [v for v, n in ((h0, "h0"), (c0, "c0")) if s[n]]
    got = np.asarray(k.run_packed(*[as_packed(np.asarray(a, np.float32), "fp16") for a in args]), np.float64)
    got = got.reshape((T + 2) * D * B, H)
    want = np.zeros_like(got)
    rf = R.astype(np.float16).astype(np.float64)
    for d in range(D):
        h, c = h0[d].astype(np.float64), c0[d].astype(np.float64)
        for t in (range(T - 1, -1, -1) if rev or d == 1 else range(T)):
            g = (xw[t * B:(t + 1) * B, d * 4 * H:(d + 1) * 4 * H].astype(np.float64)
                 + ref.f16(h) @ rf[d].T)
            i, o, f = (1 / (1 + np.exp(-g[:, j * H:(j + 1) * H])) for j in range(3))
            c = f * c + i * np.tanh(g[:, 3 * H:])
            h = o * np.tanh(c)
            want[(t * D + d) * B:(t * D + d + 1) * B] = h
        want[(T * D + d) * B:(T * D + d + 1) * B] = h
        want[((T + 1) * D + d) * B:((T + 1) * D + d + 1) * B] = c
    return got, want


def run_gru_loop(k, seed: int):
    """Runs the kernel on packed operands: the input projection xw [T*B, D*3H] (gates z, r, h), R^T per direction
    in the Zn layout (linear_before_reset: one [H, 3H] block, else [H, 2H] then [H, H]), Rb_h [D, B, H] with
    linear_before_reset, h0 when the spec takes it; its output packs Y per step and direction, then Y_h. Returns
    (output, the float64 GRU's)."""
    from codegen.ir import layouts
    from kiln.runtime import as_packed
    s = k.record["spec"]
    T, B, H, D, rev, lbr = s["seq"], s["batch"], s["hidden"], s["dirs"], s["reverse"], s["lbr"]
    rng = np.random.default_rng(seed)
    xw = (0.5 * rng.standard_normal((T * B, D * 3 * H))).astype(np.float16)
    R = (0.15 * rng.standard_normal((D, 3 * H, H))).astype(np.float32)
    blocks = [[R[d]] if lbr else [R[d][:2 * H], R[d][2 * H:]] for d in range(D)]
    packed = np.concatenate([layouts.kn_to_zn(b.T).reshape(-1) for bs in blocks for b in bs])
    rbh = np.broadcast_to((0.3 * rng.standard_normal((D, 1, H))).astype(np.float16), (D, B, H))
    h0 = (0.5 * rng.standard_normal((D, B, H))).astype(np.float16) if s["h0"] else np.zeros((D, B, H), np.float16)
    args = [xw, packed.reshape(D, H // 16, 3 * H // 16, 16, 16)] + [v for v, on in ((rbh, lbr), (h0, s["h0"])) if on]
    got = np.asarray(k.run_packed(*[as_packed(np.asarray(a, np.float32), "fp16") for a in args]), np.float64)
    got = got.reshape((T + 1) * D * B, H)
    want = np.zeros_like(got)
    rf = R.astype(np.float16).astype(np.float64)
    for d in range(D):
        h = h0[d].astype(np.float64)
        for t in (range(T - 1, -1, -1) if rev or d == 1 else range(T)):
            x = xw[t * B:(t + 1) * B, d * 3 * H:(d + 1) * 3 * H].astype(np.float64)
            g = ref.f16(h) @ rf[d, :2 * H].T
            z, r = (1 / (1 + np.exp(-(x[:, j * H:(j + 1) * H] + g[:, j * H:(j + 1) * H]))) for j in range(2))
            if lbr:
                n = np.tanh(x[:, 2 * H:] + r * (ref.f16(h) @ rf[d, 2 * H:].T + rbh[d].astype(np.float64)))
            else:
                n = np.tanh(x[:, 2 * H:] + ref.f16(r * h) @ rf[d, 2 * H:].T)
            h = n + z * (h - n)
            want[(t * D + d) * B:(t * D + d + 1) * B] = h
        want[(T * D + d) * B:(T * D + d + 1) * B] = h
    return got, want


RUN_LOOP = {"lstm_loop": run_lstm_loop, "gru_loop": run_gru_loop}
