"""codegen/passes/mha.py: nn.MultiheadAttention's export (the packed Q/K/V projection and its head split, the
scales on Q and K^T) put in the form the flash-attention fusion takes; planned only (analyze), no build. The
numerics of the rewritten layers are the op cases mha_torch_* (tests/kiln/test_ops.py, against ONNX Runtime)."""
import sys

import pytest

onnx = pytest.importorskip("onnx")
from conftest import REPO, model_file  # noqa: E402

sys.path.insert(0, str(REPO / "tests" / "kiln"))
from op_cases.attention_mha import _mha_layer  # noqa: E402

from codegen.analyze import AnalysisSettings, analyze  # noqa: E402


def _analyze(tmp_path, batch=1, seq=17, d=32, heads=4, edit=None, **settings):
    model = _mha_layer("mha", batch, seq, d, heads, None).model
    if edit is not None:
        edit(model)
    path = tmp_path / "mha.onnx"
    onnx.save(model, path)
    return analyze(path, settings=AnalysisSettings(**settings))


def test_packed_heads_become_one_transpose_and_the_attention_one_kernel(tmp_path):
    r = _analyze(tmp_path)
    f = r["fusion"]
    assert (f["launches_unfused"], f["launches_fused"]) == (15, 7)
    assert [x["pattern"] for x in f["fused"]] == ["PackedQKV", "Attention"]
    packed = f["fused"][0]
    assert packed["into"] == "/matmul42" and len(packed["node"].split(",")) == 19  # 17 moves, 2 scales
    assert "one Transpose of add8 (seq_first) to [3, 1, 4, 17, 8]" in packed["where"]
    assert "scale 0.353553 after Q.K^T" in packed["where"]  # (8 ** -0.25) ** 2
    # the out projection's residual add (through its Reshape and a unit-axis Transpose) is audited, not taken
    assert [(a["pattern"], a["node"], a["into"], a["reason"]) for a in f["audit"]] == [
        ("Gemm+Add", "/add54", "/gemm50", "epilogue_unsupported")]


def test_batch_two_takes_the_same_rewrite(tmp_path):
    f = _analyze(tmp_path, batch=2, seq=16, d=64, heads=2)["fusion"]
    assert (f["launches_unfused"], f["launches_fused"]) == (17, 9)
    assert "[3, 2, 2, 16, 32]" in f["fused"][0]["where"]


def test_fusion_off_leaves_the_export_as_it_is_and_audits(tmp_path):
    f = _analyze(tmp_path, fusion=False)["fusion"]
    assert f["launches_fused"] == f["launches_unfused"] == 15
    # the scales stay on Q and K^T, so no attention chain (scale after Q.K^T) is there to audit besides it
    assert [(a["pattern"], a["reason"]) for a in f["audit"]] == [("PackedQKV", "fusion_off"),
                                                                 ("Gemm+Add", "fusion_off")]


def test_without_flash_attention_the_head_split_is_still_one_transpose(tmp_path):
    f = _analyze(tmp_path, flash_attention=False)["fusion"]
    # in_proj GEMM, the one transpose, K^T, Q.K^T, the one scale, Softmax, .V, ... : 15 - 4 transposes - 1 Mul
    assert [x["pattern"] for x in f["fused"]] == ["PackedQKV"]
    assert [(a["pattern"], a["reason"]) for a in f["audit"]] == [("Attention", "option_off"),
                                                                 ("Gemm+Add", "epilogue_unsupported")]
    assert f["launches_fused"] == 11


def test_an_intermediate_read_elsewhere_is_audited(tmp_path):
    def expose(model):  # the head split's Squeeze result becomes a second graph output
        v = next(n for n in model.graph.node if n.op_type == "Squeeze").output[0]
        model.graph.output.append(onnx.helper.make_tensor_value_info(v, onnx.TensorProto.FLOAT, [3, 17, 1, 32]))
    f = _analyze(tmp_path, edit=expose)["fusion"]
    assert [(a["pattern"], a["reason"]) for a in f["audit"]][:1] == [("PackedQKV", "multiple_consumers")]
    assert "PackedQKV" not in [x["pattern"] for x in f["fused"]]


def test_gemm_epilogues_a_transformer_offers_are_audited(tmp_path):
    """The small ViT op case (MatMul + Add bias on [B, S, D], Erf GELU, residual adds): each residual add of a GEMM
    and the GELU of one are in the audit with their reasons; the position embedding's constant add is not."""
    from op_cases.architectures import CASES
    path = tmp_path / "vit.onnx"
    onnx.save(next(c for c in CASES if c.name == "arch_vit").model, path)
    f = analyze(path, settings=AnalysisSettings())["fusion"]
    assert [(a["pattern"], a["node"], a["into"], a["reason"]) for a in f["audit"]] == [
        ("MatMul+Add", "/add47", "/matmul45", "epilogue_unsupported"),
        ("MatMul+Gelu", "/erf57", "/matmul53", "fixpipe_no_gelu"),
        ("MatMul+Add", "/add67", "/matmul65", "epilogue_unsupported")]
    assert f["launches_fused"] == 20


def test_the_corpus_torch_bert_layer_takes_the_flash_attention_kernel():
    """shared/models/bert_layer_torch.onnx (nn.TransformerEncoderLayer exported by torch.onnx.export): its
    attention fuses (20 -> 12 launches); its out projection's and second GEMM's residual adds and its GELU are
    audited."""
    r = analyze(model_file("bert_layer_torch.onnx"), settings=AnalysisSettings())
    f = r["fusion"]
    assert (f["launches_unfused"], f["launches_fused"]) == (20, 12)
    assert [x["pattern"] for x in f["fused"]] == ["PackedQKV", "Attention"]
    assert [(a["pattern"], a["reason"]) for a in f["audit"]] == [
        ("Gemm+Add", "epilogue_unsupported"), ("MatMul+Gelu", "fixpipe_no_gelu"),
        ("MatMul+Add", "epilogue_unsupported")]
