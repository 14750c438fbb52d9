"""eltwise_program_vector: a fused chain of elementwise ops (an elementwise program, codegen/ir/eltwise_program.py)
as one Vector kernel: per tile, the inputs GM->UB (a per-channel input as its one C0 block, expanded over the
tile), each cast to fp32, the program's instruction sequence, one cast back, UB->GM
(templates/eltwise_program_vector.cpp.j2). NC1HWC0 outputs are walked plane by plane ((n, c1) = H*W*C0
values) so a broadcast block is one per tile; padded channel lanes are written as zeros. A run-time scalar input
is read as its one value, broadcast to a 32-byte block by a Brcb, then expanded over the tile as a channel block."""
from __future__ import annotations

from math import ceil

from ..cost.blocks import pingpong_tile
from ..cost.model import PingPongSim, Prediction, SimCore, launch
from ..ir.eltwise_program import BINARY_VECOPS, PROGRAM_OPS, scalar_of, scratch_names, vector_ops
from ..ir.opspec import C0, EltwiseProgramSpec
from ..ir.optlog import OptLog
from ..ir.profiles import Profile
from .base import Family, Variant, register, share128


def ub_per_elem(spec: EltwiseProgramSpec) -> int:
    """UB bytes per tile element: fp16 ping-pong of each full input and of the output, the expanded fp16 tile of
    each broadcast input, one fp32 buffer per input, per step and per step's scratch buffer."""
    forms = spec.form_list
    full = forms.count("full") + forms.count("row")
    return 4 * full + 4 + 2 * (len(forms) - full) + 4 * (len(forms) + len(spec.steps) + len(scratch_names(spec.steps)))


SCALAR_BLOCK = 128  # fp16 values a scalar input's Brcb writes (8 blocks; the expansion reads the first)


def ub_fixed(spec: EltwiseProgramSpec) -> int:
    """The broadcast inputs' C0 blocks (ping-pong), and each scalar input's Brcb destination."""
    return sum(2 * C0 * 2 + (SCALAR_BLOCK * 2 if f == "scalar" else 0) for f in spec.form_list
               if f not in ("full", "row"))


