"""The cost model's timing rules for instruction costs (issue 22 points 2 and 3), on SimCore alone (no build): a
pipe's head is its latency, paid once by a burst of back-to-back instructions and seen by whatever waits on the
pipe; the per-instruction bodies; Load3D's rate by convolution; Fixpipe by output type; launch overhead. The
emulator applies the same rules (kernels/kiln/core.hpp Core::issue); tests/codegen/cost/test_costmodel.py holds
the two equal on every baked kernel."""
import pytest

from codegen.cost.model import CrossFlagSim, SimCore, launch, launch_group
from codegen.ir.profiles import PROFILES

P = PROFILES["ascend910b"]
MMAD_BODY = P.mmad_issue + 2  # m32 k16 n16: two fractals


def test_one_instruction_pays_head_and_body():
    core = SimCore(P)
    core.mmad(32, 16, 16)
    assert core.end_cycle() == pytest.approx(P.mmad_head + MMAD_BODY)
    assert core.count["M"].busy == pytest.approx(MMAD_BODY)  # busy: the pipe's occupancy, not its latency


def test_a_burst_pays_one_head():
    core = SimCore(P)
    for _ in range(100):
        core.mmad(32, 16, 16)
    assert core.end_cycle() == pytest.approx(P.mmad_head + 100 * MMAD_BODY)
    assert core.count["M"].instrs == 100 and core.count["M"].busy == pytest.approx(100 * MMAD_BODY)


def test_a_flag_rises_when_the_result_is_ready_and_a_stalled_pipe_starts_a_new_burst():
    core = SimCore(P)
    core.copy_gm(1, 512, 2, "L1", src=0)             # 1 KiB, an L2 miss (no L2 plan)
    mte2_done = P.mte2_head + P.gm_to_l1_copy + 1024 / P.gm_to_l1_bpc
    core.set_flag("MTE2", "MTE1", 0)
    core.wait_flag("MTE2", "MTE1", 0)
    core.load2d(2, "L0A")
    body = P.mte1_issue + 1024 / P.l1_to_l0a_bpc
    assert core.done_at["MTE1"] == pytest.approx(mte2_done + body + P.mte1_head)
    core.load2d(2, "L0A")                            # back to back: no second head
    assert core.done_at["MTE1"] == pytest.approx(mte2_done + 2 * body + P.mte1_head)


def test_a_wait_on_a_flag_already_set_does_not_break_the_burst():
    core = SimCore(P)
    core.set_flag("MTE1", "M", 0)                    # nothing issued on MTE1: the flag is up at 0
    core.mmad(32, 16, 16)
    core.wait_flag("MTE1", "M", 0)
    core.mmad(32, 16, 16)
    assert core.end_cycle() == pytest.approx(P.mmad_head + 2 * MMAD_BODY)


def test_barrier_drains_every_pipe():
    core = SimCore(P)
    core.mmad(32, 16, 16)
    core.barrier_all()
    core.mmad(32, 16, 16)                            # waits for the first result: two heads
    assert core.end_cycle() == pytest.approx(2 * (P.mmad_head + MMAD_BODY))


def test_vector_body_has_a_floor_and_scalar_forms_cost_one_cycle_per_repeat():
    core = SimCore(P)
    core.vec("Adds", False, 1)
    assert core.count["V"].busy == pytest.approx(P.vec_min_cycles)
    core.vec("Adds", True, 8)
    core.vec("ReduceMax", True, 8)
    assert core.count["V"].busy == pytest.approx(P.vec_min_cycles + 8 + 8 * 7)


@pytest.mark.parametrize("kh, stride_w, rate", [(1, 1, 256), (3, 1, 102), (7, 1, 56), (1, 2, 128), (3, 2, 73),
                                                (7, 2, 46), (3, 4, 46), (3, 8, 32), (3, 3, 32)])
def test_load3d_rate_follows_the_convolution(kh, stride_w, rate):
    assert P.load3d_rate(kh, stride_w) == rate
    core = SimCore(P)
    core.load3d(2, 3, kh, stride_w)
    assert core.count["MTE1"].busy == pytest.approx(P.mte1_issue + 2 * 3 * 512 / rate)


def test_fixpipe_fp32_output_moves_half_the_elements_per_cycle():
    fp16, fp32 = SimCore(P), SimCore(P)
    fp16.fixpipe(64 * 1024, 2)
    fp32.fixpipe(64 * 1024, 4)
    assert fp16.count["FIX"].busy == pytest.approx(1024)
    assert fp32.count["FIX"].busy == pytest.approx(2048)
    small = SimCore(P)
    small.fixpipe(256, 2)                            # a small write to GM costs its latency floor
    assert small.count["FIX"].busy == pytest.approx(P.fix_gm_min_cycles)


def test_launch_overhead_and_cross_core_latency():
    def body(core, b):
        core.mmad(16, 16, 16)
    one = launch(P, "cube", 1, body)
    assert one.cycles == pytest.approx(P.launch_cycles + P.mmad_head + P.mmad_issue + 1)
    both = launch_group(P, 1, lambda aic, v0, v1, b: aic.mmad(16, 16, 16))
    assert both.cycles == pytest.approx(one.cycles + P.mixed_launch_cycles)
    coupled = PROFILES["ascend310p"]
    assert launch_group(coupled, 1, lambda aic, v0, v1, b: aic.mmad(16, 16, 16)).cycles == pytest.approx(
        coupled.launch_cycles + coupled.mmad_head + coupled.mmad_issue + 1)
    aic, aiv = SimCore(P), SimCore(P)
    aic.mmad(16, 16, 16)
    flag = CrossFlagSim(False, P)
    flag.set(aic, "M")
    flag.wait(aiv, "V")
    aiv.vec("Relu", False, 1)
    assert aiv.count["V"].busy == pytest.approx(P.vec_min_cycles)
    assert aiv.done_at["V"] == pytest.approx(aic.done_at["M"] + P.cross_core_cycles + P.vec_min_cycles + P.vec_head)
