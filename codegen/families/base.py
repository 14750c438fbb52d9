"""What every kernel family module builds on: the Family record, the Variant it chooses, the shared sizing
helpers, and the table the registry fills (codegen/families/registry.py lists the families, a line each).

A family is one template (templates/<name>.cpp.j2) and everything the codegen knows about it: the op kind it
implements, the unit it runs on, its tiling parameters, its rule tiling, the GM bytes it moves, its cost-model
replay, and optionally its tuning space and its generic (runtime-shaped) form. Nothing outside
codegen/families/ names a family: the other stages ask the registry.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from math import ceil
from typing import Any

from .. import KilnError
from ..cost import model as cost
from ..ir.opspec import Opspec, c1
from ..ir.optlog import OptLog
from ..ir.profiles import Profile

# One letter per tiling parameter, for variant tags (a parameter keeps its letter in every family).
PARAM_LETTER = {"base_m": "m", "base_n": "n", "base_k1": "k", "c1_step": "c", "slab_rows": "r", "k1_step": "s",
                "rows_per_block": "r", "tile_elems": "t", "chunk_pixels": "p", "rows_per_tile": "r",
                "planes_per_block": "p", "items_per_block": "g",
                "epi_tile": "e", "tile": "f", "tile_batch": "b", "c1_block": "i", "co1_block": "o", "on_chip": "u",
                "base_n2": "q", "base_k2": "j", "n_split": "z", "mixed": "h", "resident": "l",
                "l1_buffers": "d", "prefetch": "a", "images": "v", "base_q": "x", "base_kv": "y", "vec_split": "w"}


# What a rule derives from the profile and the size instead of searching (the Vector epilogue's UB tile and where
# it runs): a search's candidates and a re-ranking inherit it from the tiling they start from.
RULE_DERIVED = ("epi_tile", "on_chip", "mixed")

# A chained conv's 1x1 tiling, which its tunable parameters hold instead of base_n (pins, records, kiln tune).
CHAIN_TILING = ("base_n2", "base_k2", "n_split")


@dataclass(frozen=True)
class GenericForm:
    """How a kernel family becomes generic (codegen/shapes/generic.py)."""
    size_fields: tuple[str, ...]     # spec fields that vary with the input size (erased from the structural key)
    spec_fields: tuple[str, ...]     # spec attributes the template reads that become runtime values
    tiling_fields: tuple[str, ...]   # variant parameters that become runtime values
    runtime_blocks: bool = False     # the template reads v.blocks (the block count depends on the size)
    structural: tuple[str, ...] = ()  # variant parameters that are structural (part of the generic key)
    name: Callable[[Any], str] | None = None  # the generic kernel's name body, where the spec's own name needs numbers


Rule = Callable[..., "Variant"]  # (spec, profile, log[, search]) -> Variant


@dataclass(frozen=True)
class Family:
    """One kernel family (see the module docstring)."""
    name: str                      # also the template's name: templates/<name>.cpp.j2
    kind: str                      # the Opspec kind it implements
    unit: str                      # "cube" or "vector": whose cores its blocks run on
    rule: Rule | None              # the rule tiling (None: only its kind's chooser builds it, see registry.CHOOSERS)
    mte2: Callable[[Any, Variant], int]                # GM -> L1/UB bytes the kernel moves
    replay: Callable[[Any, dict, Profile], cost.Prediction]  # the cost model's instruction-level replay
    matches: Callable[[Any], bool] = lambda spec: True  # picks the family among its kind's (a conv: the algorithm)
    algorithm: Callable[[Variant], str] | None = None   # the algorithm reported in the manifest (default: the name)
    searched: bool = False         # rule(spec, profile, log, search) runs the cost-model search after the rule
    tunable: tuple[str, ...] = ()  # parameters `kiln tune` / tuning records / kernel-list pins set
    record_extra: tuple[str, ...] = ()  # what a pin or tuning record sets besides `tunable` (Winograd's tile)
    searched_extra: tuple[str, ...] = ()  # what a whole searched tiling sets besides `tunable`
    # (spec, profile, params, source) -> (params, buffers, blocks) of a pinned or recorded tiling
    from_params: Callable[..., tuple[dict, dict, int]] | None = None
    space: Callable[[Any, dict, Profile], list[dict]] | None = None     # tilings `kiln optimize` compares
    wide_space: Callable[[Any, dict, Profile], list[dict]] | None = None  # off-grid Cube tilings (kiln optimize)
    candidates: Callable[..., tuple[dict, list, Callable]] | None = None  # (spec, profile, edges) for `kiln tune`
    # (spec, params, profile) -> params: a never-slower option given to each quick-ranked finalist before its exact
    # replay (what the quick ranking of every candidate leaves out to stay cheap: conv2d_cube_img2col's prefetch)
    finalist: Callable[[Any, dict, Profile], dict] | None = None
    generic: GenericForm | None = None  # the runtime-shaped form (KILN_SHAPE_BUCKETS)
    kernel_inputs: Callable[[Any, Variant], list] | None = None  # where the variant changes an input's layout
    record_allowed: Callable[..., bool] | None = None  # (spec, record, options, log): the options admit a record
    symbol_family: Callable[[Variant], str] | None = None  # the family part of kernel symbols (default: the name)
    # (spec, variant) -> (blob-name suffix, transform of the FRACTAL_Z weight): a weight baked in another layout
    weight_transform: Callable[[Any, Variant], tuple[str, Callable]] | None = None
    template_globals: dict[str, Any] = field(default_factory=dict)  # helpers its template calls

    def choose(self, spec, profile: Profile, log: OptLog, search: bool) -> Variant:
        assert self.rule is not None, f"{self.name} is chosen by its kind's chooser"
        return self.rule(spec, profile, log, search) if self.searched else self.rule(spec, profile, log)

    def algorithm_of(self, v: Variant) -> str:
        return self.algorithm(v) if self.algorithm else self.name

    def symbol_of(self, v: Variant) -> str:
        return self.symbol_family(v) if self.symbol_family else self.name

    def inputs_of(self, spec: Opspec, v: Variant) -> list:
        return self.kernel_inputs(spec, v) if self.kernel_inputs else spec.inputs()


FAMILIES: dict[str, Family] = {}  # every family by name, filled as each family module is imported


def register(f: Family) -> Family:
    """Called once by the family's own module (FAMILY = register(Family(...))): its name is then known to
    predict(), Variant.unit and the registry."""
    assert f.name not in FAMILIES, f"family {f.name} registered twice"
    FAMILIES[f.name] = f
    return f


def tag_of(family: str, params: dict) -> str:
    return family + "_" + "".join(f"{PARAM_LETTER[k]}{v}" for k, v in params.items())


def predict(spec, family: str, params: dict, profile: Profile, sample: bool = False,
            l2: tuple[bool, ...] | None = None) -> cost.Prediction | None:
    """Predicted execution of `family` with `params` for `spec` (None for an unknown family). sample=True
    replays two cores per launch: cycles for ranking candidates, not per-pipe totals. l2: a model step's L2 hits
    per kernel input (codegen/passes/l2.py); None, the kernel called on its own: every GM read misses."""
    f = FAMILIES.get(family)
    if f is None:
        return None
    return cost.run(f.replay, spec, params, profile, sample,
                    None if l2 is None else cost.L2Plan(l2, input_bytes(spec, f, params)))


def input_reads(spec, family: str, params: dict, profile: Profile) -> tuple[int, ...] | None:
    """The bytes the kernel's cores read of each packed input over its launches (the cost model's count: what a
    model step's first-read shares come from, cost.first_shares); None for an unknown family."""
    f = FAMILIES.get(family)
    if f is None:
        return None
    counts = cost.read_counts(f.replay, spec, params, profile)
    return tuple(counts[i] for i in range(len(input_bytes(spec, f, params))))


