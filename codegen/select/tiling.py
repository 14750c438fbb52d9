"""Variants: which kernel family implements an Opspec, with which tiling.

The family comes from the registry (codegen/families/registry.py): the kind's chooser where several families
implement it (a conv), otherwise its one family's rule tiling, which picks the largest tile fitting the
profile's buffers (double-buffered) and shrinks tiles so the blocks spread over the AI cores; searched families
then rank candidates with the cost model. A kernel-list pin or a tuning record fixes the tiling instead
(`variant_from_params`, checked against the buffers).
"""
from __future__ import annotations

from .. import KilnError
from ..families.base import CHAIN_TILING, RULE_DERIVED, Variant, fits
from ..families.registry import CHOOSERS, FAMILIES, family_for, pinned_family, tunable
from ..ir.opspec import Opspec, spec_hash
from ..ir.optlog import OptLog
from ..ir.profiles import Profile

# What the input size decides in a whole tiling (recomputed for a generic plan's size).
SIZE_DERIVED = ("slab_rows", *RULE_DERIVED)


def _checked_params(spec: Opspec, family: str, params: dict, source: str, whole: bool) -> dict:
    f = FAMILIES.get(family)
    if f is None or not f.tunable or f.kind != spec.kind:
        raise KilnError("tiling", spec.name, f"{source}: family {family!r} cannot implement a {spec.kind} kernel; "
                        f"tunable: {', '.join(f'{n} ({FAMILIES[n].kind})' for n in tunable())}")
    want = set(f.tunable) | set(f.record_extra)
    chain = getattr(spec, "mid", 0) > 0  # a chain tiles its 1x1 with base_n2 instead of base_n
    need = want - {"base_n"} if chain else want
    if whole:
        params = {k: v for k, v in params.items() if k not in SIZE_DERIVED}
        need = need | set(CHAIN_TILING) if chain else need
        if not need <= set(params) <= want | set(f.searched_extra):
            raise KilnError("tiling", spec.name, f"{source}: tiling {sorted(params)} is not a whole tiling of "
                            f"{family} (needs {sorted(need)})")
    elif not need <= set(params) <= want | set(f.searched_extra):  # a pin may also set what the search chooses
        raise KilnError("tiling", spec.name, f"{source}: tiling {sorted(params)} must set {sorted(need)}"
                        + (f" and may set {sorted(f.searched_extra)}" if f.searched_extra else ""))
    bad = sorted(k for k, v in params.items() if not isinstance(v, int) or isinstance(v, bool) or v < 1)
    if bad:
        raise KilnError("tiling", spec.name, f"{source}: {', '.join(bad)} must be positive integers")
    for key in ("base_m", "base_n"):
        if key in params and params[key] % 16:
            raise KilnError("tiling", spec.name, f"{source}: {key}={params[key]} is not a multiple of 16")
    return params


def variant_from_params(spec: Opspec, profile: Profile, family: str, params: dict, source: str,
                        whole: bool = False) -> Variant:
    """The variant of `family` with the tunable parameters given by a pin or a tuning record (checked). whole:
    `params` is a baked kernel's whole tiling, which a generic plan borrows for another input size
    (codegen/shapes/buckets.py): it may also set the family's searched_extra (a chain's has no base_n), and what
    the size decides (SIZE_DERIVED) is recomputed here, as the fit to this spec's buffers is checked."""
    params = _checked_params(spec, family, params, source, whole)
    from_params = FAMILIES[family].from_params
    assert from_params is not None, f"{family} is tunable but reads no tiling"  # every tunable family has one
    p, bufs, blocks = from_params(spec, profile, params, source)
    over = fits(profile, bufs)
    if over:
        raise KilnError("tiling", spec.name, f"{source}: tiling {params} needs {bufs[over]} B of {over}, "
                        f"{profile.name} has {profile.capacity[over]} B")
    return Variant(family, p, blocks, bufs, notes={"algorithm": algorithm_of(Variant(family, p))})


def _usable_record(spec: Opspec, record: dict | None, options, log: OptLog) -> dict | None:
    """A tuning record, unless the build's options rule out its family (the family's record_allowed says)."""
    f = FAMILIES.get(record.get("family", "")) if record is not None else None
    if f is not None and f.record_allowed is not None and options is not None and not f.record_allowed(
            spec, record, options, log):
        return None
    return record


def choose_variant(spec: Opspec, profile: Profile, log: OptLog, options=None, pinned: str = "",
                   pinned_tiling: dict | None = None, records: dict | None = None) -> Variant:
    search = options is not None and options.kiln_opt_level != "O0"  # O0: the plain rule tiling
    record = None if (pinned or pinned_tiling) else (records or {}).get(spec_hash(spec))
    record = _usable_record(spec, record, options, log)
    if pinned_tiling:
        f, implied = pinned_family(spec, pinned)
        v = variant_from_params(spec, profile, f.name, dict(pinned_tiling, **implied), "kernel-list tiling")
        log.add("search", spec.name, v.tag, "option", pinned="tiling")
    elif record is not None:
        v = variant_from_params(spec, profile, record["family"], record["params"],
                                f"tuning record {record['opspec']}")
        log.add("search", spec.name, v.tag, "tuning_record", simulated_cycles=record["simulated_cycles"],
                records=options.kiln_tuning_records)
    elif spec.kind in CHOOSERS:
        v = CHOOSERS[spec.kind](spec, profile, log, options, pinned, search)
    else:
        f = family_for(spec)
        log.add("tiling", spec.name, f.name, "family_rule", unit=f.unit)
        v = f.choose(spec, profile, log, search)
    for key in ("base_m", "base_n"):
        if key in v.params and v.params[key] % 16:
            raise KilnError("tiling", spec.name, f"{key}={v.params[key]} is not a multiple of 16 (rule bug)")
    over = fits(profile, v.buffers)
    if over:  # a rule bug, not a user error: say so loudly
        raise KilnError("tiling", spec.name, f"variant {v.params} overflows {over} "
                        f"({v.buffers[over]} B > {profile.capacity[over]} B on {profile.name})")
    log.add("tiling", spec.name, v.tag, "tile_fit", blocks=v.blocks, cores=profile.cores_for(v.unit),
            **{f"{k}_bytes": b for k, b in v.buffers.items() if b})
    return v


def algorithm_of(v: Variant) -> str:
    """The algorithm a variant implements, as reported in the manifest and `kiln kernels --json`."""
    return FAMILIES[v.family].algorithm_of(v)


def mte2_bytes(spec: Opspec, variant: Variant) -> int:
    """GM -> L1/UB bytes the variant's kernel moves (what the MTE2 counter must show)."""
    return FAMILIES[variant.family].mte2(spec, variant)


def kernel_inputs(spec: Opspec, variant: Variant) -> list:
    """The kernel's packed inputs: the spec's, except where the variant changes a layout (Winograd weights)."""
    return FAMILIES[variant.family].inputs_of(spec, variant)
