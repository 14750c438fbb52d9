"""Hardware profiles of the emulated Ascend AI Core.

One table feeds both the tiling/cost decisions here and the C++ emulator
(rendered into kiln_profiles.hpp). Numbers and their sources are collected in
docs/ascend-model.md; keys used below:
  AD-stub  asc-devkit tests/api/common/platform_stub.cpp (buffer sizes, ddr/l2 rates)
  AD-perf  asc-devkit tests/perf (mmad 21-cycle head, L1->L0 256/128 B/cycle, load3d)
  CAT-arch catlass include/catlass/arch/arch.hpp (A2 buffer sizes)
  KPP-res  mskpp csrc/prof_data/resource910b.cpp (measured vector cycles per repeat)
  PTOK     pto-kernels skills.md quoting Ascend910B2.ini (core counts, ub_to_l2 64 B/cycle)
  AD-API   asc-devkit docs/zh/api/附录/Cube指令理论性能汇总.md (LoadData, Load3D, Fixpipe rates)
  ADD      asc-devkit add_high_performance README_en.md (launch overhead, Vector Add with/without bank conflicts)
  PTO-fam  pto-isa flash_atten/scripts/fa_cost_model.py (launch overhead, Cube <-> Vector tile sync)
Section 0 of docs/ascend-model.md gives every field its source (file and line) or says "assumed" and why.
"""
from __future__ import annotations

from dataclasses import dataclass, field

KB = 1024
POSITIONS = ("GM", "L1", "L0A", "L0B", "L0C", "UB", "BT")
VEC_OPS = ("Add", "Sub", "Mul", "Div", "Max", "Min", "MulAddDst", "Adds", "Muls", "Maxs", "Mins", "Relu", "Exp",
           "Abs", "Reciprocal", "Copy", "Dup", "Cast", "ReduceSum", "ReduceMax", "Transpose", "Brcb", "Ln", "Sqrt",
           "LeakyRelu", "CmpLt", "CmpGt", "CmpEq", "CmpLe", "CmpGe", "Sel")


def _vec_cycles(overrides: dict[str, float], default: float) -> tuple[float, ...]:
    return tuple(overrides.get(op, default) for op in VEC_OPS)


