"""Gather with run-time indices (gather_mte): an int64 (or int32) graph input of any shape, 0-d included, into
constant data (an embedding table) or run-time data, on the first, a middle and the last axis; negative indices
(counted from the end of the axis) and repeats in every case; constant indices of several values on run-time
data."""
from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from . import OpCase


def _gather(name: str, data: list[int], indices: list[int], axis: int, *, table: bool = False,
            constant: np.ndarray | None = None, itype: int = TensorProto.INT64) -> OpCase:
    """Gather(data, indices): data a graph input, or (table) a constant; indices a graph input of `itype`, or the
    constant array given."""
    rng = np.random.default_rng(len(name))
    inputs, init = [], []
    if table:
        init.append(numpy_helper.from_array(rng.standard_normal(data).astype(np.float32), "data"))
    else:
        inputs.append(helper.make_tensor_value_info("data", TensorProto.FLOAT, data))
    if constant is not None:
        init.append(numpy_helper.from_array(constant.astype(np.int64), "indices"))
    else:
        inputs.append(helper.make_tensor_value_info("indices", itype, indices))
    node = helper.make_node("Gather", ["data", "indices"], ["y"], axis=axis)
    out = data[:axis % len(data)] + list(np.shape(constant) if constant is not None else indices) + \
        data[axis % len(data) + 1:]
    graph = helper.make_graph([node], name, inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, out)],
                              init)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    size = data[axis % len(data)]
    return OpCase(name, model, tol=1e-3, launches=1,
                  inputs={"indices": lambda r, shape: r.integers(-size, size, shape)})


CASES = [
    _gather("gather_embedding_v50_d24_i2x7", [50, 24], [2, 7], 0, table=True),
    _gather("gather_embedding_int32_v300_d40_i5", [300, 40], [5], 0, table=True, itype=TensorProto.INT32),
    _gather("gather_runtime_axis1_3x10x5_i4", [3, 10, 5], [4], 1),
    _gather("gather_runtime_last_axis_4x6_i3x2", [4, 6], [3, 2], -1),
    _gather("gather_runtime_scalar_index_3x10x4", [3, 10, 4], [], 1),
    _gather("gather_const_indices_runtime_data_6x8", [6, 8], [], 0, constant=np.array([[5, -1], [0, 5]])),
    _gather("gather_table_long_rows_v20_d3000_i3", [20, 3000], [3], 0, table=True),
]
