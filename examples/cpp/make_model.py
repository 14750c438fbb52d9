"""Writes tiny_cnn.onnx beside this file: a small image classifier (Conv+BN+ReLU, a strided 3x3 conv, global
average pooling, a linear head) with seeded random weights, in the shapes a torchvision export has."""
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def tiny_cnn(seed: int = 0) -> onnx.ModelProto:
    rng = np.random.default_rng(seed)
    w = lambda name, *shape: numpy_helper.from_array((rng.standard_normal(shape) * 0.2).astype(np.float32), name)  # noqa: E731
    inits = [w("c1.w", 16, 3, 3, 3), w("c1.b", 16), w("bn.scale", 16), w("bn.bias", 16), w("bn.mean", 16),
             numpy_helper.from_array(rng.uniform(0.5, 1.5, 16).astype(np.float32), "bn.var"),
             w("c2.w", 32, 16, 3, 3), w("c2.b", 32), w("fc.w", 10, 32), w("fc.b", 10)]
    nodes = [helper.make_node("Conv", ["input", "c1.w", "c1.b"], ["c1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c1", "bn.scale", "bn.bias", "bn.mean", "bn.var"], ["bn"]),
             helper.make_node("Relu", ["bn"], ["r1"]),
             helper.make_node("Conv", ["r1", "c2.w", "c2.b"], ["c2"], kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                              strides=[2, 2]),
             helper.make_node("Relu", ["c2"], ["r2"]),
             helper.make_node("GlobalAveragePool", ["r2"], ["pool"]),
             helper.make_node("Flatten", ["pool"], ["flat"]),
             helper.make_node("Gemm", ["flat", "fc.w", "fc.b"], ["logits"], transB=1)]
    graph = helper.make_graph(nodes, "tiny_cnn", [helper.make_tensor_value_info("input", TensorProto.FLOAT,
                                                                                [1, 3, 32, 32])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


if __name__ == "__main__":
    onnx.save(tiny_cnn(), Path(__file__).resolve().parent / "tiny_cnn.onnx")
