"""Pooling, ReduceMean and standalone BatchNormalization against ONNX Runtime: MaxPool ceil_mode crossed with
pads and strides, AveragePool's count_include_pad crossed with pads (and ceil_mode, auto_pad), ReduceMean's axes
and keepdims, BatchNormalization that no Conv absorbs (4-D and 2-D). Channel counts are mostly not multiples of
16. Output shapes are left to onnx's shape inference, except where it does not drop a ceil_mode window that would
start in the end padding (ROUND_UP: 14 rows, k3/s3/p1 give 5 rows, not 6; ONNX Runtime and the spec drop the sixth):
there the case declares the spec's shape."""
import numpy as np

from . import OpCase, single_op

X = [1, 13, 14, 12]  # odd channels; 14 and 12 leave a partial last window at stride 2 and 3


def _maxpool(name, k, s, pads, ceil, shape=X, out=None, **extra):
    return OpCase(name, single_op("MaxPool", [("x", shape)], [("y", out)], kernel_shape=k, strides=s, pads=pads,
                                  ceil_mode=ceil, **extra))


def _avgpool(name, k, s, pads, cip, ceil=0, shape=X, out=None, tol=4e-3, **extra):
    if pads is not None:
        extra["pads"] = pads
    return OpCase(name, single_op("AveragePool", [("x", shape)], [("y", out)], kernel_shape=k, strides=s,
                                  count_include_pad=cip, ceil_mode=ceil, **extra), tol=tol)


MAXPOOL = [
    # ceil_mode x pads x strides (pairwise), SqueezeNet's 3x3/s2 unpadded ceil pool first
    _maxpool("maxpool_ceil_k3_s2_p0", [3, 3], [2, 2], [0, 0, 0, 0], 1, shape=[1, 21, 15, 14]),
    _maxpool("maxpool_ceil_k3_s2_p1", [3, 3], [2, 2], [1, 1, 1, 1], 1),
    _maxpool("maxpool_ceil_k3_s3_p1", [3, 3], [3, 3], [1, 1, 1, 1], 1, out=[1, 13, 5, 5]),  # see ROUND_UP
    _maxpool("maxpool_ceil_k2_s1_p0", [2, 2], [1, 1], [0, 0, 0, 0], 1),
    _maxpool("maxpool_ceil_k3_s2_asym", [3, 3], [2, 2], [0, 1, 1, 0], 1),
    _maxpool("maxpool_ceil_k2x3_s2x3_p0", [2, 3], [2, 3], [0, 0, 0, 0], 1, shape=[2, 7, 9, 13]),
    _maxpool("maxpool_floor_k3_s3_p1", [3, 3], [3, 3], [1, 1, 1, 1], 0),
    _maxpool("maxpool_floor_k2_s2_p0", [2, 2], [2, 2], [0, 0, 0, 0], 0),
    _maxpool("maxpool_storage_order0", [3, 3], [2, 2], [1, 1, 1, 1], 1, storage_order=0),
    # dilations (pairwise with strides, pads and ceil_mode); 1x2 and 2x1 unequal
    _maxpool("maxpool_dil2_k3_s1_p2", [3, 3], [1, 1], [2, 2, 2, 2], 0, dilations=[2, 2]),
    _maxpool("maxpool_dil2_k2_s2_p0_ceil", [2, 2], [2, 2], [0, 0, 0, 0], 1, dilations=[2, 2]),
    _maxpool("maxpool_dil1x2_k3_s2_p1", [3, 3], [2, 2], [1, 1, 1, 1], 0, dilations=[1, 2]),
    _maxpool("maxpool_dil3x1_k2x3_s1_asym_ceil", [2, 3], [1, 2], [0, 1, 1, 0], 1, dilations=[3, 1]),
]

