"""The L2 residency pass (codegen/passes/l2.py): least-recently-used whole tensors against the L2 size, a cold
L2 at the start of a run, host steps outside it; and the plans it makes for whole models."""
import pytest

from codegen.ir.optlog import OptLog
from codegen.passes.l2 import StepAccess, plan_l2

MB = 1 << 20


def step(name, reads, write, host=False):
    return StepAccess(name, tuple(reads), write, host)


def test_first_touch_misses_and_what_a_step_wrote_hits_the_next():
    log = OptLog()
    hits = plan_l2("m", [step("a", [("x", MB), ("w1", MB)], ("y", MB)),
                         step("b", [("y", MB), ("w2", MB)], ("z", MB)),
                         step("c", [("z", MB), ("w1", MB)], ("u", MB))], 16 * MB, log)
    assert hits == [(False, False), (True, False), (True, True)]  # w1 read again while resident: a hit
    assert [ln.split()[2:4] for ln in log.lines] == [["m:a", "hits=mm"], ["m:b", "hits=Hm"], ["m:c", "hits=HH"]]
    assert all("reason=l2_residency" in ln for ln in log.lines)


def test_least_recently_used_tensors_are_evicted_first():
    # 4 MB of L2: a (2 MB) then b and c (1 MB each) fill it; d evicts a, the least recent; b is still there
    hits = plan_l2("m", [step("s1", [], ("a", 2 * MB)), step("s2", [], ("b", MB)), step("s3", [], ("c", MB)),
                         step("s4", [], ("d", MB)), step("s5", [("a", 2 * MB), ("b", MB)], ("e", 0))],
                   4 * MB, OptLog())
    assert hits[4] == (False, True)


def test_a_read_refreshes_a_tensor_and_duplicates_share_one_decision():
    hits = plan_l2("m", [step("s1", [], ("a", MB)), step("s2", [], ("b", MB)),
                         step("s3", [("a", MB), ("a", MB)], ("c", MB)),  # a read: now more recent than b
                         step("s4", [], ("d", MB)), step("s5", [("a", MB), ("b", MB)], ("e", 0))], 3 * MB, OptLog())
    assert hits[2] == (True, True) and hits[4] == (True, False)


def test_a_tensor_larger_than_the_l2_streams_through_and_flushes_it():
    hits = plan_l2("m", [step("s1", [], ("small", MB)), step("s2", [("big", 8 * MB)], ("y", MB)),
                         step("s3", [("big", 8 * MB), ("small", MB), ("y", MB)], ("z", 0))], 4 * MB, OptLog())
    assert hits[1] == (False,) and hits[2] == (False, False, True)


def test_host_steps_write_outside_the_l2():
    hits = plan_l2("m", [step("k1", [], ("x", MB)), step("glue", [("x", MB)], ("x", MB), host=True),
                         step("k2", [("x", MB)], ("y", MB))], 16 * MB, OptLog())
    assert hits == [(), None, (False,)]


def test_no_l2_means_every_read_misses():
    hits = plan_l2("m", [step("a", [], ("x", MB)), step("b", [("x", MB)], ("y", MB))], 0, OptLog())
    assert hits[1] == (False,)


@pytest.fixture(scope="module")
def resnet_plan(default_plan):
    """ResNet-50's model plan in the default build (shared with tests/codegen/emit/test_render.py) and the build's
    L2 lines about it."""
    p = default_plan("ascend910b")
    m = next(m for m in p.models if m.name == "resnet50")
    return m, [ln for ln in p.log.lines if "reason=l2_residency" in ln and ln.split()[2].startswith("resnet50:")]


def test_resnet50_plan_hits_activations_and_misses_weights_on_first_touch(resnet_plan):
    m, lines = resnet_plan
    steps = m.lowered.steps
    first = min(m.step_kernels)  # the stem conv: its input comes from the host glue, its weight is cold
    assert m.l2_hits[first] == (False,) * len(m.l2_hits[first])
    for i, hits in m.l2_hits.items():
        names = steps[i].inputs
        for v, h in zip(names, hits):
            if v in m.lowered.weights:
                assert not h, (steps[i].name, v)  # ResNet-50 reads each weight once: always its first touch
    assert sum(h for hits in m.l2_hits.values() for h in hits) > len(m.l2_hits)  # most activations hit
    assert all(m.launches[i] is not None and m.launches[i].predicted_cycles > 0 for i in m.step_kernels)
    assert len(lines) == len(m.step_kernels)
