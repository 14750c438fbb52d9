"""The pipe cost model (codegen/cost/model.py and each family's replay in codegen/families/) against the
emulator, for every baked kernel whose family the
model replays: the same instructions and bytes on every pipe, and the same cycles, since both apply the
profile's per-instruction costs and the same pipe/flag timing rules."""
import numpy as np
import pytest

import kiln
from codegen.families.registry import input_reads, predict
from codegen.ir.manifest import opspec_of_record
from codegen.ir.profiles import PROFILES
from kiln.runtime import as_packed


def spec_of(k):
    return opspec_of_record(k.entry)


PROFILE = PROFILES[kiln.build_info()["profile"]]
REPLAYED = [k for k in kiln.kernels() if predict(spec_of(k), k.record["family"], k.tiling, PROFILE) is not None]


def test_the_default_build_has_replayed_kernels_of_both_conv_algorithms():
    algos = {k.record["algorithm"] for k in REPLAYED}
    winograd = kiln.build_info()["dtype"] == "fp16"  # KILN_DTYPE=bf16 builds have no Winograd kernels
    assert "direct_img2col" in algos and any(a.startswith("winograd") for a in algos) == winograd, algos


def assert_equal(p, st) -> None:
    """A prediction against the emulator's statistics: per-pipe counts, bytes and busy cycles, the GM traffic
    (L2 hits, HBM reads, writes), the slowest cores, what set each launch's cycles, and the cycles."""
    for pipe, got in st["pipes"].items():
        assert (p.pipes[pipe].instrs, p.pipes[pipe].bytes) == (got["instructions"], got["bytes"]), pipe
        assert p.pipes[pipe].busy == pytest.approx(got["busy_cycles"], rel=1e-9), pipe
    assert (p.mem.l2_hit_bytes, p.mem.hbm_read_bytes, p.mem.write_bytes) == (
        st["l2_hit_bytes"], st["hbm_read_bytes"], st["gm_write_bytes"])
    assert p.limits == st["limits"]
    assert p.core_cycles == pytest.approx(st["core_cycles"], rel=1e-9)
    assert p.cycles == pytest.approx(st["cycles"], rel=1e-9)
    assert p.cube_macs == st["cube_macs"]


@pytest.mark.parametrize("k", REPLAYED, ids=[k.name for k in REPLAYED])
def test_prediction_equals_the_emulator(k):
    ins = [as_packed(np.zeros(t["shape"]), t["dtype"]) for t in k.record["inputs"]]
    k.run_packed(*ins)
    st = k.last_stats
    p = predict(spec_of(k), k.record["family"], k.record["tiling"], PROFILES[st["profile"]])
    assert_equal(p, st)
    assert st["l2_hit_bytes"] == 0  # called on its own: every read misses L2
    if k.record.get("predicted_cycles") is not None:  # what the build recorded in the manifest
        assert k.record["predicted_cycles"] == pytest.approx(st["cycles"], abs=1e-3)


Plan = tuple[tuple[bool, ...], tuple[int, ...] | None]


def _step_plans() -> dict[str, set[Plan]]:
    """Every L2 plan (hits per input, and the bytes read of each) a baked model's step runs each kernel with."""
    out: dict[str, set[Plan]] = {}
    for name in kiln.models():
        for s in kiln.load(name).record["steps"]:
            if s["kind"] == "kernel" and s.get("l2_hits") is not None:
                reads = None if s.get("l2_reads") is None else tuple(s["l2_reads"])
                out.setdefault(s["kernel"], set()).add((tuple(s["l2_hits"]), reads))
    return out


STEP_PLANS = _step_plans()
HIT_CASES = [(k, h, r) for k in REPLAYED
             for h, r in sorted(STEP_PLANS.get(k.name, set()) | {((True,) * len(k.record["inputs"]), None)},
                                key=repr)]


@pytest.mark.parametrize("k,hits,reads", HIT_CASES,
                         ids=[f"{k.name}-{''.join('H' if x else 'm' for x in h)}" for k, h, _ in HIT_CASES])
def test_prediction_with_l2_hits_equals_the_emulator(k, hits, reads):
    """With a step's L2 plan (and with every input in L2): the emulator, given the hits and reads as the executor
    gives them, and the cost model, given the hits as the build does, still agree on everything."""
    ins = [as_packed(np.zeros(t["shape"]), t["dtype"]) for t in k.record["inputs"]]
    k.run_packed(*ins, l2_hits=hits, l2_reads=reads)
    st = k.last_stats
    p = predict(spec_of(k), k.record["family"], k.record["tiling"], PROFILES[st["profile"]], l2=hits)
    assert_equal(p, st)
    if all(hits):  # every input, its own output and its workspaces in L2: nothing from HBM
        assert st["hbm_read_bytes"] == 0 and st["l2_hit_bytes"] > 0
    else:  # the manifest's reads are the cost model's count
        assert reads == input_reads(spec_of(k), k.record["family"], k.record["tiling"], PROFILES[st["profile"]])
    # reuse within the launch: its cold inputs come from HBM at most once (docs/ascend-model.md section 12, rule 4)
    assert st["hbm_read_bytes"] <= sum(a.nbytes for a, h in zip(ins, hits) if not h)


