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