def input_bytes(spec, f: Family, params: dict) -> tuple[int, ...]:
    """Each packed kernel input's bytes (the GM regions a model step's L2 plan is about: cost.ReplayMode.l2_bytes)."""
    return tuple(t.nbytes for t in f.inputs_of(spec, Variant(f.name, params)))


def predicted_cycles(spec, family: str, params: dict, profile: Profile, sample: bool = False) -> float:
    """predict()'s cycles for a registered family (a KeyError for another: the callers rank their own variants)."""
    return cost.run(FAMILIES[family].replay, spec, params, profile, sample).cycles


def record(spec, family: str, params: dict, profile: Profile) -> tuple[cost.Prediction | None, list]:
    """predict() with every instruction recorded (for `kiln trace` and the report): (prediction, launches),
    the launches in the order they chain, each (unit, cycles, {core: [(pipe, instr, bytes, start, end)]}) with
    start/end in cycles from that launch's start (launch i begins when launches 0..i-1 have ended)."""
    f = FAMILIES.get(family)
    if f is None:
        return None, []
    return cost.run_recorded(f.replay, spec, params, profile)

@dataclass(frozen=True)
class Variant:
    family: str
    params: dict[str, int] = field(hash=False)
    blocks: int = 0
    buffers: dict[str, int] = field(default_factory=dict, hash=False)  # bytes used per position
    notes: dict = field(default_factory=dict, hash=False, compare=False)  # how it was chosen (algorithm, cycles)

    @property
    def unit(self) -> str:
        return FAMILIES[self.family].unit

    @property
    def tag(self) -> str:
        """Short variant name: family plus tiling, e.g. gemm_cube_m128n256k4s20."""
        return tag_of(self.family, self.params)