@dataclass(frozen=True)
class Profile:
    name: str
    sources: str
    cube_cores: int
    vector_cores: int
    coupled: bool          # Cube and Vector in one core; L0C may drain into UB
    clock_ghz: float
    capacity: dict[str, int]
    alignment: dict[str, int]
    gm_to_l1_bpc: float
    gm_to_ub_bpc: float
    l1_to_l0a_bpc: float
    l1_to_l0b_bpc: float
    load3d_bpc: float
    l1_to_bt_bpc: float
    ub_to_gm_bpc: float
    fix_elems_pc: float
    mte2_head: int
    mte1_head: int
    load3d_head: int
    bt_head: int
    fix_head: int
    mmad_head: int
    mte3_head: int
    vec_head: int
    vec_cpr_f16: tuple[float, ...] = field(default=())
    vec_cpr_f32: tuple[float, ...] = field(default=())
    gm_alignment: int = 128  # bytes; arena offsets (GM bursts split at 128/256/512 B, AD-HC)
    # ---- instruction costs (issue 22 points 2 and 3; sources in docs/ascend-model.md section 0). An instruction
    # occupies its pipe for its body: the per-instruction cost below + bytes / rate (or fractals, or repeats).
    # The *_head fields above are each pipe's latency: a burst of back-to-back instructions pays it once, and
    # whatever waits on the pipe (a flag, a barrier, the kernel's end) sees it after the burst's last body.
    gm_to_l1_copy: float = 167.0    # cycles per GM->L1 copy (MTE2); the bandwidth is gm_to_l1_bpc
    gm_to_ub_copy: float = 215.0    # cycles per GM->UB copy (MTE2)
    ub_to_gm_copy: float = 137.0    # cycles per UB->GM copy (MTE3)
    mte1_issue: float = 2.0         # cycles per LoadData 2D/3D (MTE1)
    bt_issue: float = 1.0           # cycles per L1->BiasTable copy (MTE1)
    mmad_issue: float = 2.9         # cycles per mmad beyond its fractals
    fix_gm_min_cycles: float = 83.0  # a Fixpipe to GM takes at least this (a write latency its transfer hides)
    fix_local_issue: float = 2.0    # cycles per Fixpipe to L1 or UB (on chip)
    fix_f32_elems_pc: float = 32.0  # Fixpipe elements per cycle with fp32 output (fix_elems_pc: 16-bit output)
    vec_min_cycles: float = 3.0     # a Vector instruction's body is at least this, whatever its repeats
    launch_cycles: float = 10850.0  # per kernel launch (the whole launch waits for it)
    mixed_launch_cycles: float = 1800.0  # added to a launch of Cube and Vector cores together (split profiles)
    cross_core_cycles: float = 500.0     # a cross-core flag (AIC <-> AIV through GM), after the setting pipe
    vector_only_cores: int = 0      # standalone Vector cores beside coupled AI cores (310P: 7); not used yet

    # ---- the memory system (issue 22 point 1; docs/ascend-model.md section 12). gm_to_l1_bpc / gm_to_ub_bpc
    # above are a core's rates on an L2 miss (the per-core HBM share); these are the rest.
    l2_bytes: int = 0                # L2 capacity (0: no L2, every access misses)
    l2_to_l1_bpc: float = 0.0        # one core's GM -> L1 rate on an L2 hit, B/cycle
    l2_to_ub_bpc: float = 0.0        # one core's GM -> UB rate on an L2 hit, B/cycle
    hbm_read_gbps: float = 0.0       # chip-wide HBM/DDR bandwidth, GB/s (10^9 B/s): reads alone,
    hbm_write_gbps: float = 0.0      # writes alone,
    hbm_mixed_gbps: float = 0.0      # reads + writes together
    l2_gbps: float = 0.0             # chip-wide L2 bandwidth (all GM traffic passes it), GB/s

    def load3d_rate(self, kh: int, stride_w: int) -> float:
        """Load3D (img2col) L1->L0A bytes per cycle for a kh-row kernel at stride_w (AD-API table 4)."""
        if stride_w == 1:
            return self.load3d_bpc if kh == 1 else max(32.0, float(512 // (kh + 2)))
        if stride_w in (2, 4, 8):
            return max(32.0, float(512 // (2 * stride_w + (kh if kh > 1 else 0))))
        return 32.0

    def chip_bpc(self, gbps: float) -> float:
        """A chip-wide rate in GB/s as bytes per cycle at the profile's clock."""
        return gbps / self.clock_ghz

    def cores_for(self, unit: str) -> int:
        """AI cores a kernel on `unit` ("cube" or "vector") can be split over."""
        if self.coupled or unit == "cube":
            return self.cube_cores
        return self.vector_cores


# Cycles per 256-byte repeat, measured on 910B1 (KPP-res; rows in docs/ascend-model.md section 0): the
# single-operand and scalar-operand ops (Relu, Cast, Copy, Dup, Abs, Reciprocal, Adds, Muls, Maxs, Mins) 1;
# the tensor-tensor ops 2 (mskpp's operands share UB bank groups, as kiln's unstaggered buffers do; 1.2 without
# the conflicts, AD-add case 6); Exp fp16 4 / fp32 2; Div 4; MulAdd 6; ReduceSum fp16 7 / fp32 3; ReduceMax 7.
# Transpose (TransDataTo5HD) has no figure: costed as data movement, like Copy (a 16x16 fp16 tile is two repeats).
# Added for the elementwise catalogue (issue 19), same table: Ln (VLN) and Sqrt (VSQRT) fp16 4 / fp32 2 (as Exp),
# LeakyRelu (VLRELU) 1. Where and the comparisons (issue 19): the five compares (VCMPV_LT/GT/EQ/LE/GE) and the
# select (VSEL) 2, the tensor-tensor default (VCMPV fp32 and VSEL fp32 measured at 2; their fp16 rows assumed equal).
_ONE = dict.fromkeys(("Relu", "Cast", "Copy", "Dup", "Abs", "Reciprocal", "Transpose", "Brcb",
                      "Adds", "Muls", "Maxs", "Mins", "LeakyRelu"), 1)
_VEC_F16 = _vec_cycles({**_ONE, "Exp": 4, "Ln": 4, "Sqrt": 4, "Div": 4, "MulAddDst": 6, "ReduceSum": 7,
                        "ReduceMax": 7}, 2)
_VEC_F32 = _vec_cycles({**_ONE, "Exp": 2, "Ln": 2, "Sqrt": 2, "Div": 4, "MulAddDst": 6, "ReduceSum": 3,
                        "ReduceMax": 7}, 2)
_ALIGN = {"GM": 1, "L1": 32, "L0A": 512, "L0B": 512, "L0C": 64, "UB": 32, "BT": 64}

PROFILES: dict[str, Profile] = {
    "ascend910b": Profile(
        name="ascend910b",
        sources="AD-stub, CAT-arch, AD-perf, KPP-res, PTOK (see docs/ascend-model.md)",
        cube_cores=24, vector_cores=48, coupled=False, clock_ghz=1.8,
        capacity={"GM": 0, "L1": 512 * KB, "L0A": 64 * KB, "L0B": 64 * KB, "L0C": 128 * KB, "UB": 192 * KB,
                  "BT": 1 * KB},
        alignment=_ALIGN,
        # GM reads on an L2 miss at 56 (L1) / 50 (UB) B/cycle per core, fitted on kernels that stream from HBM
        # (ADD L141, CAT L129; docs/ascend-model.md section 0); the chip-wide HBM rates below bound all cores.
        # UB->GM 77 B/cycle: the two-point fit of KPP UB_TO_GM.
        gm_to_l1_bpc=56, gm_to_ub_bpc=50, l1_to_l0a_bpc=256, l1_to_l0b_bpc=128, load3d_bpc=256,
        l1_to_bt_bpc=34, ub_to_gm_bpc=77, fix_elems_pc=64,
        mte2_head=30, mte1_head=28, load3d_head=50, bt_head=20, fix_head=20, mmad_head=21, mte3_head=30,
        vec_head=2, vec_cpr_f16=_VEC_F16, vec_cpr_f32=_VEC_F32,
        # Memory system (docs/ascend-model.md section 12): L2 192 MB (AD-stub l2_size); a hit streams at the
        # measured single-core rates (KPP-res GM_TO_L1 / GM_TO_UB, two-point fits: 164 / 51 B/cycle); HBM
        # about 1.6 TB/s (AD-L2), 2.35 TB/s read+write mixed (AD-add case 6), writes alone assumed = reads
        # alone (no figure); L2 about 7 TB/s read+write mixed (AD-L2).
        l2_bytes=192 * KB * KB, l2_to_l1_bpc=164, l2_to_ub_bpc=51,
        hbm_read_gbps=1600, hbm_write_gbps=1600, hbm_mixed_gbps=2346, l2_gbps=7000,
    ),
    "ascend310p": Profile(
        name="ascend310p",
        sources="CANN Ascend310P3.ini (8 AI cores, 7 Vector cores), AD-stub (buffers, DDR rate); clock derived "
                "from 70 TFLOPS fp16 (assumed); instruction costs assumed equal to 910B's (no 310P tables)",
        cube_cores=8, vector_cores=8, coupled=True, clock_ghz=1.07,
        capacity={"GM": 0, "L1": 1024 * KB, "L0A": 64 * KB, "L0B": 64 * KB, "L0C": 256 * KB, "UB": 256 * KB,
                  "BT": 1 * KB},
        alignment=_ALIGN,
        gm_to_l1_bpc=17, gm_to_ub_bpc=17, l1_to_l0a_bpc=256, l1_to_l0b_bpc=128, load3d_bpc=256,
        l1_to_bt_bpc=34, ub_to_gm_bpc=64, fix_elems_pc=64,
        mte2_head=30, mte1_head=28, load3d_head=50, bt_head=20, fix_head=20, mmad_head=21, mte3_head=30,
        vec_head=2, vec_cpr_f16=_VEC_F16, vec_cpr_f32=_VEC_F32,
        vector_only_cores=7,
        # Memory system (docs/ascend-model.md section 12): L2 16 MB (AD-stub L237); a hit at the stub's
        # l2_rate, 114 B/cycle, on both paths (AD-stub L251); DDR 204.8 GB/s for the whole board (Atlas 300I
        # Pro, LPDDR4X) in every direction (no read/write split published); L2 chip-wide: assumed 8 cores x
        # 114 B/cycle at the assumed 1.07 GHz (no figure), so it never binds before the cores do.
        l2_bytes=16 * KB * KB, l2_to_l1_bpc=114, l2_to_ub_bpc=114,
        hbm_read_gbps=204.8, hbm_write_gbps=204.8, hbm_mixed_gbps=204.8, l2_gbps=976,
    ),
}


def get_profile(name: str) -> Profile:
    try:
        return PROFILES[name]
    except KeyError:
        raise ValueError(f"unknown hardware profile {name!r}; known: {', '.join(PROFILES)}") from None
