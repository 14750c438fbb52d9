"""LayerNormalization over channels after a Transpose to NHWC (ConvNeXt): audited with its reason
(codegen/passes/channel_norm.py); the Transpose stays a relayout copy and the LayerNorm its own kernel."""
import numpy as np
import pytest

pytest.importorskip("onnx")

from test_eltwise_programs import _model, _plan

NODES = [("Transpose", ["x"], ["t"], {"perm": [0, 2, 3, 1]}),
         ("LayerNormalization", ["t", "s", "b"], ["y"], {"axis": -1, "epsilon": 1e-6})]
INIT = {"s": np.ones(20), "b": np.zeros(20)}


@pytest.mark.parametrize(("hw", "options", "reason"), [(5, {}, "channel_layernorm_unsupported"),
                                                       (5, {"ENABLE_FUSION": "OFF"}, "fusion_off"), (1, {}, None)])
def test_layernorm_after_a_transpose_to_nhwc_is_audited(tmp_path, hw, options, reason):
    stages, log = _plan(_model(tmp_path, NODES, [("x", [1, 20, hw, hw])], [("y", [1, hw, hw, 20])], INIT), **options)
    audit = [a for a in stages.fusion.audit if a["pattern"] == "Transpose+LayerNormalization"]
    if reason is None:  # one pixel: the Transpose is a view, no opportunity
        assert not audit
        return
    assert [(a["node"], a["into"], a["reason"]) for a in audit] == [("n1", "n0", reason)]
    assert "2 C0 blocks 400 values apart" in audit[0]["detail"] and f"{2 * 20 * hw * hw} bytes" in audit[0]["detail"]
    assert any(f"m:n1 Transpose+LayerNormalization:rejected reason={reason}" in line for line in log.lines)
    assert [s.kind for s in stages.specs.values()] in (["copy", "layernorm"], ["transpose", "layernorm"])
