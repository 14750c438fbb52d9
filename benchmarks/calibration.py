"""kiln's cost model against published measurements of the Ascend 910B (issue 22, point 4).

Each case is one published measurement (a single-core instruction or copy curve point of mskpp's measured
910B1 tables, asc-devkit's fp16 Vector Add of 8192x8192, catlass' matmul case studies on a 20-AIC part, a
large square GEMM) simulated by the cost model (codegen/cost/ and the families' replays in codegen/families/,
which equal the emulator exactly) with kiln's own instructions and kernels at the same shapes: no build, no
device. Ratio = simulated / published time (> 1: kiln predicts slower than the chip measured).

Every case is marked "fit" (the calibration of issue 22 tuned constants on it) or "check" (held out: it
judges the fitted constants). Curve cases are instruction/copy figures (goal: within 15%), kernel cases whole
launches (goal: within 25%); OUTSIDE_GOAL names the cases the model cannot bring there and why. Sources are
cited by key and line; the keys are resolved below the table and in docs/ascend-model.md (section 10).

    python benchmarks/calibration.py                  # print the table (runs the tiling search: minutes)
    python benchmarks/calibration.py --recorded       # the search's recorded tilings instead (seconds)
    python benchmarks/calibration.py --write          # also replace the section in benchmarks/RESULTS.md
    python benchmarks/calibration.py --freeze         # record every profile constant in calibration_frozen.json

tests/benchmarks/test_calibration.py holds the cases to the goal (OUTSIDE_GOAL: to their recorded ratio).
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import subprocess
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the source tree's codegen

from codegen.cost.model import SimCore
from codegen.families import eltwise_vector, gemm_cube
from codegen.families.ranking import ranked
from codegen.families.registry import predict
from codegen.ir.opspec import EltwiseSpec, GemmSpec
from codegen.ir.optlog import OptLog
from codegen.ir.profiles import PROFILES, VEC_OPS, Profile
from codegen.passes.l2 import StepAccess, plan_l2

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "RESULTS.md"
FROZEN = REPO / "benchmarks" / "calibration_frozen.json"  # the calibration of issue 22, frozen before point 5
HEADING = "## Calibration: the cost model against published measurements"
KPP_MHZ = 1800  # mskpp converts its measured GiB/s to bytes per cycle at a fixed 1800 MHz (data_adapter.cpp)

# Source keys (full paths and commits in docs/ascend-model.md, section 10).
SOURCES = {
    "KPP": "Ascend/mskpp/csrc/prof_data/resource910b.cpp at 065b75c (measured 910B1, one core)",
    "ADD": "cannmirror/asc-devkit/examples/01_simd_cpp_api/05_best_practices/00_vector_compute/"
           "add_high_performance/README_en.md at 0da921b (Atlas A2)",
    "CAT": "hicann/catlass/docs/en/1_Practice/11_matmul_optimization.md at 0dfcf9d (20 AIC, fp16 in and out)",
    "PTO": "hw-native-sys/pto-isa/.claude/skills/pto-isa-matmul-l2-schedule/references/"
           "matmul-n-swizzle-m-zigzag.md at 3186c38 (Ascend910B2, 24 AIC)",
}


@dataclass(frozen=True)
class Case:
    key: str                # stable name (the test's expectations)
    label: str              # what was measured
    kind: str               # "curve" (an instruction or copy) or "kernel" (a whole launch)
    role: str               # "fit" or "check"
    published: float        # in `unit`
    unit: str               # "cycles" or "us"
    source: str             # key and line, e.g. "KPP L1341"
    profile: str            # which profile simulates it ("ascend910b", or a core-count variant of it)
    run: Callable[[Profile, bool], float]  # (base profile, run the tiling search) -> simulated, in `unit`
    note: str = ""


def variant(base: Profile, aic: int, aiv: int) -> Profile:
    """The profile with another core count (catlass' 20-AIC part; one AIV for single-core cases)."""
    return dataclasses.replace(base, name=f"{base.name}-{aic}aic-{aiv}aiv", cube_cores=aic, vector_cores=aiv)


BURST = 1024  # instructions per simulated curve point: mskpp times 1024 back-to-back copies (KPP L24)


def one_instruction(issue: Callable[[SimCore], None]) -> Callable[[Profile, bool], float]:
    """Cycles per instruction of BURST back-to-back instructions on an idle core, as the tables were measured:
    each instruction's body, and the pipe's head (its latency) once for the whole burst. mskpp times back-to-back
    copies of one buffer, so a GM read (of input 0) is an L2 hit."""
    def run(base: Profile, search: bool) -> float:
        core = SimCore(base, l2=(True,))
        for _ in range(BURST):
            issue(core)
        return core.end_cycle() / BURST
    return run


# ---- single-core curves (mskpp resource910b.cpp, 910B1)

def kpp_copy_cycles(kib: float, gib_per_s: float) -> float:
    """Cycles of one copy of `kib` KiB at the table's GiB/s, converted as mskpp converts it (1800 MHz)."""
    return kib * 1024 / (gib_per_s * 2**30 / (KPP_MHZ * 1e6))


# (tag, path, kiln instruction, [(KiB, GiB/s, line, role)])
Copier = Callable[[SimCore, int], None]  # issues one copy of n bytes
COPY_CURVES: list[tuple[str, str, Copier, list[tuple[float, float, int, str]]]] = [
    ("gm_l1", "GM->L1", lambda c, b: c.copy_gm(1, b // 2, 2, "L1", src=0),
     [(1, 9.932434723156117, 24, "fit"), (4, 29.334643353317396, 26, "check"), (16, 93.1948692289595, 28, "check"),
      (64, 176.28006750351386, 31, "check"), (256, 261.3603165596154, 43, "check"),
      (512, 261.8630508616604, 59, "fit")]),
    ("gm_ub", "GM->UB", lambda c, b: c.copy_gm(1, b // 2, 2, "UB", src=0),
     [(1, 7.294434116615037, 142, "fit"), (8, 42.743142801718825, 145, "check"), (32, 77.19285612204116, 119, "check"),
      (128, 78.49221799265685, 149, "fit")]),
    ("ub_gm", "UB->GM", lambda c, b: c.copy_ub_to_gm(1, b // 2, 2),
     [(1, 11.39450292, 617, "fit"), (4, 37.90890473, 620, "check"), (16, 86.84965202, 632, "check"),
      (64, 110.6587405, 680, "fit")]),
    ("l1_l0a", "L1->L0A (load2d)", lambda c, b: c.load2d(b // 512, "L0A"),
     [(1, 286.91, 481, "fit"), (4, 389.92, 484, "check"), (16, 427.31, 496, "check"), (64, 437.55, 520, "fit")]),
    ("l1_l0b", "L1->L0B (load2d)", lambda c, b: c.load2d(b // 512, "L0B"),
     [(1, 174.08, 533, "fit"), (4, 206.94, 536, "check"), (16, 216.99, 548, "check"), (64, 219.64, 572, "fit")]),
    ("l0c_gm", "L0C->GM (Fixpipe, fp32 out)", lambda c, b: c.fixpipe(b // 4, 4),
     [(1, 20.78, 328, "fit"), (4, 85.79, 331, "check"), (16, 203.25, 343, "check"), (128, 196.84, 392, "fit")]),
    ("l1_bt", "L1->BiasTable", lambda c, b: c.load_bias_table(b // 4),
     [(0.0625, 35.75, 441, "fit"), (0.25, 55.0, 444, "check"), (1, 55.1, 456, "fit")]),
]

# mmad fp16 -> fp32, m=32 k=16, one instruction: (n, OPs per cycle, line, role); OPs = 2 m k n (KPP L978..L1041)
MMAD_CURVE = [(16, 3369.806664, 978, "fit"), (128, 7258.389633, 985, "check"), (512, 7818.659031, 1009, "check"),
              (1024, 8057.168324, 1041, "fit")]

# Vector ops, one instruction of `r` repeats: (table, kiln op, fp32 operands, repeats, line, published cycles,
# role). Published cycles: the table's totalCycles, or numSum * element bytes / calPerf where it gives none
# (VADD/VMUL fp16). Within a cost class the first op is "fit", its siblings "check".
VEC_ROWS = [
    ("VADD fp16", "Add", False, 1, 1337, 128 * 2 / 42.26068238, "fit"),
    ("VADD fp16", "Add", False, 8, 1341, 1024 * 2 / 127.5317989, "fit"),
    ("VADD fp32", "Add", True, 8, 1381, 16.031175, "check"),
    ("VSUB fp16", "Sub", False, 8, 3683, 16.036725, "check"),
    ("VMUL fp16", "Mul", False, 8, 3419, 1024 * 2 / 127.5317989, "check"),
    ("VMUL fp32", "Mul", True, 8, 3443, 16.033395, "check"),
    ("VMAX fp16", "Max", False, 8, 3061, 16.028585, "check"),
    ("VADDS fp16", "Adds", False, 1, 1262, 2.988, "fit"),
    ("VADDS fp16", "Adds", False, 8, 1269, 7.84368, "fit"),
    ("VADDS fp32", "Adds", True, 8, 1284, 8.028445, "check"),
    ("VMULS fp32", "Muls", True, 8, 3362, 8.032515, "check"),
    ("VMAXS fp16", "Maxs", False, 8, 2974, 8.05428, "check"),
    ("VMINS fp32", "Mins", True, 8, 3161, 8.028075, "check"),
    ("VRELU fp16", "Relu", False, 1, 3576, 3.02586, "fit"),
    ("VRELU fp16", "Relu", False, 8, 3583, 8.02789, "fit"),
    ("VRELU fp32", "Relu", True, 8, 3603, 8.03048, "check"),
    ("VABS fp16", "Abs", False, 8, 1229, 8.027705, "check"),
    ("VREC fp32", "Reciprocal", True, 8, 3663, 8.030665, "check"),
    ("VCONV fp16->fp32", "Cast", False, 8, 2099, 7.8444, "check"),
    ("VECTORDUP fp32", "Dup", True, 8, 2730, 8.03011, "check"),
    ("VCOPY int16", "Copy", False, 8, 2534, 8.02678, "check"),
    ("VBRCB uint16", "Brcb", False, 8, 1661, 8.02826, "check"),
    ("VEXP fp16", "Exp", False, 8, 2830, 31.21596, "fit"),
    ("VEXP fp32", "Exp", True, 8, 2850, 16.0395, "fit"),
    ("VDIV fp16", "Div", False, 8, 2654, 36.08018, "fit"),
    ("VDIV fp32", "Div", True, 8, 2690, 32.03793, "check"),
    ("VMLA fp16 (MulAddDst)", "MulAddDst", False, 8, 4275, 48.038765, "fit"),
    ("VMLA fp32 (MulAddDst)", "MulAddDst", True, 8, 4179, 48.02933, "check"),
    ("VCADD fp16 (ReduceSum)", "ReduceSum", False, 8, 1701, 56.10199, "fit"),
    ("VCADD fp32 (ReduceSum)", "ReduceSum", True, 8, 1721, 24.045005, "fit"),
    ("VCMAX fp16 (ReduceMax)", "ReduceMax", False, 8, 1835, 54.567, "check"),
    ("VCMAX fp32 (ReduceMax)", "ReduceMax", True, 8, 1855, 56.034465, "check"),
]


def _sized(issue: Copier, nbytes: int) -> Callable[[SimCore], None]:
    return lambda core: issue(core, nbytes)


def _mmad(m: int, n: int, k: int) -> Callable[[SimCore], None]:
    return lambda core: core.mmad(m, n, k)


def _vec(op: str, fp32: bool, reps: int) -> Callable[[SimCore], None]:
    return lambda core: core.vec(op, fp32, reps)


def curve_cases() -> list[Case]:
    cases = []
    for tag, path, issue, points in COPY_CURVES:
        for kib, gib, line, role in points:
            nbytes = int(kib * 1024)
            cases.append(Case(f"{tag} {kib:g}K", f"{path}, one {kib:g} KiB copy", "curve", role,
                              kpp_copy_cycles(kib, gib), "cycles", f"KPP L{line}", "ascend910b",
                              one_instruction(_sized(issue, nbytes))))
    for n, ops, line, role in MMAD_CURVE:
        cases.append(Case(f"mmad m32k16n{n}", f"mmad fp16 m32 k16 n{n}", "curve", role, 2 * 32 * 16 * n / ops,
                          "cycles", f"KPP L{line}", "ascend910b",
                          one_instruction(_mmad(32, n, 16))))
    for table, op, fp32, reps, line, cycles, role in VEC_ROWS:
        key = f"{op}.{'f32' if fp32 else 'f16'} r{reps}"
        cases.append(Case(key, f"{table}, {reps} repeat{'s' if reps > 1 else ''}", "curve", role, cycles, "cycles",
                          f"KPP L{line}", "ascend910b", one_instruction(_vec(op, fp32, reps))))
    return cases


# ---- whole kernels

def us(cycles: float, profile: Profile) -> float:
    return cycles / (profile.clock_ghz * 1e3)


def warm_l2(profile: Profile, reads: list[int], write: int) -> tuple[bool, ...]:
    """A kernel's L2 hits when it is timed in a loop, as profilers time it: the build's L2 rule
    (codegen/passes/l2.py) over two calls on the same tensors, the second call's hits."""
    step = StepAccess("kernel", tuple((f"in{i}", b) for i, b in enumerate(reads)), ("out", write))
    hits = plan_l2("calibration", [step, step], profile.l2_bytes, OptLog())[1]
    assert hits is not None
    return hits


def add_kernel(aiv: int, tile: int | None, vector_time: bool = False) -> Callable[[Profile, bool], float]:
    """kiln's eltwise_vector Add of 8192x8192 fp16 on `aiv` Vector cores (tile: the rule's, or pinned).
    vector_time: the V pipe's busy time per core instead of the kernel's time. Every read misses L2: case 6
    bypasses it, and x, y, z (384 MB) would not fit anyway."""
    def run(base: Profile, search: bool) -> float:
        prof = variant(base, base.cube_cores, aiv) if aiv != base.vector_cores else base
        spec = EltwiseSpec(op="add", numel=8192 * 8192)
        params = {"tile_elems": tile} if tile else eltwise_vector.eltwise_rule(spec, prof, OptLog()).params
        pred = predict(spec, "eltwise_vector", params, prof)
        assert pred is not None
        return us(pred.pipes["V"].busy / pred.cores if vector_time else pred.cycles, prof)
    return run


def searched_tiling(spec: GemmSpec, prof: Profile, min_edge: int) -> tuple[int, int, int, int]:
    """The tiling search's choice (gemm_cube's rule, then the cost model's best candidate). min_edge > 0: only
    candidates with base_m and base_n >= min_edge are ranked (at 6144^3 the full grid's small tiles take hours
    to replay, issue 22 point 6; the large tiles are where the winner is)."""
    if not min_edge:
        p = gemm_cube.gemm_rule(spec, prof, OptLog(), search=True).params
    else:
        rule = gemm_cube.gemm_rule(spec, prof, OptLog()).params
        cands, fit = gemm_cube.gemm_candidates(spec, prof, gemm_cube.gemm_buffers)
        cands = [c for c in cands if min(c["base_m"], c["base_n"]) >= min_edge]
        p = ranked(spec, "gemm_cube", rule, cands, fit, prof)[0][0][1]
    return p["base_m"], p["base_n"], p["base_k1"], p["k1_step"]


@dataclass(frozen=True)
class Searched:
    """A GEMM case simulated with the tiling search's choice: `recorded` is the choice when the table was
    written (used without --search, and by the test); min_edge restricts the search (searched_tiling)."""
    recorded: tuple[int, int, int, int]
    min_edge: int = 0


def gemm_kernel(mnk: tuple[int, int, int], aic: int,
                tiling: tuple[int, int, int, int] | Searched) -> Callable[[Profile, bool], float]:
    """kiln's gemm_cube (A row-major ND, B packed ZN: catlass' zN) of M x N x K fp16 on `aic` Cube cores, timed
    in a loop (warm_l2: operands hit L2 when they fit beside the others).
    tiling: (base_m, base_n, base_k1, k1_step) pinned (catlass' L1/L0 tiles in kiln's terms), or Searched."""
    m, n, k = mnk

    def run(base: Profile, search: bool) -> float:
        prof = variant(base, aic, 2 * aic) if aic != base.cube_cores else base
        spec = GemmSpec(m=m, k=k, n=n, bias=False, relu=False)
        t = tiling
        if isinstance(tiling, Searched):
            t = tiling.recorded
            if search:
                t = searched_tiling(spec, prof, tiling.min_edge)
                if t != tiling.recorded:
                    print(f"note: the search now picks {t} for {spec.name} on {prof.name} "
                          f"(recorded {tiling.recorded})", file=sys.stderr)
        assert isinstance(t, tuple)
        pred = predict(spec, "gemm_cube", dict(base_m=t[0], base_n=t[1], base_k1=t[2], k1_step=t[3]), prof,
                       l2=warm_l2(prof, [m * k * 2, k * n * 2], m * n * 2))
        assert pred is not None
        return us(pred.cycles, prof)
    return run


def catlass_tiling(l1: tuple[int, int, int], l0k: int) -> tuple[int, int, int, int]:
    """catlass' L1TileShape<M, N, K> and L0TileShape::K as gemm_cube's (base_m, base_n, base_k1, k1_step)."""
    return l1[0], l1[1], l0k // 16, l1[2] // 16


def kernel_cases() -> list[Case]:
    v20 = "ascend910b-20aic-40aiv"
    default = catlass_tiling((128, 256, 256), 64)
    big = 6144
    return [
        Case("add 48aiv", "Vector Add fp16 8192x8192, 48 AIV, double buffer, L2 bypass (case 6), end to end",
             "kernel", "fit", 184.52, "us", "ADD L461", "ascend910b", add_kernel(48, None),
             "aiv_time 178.49 us; kiln: rule tile"),
        Case("add 48aiv vec", "the same, Vector instruction time per core (aiv_vec_time)", "kernel", "check",
             6.954, "us", "ADD L461", "ascend910b", add_kernel(48, None, vector_time=True), "V busy / cores"),
        Case("add 48aiv vec conflicts", "Vector Add as case 5 (UB bank conflicts), aiv_vec_time", "kernel", "check",
             12.846, "us", "ADD L384", "ascend910b", add_kernel(48, None, vector_time=True),
             "V busy / cores; kiln's UB buffers are laid out as case 5's"),
        Case("add 1aiv", "Vector Add fp16 8192x8192, one AIV, 4096-element copies (case 1)", "kernel", "fit",
             6909.6, "us", "ADD L141", "ascend910b-24aic-1aiv", add_kernel(1, 4096),
             "kiln double-buffers, case 1 does not; fits the GM->UB rate on an L2 miss (384 MB, all misses)"),
        Case("catlass m1024 default", "matmul M1024 N576 K6144, L1 128x256x256, L0 K 64", "kernel", "fit", 72.5,
             "us", "CAT L115", v20, gemm_kernel((1024, 576, 6144), 20, default), "24 blocks on 20 cores"),
        Case("catlass m1024 tuned", "matmul M1024 N576 K6144, L1 256x128x256, L0 K 64", "kernel", "fit", 48.6,
             "us", "CAT L119", v20, gemm_kernel((1024, 576, 6144), 20, catlass_tiling((256, 128, 256), 64)),
             "20 blocks"),
        Case("catlass m1024 search", "matmul M1024 N576 K6144, kiln's searched tiling", "kernel", "check", 48.6,
             "us", "CAT L119", v20, gemm_kernel((1024, 576, 6144), 20, Searched((256, 128, 1, 16))),
             "search: m256 n128 k1 s16"),
        Case("catlass m20 default", "matmul M20 N6144 K16384 (B zN), L1 128x256x256, L0 K 64", "kernel", "check",
             181.4, "us", "CAT L125", v20, gemm_kernel((20, 6144, 16384), 20, default), "memory-bound"),
        Case("catlass m20 tuned", "matmul M20 N6144 K16384 (B zN), L1 32x320x128, L0 K 32", "kernel", "fit",
             139.6, "us", "CAT L129", v20, gemm_kernel((20, 6144, 16384), 20, catlass_tiling((32, 320, 128), 32)),
             "memory-bound (B: 201 MB, beyond L2); fits the GM->L1 rate on an L2 miss"),
        Case("catlass m20 search", "matmul M20 N6144 K16384 (B zN), kiln's searched tiling", "kernel", "check",
             139.6, "us", "CAT L129", v20, gemm_kernel((20, 6144, 16384), 20, Searched((32, 128, 8, 32))),
             "search: m32 n128 k8 s32"),
        Case("catlass m160 swizzle", "matmul M160 N6144 K2048 (B zN), L1 128x256x256, swizzle <4,1>", "kernel",
             "check", 35.3, "us", "CAT L154", v20, gemm_kernel((160, 6144, 2048), 20, default),
             "40.6 us with <3,1>; kiln: block b on core b % 20"),
        Case("catlass m160 search", "matmul M160 N6144 K2048 (B zN), kiln's searched tiling", "kernel", "check",
             35.3, "us", "CAT L154", v20, gemm_kernel((160, 6144, 2048), 20, Searched((128, 256, 4, 20))),
             "search: m128 n256 k4 s20"),
        Case("gemm 6144 search", "square GEMM 6144^3 at 309 TFLOPS, kiln's searched tiling", "kernel", "check",
             2 * big**3 / 309e12 * 1e6, "us", "PTO L24", "ascend910b",
             gemm_kernel((big, big, big), 24, Searched((128, 256, 4, 20), min_edge=128)),
             "search (base_m, base_n >= 128): m128 n256 k4 s20; limulidae: 328 TFLOPS bf16"),
    ]


CASES = curve_cases() + kernel_cases()

# Cases the model cannot bring within the goal (GOAL in the test), and why: the table prints the reason, the test
# holds these at their recorded ratio and fails if one of them reaches the goal (then it leaves this list).
OUTSIDE_GOAL = {
    "gm_l1 4K": "the measured curve is not a line: 167 cycles + 164 B/cycle through its ends (1 and 512 KiB, the "
                "fit) is 18% fast at 4 KiB and within 10% elsewhere; mskpp gives no reason for the knee",
    **{f"gm_ub {k}K": "the measured curve is not a line: 215 cycles + 51 B/cycle through 1 and 128 KiB (the fit) is "
                      "17-21% slow at 8-32 KiB" for k in (8, 32)},
    "Add.f16 r1": "the row is twice VSUB's and VMAX's fp16 r1 and VADD fp32's r1 (3.0-3.1 cycles) of the same "
                  "table; kiln charges the 3-cycle floor those show",
    "add 48aiv vec": "case 6 staggers its UB buffers across bank groups (1.2 cycles per repeat); kiln's buffers "
                     "conflict as case 5's do (2 cycles, the next row)",
    "catlass m1024 tuned": "kiln is 1.4x faster than measured, not explained: the operands (19 MB) are L2-resident "
                           "and every core streams them at the single-core L2 rate (164 B/cycle), the Cube at one "
                           "fractal per cycle; candidates: the L2 rate with 20 cores reading the same tiles (AD-L2's "
                           "7 TB/s is a mixed figure), per-tile costs of the K loop (384 steps of 16)",
}


def simulate(base: Profile | None = None, search: bool = False,
             cases: list[Case] | None = None) -> list[tuple[Case, float, float]]:
    """(case, simulated, ratio) for every case, simulated on `base` (default ascend910b) or its variants."""
    base = base or PROFILES["ascend910b"]
    rows = []
    for case in cases or CASES:
        sim = case.run(base, search)
        rows.append((case, sim, sim / case.published))
    return rows


def _fmt(x: float) -> str:
    return f"{x:.1f}" if x >= 100 else f"{x:.2f}" if x >= 10 else f"{x:.3f}"


def _para(text: str) -> str:
    return textwrap.fill(text, 115, break_on_hyphens=False, break_long_words=False)


def markdown(rows: list[tuple[Case, float, float]], how: str) -> str:
    commit = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=REPO, capture_output=True,
                            text=True).stdout.strip() or "unknown"
    date = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d")
    intro = _para(
             f"Produced by `python benchmarks/calibration.py --write{how}` on {date}, commit {commit}: every figure "
             "is simulated by the cost model (no build, no device) on the profile named per row (ascend910b, or "
             "its variant with other core counts). Ratio = simulated / published time. \"fit\": a case the "
             "calibration tuned constants on; \"check\": held out. A curve point is the cycles per instruction of "
             f"{BURST} back-to-back instructions on one core (the pipe's latency paid once, as mskpp timed them). "
             "Goal: within 15% for curves, 25% for kernels; `tests/benchmarks/test_calibration.py` holds every case "
             "that reaches it to the goal, and the others (the note says why) to their ratio here.")
    lines = [HEADING, "", intro, "",
             "| case | kind | fit/check | profile | published | simulated | ratio | source | note |",
             "|---|---|---|---|---|---|---|---|---|"]
    for case, sim, ratio in rows:
        note = "; ".join(filter(None, [case.note, OUTSIDE_GOAL.get(case.key, "") and
                                       "outside the goal: " + OUTSIDE_GOAL[case.key]]))
        lines.append(f"| {case.label} | {case.kind} | {case.role} | {case.profile} | {_fmt(case.published)} "
                     f"{case.unit} | {_fmt(sim)} {case.unit} | {ratio:.2f} | {case.source} | {note} |")
    lines += ["", _para("Sources (file at the commit named; line numbers of the row cited; details and the "
                        "conversions in [docs/ascend-model.md](../docs/ascend-model.md), section 10):"), ""]
    lines += [f"- {key}: {text}" for key, text in SOURCES.items()]
    return "\n".join(lines) + "\n"


def write_section(text: str, path: Path = RESULTS) -> None:
    """Replace this script's section of RESULTS.md (from its heading to the next one), or append it."""
    page = path.read_text(encoding="utf-8")
    start = page.find(HEADING)
    if start < 0:
        page = page.rstrip("\n") + "\n\n" + text
    else:
        end = page.find("\n## ", start + len(HEADING))
        page = page[:start] + text + (page[end:] if end >= 0 else "")
    path.write_text(page, encoding="utf-8")


def profile_constants() -> dict[str, dict[str, object]]:
    """Every cost constant of every profile (its sources text aside), as JSON values: what the freeze holds."""
    def constants(profile: Profile) -> dict[str, object]:
        fields = dataclasses.asdict(profile)
        fields.pop("sources")
        for name in ("vec_cpr_f16", "vec_cpr_f32"):  # per op by name, so a new op shows as one added entry
            fields[name] = dict(zip(VEC_OPS, fields[name]))
        return json.loads(json.dumps(fields))
    return {name: constants(profile) for name, profile in PROFILES.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--recorded", action="store_true", help="use the searched tilings recorded in the cases")
    ap.add_argument("--write", action="store_true", help=f"replace the section of {RESULTS.relative_to(REPO)}")
    ap.add_argument("--expect", action="store_true", help="print the ratios as the test's expectation table")
    ap.add_argument("--freeze", action="store_true", help=f"record the profiles' constants in {FROZEN.name}")
    args = ap.parse_args()
    if args.freeze:
        FROZEN.write_text(json.dumps(profile_constants(), indent=1, sort_keys=True) + "\n", encoding="utf-8")
        print(f"wrote {FROZEN.relative_to(REPO)}")
        return 0
    rows = simulate(search=not args.recorded)
    if args.expect:
        print("\n".join(f"    {case.key!r}: {ratio:.4g}," for case, _, ratio in rows))
        return 0
    text = markdown(rows, " --recorded" if args.recorded else "")
    print(text)
    if args.write:
        write_section(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
