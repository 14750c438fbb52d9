"""DepthToSpace (DCR, CRD) and SpaceToDepth on run-time data, rewritten by the frontend into Reshape -> Transpose
-> Reshape (codegen/frontend/onnx_depth_space.py): each mode, block sizes 2 and 3, channel counts that are and
are not whole C0 blocks, and the sub-pixel upsampling of a super-resolution net (Conv -> DepthToSpace)."""
import numpy as np

from . import OpCase, single_op

RNG = np.random.default_rng(29)


def _subpixel():
    """ESPCN's last layers: a 3x3 Conv to C * r^2 channels, then DepthToSpace(r) (CRD as torch's PixelShuffle)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    w = (RNG.standard_normal((16, 8, 3, 3)) / np.sqrt(72)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="sp.conv", pads=[1, 1, 1, 1]),
             helper.make_node("DepthToSpace", ["c"], ["y"], name="sp.d2s", blocksize=2, mode="CRD")]
    graph = helper.make_graph(nodes, "subpixel", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 6, 7])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 12, 14])],
                              [numpy_helper.from_array(w, "w")])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


CASES = [
    OpCase("d2s_dcr_b2_c32", single_op("DepthToSpace", [("x", [1, 32, 3, 5])], [("y", [1, 8, 6, 10])], blocksize=2)),
    OpCase("d2s_crd_b2_c20_n2", single_op("DepthToSpace", [("x", [2, 20, 4, 3])], [("y", [2, 5, 8, 6])], blocksize=2,
                                          mode="CRD")),
    OpCase("d2s_dcr_b3_c18", single_op("DepthToSpace", [("x", [1, 18, 2, 3])], [("y", [1, 2, 6, 9])], blocksize=3,
                                       mode="DCR")),
    OpCase("s2d_b2_c3", single_op("SpaceToDepth", [("x", [1, 3, 8, 6])], [("y", [1, 12, 4, 3])], blocksize=2)),
    OpCase("s2d_b3_c16", single_op("SpaceToDepth", [("x", [1, 16, 6, 9])], [("y", [1, 144, 2, 3])], blocksize=3)),
    OpCase("subpixel_conv_d2s_crd", _subpixel()),
]
