"""benchmarks/calibration.py on the cost model only (no build): every published measurement it simulates keeps
its ratio (simulated / published time) within BAND of the ratio recorded in TODAY.

The model is not calibrated yet (issue 22): TODAY is today's ratio of each case, not the goal, so the test
fails when a cost constant, a replay or a case changes a simulated figure, and the change must then be
deliberate (regenerate the table with `python benchmarks/calibration.py --write --recorded` and these
expectations with `--expect --recorded`). The calibration work replaces TODAY by the goal of issue 22: every ratio
within 15% of 1 for the instruction and copy curves and within 25% for whole kernels (GOAL), or a reason in the
table where the model cannot get there. The searched GEMM cases use the tilings recorded in the cases (the search
itself takes minutes at these shapes); `python benchmarks/calibration.py` runs it and says when it now picks
another tiling."""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from benchmarks import calibration as cal
from codegen.ir.profiles import PROFILES

BAND = 0.01  # relative; the model is deterministic, so this only absorbs the 4 significant digits below
GOAL = {"curve": 0.15, "kernel": 0.25}  # what the calibration must reach (not tested yet)
BASE = PROFILES["ascend910b"]

# Ratios on the uncalibrated instruction costs with the memory system (L2 hits on the copy curves, the chip-wide
# HBM bound, warm GEMM operands), from `--expect --recorded`.
TODAY = {
    "gm_l1 1K": 0.2097,
    "gm_l1 4K": 0.2349,
    "gm_l1 16K": 0.4408,
    "gm_l1 64K": 0.6893,
    "gm_l1 256K": 0.9685,
    "gm_l1 512K": 0.9614,
    "gm_ub 1K": 0.2128,
    "gm_ub 8K": 0.5933,
    "gm_ub 32K": 0.945,
    "gm_ub 128K": 0.9288,
    "ub_gm 1K": 0.3053,
    "ub_gm 4K": 0.519,
    "ub_gm 16K": 0.9044,
    "ub_gm 64K": 1.062,
    "l1_l0a 1K": 5.348,
    "l1_l0a 4K": 2.499,
    "l1_l0a 16K": 1.431,
    "l1_l0a 64K": 1.131,
    "l1_l0b 1K": 3.651,
    "l1_l0b 4K": 1.808,
    "l1_l0b 16K": 1.232,
    "l1_l0b 64K": 1.08,
    "l0c_gm 1K": 0.2905,
    "l0c_gm 4K": 0.4498,
    "l0c_gm 16K": 0.6216,
    "l0c_gm 128K": 0.4766,
    "l1_bt 0.0625K": 7.331,
    "l1_bt 0.25K": 3.588,
    "l1_bt 1K": 1.669,
    "mmad m32k16n16": 4.731,
    "mmad m32k16n128": 2.049,
    "mmad m32k16n512": 1.268,
    "mmad m32k16n1024": 1.145,
    "Add.f16 r1": 0.6603,
    "Add.f16 r8": 1.121,
    "Add.f32 r8": 1.123,
    "Sub.f16 r8": 1.122,
    "Mul.f16 r8": 1.121,
    "Mul.f32 r8": 1.123,
    "Max.f16 r8": 1.123,
    "Adds.f16 r1": 1.339,
    "Adds.f16 r8": 2.295,
    "Adds.f32 r8": 2.242,
    "Muls.f32 r8": 2.241,
    "Maxs.f16 r8": 2.235,
    "Mins.f32 r8": 2.242,
    "Relu.f16 r1": 0.9915,
    "Relu.f16 r8": 1.246,
    "Relu.f32 r8": 1.245,
    "Abs.f16 r8": 1.246,
    "Reciprocal.f32 r8": 1.245,
    "Cast.f16 r8": 1.275,
    "Dup.f32 r8": 1.245,
    "Copy.f16 r8": 1.246,
    "Brcb.f16 r8": 1.246,
    "Exp.f16 r8": 1.089,
    "Exp.f32 r8": 1.122,
    "Div.f16 r8": 0.9423,
    "Div.f32 r8": 1.061,
    "MulAddDst.f16 r8": 1.041,
    "MulAddDst.f32 r8": 1.041,
    "ReduceSum.f16 r8": 1.034,
    "ReduceSum.f32 r8": 1.081,
    "ReduceMax.f16 r8": 1.063,
    "ReduceMax.f32 r8": 0.464,
    "add 48aiv": 0.9302,
    "add 48aiv vec": 1.759,
    "add 1aiv": 0.7535,
    "catlass m1024 default": 0.869,
    "catlass m1024 tuned": 0.8299,
    "catlass m1024 search": 0.823,
    "catlass m20 default": 1.764,
    "catlass m20 tuned": 1.421,
    "catlass m20 search": 1.77,
    "catlass m160 swizzle": 0.8148,
    "catlass m160 search": 0.8278,
    "gemm 6144 search": 1.283,
}