AVGPOOL = [
    # count_include_pad x pads (pairwise with strides and ceil_mode)
    _avgpool("avgpool_cip0_p1_s1", [3, 3], [1, 1], [1, 1, 1, 1], 0),
    _avgpool("avgpool_cip1_p1_s1", [3, 3], [1, 1], [1, 1, 1, 1], 1),
    _avgpool("avgpool_cip0_p0_s2", [2, 2], [2, 2], [0, 0, 0, 0], 0),
    _avgpool("avgpool_cip1_p0_s2", [3, 3], [2, 2], [0, 0, 0, 0], 1),
    _avgpool("avgpool_cip0_asym_s2", [3, 3], [2, 2], [1, 0, 0, 2], 0),
    _avgpool("avgpool_cip1_asym_s2", [3, 3], [2, 2], [1, 0, 0, 2], 1),
    # ceil_mode x count_include_pad: the extra row/column past the pads is never counted
    _avgpool("avgpool_ceil_cip0_p1_s2", [3, 3], [2, 2], [1, 1, 1, 1], 0, ceil=1),
    _avgpool("avgpool_ceil_cip1_p1_s2", [3, 3], [2, 2], [1, 1, 1, 1], 1, ceil=1),
    _avgpool("avgpool_ceil_cip1_p0_s3", [2, 2], [3, 3], [0, 0, 0, 0], 1, ceil=1, out=[1, 13, 5, 4]),  # ROUND_UP
    _avgpool("avgpool_ceil_cip0_p0_s2", [3, 3], [2, 2], [0, 0, 0, 0], 0, ceil=1, shape=[2, 21, 15, 14]),
    # auto_pad resolved to pads, both count modes
    _avgpool("avgpool_same_upper_cip0", [3, 3], [2, 2], None, 0, auto_pad="SAME_UPPER"),
    _avgpool("avgpool_same_lower_cip1", [2, 2], [1, 1], None, 1, auto_pad="SAME_LOWER"),
    _avgpool("avgpool_valid", [3, 2], [1, 2], None, 0, auto_pad="VALID"),
    # the window is the whole map: the GlobalAveragePool kernel (fp32 accumulation)
    _avgpool("avgpool_whole_map", [7, 7], [1, 1], [0, 0, 0, 0], 0, shape=[2, 37, 7, 7]),
]


def _reduce_mean(name, shape, axes, keepdims, opset=17, **extra):
    if opset >= 18:
        return OpCase(name, single_op("ReduceMean", [("x", shape)], [("y", None)],
                                      {"axes": np.asarray(axes, np.int64)}, opset=opset, keepdims=keepdims, **extra))
    return OpCase(name, single_op("ReduceMean", [("x", shape)], [("y", None)], opset=opset, axes=axes,
                                  keepdims=keepdims, **extra))


REDUCE_MEAN = [
    _reduce_mean("reducemean_hw_keep", [2, 20, 7, 9], [2, 3], 1),
    _reduce_mean("reducemean_hw_drop_c20", [2, 20, 7, 9], [2, 3], 0),       # (N, C) through a relayout
    _reduce_mean("reducemean_hw_drop_c32", [1, 32, 5, 5], [-2, -1], 0),     # (N, C) as a view; negative axes
    _reduce_mean("reducemean_hw_opset18", [1, 24, 6, 6], [2, 3], 1, opset=18),  # axes as an input
    _reduce_mean("reducemean_last_2d_keep", [5, 77], [1], 1),
    _reduce_mean("reducemean_last_2d_drop", [5, 77], [-1], 0),
    _reduce_mean("reducemean_last_3d_keep", [2, 9, 40], [2], 1),
    _reduce_mean("reducemean_last_3d_drop_opset18", [2, 9, 40], [-1], 0, opset=18),
    _reduce_mean("reducemean_last_noop1_axes", [3, 50], [1], 1, opset=18, noop_with_empty_axes=1),
]


def _bn(name, shape, eps, seed):
    rng = np.random.default_rng(seed)
    c = shape[1]
    consts = {"scale": 1 + 0.2 * rng.standard_normal(c), "bias": 0.3 * rng.standard_normal(c),
              "mean": 0.5 * rng.standard_normal(c), "var": 0.5 + rng.random(c)}
    return OpCase(name, single_op("BatchNormalization", [("x", shape)], [("y", shape)],
                                  {k: v.astype(np.float32) for k, v in consts.items()}, epsilon=eps))


BATCHNORM = [
    _bn("batchnorm_4d_c19", [2, 19, 6, 7], 1e-5, 1),
    _bn("batchnorm_4d_c32_eps1e-3", [1, 32, 5, 3], 1e-3, 2),
    _bn("batchnorm_2d_c37", [4, 37], 1e-5, 3),
    _bn("batchnorm_2d_c16_eps0.1", [3, 16], 0.1, 4),
]

CASES = MAXPOOL + AVGPOOL + REDUCE_MEAN + BATCHNORM


def _two_node_model(nodes, x_shape, outputs, consts):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    graph = helper.make_graph(nodes, "two", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs],
                              [numpy_helper.from_array(v.astype(np.float32), k) for k, v in consts.items()])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    m = onnx.shape_inference.infer_shapes(m, strict_mode=True)
    onnx.checker.check_model(m)
    return m


