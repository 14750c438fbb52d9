"""InstanceNormalization, GroupNormalization and LRN against ONNX Runtime (codegen/frontend/onnx_norm.py rewrites
them: LayerNormalization over rows + a per-channel affine; a banded 1x1 Conv over squares + Pow, Mul).
InstanceNormalization: rank 3, 4, 5, epsilon default and 1e-3, channels that are and are not multiples of 16, the
identity affine (no affine kernel). GroupNormalization: opset 18 (scale and bias per group; onnx deprecated that
schema, so the model is built without onnx's checker) and 21 (per channel), groups of 6 and 20 channels (not
multiples of C0), num_groups 1 and C, stash_type 1, rank 3 and 4. LRN: AlexNet's size 5, alpha 1e-4, beta 0.75, bias
1 and 2, GoogLeNet's (the same values, 64 channels), size 3 with beta 0.5, size 1; inputs scaled so the window sum
matters. Even sizes: ONNX Runtime refuses them (tests/codegen/frontend/test_norm.py checks the rewrite against the
spec there). The net_* cases put them where exporters do (AlexNet, GoogLeNet, style transfer, a diffusion U-Net)."""
import numpy as np

from . import OpCase, single_op


def _f(*shape, seed=1):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _norm(name, op, shape, n, opset=17, **attrs):
    return OpCase(name, single_op(op, [("x", shape)], [("y", shape)], {"s": _f(n), "b": _f(n, seed=2)},
                                  opset=opset, **attrs))


def _gn18(name, shape, groups, **attrs):
    """GroupNormalization-18 (scale and bias per group): onnx.checker refuses the deprecated schema."""
    from onnx import TensorProto, helper, numpy_helper
    node = helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=groups, **attrs)
    graph = helper.make_graph([node], name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
                              [numpy_helper.from_array(_f(groups), "s"),
                               numpy_helper.from_array(_f(groups, seed=2), "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    return OpCase(name, model)


def _lrn(name, shape, scale, **attrs):
    return OpCase(name, single_op("LRN", [("x", shape)], [("y", shape)], **attrs),
                  inputs={"x": lambda rng, s: scale * rng.standard_normal(s)})


CASES = [
    _norm("instnorm_4d", "InstanceNormalization", [2, 8, 5, 6], 8),
    _norm("instnorm_3d_eps1e-3", "InstanceNormalization", [2, 20, 30], 20, epsilon=1e-3),
    _norm("instnorm_5d", "InstanceNormalization", [1, 4, 3, 4, 5], 4),
    _norm("instnorm_c32_l256", "InstanceNormalization", [1, 32, 16, 16], 32, epsilon=1e-6),
    OpCase("instnorm_identity_affine",  # no affine: the layernorm kernel alone
           single_op("InstanceNormalization", [("x", [1, 16, 6, 6])], [("y", [1, 16, 6, 6])],
                     {"s": np.ones(16, np.float32), "b": np.zeros(16, np.float32)}), launches=1),
    _gn18("groupnorm18_g3", [2, 12, 5, 6], 3, epsilon=1e-5),
    _gn18("groupnorm18_g2_c40", [1, 40, 4, 4], 2),
    _norm("groupnorm21_g4_c24", "GroupNormalization", [1, 24, 4, 4], 24, opset=21, num_groups=4),
    _norm("groupnorm21_3d_eps1e-6", "GroupNormalization", [2, 40, 10], 40, opset=21, num_groups=2, epsilon=1e-6,
          stash_type=1),
    _norm("groupnorm21_g1", "GroupNormalization", [1, 8, 4, 4], 8, opset=21, num_groups=1),
    _norm("groupnorm21_gc", "GroupNormalization", [1, 8, 3, 3], 8, opset=21, num_groups=8),
    _lrn("lrn_alexnet_bias1", [1, 24, 9, 9], 30.0, size=5, alpha=1e-4, beta=0.75, bias=1.0),
    _lrn("lrn_alexnet_bias2", [1, 20, 6, 6], 30.0, size=5, alpha=1e-4, beta=0.75, bias=2.0),
    _lrn("lrn_googlenet_c64", [1, 64, 7, 7], 30.0, size=5, alpha=1e-4, beta=0.75, bias=1.0),
    _lrn("lrn_size3_beta05", [2, 10, 5, 5], 5.0, size=3, alpha=1e-2, beta=0.5, bias=1.0),
    _lrn("lrn_size1", [1, 8, 4, 4], 3.0, size=1, alpha=0.1, beta=1.0, bias=0.5),
]


def _net(name, nodes, x, init, opset=17, y=None):
    """A small model in an exporter's shape: `nodes` (onnx.helper) from graph input x to output y (shape `y`, or
    from onnx's shape inference, which has no type rule for GroupNormalization-21's function body)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    graph = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, x)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, y)],
                              [numpy_helper.from_array(v, k) for k, v in init.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    if y is None:
        model = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    onnx.checker.check_model(model)
    return model


def _n(op, ins, out, **attrs):
    from onnx import helper
    return helper.make_node(op, ins, [out], name=out, **attrs)


_LRN = {"size": 5, "alpha": 1e-4, "beta": 0.75, "bias": 1.0}
CASES += [  # the ops where exporters put them: after Conv + Relu (AlexNet), after a MaxPool (GoogLeNet), between a
    # Conv and its activation (style transfer: InstanceNorm + Relu; diffusion U-Nets: GroupNorm + SiLU)
    OpCase("net_alexnet_conv_relu_lrn_pool", _net("alexnet", [
        _n("Conv", ["x", "w", "b"], "c", pads=[2, 2, 2, 2], strides=[2, 2]), _n("Relu", ["c"], "r"),
        _n("LRN", ["r"], "n", **_LRN), _n("MaxPool", ["n"], "y", kernel_shape=[3, 3], strides=[2, 2])],
        [1, 3, 23, 23], {"w": 4 * _f(16, 3, 5, 5), "b": _f(16, seed=2)})),
    OpCase("net_googlenet_pool_lrn_conv", _net("googlenet", [
        _n("MaxPool", ["x"], "p", kernel_shape=[3, 3], strides=[2, 2], pads=[0, 0, 1, 1]),
        _n("LRN", ["p"], "n", **_LRN), _n("Conv", ["n", "w"], "c"), _n("Relu", ["c"], "y")],
        [1, 32, 12, 12], {"w": _f(32, 32, 1, 1)}), inputs={"x": lambda rng, s: 20 * rng.standard_normal(s)}),
    OpCase("net_style_conv_instnorm_relu", _net("style", [
        _n("Conv", ["x", "w"], "c", pads=[1, 1, 1, 1]), _n("InstanceNormalization", ["c", "s", "b"], "i"),
        _n("Relu", ["i"], "y")], [1, 8, 10, 10], {"w": _f(16, 8, 3, 3), "s": _f(16, seed=2), "b": _f(16, seed=3)})),
    OpCase("net_unet_conv_groupnorm_silu", _net("unet", [
        _n("Conv", ["x", "w"], "c", pads=[1, 1, 1, 1]),
        _n("GroupNormalization", ["c", "s", "b"], "g", num_groups=4, epsilon=1e-5),
        _n("Sigmoid", ["g"], "sg"), _n("Mul", ["g", "sg"], "y")], [1, 8, 6, 6],
        {"w": _f(24, 8, 3, 3), "s": _f(24, seed=2), "b": _f(24, seed=3)}, opset=21, y=[1, 24, 6, 6])),
]
