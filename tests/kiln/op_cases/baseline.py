"""Ops kiln lowered before the op catalogue grew: they keep the harness honest (a case that must pass today)."""
import numpy as np

from . import OpCase, single_op

CASES = [
    OpCase("relu_4d", single_op("Relu", [("x", [1, 20, 7, 9])], [("y", [1, 20, 7, 9])])),
    OpCase("add_same_shape", single_op("Add", [("a", [2, 33, 5, 5]), ("b", [2, 33, 5, 5])], [("y", [2, 33, 5, 5])])),
    OpCase("maxpool_3x3_s2", single_op("MaxPool", [("x", [1, 24, 13, 13])], [("y", None)], kernel_shape=[3, 3],
                                       strides=[2, 2], pads=[1, 1, 1, 1])),
    OpCase("softmax_last", single_op("Softmax", [("x", [4, 77])], [("y", [4, 77])], axis=-1)),
    OpCase("conv_3x3", single_op("Conv", [("x", [1, 8, 10, 10])], [("y", None)],
                                 {"w": np.random.default_rng(1).standard_normal((12, 8, 3, 3)).astype(np.float32)},
                                 pads=[1, 1, 1, 1]), tol=8e-3),
]