def fits(profile: Profile, buffers: dict[str, int]) -> str | None:
    """Name of the first buffer that overflows, or None."""
    for pos, used in buffers.items():
        if used > profile.capacity[pos]:
            return pos
    return None


def row_band_variant(family: str, spec, profile: Profile, buffers: Callable[..., dict[str, int]],
                     carry: bool = False) -> Variant:
    """A window kernel's rule tiling over bands of output rows per (n, c1) plane (the pooling families): enough
    bands to give every Vector core one, halved while the band's buffers overflow; refused when one row does not
    fit. carry: the family can run its slabs as a queue across a core's blocks (prefetch; buffers(spec, rows,
    slabs)), which it does where there are more planes than Vector cores, with the largest band whose two slabs
    fit (one slab where two one-row slabs do not: a wide map)."""
    cores = profile.cores_for("vector")
    planes = spec.n * c1(spec.c)
    limit: str | None = ""
    for slabs in (2, 1) if carry and planes > cores else (1,):
        def bufs(rows: int, slabs: int = slabs) -> dict[str, int]:
            return buffers(spec, rows, slabs) if carry else buffers(spec, rows)
        rpb = ceil(spec.ho / max(1, ceil(cores / planes)))
        while rpb > 1 and fits(profile, bufs(rpb)):
            rpb = ceil(rpb / 2)
        limit = fits(profile, bufs(rpb))
        if not limit:
            params = {"rows_per_block": rpb, **({"prefetch": 1} if slabs == 2 else {})}
            return Variant(family, params, planes * ceil(spec.ho / rpb), bufs(rpb))
    raise KilnError("tiling", spec.name, f"one output row does not fit {limit} of {profile.name}")


def row_band_space(spec, params: dict, profile: Profile, buffers: Callable[..., dict[str, int]]) -> list[dict]:
    """`kiln optimize`'s grid of a pool that may queue its slabs: every band size that fits with the kernel's slabs
    (two with prefetch: a structure the grid keeps)."""
    slabs = 2 if params.get("prefetch") else 1
    return [dict(params, rows_per_block=r) for r in splits(spec.ho) if not fits(profile, buffers(spec, r, slabs))]


def row_band_mte2(spec, rows_per_block: int) -> int:
    """GM bytes a row-band window kernel reads: each band's input rows (padding rows not read), per plane."""
    total = 0
    for r0 in range(0, spec.ho, rows_per_block):
        rows_out = min(rows_per_block, spec.ho - r0)
        lo = r0 * spec.sh - spec.pt
        hi = lo + (rows_out - 1) * spec.sh + (spec.kh - 1) * spec.dh + 1
        total += max(0, min(hi, spec.h) - max(lo, 0)) * spec.w * 32
    return total * spec.n * c1(spec.c)


def r16(x: int) -> int:
    return ceil(x / 16) * 16


def r32(nbytes: int) -> int:
    """Bytes rounded up to the 32-byte UB block."""
    return ceil(nbytes / 32) * 32


def share128(numel: int, cores: int, max_tile: int) -> int:
    """Elements per tile so that every core gets at most one tile: the per-core share rounded *up* to
    whole 128-element repeats (rounding down leaves one core a second tile), capped by the UB budget."""
    return max(128, min(max_tile, ceil(ceil(numel / cores) / 128) * 128))


def half16(x: int) -> int:
    """Half a tile edge, kept a multiple of 16 (the fractal edge)."""
    return max(16, (x // 2) // 16 * 16)


def powers(limit: int) -> list[int]:
    """1, 2, 4, ... up to `limit`."""
    out, v = [], 1
    while v <= limit:
        out.append(v)
        v *= 2
    return out


def splits(total: int) -> list[int]:
    """ceil(total / k) for every k: all the distinct per-block shares of `total` items."""
    return sorted({ceil(total / k) for k in range(1, total + 1)})
