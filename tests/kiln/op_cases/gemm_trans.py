"""Gemm with transA=1 against ONNX Runtime (A [K, M] moved to [M, K] by a copy_mte kernel, then the Cube GEMM),
crossed with transB and a bias."""
import numpy as np

from . import OpCase, single_op


def _gemm_trans_a(name, k, m, n, trans_b, bias, seed):
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((n, k) if trans_b else (k, n)) / np.sqrt(k)).astype(np.float32)
    consts = {"w": w} | ({"c": rng.standard_normal(n).astype(np.float32)} if bias else {})
    return OpCase(name, single_op("Gemm", [("x", [k, m])], [("y", None)], consts, transA=1, transB=trans_b),
                  tol=8e-3)


CASES = [
    _gemm_trans_a("gemm_transa_k40_m24_n33", 40, 24, 33, 0, False, 1),
    _gemm_trans_a("gemm_transa_transb_bias_k64_m7_n16", 64, 7, 16, 1, True, 2),
]



def _matmul_1d(name, a_shape, b_shape, seed):
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal(b_shape) / np.sqrt(b_shape[0])).astype(np.float32)
    return OpCase(name, single_op("MatMul", [("x", a_shape)], [("y", None)], {"w": w}), tol=8e-3)


CASES += [  # MatMul with a 1-D operand (numpy's promotion: A [K] one row, a constant B [K] one column)
    _matmul_1d("matmul_1d_a_k48_n20", [48], [48, 20], 3),
    _matmul_1d("matmul_1d_b_m6_k40", [6, 40], [40], 4),
    _matmul_1d("matmul_1d_b_3d_a", [2, 5, 40], [40], 5),
]
