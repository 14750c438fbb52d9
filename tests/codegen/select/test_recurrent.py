"""Looped or unrolled (codegen/select/recurrent.py): both forms priced, one [OPT] line per node, the frontend builds
the form the cost model predicts faster."""
import pytest

from codegen.ir.optlog import OptLog
from codegen.ir.profiles import get_profile
from codegen.ir.recurrent_spec import GruLoopSpec, LstmLoopSpec
from codegen.select.recurrent import choose, chooser, unrolled_cycles


def _fields(line: str) -> dict[str, str]:
    return dict(kv.split("=", 1) for kv in line.split() if "=" in kv)


def test_the_crnn_layer_is_launch_bound_unrolled_and_one_launch_looped():
    """The CRNN benchmark's layer (32 steps, hidden 128, both directions): the unrolled estimate pays ~254 launches,
    close to the 3.0 M cycles per layer the unrolled build predicted (benchmarks/RESULTS.md); the loop is one."""
    spec, profile, log = LstmLoopSpec(32, 1, 128, 2, False, False, False), get_profile("ascend910b"), OptLog()
    assert choose("crnn:blstm0", spec, profile, log)
    (line,) = log.lines
    fields = _fields(line)
    assert fields["recurrence"] == "looped" and fields["unrolled_launches"] == "254" and "cost_model" in line
    assert 2.5e6 < unrolled_cycles(spec, profile)[0] < 3.5e6
    assert float(fields["speedup"]) > 10


@pytest.mark.parametrize("lbr, launches", [(True, 2 * (31 + 3 * 32)), (False, 2 * (3 * 31 + 3 * 32))])
def test_a_gru_without_linear_before_reset_unrolls_into_two_gemms_a_step(lbr, launches):
    """linear_before_reset=0: (r * h) R_h^T needs r first, so the unrolled step is a GEMM, a Mul, a second GEMM."""
    spec, log = GruLoopSpec(32, 1, 128, 2, False, False, lbr), OptLog()
    assert chooser("m", get_profile("ascend910b"), log)("gru", "GRULoop", {
        "seq": 32, "batch": 1, "hidden": 128, "dirs": 2, "reverse": False, "h0": False, "lbr": lbr})
    fields = _fields(log.lines[0])
    assert fields["unrolled_launches"] == str(launches) and float(fields["speedup"]) > 5
    assert unrolled_cycles(spec, get_profile("ascend910b"))[1] == launches


def test_the_unrolled_form_when_it_is_predicted_faster(monkeypatch):
    """The choice is the comparison: with the loop priced above the estimate, the node is unrolled and logged so."""
    import codegen.select.recurrent as rec
    real = rec._cycles
    monkeypatch.setattr(rec, "_cycles", lambda s, p: 1e12 if isinstance(s, GruLoopSpec) else real(s, p))
    log = OptLog()
    assert not choose("m:gru", GruLoopSpec(4, 2, 16, 1, False, False, True), get_profile("ascend910b"), log)
    assert _fields(log.lines[0])["recurrence"] == "unrolled"
