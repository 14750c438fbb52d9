"""Generic kernels: one compiled kernel per *structural* spec, with the input size as a runtime argument.

A baked kernel is specialised for one Opspec: every dim and every tiling parameter is a C++ constexpr. A
generic kernel is rendered from the same Jinja2 template in a second mode: the values that depend on the
spatial size of the input (H, W and what follows from them: HO, WO, element counts, and the tiling, which
must fit the buffers for the size at hand -- an L1 slab holds rows of W pixels) become members of a
struct filled from a `RuntimeShape` at each launch (kernels/kiln/generic_abi.hpp), while channel counts,
kernel window, strides, pads and the fused epilogue stay compiled in. So one generic kernel serves every
input size of one structural spec, and a model needs as many generic kernels as it has structural specs.

The templates mark each namespace-scope constant with `{{ dyn }}` (may depend on the runtime shape) or
`{{ fixed }}` (structural; needed by `if constexpr`) and bracket their code with `{{- kernel_struct_begin }}`,
`{{ kernel_entry(k) }}` and `{{ kernel_entry_end(k) }}`; in the baked mode all of these render to exactly the
text the templates had before generic mode existed, so baked kernels are unchanged.
"""
from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

from ..emit.modes import GENERIC_MODE
from ..families.base import GenericForm, Variant
from ..families.registry import FAMILIES
from ..ir.opspec import Opspec

# The fields of `struct RuntimeShape`, in its order (kernels/kiln/generic_abi.hpp KILN_RUNTIME_SHAPE_FIELDS;
# tests/test_shape_buckets.py holds the two lists equal).
RUNTIME_FIELDS = ("h", "w", "ho", "wo", "h2", "w2", "numel", "base_m", "base_n", "base_k1", "c1_step", "slab_rows",
                  "epi_tile", "l1_buffers", "base_n2", "base_k2", "n_split", "rows_per_block", "chunk_pixels",
                  "tile_elems", "blocks", "planes_per_block", "prefetch")


def generic_form(family: str) -> GenericForm | None:
    """The family's generic form (codegen/families/<family>.py), None where it has none. A size-dependent kernel
    of such a family (e.g. a softmax over spatial positions) leaves its model without a generic path; the build
    log says which node."""
    f = FAMILIES.get(family)
    return None if f is None else f.generic


def _form(family: str) -> GenericForm:
    """The generic form of a family that has one: the family of a generic key or kernel."""
    form = generic_form(family)
    assert form is not None, f"{family} has no generic form"
    return form


@dataclass(frozen=True)
class GenericKey:
    """What one generic kernel implements: a family and a spec with its size fields erased (0)."""
    family: str
    spec: Opspec
    structural: tuple[tuple[str, int], ...] = ()  # structural variant parameters, e.g. (("on_chip", 1),)


def generic_key(spec: Opspec, variant: Variant) -> GenericKey | None:
    """The structural key of a kernel, or None when its family has no generic mode."""
    form = generic_form(variant.family)
    if form is None:
        return None
    zeros: dict[str, Any] = dict.fromkeys(form.size_fields, 0)
    erased = replace(spec, **zeros)
    structural = tuple((p, int(variant.params[p])) for p in form.structural if p in variant.params)
    return GenericKey(variant.family, erased, structural)


def generic_symbol(key: GenericKey) -> str:
    """C++ symbol of a generic kernel: the family, `generic`, then the structural spec with the size as
    letters (conv2d_cube_img2col_generic_1x64xHxW_o64_k3x3_s1_p1_bias_relu, eltwise_vector_generic_add_relu_N)."""
    s = key.spec
    letters = {"h": "H", "w": "W", "kh": "H", "kw": "W", "numel": "N"}
    form = _form(key.family)
    shown = {f.name: letters.get(f.name, getattr(s, f.name)) if f.name in form.size_fields
             else getattr(s, f.name) for f in fields(s)}
    name = form.name(s) if form.name else type(s)(**shown).name
    body = name[len(s.kind):] if name.startswith(s.kind) else "_" + name
    extra = "".join(f"_{p}{v}" for p, v in key.structural if v)
    return f"{key.family}_generic{body}{extra}"


def runtime_args(spec: Opspec, variant: Variant) -> dict[str, int]:
    """The RuntimeShape values of one launch of the generic kernel for `spec` with the tiling `variant`
    (a parameter the variant does not set is left to the template's own default, see _RuntimeParams.get; a
    size field of an absent part, e.g. h2 without a second source, is 0 and unread)."""
    form = _form(variant.family)
    args = {f: int(getattr(spec, f)) for f in form.spec_fields if getattr(spec, f)}
    args.update({p: int(variant.params[p]) for p in form.tiling_fields if p in variant.params})
    if form.runtime_blocks:
        args["blocks"] = int(variant.blocks)
    return args


def runtime_field_names(family: str) -> tuple[str, ...]:
    """Every RuntimeShape field a generic kernel of `family` may read (its table entry lists them)."""
    form = _form(family)
    return tuple(f for f in RUNTIME_FIELDS if f in form.spec_fields or f in form.tiling_fields
                 or (f == "blocks" and form.runtime_blocks))


# ---------------------------------------------------------------- rendering


class _RuntimeSpec:
    """The spec as a generic template sees it: size fields render as `rt.<field>`, the rest as values."""

    def __init__(self, spec: Opspec, runtime: tuple[str, ...]):
        self._spec, self._runtime = spec, runtime

    def __getattr__(self, name: str):
        if name in self._runtime:
            return f"rt.{name}"
        return getattr(self._spec, name)


class _RuntimeParams:
    """Variant parameters: runtime ones render as `rt.<name>`, structural ones as values."""

    def __init__(self, params: dict, runtime: tuple[str, ...]):
        self._params, self._runtime = params, runtime

    def __getitem__(self, name: str):
        if name in self._runtime:
            return f"rt.{name}"
        return self._params[name]

    def __getattr__(self, name: str):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def get(self, name: str, default=None):
        if name in self._runtime:  # runtime_args() leaves a parameter the variant lacks at 0: the template's default
            return f"(rt.{name} > 0 ? rt.{name} : {default})" if default is not None else f"rt.{name}"
        return self._params.get(name, default)


class _RuntimeVariant:
    tag = "chosen at run time for each input size"

    def __init__(self, variant: Variant, form: GenericForm):
        self.family = variant.family
        self.params = _RuntimeParams(variant.params, form.tiling_fields)
        self.blocks = "rt.blocks" if form.runtime_blocks else variant.blocks


@dataclass
class GenericKernel:
    """One generic kernel of the build, rendered from the spec and variant of its first instance (only the
    structural values of those are compiled in)."""
    key: GenericKey
    spec: Opspec
    variant: Variant
    instances: list[str]  # "model:node" of every step it can serve

    @property
    def symbol(self) -> str:
        return generic_symbol(self.key)

    @property
    def family(self) -> str:
        return self.key.family

    @property
    def inputs(self) -> int:
        return len(self.spec.inputs())

    @property
    def runtime_fields(self) -> tuple[str, ...]:
        return runtime_field_names(self.family)

    def template_vars(self) -> dict:
        form = _form(self.family)
        return {"s": _RuntimeSpec(self.spec, form.spec_fields), "v": _RuntimeVariant(self.variant, form),
                **GENERIC_MODE}

    def record(self) -> dict:
        return {"name": self.symbol, "family": self.family, "runtime_fields": list(self.runtime_fields),
                "inputs": self.inputs, "instances": list(self.instances)}
