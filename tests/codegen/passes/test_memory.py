"""The arena planner: property tests on random lifetimes (hypothesis), and the
plans of the baked models (no live overlap, alignment, in-place reuse, and no
read of a dead tensor when freed regions are poisoned)."""
import json

import numpy as np
import pytest
from conftest import run
from hypothesis import given, settings
from hypothesis import strategies as st

import kiln
from codegen.passes import memory


@st.composite
def lifetimes(draw):
    n = draw(st.integers(1, 40))
    steps = draw(st.integers(1, 30))
    out = []
    for i in range(n):
        a = draw(st.integers(0, steps - 1))
        b = draw(st.integers(a, steps - 1))
        out.append(memory.Interval(f"t{i}", draw(st.integers(1, 5000)), a, b))
    return out


@settings(max_examples=200, deadline=None)
@given(lifetimes(), st.sampled_from([32, 128, 512]))
def test_placements_never_overlap_while_alive(ivs, align):
    lb = memory.lower_bound(ivs, align)
    for name, place in memory.STRATEGIES.items():
        placed = place(ivs, align)
        assert len(placed) == len(ivs)
        assert all(p.offset % align == 0 for p in placed), name
        plan = memory.MemoryPlan(memory.arena_size(placed, align), lb, 0, name, {p.value: p for p in placed})
        assert memory.overlaps(plan) == [], name
        assert plan.arena_bytes >= lb, name  # nothing beats the peak of live bytes


MODELS = kiln.models()
needs_models = pytest.mark.skipif(not MODELS, reason="no models baked")


@needs_models
@pytest.mark.parametrize("name", MODELS)
def test_model_plan_is_sound_and_near_the_lower_bound(name):
    m = kiln.load(name)
    mem = m.record["memory"]
    tensors = mem["tensors"]
    for i, a in enumerate(tensors):
        assert a["offset"] % mem["alignment"] == 0
        assert a["offset"] + a["bytes"] <= m.arena_bytes
        for b in tensors[i + 1:]:
            alive_together = not (a["last_step"] < b["first_step"] or b["last_step"] < a["first_step"])
            if alive_together:
                assert a["offset"] + a["bytes"] <= b["offset"] or b["offset"] + b["bytes"] <= a["offset"], (a, b)
    assert m.arena_bytes <= 1.02 * mem["lower_bound_bytes"]
    assert mem["naive_bytes"] > m.arena_bytes
    capable = {"Relu", "Clip", "Add", "Mul", "Gelu", "Softmax", "LayerNormalization"}
    if any(s["kind"] == "kernel" and set(s["op_types"]) & capable for s in m.record["steps"]):
        assert mem["in_place"], "elementwise/row kernels whose input dies there should run in place"


@needs_models
@pytest.mark.parametrize("name", MODELS)
def test_no_kernel_reads_a_dead_tensor(name):
    """Freed regions are filled with NaN right after their last use: the result must not change."""
    m = kiln.load(name)
    x = np.random.default_rng(4).standard_normal(m.inputs[0][1]).astype(np.float32)
    clean = m.run(x)
    poisoned = m.run(x, poison_freed=True)
    assert np.isfinite(poisoned).all()
    np.testing.assert_array_equal(poisoned, clean)


@needs_models
def test_kiln_plan_cli_contract():
    import shutil
    r = run([shutil.which("kiln"), "plan", MODELS[0], "--json"])
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    for key in ("model", "arena_bytes", "lower_bound_bytes", "naive_bytes", "strategy", "tensors"):
        assert key in d
    assert {"name", "offset", "bytes", "first_kernel", "last_kernel"} <= set(d["tensors"][0])
    r = run([shutil.which("kiln"), "plan", MODELS[0]])
    assert r.returncode == 0 and "lower bound" in r.stdout and "#" in r.stdout
