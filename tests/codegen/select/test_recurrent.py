"""The looped LSTM against the unrolled form (codegen/select/recurrent.py): both priced, one [OPT] line per node."""
from codegen.ir.optlog import OptLog
from codegen.ir.profiles import get_profile
from codegen.ir.recurrent_spec import LstmLoopSpec
from codegen.select.recurrent import log_choice, unrolled_cycles


def test_the_crnn_layer_is_launch_bound_unrolled_and_one_launch_looped():
    """The CRNN benchmark's layer (32 steps, hidden 128, both directions): the unrolled estimate pays ~254 launches,
    close to the 3.0 M cycles per layer the unrolled build predicted (benchmarks/RESULTS.md); the loop is one."""
    spec, profile, log = LstmLoopSpec(32, 1, 128, 2, False, False, False), get_profile("ascend910b"), OptLog()
    log_choice("crnn", "blstm0/loop", spec, profile, log)
    (line,) = log.lines
    fields = dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
    assert fields["recurrence"] == "looped" and fields["unrolled_launches"] == "254"
    assert 2.5e6 < unrolled_cycles(spec, profile) < 3.5e6
    assert float(fields["speedup"]) > 10
