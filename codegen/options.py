"""Typed build options: the one table behind the CMake cache variables.

CMake declares each option from this table (``python -m codegen options-cmake``),
writes the values it has into one JSON file and asks this module to check it
(``python -m codegen check-options``) before anything is generated, so a bad
value stops configure with a message naming the option and what is allowed.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from .ir.profiles import PROFILES

ZOO_MODELS = ("resnet50", "mobilenet_v2", "bert_layer")
ISAS = ("auto", "amx_bf16", "avx512_bf16", "avx512", "avx2", "portable")
DTYPES = ("fp16", "bf16")


@dataclass(frozen=True)
class OptionSpec:
    name: str
    kind: str  # bool | int | enum | list_int | list_models | path
    default: str
    doc: str
    allowed: tuple[str, ...] = ()
    lo: int | None = None
    hi: int | None = None
    by_level: bool = False  # empty (the default) takes the value KILN_OPT_LEVEL implies

    def allowed_text(self) -> str:
        if self.by_level:
            return replace(self, by_level=False).allowed_text() + ", or empty to follow KILN_OPT_LEVEL"
        if self.kind == "bool":
            return "ON or OFF"
        if self.kind == "enum":
            return "one of " + ", ".join(self.allowed)
        if self.kind == "int":
            return f"an integer {self.lo}..{self.hi}"
        if self.kind == "list_int":
            return f"a ;-separated list of integers {self.lo}..{self.hi} (or empty)"
        if self.kind == "list_models":
            return (f"a ;-separated list of zoo names ({', '.join(ZOO_MODELS)}) or paths to .onnx files, each "
                    f"optionally with @BATCH (e.g. resnet50@32) or @INPUT=DxD... pins joined with + (e.g. "
                    f"model.onnx@x=1x3x736x736), or empty")
        if self.kind == "path":
            return "an existing file"
        return self.kind


OPTIONS: tuple[OptionSpec, ...] = (
    OptionSpec("ENABLE_FUSION", "bool", "", "Fuse operators into larger kernels", by_level=True),
    OptionSpec("MAX_FUSION_DEPTH", "int", "", "Most ops in one fused kernel", lo=1, hi=8, by_level=True),
    OptionSpec("USE_WINOGRAD", "enum", "", "Winograd convolution: force where legal (ON: fastest tile; F2/F4: "
               "that tile), never, or cost model", allowed=("ON", "OFF", "AUTO", "F2", "F4"), by_level=True),
    OptionSpec("FORCE_DIRECT_CONV", "bool", "OFF", "Direct Cube (img2col) convolution everywhere"),
    OptionSpec("DEBUG_OPTIMIZATION_PATH", "bool", "OFF", "Write the [OPT] optimisation-path log"),
    OptionSpec("KILN_MODELS", "list_models", "resnet50;mobilenet_v2;bert_layer",
               "Models to bake: zoo names or .onnx paths"),
    OptionSpec("KILN_KERNEL_LIST", "path", "", "TOML list of op instances to bake (default kernels/default.toml)"),
    OptionSpec("KILN_TARGET", "enum", "ascend910b", "Hardware profile for tiling, cost and emulation",
               allowed=tuple(PROFILES)),
    OptionSpec("KILN_TUNING_RECORDS", "path", "", "Tuning records from `kiln tune` (JSON): kernels whose opspec hash "
               "has a record use its variant instead of the search"),
    OptionSpec("KILN_SHAPE_BUCKETS", "list_int", "", "Input sizes that get specialised kernels", lo=1, hi=8192),
    OptionSpec("KILN_OPT_LEVEL", "enum", "O2", "Graded optimisation, for bisecting a wrong result; sets the "
               "options left empty (see OPT_LEVELS)", allowed=("O0", "O1", "O2", "O3")),
    OptionSpec("USE_FLASH_ATTENTION", "bool", "ON", "Fused attention for transformer blocks"),
    OptionSpec("MAX_SEQ_LEN", "int", "512", "Longest sequence the attention kernels are built for", lo=1, hi=65536),
    OptionSpec("KILN_ISA", "enum", "auto", "Host instruction set for the emulator", allowed=ISAS),
    OptionSpec("KILN_DTYPE", "enum", "fp16", "Operand type of the Cube kernels (fp32 accumulate either way): fp16 "
               "or bf16 (weights packed as bf16, activations rounded to bf16 where they enter the Cube)",
               allowed=DTYPES),
)
OPTION_BY_NAME = {o.name: o for o in OPTIONS}

# What each KILN_OPT_LEVEL implies for the options left empty; an option given explicitly wins. Build the
# same model at two levels and compare `kiln validate MODEL --per-kernel` to find the first kernel that diverges.
OPT_LEVELS: dict[str, dict[str, str]] = {
    "O0": {"ENABLE_FUSION": "OFF", "MAX_FUSION_DEPTH": "1", "USE_WINOGRAD": "OFF"},   # one kernel per op, direct conv
    "O1": {"ENABLE_FUSION": "ON", "MAX_FUSION_DEPTH": "5", "USE_WINOGRAD": "OFF"},    # + fusion
    "O2": {"ENABLE_FUSION": "ON", "MAX_FUSION_DEPTH": "5", "USE_WINOGRAD": "AUTO"},   # + Winograd by the cost model
    "O3": {"ENABLE_FUSION": "ON", "MAX_FUSION_DEPTH": "8", "USE_WINOGRAD": "AUTO"},   # + the deepest fusion
}

_TRUE = {"ON", "TRUE", "YES", "Y", "1"}
_FALSE = {"OFF", "FALSE", "NO", "N", "0", ""}


class OptionError(ValueError):
    pass


def _bad(spec: OptionSpec, raw: Any, why: str = "") -> OptionError:
    extra = f" ({why})" if why else ""
    return OptionError(f"{spec.name}={raw!r} is not valid{extra}: expected {spec.allowed_text()}")


def parse_value(spec: OptionSpec, raw: Any) -> Any:
    text = str(raw).strip()
    if spec.kind == "bool":
        up = text.upper()
        if up in _TRUE:
            return True
        if up in _FALSE:
            return False
        raise _bad(spec, raw)
    if spec.kind == "int":
        if not re.fullmatch(r"[+-]?\d+", text):
            raise _bad(spec, raw)
        v = int(text)
        assert spec.lo is not None and spec.hi is not None, spec.name  # every int option has a range
        if not spec.lo <= v <= spec.hi:
            raise _bad(spec, raw, "out of range")
        return v
    if spec.kind == "enum":
        for a in spec.allowed:
            if text.upper() == a.upper():
                return a
        raise _bad(spec, raw)
    items = [t.strip() for t in re.split(r"[;,]", text) if t.strip()]
    if spec.kind == "list_int":
        assert spec.lo is not None and spec.hi is not None, spec.name
        out = []
        for t in items:
            if not re.fullmatch(r"\d+", t) or not spec.lo <= int(t) <= spec.hi:
                raise _bad(spec, raw, f"entry {t!r}")
            out.append(int(t))
        return tuple(sorted(set(out)))
    if spec.kind == "list_models":  # each entry is checked by the model-spec parser (frontend/model_spec.py)
        return tuple(items)
    if spec.kind == "path":
        if text and not os.path.isfile(text):
            raise _bad(spec, raw, "no such file")
        return text
    raise AssertionError(spec.kind)


@dataclass(frozen=True)
class Options:
    enable_fusion: bool
    max_fusion_depth: int
    use_winograd: str
    force_direct_conv: bool
    debug_optimization_path: bool
    kiln_models: tuple[str, ...]
    kiln_kernel_list: str
    kiln_target: str
    kiln_tuning_records: str
    kiln_shape_buckets: tuple[int, ...]
    kiln_opt_level: str
    use_flash_attention: bool
    max_seq_len: int
    kiln_isa: str
    kiln_dtype: str
    isa_resolved: str = ""  # what configure picked for KILN_ISA=auto
    from_level: tuple[str, ...] = ()  # options that took KILN_OPT_LEVEL's value (left empty)

    def as_dict(self) -> dict[str, Any]:
        d = {o.name: getattr(self, o.name.lower()) for o in OPTIONS}
        d["KILN_ISA_RESOLVED"] = self.isa_resolved
        return {k: list(v) if isinstance(v, tuple) else v for k, v in d.items()}


def parse_options(raw: dict[str, Any]) -> Options:
    """Checks every option; all errors are reported together."""
    unknown = sorted(set(raw) - set(OPTION_BY_NAME) - {"KILN_ISA_RESOLVED"})
    if unknown:
        raise OptionError(f"unknown option(s) {', '.join(unknown)}; known: {', '.join(OPTION_BY_NAME)}")
    values, errors, from_level = {}, [], []
    level = str(raw.get("KILN_OPT_LEVEL", "O2")).strip().upper() or "O2"
    for spec in OPTIONS:
        value = raw.get(spec.name, spec.default)
        if spec.by_level and str(value).strip() == "":
            value = OPT_LEVELS.get(level, OPT_LEVELS["O2"])[spec.name]  # a bad level is reported below
            from_level.append(spec.name)
        try:
            values[spec.name.lower()] = parse_value(spec, value)
        except OptionError as e:
            errors.append(str(e))
    if errors:
        raise OptionError("\n".join(errors))
    return Options(**values, isa_resolved=str(raw.get("KILN_ISA_RESOLVED", "")), from_level=tuple(from_level))


def load_options(path: str | os.PathLike) -> Options:
    p = Path(path)
    try:
        raw = json.loads(p.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise OptionError(f"cannot read options file {p}: {e}") from None
    return parse_options(raw)


def cmake_declarations() -> str:
    """CMake cache declarations for every option (included by cmake/KilnOptions.cmake)."""
    lines = ["# Generated by `python -m codegen options-cmake` from codegen/options.py. Do not edit."]
    for o in OPTIONS:
        kind = "BOOL" if o.kind == "bool" and not o.by_level else ("FILEPATH" if o.kind == "path" else "STRING")
        doc = f"{o.doc}: {o.allowed_text()}".replace('"', "'")
        lines.append(f'set({o.name} "{o.default}" CACHE {kind} "{doc}")')
        if o.kind == "enum":
            lines.append(f'set_property(CACHE {o.name} PROPERTY STRINGS {" ".join(o.allowed)})')
    lines.append("set(KILN_OPTION_NAMES " + " ".join(o.name for o in OPTIONS) + ")")
    return "\n".join(lines) + "\n"


# Options a kiln_add_model() call may not set per model: the model is its MODEL argument, there is no kernel list
# and no shape buckets (the C++ runtime serves the baked shapes), and the host ISA is the project's.
NOT_PER_MODEL = {"KILN_MODELS": "the model is kiln_add_model's MODEL argument",
                 "KILN_KERNEL_LIST": "a C++ model bakes its own kernels only",
                 "KILN_SHAPE_BUCKETS": "the C++ runtime serves the baked shapes only (other sizes are planned in "
                                       "Python at run time)",
                 "KILN_ISA": "the host ISA is one per project: set KILN_ISA for the whole project"}


def model_options(model: str, settings: list[str], isa_resolved: str) -> dict[str, str]:
    """The options file of one kiln_add_model() model: `settings` are its OPTIONS (NAME=VALUE), checked as the
    build checks its own (OptionError naming the option and what it accepts); the rest take their defaults."""
    raw: dict[str, str] = {"KILN_MODELS": model, "KILN_ISA_RESOLVED": isa_resolved}
    errors = []
    for item in settings:
        name, eq, value = item.partition("=")
        name = name.strip()
        if not eq or not name:
            errors.append(f"OPTIONS entry {item!r}: expected NAME=VALUE, e.g. USE_WINOGRAD=OFF")
        elif name not in OPTION_BY_NAME:
            known = ", ".join(n for n in OPTION_BY_NAME if n not in NOT_PER_MODEL)
            errors.append(f"unknown option {name}; known: {known}")
        elif name in NOT_PER_MODEL:
            errors.append(f"{name} cannot be set per model: {NOT_PER_MODEL[name]}")
        elif name in raw:
            errors.append(f"{name} given twice")
        else:
            raw[name] = value
    if errors:
        raise OptionError("\n".join(errors))
    parse_options(raw)  # every value checked; raises naming each bad one
    return raw
