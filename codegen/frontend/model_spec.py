"""The one grammar for naming a model to bake, analyze or validate (KILN_MODELS entries, `kiln analyze`,
`kiln validate`): comma-free, so a list of specs splits on `;` (or `,`) without quoting.

    SPEC   := SOURCE [ "@" BATCH | "@" PINS ]
    SOURCE := a zoo name (resnet50, ...) | a path ending in .onnx
    BATCH  := an integer 1..4096               the value of a symbolic dim 0 (batch shorthand, `resnet50@32`)
    PINS   := PIN { "+" PIN }                  `file.onnx@x=1x3x736x736+mask=1x736x736`
    PIN    := INPUT "=" DIM { "x" DIM }        INPUT a graph input's name; DIM an integer 1..2^31-1

The split is at the last "@" that follows a zoo name or a path ending in .onnx, so an "@" inside a file name is
kept (cmake/KilnCodegen.cmake strips the same suffixes to find the file). parse_model_spec() checks the grammar
only; whether the file exists and has those inputs is for the caller (pipeline.check_model_entries) and the
frontend (onnx_read.bind_inputs), which name the spec or the input in their errors.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePath

from .. import KilnError

MAX_BATCH = 4096
MAX_DIM = 2 ** 31 - 1
GRAMMAR = ("a zoo name or a path ending in .onnx, optionally followed by @BATCH (an integer 1..4096, e.g. "
           "resnet50@32) or by @INPUT=DxDx... pins joined with + (e.g. model.onnx@x=1x3x736x736+mask=1x736x736)")
_PIN = re.compile(r"([^=+@]+)=([^=+]*)")


@dataclass(frozen=True)
class ModelSpec:
    """A parsed spec: the source (zoo name or .onnx path) and either a batch or pinned input shapes."""
    text: str
    source: str
    batch: int = 1
    pins: tuple[tuple[str, tuple[int, ...]], ...] = ()

    @property
    def pinned(self) -> dict[str, tuple[int, ...]]:
        return dict(self.pins)

    @property
    def is_onnx_file(self) -> bool:
        return self.source.endswith(".onnx")

    @property
    def model_name(self) -> str:
        """The name the model is baked under: the zoo name or the file's stem, with the shape suffix (name())."""
        return self.name(PurePath(self.source).stem if self.is_onnx_file else self.source)

    def name(self, stem: str) -> str:
        """The baked model's name from the source's stem: a batch other than 1 and the pinned shapes are part of
        it, so the same file baked twice at different shapes gives two models."""
        if self.pins:
            return stem + "".join(f"_{inp}{'x'.join(map(str, dims))}" for inp, dims in self.pins)
        return stem if self.batch == 1 else f"{stem}_b{self.batch}"


def _error(spec: str, why: str) -> KilnError:
    return KilnError("frontend", f"model spec {spec!r}", f"{why}; expected {GRAMMAR}")


def _parse_dims(spec: str, inp: str, text: str) -> tuple[int, ...]:
    parts = text.split("x")
    if not text or not all(re.fullmatch(r"\d+", p) for p in parts):
        raise _error(spec, f"the shape {text!r} of input {inp!r} is not dims joined with 'x' (e.g. 1x3x224x224)")
    dims = tuple(int(p) for p in parts)
    bad = [d for d in dims if not 1 <= d <= MAX_DIM]
    if bad:
        raise _error(spec, f"input {inp!r} dim {bad[0]} is out of range 1..{MAX_DIM}")
    return dims


def _parse_pins(spec: str, text: str) -> tuple[tuple[str, tuple[int, ...]], ...]:
    pins: dict[str, tuple[int, ...]] = {}
    for part in text.split("+"):
        m = _PIN.fullmatch(part)
        if not m or not m.group(1).strip() or m.group(1) != m.group(1).strip():
            raise _error(spec, f"{part!r} is not INPUT=DxDx... (an input name, '=', dims joined with 'x')")
        inp = m.group(1)
        if inp in pins:
            raise _error(spec, f"input {inp!r} is pinned twice")
        pins[inp] = _parse_dims(spec, inp, m.group(2))
    return tuple(pins.items())


def _split_source(spec: str, zoo_names) -> tuple[str, str | None]:
    """(source, the text after the suffix's '@' or None): the split is at the last '@' that follows a zoo name or
    a path ending in .onnx, so an '@' inside a file name stays part of it."""
    for i in range(len(spec) - 1, -1, -1):
        if spec[i] == "@" and (spec[:i] in zoo_names or spec[:i].endswith(".onnx")):
            return spec[:i], spec[i + 1:]
    return spec, None


def parse_model_spec(text: str, zoo_names: tuple[str, ...] | list[str] = ()) -> ModelSpec:
    """`text` as a ModelSpec; a KilnError naming the spec and the accepted grammar when malformed."""
    spec = text.strip()
    if not spec:
        raise _error(text, "it is empty")
    if "," in spec or ";" in spec:
        raise _error(spec, "a spec holds no ',' or ';' (they separate the specs of a list)")
    source, tail = _split_source(spec, zoo_names)
    if source not in zoo_names and not source.endswith(".onnx"):
        known = f" (zoo: {', '.join(zoo_names)})" if zoo_names else ""
        raise _error(spec, f"{source!r} is neither a zoo model{known} nor an .onnx path")
    if tail is None:
        return ModelSpec(spec, source)
    if "=" in tail:
        if not source.endswith(".onnx"):
            raise _error(spec, "input shapes can be pinned only for an .onnx file (zoo models have fixed shapes)")
        return ModelSpec(spec, source, pins=_parse_pins(spec, tail))
    if not re.fullmatch(r"\d+", tail) or not 1 <= int(tail) <= MAX_BATCH:
        raise _error(spec, f"the batch after '@' must be an integer 1..{MAX_BATCH}, got {tail!r}")
    return ModelSpec(spec, source, batch=int(tail))