def _conv_bn_unfoldable():
    """The Conv's output is also a graph output, so fold_batchnorm keeps the BN: a standalone BN after a Conv."""
    from onnx import helper
    rng = np.random.default_rng(5)
    consts = {"w": rng.standard_normal((21, 8, 3, 3)) / 5, "scale": 1 + 0.2 * rng.standard_normal(21),
              "bias": 0.3 * rng.standard_normal(21), "mean": 0.3 * rng.standard_normal(21), "var": 0.5 + rng.random(21)}
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "scale", "bias", "mean", "var"], ["y"])]
    return OpCase("conv_then_batchnorm_unfoldable", _two_node_model(nodes, [1, 8, 9, 9], ["c", "y"], consts),
                  tol=8e-3)


def _reduce_mean_then_gemm():
    """ShuffleNetV2's head: ReduceMean over H, W (keepdims 0), then the classifier GEMM on the (N, C) result."""
    from onnx import helper
    rng = np.random.default_rng(6)
    consts = {"fc_w": rng.standard_normal((10, 40)) / 6, "fc_b": rng.standard_normal(10)}
    nodes = [helper.make_node("ReduceMean", ["x"], ["m"], axes=[2, 3], keepdims=0),
             helper.make_node("Gemm", ["m", "fc_w", "fc_b"], ["y"], transB=1)]
    return OpCase("reducemean_hw_then_gemm", _two_node_model(nodes, [2, 40, 7, 7], ["y"], consts), tol=8e-3)


CASES += [_conv_bn_unfoldable(), _reduce_mean_then_gemm()]


def _bn_tail(name: str, shape: list[int], tails: list[tuple[str, dict]], launches: int) -> OpCase:
    """A standalone BatchNormalization (its input is the graph's, so no Conv absorbs it) followed by elementwise
    tails: ReLU and Clip(0, hi) join its kernel (DenseNet's BN+ReLU pairs), others stay their own launch."""
    from onnx import helper
    rng = np.random.default_rng(7)
    c = shape[1]
    consts = {"scale": 1 + 0.2 * rng.standard_normal(c), "bias": 0.3 * rng.standard_normal(c),
              "mean": 0.3 * rng.standard_normal(c), "var": 0.5 + rng.random(c)}
    nodes = [helper.make_node("BatchNormalization", ["x", "scale", "bias", "mean", "var"], ["t0"])]
    for i, (op, attrs) in enumerate(tails):
        extra = [k for k in attrs if k.startswith("in:")]
        consts.update({k[3:]: np.asarray(attrs[k]) for k in extra})
        nodes.append(helper.make_node(op, [f"t{i}"] + [k[3:] for k in extra], [f"t{i + 1}"],
                                      **{k: v for k, v in attrs.items() if k not in extra}))
    nodes[-1].output[0] = "y"
    return OpCase(name, _two_node_model(nodes, shape, ["y"], consts), launches=launches)


CASES += [
    _bn_tail("batchnorm_relu_4d_c19", [2, 19, 5, 6], [("Relu", {})], 1),
    _bn_tail("batchnorm_relu_4d_c64", [1, 64, 4, 4], [("Relu", {})], 1),
    _bn_tail("batchnorm_clip6_4d_c24", [1, 24, 3, 5], [("Clip", {"in:lo": np.float32(0), "in:hi": np.float32(6)})],
             1),
    _bn_tail("batchnorm_relu_2d_c32", [3, 32], [("Relu", {})], 1),
    _bn_tail("batchnorm_relu_2d_c37_gemm", [4, 37], [("Relu", {})], 1),
    # a tail the depthwise pass cannot apply (Clip with a negative lower bound) stays its own kernel
    _bn_tail("batchnorm_clip_neg_4d_c8", [1, 8, 3, 3], [("Clip", {"in:lo": np.float32(-1), "in:hi": np.float32(1)})],
             2),
    _bn_tail("batchnorm_relu_sigmoid_4d_c16", [1, 16, 3, 3], [("Relu", {}), ("Sigmoid", {})], 2),
]

CASES += [  # GlobalMaxPool: a MaxPool window over the whole map; past 2048 pixels rows of H*W on reduce_vector
    OpCase("globalmaxpool_c21_7x7", single_op("GlobalMaxPool", [("x", [2, 21, 7, 7])], [("y", None)])),
    OpCase("globalmaxpool_c32_13x11", single_op("GlobalMaxPool", [("x", [1, 32, 13, 11])], [("y", None)])),
    OpCase("globalmaxpool_c5_50x50_rows", single_op("GlobalMaxPool", [("x", [1, 5, 50, 50])], [("y", None)])),
]
