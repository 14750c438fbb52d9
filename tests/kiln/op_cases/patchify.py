"""Patch-embedding convolutions (kernel == stride, 8 or more a side: ViT's 16x16/16), which the frontend rewrites
into a space-to-depth of the input and a 1x1 Conv (codegen/frontend/onnx_patchify.py); the isolated check runs each
kernel against ONNX Runtime on the same rewritten graph (onnx_import.unrolled_reference)."""
import numpy as np
from onnx import helper

from . import graph_case

RNG = np.random.default_rng(1907)


def _patch(name: str, x: list[int], cout: int, k: tuple[int, int], bias: bool):
    w = (RNG.standard_normal((cout, x[1], *k)) / np.sqrt(x[1] * k[0] * k[1])).astype(np.float32)
    init = {"w": w} | ({"b": 0.1 * RNG.standard_normal(cout).astype(np.float32)} if bias else {})
    node = helper.make_node("Conv", ["x", "w"] + (["b"] if bias else []), ["y"], kernel_shape=list(k),
                            strides=list(k))
    return graph_case(name, [node], x, [x[0], cout, x[2] // k[0], x[3] // k[1]], init, 4e-3, 2)


CASES = [_patch("patchify_vit_16x16", [1, 3, 64, 64], 64, (16, 16), True),
         _patch("patchify_8x16_no_bias", [1, 3, 32, 64], 32, (8, 16), False)]