def _rereading_step():
    """A baked model step whose Cube kernel re-reads a cold input (per M tile, per core), with its plan."""
    for k, hits, reads in HIT_CASES:
        if k.record["family"] in ("conv2d_cube_img2col", "gemm_cube") and not all(hits) and reads is not None:
            ins = [as_packed(np.zeros(t["shape"]), t["dtype"]) for t in k.record["inputs"]]
            if any(not h and n > 2 * a.nbytes for a, h, n in zip(ins, hits, reads)):
                return k, hits, reads, ins
    pytest.skip("no baked model step re-reads a cold input")


def test_a_launch_reads_its_cold_inputs_from_hbm_once():
    """A model step whose kernel re-reads a cold weight: alone, every read of it misses; with the step's plan, the
    launch's HBM reads are its cold inputs' size and the re-reads L2 hits, in the emulator as in the cost model,
    and the launch is no slower."""
    k, hits, reads, ins = _rereading_step()
    cold = sum(a.nbytes for a, h in zip(ins, hits) if not h)
    k.run_packed(*ins)
    alone = k.last_stats
    k.run_packed(*ins, l2_hits=hits, l2_reads=reads)
    st = k.last_stats
    assert st["hbm_read_bytes"] == cold and st["l2_hit_bytes"] >= alone["hbm_read_bytes"] - cold
    p = predict(spec_of(k), k.record["family"], k.record["tiling"], PROFILES[st["profile"]], l2=hits)
    assert (p.mem.hbm_read_bytes, p.mem.l2_hit_bytes) == (st["hbm_read_bytes"], st["l2_hit_bytes"])
    assert st["cycles"] <= alone["cycles"]


def test_a_cores_rereads_stream_at_the_l2_rate_in_part():
    """Rule 5 (docs/ascend-model.md section 12): the same step with its reads (re-reads of a cold input partly at
    the L2 rate on each core) moves the same bytes in less MTE2 time than with every read of a cold input at the
    miss rate (no reads given), and neither is slower than the L2 plan's all-hit bound."""
    k, hits, reads, ins = _rereading_step()
    k.run_packed(*ins, l2_hits=hits)
    each_once = k.last_stats
    k.run_packed(*ins, l2_hits=hits, l2_reads=reads)
    shared = k.last_stats
    k.run_packed(*ins, l2_hits=(True,) * len(ins))
    warm = k.last_stats
    mte2 = [st["pipes"]["MTE2"] for st in (warm, shared, each_once)]
    assert mte2[1]["bytes"] == mte2[2]["bytes"]
    assert mte2[0]["busy_cycles"] < mte2[1]["busy_cycles"] < mte2[2]["busy_cycles"]


def test_the_models_have_l2_hits_and_misses():
    """The L2 plan is not trivial on the baked models: some step inputs hit (what the previous steps wrote),
    some miss (weights on first touch, the graph input)."""
    plans = [h for hs in STEP_PLANS.values() for h, _ in hs]
    if not plans:
        pytest.skip("this build bakes no models")
    assert any(any(h) for h in plans) and any(not all(h) for h in plans)


@pytest.mark.parametrize("name", kiln.models())
def test_model_steps_run_as_the_manifest_predicts(name):
    """A whole model on the emulator (its executor applying each step's L2 plan): every step's simulated
    cycles equal the cost model's prediction of that launch recorded in the manifest."""
    m = kiln.load(name)
    rng = np.random.default_rng(0)
    m.run(*[rng.standard_normal(shape).astype(np.float32) for _, shape in m.inputs])
    checked = 0
    for k in m.kernels:
        if k.launch is not None:
            assert k.launch.predicted_cycles == pytest.approx(k.simulated_cycles, abs=1e-3), k.name
            checked += 1
    assert checked


CUBE = [k for k in kiln.kernels() if k.record["family"] in ("conv2d_cube_img2col", "conv2d_winograd", "gemm_cube")]


@pytest.mark.parametrize("k", CUBE, ids=[k.name for k in CUBE])
def test_chosen_variant_is_never_slower_than_the_rule_tiling(k):
    """The searched variant against the foundation's fixed rule tiling of the same algorithm (AUTO's choice
    between algorithms is tested in test_winograd): the rule's cycles come from the cost model, which equals
    the emulator (test above)."""
    from codegen.families import conv2d_cube_img2col, conv2d_winograd, gemm_cube
    from codegen.ir.optlog import OptLog
    spec = spec_of(k)
    if k.record["features"]["kind"] == "gemm":
        rule = gemm_cube.gemm_rule(spec, PROFILE, OptLog(), search=False)
    elif k.record["family"] == "conv2d_winograd":  # same algorithm: what the search started from
        rule = conv2d_winograd.winograd_rule(spec, PROFILE, k.tiling["tile"])
    else:
        rule = conv2d_cube_img2col.conv_rule(spec, PROFILE, OptLog(), search=False)
    rule_cycles = predict(spec, rule.family, rule.params, PROFILE).cycles
    ins = [as_packed(np.zeros(t["shape"]), t["dtype"]) for t in k.record["inputs"]]
    k.run_packed(*ins)
    assert k.last_stats["cycles"] <= rule_cycles + 1e-6, (k.last_stats["cycles"], rule_cycles)
