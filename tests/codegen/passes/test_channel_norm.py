"""LayerNormalization over channels after a Transpose to NHWC (ConvNeXt, codegen/passes/channel_norm.py): fused into
one channel_layernorm kernel reading NC1HWC0 when the rules and the cost model admit it (both predicted cycles in the
[OPT] line); otherwise audited with its reason, the Transpose a copy and the LayerNorm its own kernel."""
import numpy as np
import pytest

pytest.importorskip("onnx")

from test_eltwise_programs import _model, _plan

from codegen.ir.channel_norm_spec import ChannelNormSpec
from codegen.ir.optlog import OptLog
from codegen.passes.channel_norm import fuse_channel_layernorm
from codegen.passes.fusion import FusionLimits

NODES = [("Transpose", ["x"], ["t"], {"perm": [0, 2, 3, 1]}),
         ("LayerNormalization", ["t", "s", "b"], ["y"], {"axis": -1, "epsilon": 1e-6})]
INIT = {"s": np.ones(20), "b": np.zeros(20)}


def _pair(tmp_path, hw, nodes=NODES, outputs=None, **options):
    io = ([("x", [1, 20, hw, hw])], outputs or [("y", [1, hw, hw, 20])])
    stages, log = _plan(_model(tmp_path, nodes, *io, INIT), **options)
    return stages, log, [a for a in stages.fusion.audit if a["pattern"] == "Transpose+LayerNormalization"]


def test_layernorm_after_a_transpose_to_nhwc_is_one_kernel(tmp_path):
    stages, log, audit = _pair(tmp_path, 5)
    assert not audit
    (spec,) = stages.specs.values()
    assert spec == ChannelNormSpec(1, 20, 5, 5, float(np.float32(1e-6)))
    assert [(f["node"], f["into"]) for f in stages.fusion.fused] == [("n0", "n1")]
    (line,) = [x for x in log.lines if "m:n1 Fused(Transpose+LayerNormalization)" in x]
    assert "reason=channel_layernorm" in line and "2_C0_blocks_400_values_apart" in line
    fused, unfused = (int(line.split(f"{k}=")[1].split()[0]) for k in ("fused_cycles", "unfused_cycles"))
    assert 0 < fused < unfused


@pytest.mark.parametrize(("hw", "options", "reason"), [(5, {"ENABLE_FUSION": "OFF"}, "fusion_off"),
                                                       (5, {"MAX_FUSION_DEPTH": "1"}, "depth_limit"), (1, {}, None)])
def test_pairs_not_fused_are_audited(tmp_path, hw, options, reason):
    stages, log, audit = _pair(tmp_path, hw, **options)
    if reason is None:  # one pixel: the Transpose is a view, no opportunity
        assert not audit and [s.kind for s in stages.specs.values()] == ["layernorm"]
        return
    assert [(a["node"], a["into"], a["reason"]) for a in audit] == [("n1", "n0", reason)]
    assert f"{2 * 20 * hw * hw} bytes" in audit[0]["detail"]
    assert any(f"m:n1 Transpose+LayerNormalization:rejected reason={reason}" in line for line in log.lines)
    assert [s.kind for s in stages.specs.values()] in (["copy", "layernorm"], ["transpose", "layernorm"])


def test_a_transpose_read_elsewhere_stays(tmp_path):
    nodes = [*NODES, ("Relu", ["t"], ["r"], {})]
    _, _, audit = _pair(tmp_path, 4, nodes, [("y", [1, 4, 4, 20]), ("r", [1, 4, 4, 20])])
    assert [a["reason"] for a in audit] == ["multiple_consumers"]


def _fuse(tmp_path, nodes, inputs, outputs, init, price=None):
    from codegen.frontend.onnx_import import load_onnx
    from codegen.ir.profiles import get_profile
    g = load_onnx(_model(tmp_path, nodes, inputs, outputs, init))
    log, audit, fused = OptLog(), [], []
    fuse_channel_layernorm(g, "m", FusionLimits(True, 4, profile=get_profile("ascend910b")), log, audit, fused, price)
    return g, log, audit, fused


def test_a_runtime_scale_stays(tmp_path):
    """The kernel bakes scale and bias: a runtime scale (lowering refuses it either way) is not taken."""
    nodes = [NODES[0], ("LayerNormalization", ["t", "s2"], ["y"], {"axis": -1})]
    _, _, audit, _ = _fuse(tmp_path, nodes, [("x", [1, 20, 4, 4]), ("s2", [20])], [("y", [1, 4, 4, 20])], {})
    assert [a["reason"] for a in audit] == ["channel_layernorm_unsupported"] and "constants" in audit[0]["detail"]


def test_the_cost_model_decides(tmp_path):
    """A pricing that says the fused kernel is slower keeps the two kernels, both cycle counts in the line."""
    g, log, audit, fused = _fuse(tmp_path, NODES, [("x", [1, 20, 4, 4])], [("y", [1, 4, 4, 20])], INIT,
                                 lambda spec, profile: (900.0, 800.0))
    assert not fused and [a["reason"] for a in audit] == ["channel_layernorm_slower"]
    assert "fused_cycles=900 unfused_cycles=800" in log.lines[0]
    assert [n.op_type for n in g.nodes] == ["Transpose", "LayerNormalization"]