def tile_of(spec: EltwiseProgramSpec, profile: Profile) -> int:
    """Elements per tile: a plane's share when there are fewer planes than Vector cores, within the UB."""
    cores = profile.cores_for("vector")
    max_tile = ((profile.capacity["UB"] - ub_fixed(spec)) // ub_per_elem(spec)) // 128 * 128
    return share128(spec.plane, max(1, ceil(cores / spec.planes)), max_tile)


def items(spec: EltwiseProgramSpec, tile: int) -> tuple[int, int]:
    """(chunks per plane, work items): each item is one chunk of one plane."""
    chunks = ceil(spec.plane / tile)
    return chunks, spec.planes * chunks


def program_rule(spec: EltwiseProgramSpec, profile: Profile, log: OptLog) -> Variant:
    tile = tile_of(spec, profile)
    blocks = min(profile.cores_for("vector"), items(spec, tile)[1])
    return Variant("eltwise_program_vector", {"tile_elems": tile}, blocks,
                   {"UB": ub_per_elem(spec) * tile + ub_fixed(spec)})


def program_mte2(spec: EltwiseProgramSpec, v: Variant) -> int:
    chunks, _ = items(spec, v.params["tile_elems"])
    return sum(spec.numel * 2 if f in ("full", "row") else spec.planes * chunks * _loaded(f) * 2
               for f in spec.form_list)


def _loaded(form: str) -> int:
    """fp16 values a broadcast input loads per tile: its C0 block, or a scalar's one value."""
    return 1 if form == "scalar" else C0


def _spread(form: str, n: int) -> list[tuple[int, int, list[tuple[str, bool]]]]:
    """The Vector passes expanding a broadcast input over a tile of n values (a scalar's Brcb first)."""
    brcb = [(SCALAR_BLOCK, SCALAR_BLOCK, [("Brcb", False)])] if form == "scalar" else []
    return brcb + [(n, 128, [("Copy", False)])]


def replay_program(spec, params: dict, profile: Profile) -> Prediction:
    forms = spec.form_list
    tile = params["tile_elems"]
    chunks, total = items(spec, tile)
    blocks = min(profile.cores_for("vector"), total)
    fp32_ops = [("Cast", True)] * len(forms) + [(op, True) for op in vector_ops(spec.steps)] + [("Cast", True)]

    def block(core: SimCore, b: int) -> None:
        i0, i1 = total * b // blocks, total * (b + 1) // blocks
        inq, outq = PingPongSim(core, "MTE2", "V", 0), PingPongSim(core, "V", "MTE3", 2)
        for it in range(i0, i1):
            p, off0 = it // chunks, (it % chunks) * tile
            n = min(tile, spec.plane - off0)
            spread = [s for f in forms if f not in ("full", "row") for s in _spread(f, n)]  # broadcast inputs
            pad_lanes = [(n, 128, [("Dup", False)])] if spec.c_tail and p % spec.c1 == spec.c1 - 1 else []
            pingpong_tile(core, (inq, outq), inq.slot(it - i0), n,
                          [(n if f in ("full", "row") else _loaded(f), i) for i, f in enumerate(forms)],
                          spread + [(n, 64, fp32_ops)] + pad_lanes)
        inq.drain()
        outq.drain()

    return launch(profile, "vector", blocks, block)


# ---- what the template calls

def program_lines(spec: EltwiseProgramSpec) -> list[str]:
    """The program's Vector instructions as C++ statements over the fp32 buffers r<i> (inputs first, then one
    per step), inside a vec_flat(n, 64, ...) loop body (off, mk, rp)."""
    return step_lines(spec.steps, len(spec.form_list))


def step_lines(steps: tuple, k: int, prefix: str = "r") -> list[str]:
    """program_lines of the steps of a program of k inputs over buffers <prefix><i> (also a depthwise kernel's
    program epilogue: k = 1, prefix "p")."""
    lines = []
    for j, (op, args, params) in enumerate(steps):
        named = ", ".join(f"{n}={v:.9g}" for n, v in zip(PROGRAM_OPS[op].params, params))
        lines.append(f"// step {j}: {op}({', '.join(f'{prefix}{a}' for a in args)}"
                     + (f"; {named}" if named else "") + f") -> {prefix}{k + j}")
        reg = {"d": f"{prefix}{k + j}", "t": f"t{j}", "u": f"u{j}", **{r: f"{prefix}{a}" for r, a in zip("abc", args)}}
        for vec_op, dst, src, *rest in PROGRAM_OPS[op].sequence(params):
            if vec_op == "Dup":
                lines.append(f"core.vdup({reg[dst]}, off, {_cfloat(scalar_of(rest[0], op, params))}, mk, rp);")
            elif vec_op in BINARY_VECOPS:
                lines.append(f"core.vbinary(VecOp::{vec_op}, {reg[dst]}, off, {reg[src]}, off, {reg[rest[0]]}, off, "
                             f"mk, rp);")
            elif rest:
                lines.append(f"core.vunary(VecOp::{vec_op}, {reg[dst]}, off, {reg[src]}, off, mk, rp, "
                             f"{_cfloat(scalar_of(rest[0], op, params))});")
            else:
                lines.append(f"core.vunary(VecOp::{vec_op}, {reg[dst]}, off, {reg[src]}, off, mk, rp);")
    return lines


def _cfloat(v: float) -> str:
    """An exact C++ float literal (9 significant digits round-trip a float32); the infinities by name."""
    if v in (float("inf"), float("-inf")):
        return "INFINITY" if v > 0 else "-INFINITY"
    text = f"{v:.9g}"
    return text + ("f" if any(c in text for c in ".e") else ".0f")


def pad_mask_word(c_tail: int) -> str:
    """64 mask bits selecting, in each group of C0 fp16 lanes, the padded channels c_tail..15."""
    group = ((1 << C0) - 1) & ~((1 << c_tail) - 1)
    return hex(sum(group << (C0 * i) for i in range(64 // C0))) + "ull"


FAMILY = register(Family("eltwise_program_vector", "eltwise_program", "vector", program_rule, program_mte2,
                         replay_program,
                         template_globals={"program_lines": program_lines, "step_lines": step_lines,
                                           "pad_mask_word": pad_mask_word, "scratch_names": scratch_names,
                                           "scalar_block": SCALAR_BLOCK}))
