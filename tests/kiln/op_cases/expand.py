"""Expand and Tile on run-time data (a broadcast of size-1 axes: an elementwise-program copy of the operand in
its broadcast form; codegen/passes/eltwise_programs.py): per channel, a row, one value, the same shape, a rank
increase, Tile of size-1 axes, and an Expand feeding an Add in the same kernel."""
import numpy as np

from . import OpCase, single_op


def _expand(name, x, shape, out, launches=1):
    return OpCase(name, single_op("Expand", [("x", x)], [("y", out)], {"s": np.array(shape, np.int64)}),
                  launches=launches)


def _expand_add():
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    nodes = [helper.make_node("Expand", ["g", "s"], ["e"], name="ea.expand"),
             helper.make_node("Add", ["x", "e"], ["y"], name="ea.add")]
    graph = helper.make_graph(nodes, "ea", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 24, 3, 4]),
                                            helper.make_tensor_value_info("g", TensorProto.FLOAT, [1, 24, 1, 1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 24, 3, 4])],
                              [numpy_helper.from_array(np.array([2, 24, 3, 4], np.int64), "s")])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


CASES = [
    _expand("expand_channel_c20", [1, 20, 1, 1], [2, 20, 3, 4], [2, 20, 3, 4]),
    _expand("expand_row_2d", [1, 40], [6, 40], [6, 40]),
    _expand("expand_rank_up_row", [40], [2, 3, 40], [2, 3, 40]),
    _expand("expand_scalar_3d", [1], [3, 5, 7], [3, 5, 7]),
    _expand("expand_same_shape", [4, 8], [4, 8], [4, 8]),
    _expand("expand_ones_keep_channels", [1, 24, 1, 1], [1, 1, 5, 5], [1, 24, 5, 5]),
    OpCase("tile_broadcast_c20", single_op("Tile", [("x", [1, 20, 1, 1])], [("y", [2, 20, 3, 4])],
                                           {"r": np.array([2, 1, 3, 4], np.int64)}), launches=1),
    OpCase("expand_then_add_one_kernel", _expand_add(), launches=1),
]
