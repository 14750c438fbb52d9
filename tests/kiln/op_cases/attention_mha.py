"""torch.nn.MultiheadAttention (batch_first=True, as torchvision's ViT and nn.TransformerEncoderLayer use it)
spelled node by node as torch.onnx.export writes it at opset 17 (torchvision vit_b_16's encoder layer): the
input moved to [S, B, D], one packed Q/K/V projection (MatMul + Add of in_proj_bias), the head split Reshape
[S, B, 3, D], Unsqueeze, Transpose (3, 1, 2, 0, 4), Squeeze, Gather 0/1/2, per head Reshape [S, B*H, hd],
Transpose (1, 0, 2), Reshape [B, H, S, hd], K^T by Transpose (0, 1, 3, 2), Q and K^T each scaled by
sqrt(1/sqrt(hd)), MatMul, Softmax, MatMul, Transpose (2, 0, 1, 3), Reshape [S*B, D], the out projection as Gemm
(transB=1), back to [B, S, D], the residual Add. The fusion (codegen/passes/mha.py) makes the head split one
Transpose and the attention one flash-attention kernel; the launch counts hold that."""
from __future__ import annotations

import numpy as np

from .architectures import RNG, Net


def _mha_layer(name: str, batch: int, seq: int, d: int, heads: int, launches: int) -> object:
    n, hd = Net(name), d // heads
    h = n.layer_norm("x", d)
    t = n.node("Transpose", [h], perm=[1, 0, 2])  # [S, B, D]
    w_in = n.const(RNG.standard_normal((d, 3 * d)) / np.sqrt(d))
    proj = n.node("Add", [n.const(0.1 * RNG.standard_normal(3 * d)), n.node("MatMul", [t, w_in])])
    p = n.node("Reshape", [proj, n.const([seq, batch, 3, d], np.int64)])
    p = n.node("Unsqueeze", [p, n.const([0], np.int64)])
    p = n.node("Squeeze", [n.node("Transpose", [p], perm=[3, 1, 2, 0, 4]), n.const([3], np.int64)])
    q, k, v = (n.node("Reshape", [
        n.node("Transpose", [n.node("Reshape", [n.node("Gather", [p, n.const(i, np.int64)], axis=0),
                                                n.const([seq, batch * heads, hd], np.int64)])], perm=[1, 0, 2]),
        n.const([batch, heads, seq, hd], np.int64)]) for i in range(3))
    root = float(np.sqrt(1.0 / np.sqrt(hd)))
    kt = n.node("Mul", [n.node("Transpose", [k], perm=[0, 1, 3, 2]), n.const(root)])
    att = n.node("Softmax", [n.node("MatMul", [n.node("Mul", [q, n.const(root)]), kt])], axis=-1)
    o = n.node("Transpose", [n.node("MatMul", [att, v])], perm=[2, 0, 1, 3])
    o = n.node("Reshape", [o, n.const([seq * batch, d], np.int64)])
    o = n.node("Gemm", [o, n.const(RNG.standard_normal((d, d)) / np.sqrt(d)), n.const(0.1 * RNG.standard_normal(d))],
               alpha=1.0, beta=1.0, transB=1)
    o = n.node("Transpose", [n.node("Reshape", [o, n.const([seq, batch, d], np.int64)])], perm=[1, 0, 2])
    n.node("Add", ["x", o])
    return n.case([batch, seq, d], [batch, seq, d], 4e-3, launches)


CASES = [_mha_layer("mha_torch_b1_s17_d32_h4", 1, 17, 32, 4, 7),
         _mha_layer("mha_torch_b2_s16_d64_h2", 2, 16, 64, 2, 9)]