@pytest.fixture(scope="module")
def rows() -> dict[str, tuple[cal.Case, float, float]]:
    return {case.key: (case, sim, ratio) for case, sim, ratio in cal.simulate(BASE)}


def within(ratio: float, expected: float) -> bool:
    return abs(ratio / expected - 1) <= BAND


def test_every_case_has_an_expectation_and_a_role():
    keys = [c.key for c in cal.CASES]
    assert len(keys) == len(set(keys)), "case keys must be unique"
    assert set(keys) == set(TODAY), (sorted(set(keys) - set(TODAY)), sorted(set(TODAY) - set(keys)))
    assert {c.role for c in cal.CASES} == {"fit", "check"} and {c.kind for c in cal.CASES} == set(GOAL)
    for kind in GOAL:  # both kinds have cases to fit on and cases held out
        assert {c.role for c in cal.CASES if c.kind == kind} == {"fit", "check"}, kind
    assert all(re.fullmatch(r"[A-Z]+ L\d+", c.source) and c.source.split()[0] in cal.SOURCES for c in cal.CASES)


@pytest.mark.parametrize("key", sorted(TODAY))
def test_ratio_holds_today(rows, key):
    case, sim, ratio = rows[key]
    assert within(ratio, TODAY[key]), (f"{case.label} on {case.profile}: simulated {sim:.4g} {case.unit} against "
                                       f"{case.published:.4g} published, ratio {ratio:.4g}, expected "
                                       f"{TODAY[key]} +- {BAND:.0%}")


# One constant of every kind the cases read, nudged: each must move some case out of its band.
NUDGES = {name: {name: getattr(BASE, name) + 1} for name in
          ("mmad_head", "mte2_head", "mte1_head", "bt_head", "fix_head", "mte3_head", "vec_head")}
NUDGES.update({name: {name: getattr(BASE, name) * 1.05} for name in
               ("gm_to_l1_bpc", "gm_to_ub_bpc", "l1_to_l0a_bpc", "l1_to_l0b_bpc", "l1_to_bt_bpc", "ub_to_gm_bpc",
                "fix_elems_pc", "clock_ghz", "l2_to_l1_bpc", "l2_to_ub_bpc", "hbm_mixed_gbps")})
NUDGES["vec_cpr"] = {"vec_cpr_f16": tuple(c * 1.05 for c in BASE.vec_cpr_f16),
                     "vec_cpr_f32": tuple(c * 1.05 for c in BASE.vec_cpr_f32)}
CHEAP = [c for c in cal.CASES if c.kind == "curve" or c.key in ("add 48aiv", "add 1aiv", "catlass m1024 tuned",
                                                                   "catlass m20 tuned")]


@pytest.mark.parametrize("nudge", sorted(NUDGES))
def test_a_changed_constant_fails_the_band(nudge):
    moved = [case.key for case, _, ratio in cal.simulate(dataclasses.replace(BASE, **NUDGES[nudge]), cases=CHEAP)
             if not within(ratio, TODAY[case.key])]
    assert moved, f"{nudge} changed and no case left its band"


def test_results_table_is_current(rows):
    """benchmarks/RESULTS.md's calibration section shows today's ratios (regenerate it with --write)."""
    page = (Path(cal.__file__).resolve().parent / "RESULTS.md").read_text(encoding="utf-8")
    assert cal.HEADING in page, "run python benchmarks/calibration.py --write --recorded"
    section = page[page.index(cal.HEADING):]
    section = section[:section.find("\n## ", 1)] if "\n## " in section[1:] else section
    table = {cells[0]: float(cells[6]) for line in section.splitlines()
             if line.startswith("| ") and len(cells := [c.strip() for c in line.strip("|").split("|")]) == 9
             and re.fullmatch(r"\d+\.\d\d", cells[6])}
    labels = {case.label: ratio for case, _, ratio in rows.values()}
    assert set(table) == set(labels)
    stale = [label for label, ratio in labels.items() if abs(table[label] - ratio) > 0.006]
    assert not stale, f"RESULTS.md's calibration table is stale for: {stale}"
