"""kiln: kernels baked at build time for an emulated Ascend AI Core.

    import kiln
    kiln.kernels()                 # what this build baked, with spec and variant
    k = kiln.kernel(name)
    y = k(x, w, bias)              # natural layouts in (NCHW, OIHW, [K, N]), fp16 out
    k.last_stats                   # simulated cycles, per-pipe utilisation, bytes
"""
from __future__ import annotations

import json
import os
from functools import lru_cache
from pathlib import Path

try:
    from . import _core
except ImportError as e:  # a partial install: said as such, not as Python's "circular import" guess
    raise ImportError(f"kiln's compiled extension kiln/_core is missing or does not load ({e}); reinstall kiln "
                      f"(pip install .)") from None
from ._core import AlignmentError, BoundsError, CapacityError, EmulationError, SyncError
from .codegen.ir.manifest import Manifest, ModelRecord
from .core import Core, Tensor
from .integrity import InstallError
from .model import Model, Package
from .numerics import NumericsError, NumericsWarning
from .runtime import Kernel

__all__ = [
    "AlignmentError",
    "BoundsError",
    "CapacityError",
    "Core",
    "EmulationError",
    "InstallError",
    "Kernel",
    "Model",
    "NumericsError",
    "NumericsWarning",
    "SyncError",
    "Tensor",
    "build_info",
    "kernel",
    "kernels",
    "load",
    "manifest",
    "manifest_record",
    "max_threads",
    "model_record",
    "models",
    "set_num_threads",
]



def set_num_threads(n: int) -> None:
    """Host threads the emulated AI cores run on (default: all CPU cores, or KILN_NUM_THREADS).
    A kernel's blocks go to its virtual cores exactly as its variant split them (blockDim); the threads
    only decide how many virtual cores run at once, so simulated figures do not depend on them.
    ValueError outside 1..max_threads() (the bound lives in the extension, which checks it too)."""
    from numbers import Integral
    # a NumPy integer is an integer (the extension takes Python ints only); a bool is not a count
    _core.set_num_threads(int(n) if isinstance(n, Integral) and not isinstance(n, bool) else n)


def max_threads() -> int:
    """The most host threads `set_num_threads` (and KILN_NUM_THREADS, OMP_NUM_THREADS, --threads) takes."""
    return int(_core.max_threads())


def thread_count_error(text: str) -> str | None:
    """Why `text` is not a thread count (said after the option or variable it came from), or None."""
    text = str(text).strip()
    if text.isascii() and text.isdigit() and 1 <= int(text) <= max_threads():  # "²".isdigit(), int("²") fails
        return None
    return (f"expected an integer 1..{max_threads()} (threads for the emulated AI cores, 4 per CPU core), "
            f"got {text!r}")


def _threads_from_env() -> None:
    """KILN_NUM_THREADS, else OMP_NUM_THREADS (OpenMP has read it already, unchecked): a bad value is said and
    replaced by all CPU cores, before any parallel region runs."""
    import os
    import sys
    for var in ("KILN_NUM_THREADS", "OMP_NUM_THREADS"):
        raw = os.environ.get(var, "").strip()
        if not raw:
            continue
        # OpenMP's form is a list per nesting level; kiln's regions are not nested, so the first entry counts
        first = raw.split(",")[0] if var == "OMP_NUM_THREADS" else raw
        why = thread_count_error(first)
        if why is None:
            _core.set_num_threads(int(first))
            return
        print(f"kiln: ignoring {var}={raw!r}: {why}; using all {os.cpu_count() or 1} CPU cores", file=sys.stderr)
        _core.set_num_threads(min(os.cpu_count() or 1, max_threads()))
        return


_threads_from_env()


@lru_cache(maxsize=1)
def manifest() -> dict:
    """The build's manifest as JSON: profile, options and one record per baked kernel, model, generic kernel."""
    return json.loads(_core.manifest_json())


@lru_cache(maxsize=1)
def manifest_record() -> Manifest:
    """The build's manifest, typed (codegen/ir/manifest.py)."""
    return Manifest.from_json(manifest())


def manifest_of(model: Model | None = None) -> Manifest:
    """The manifest `model` was baked in: a `kiln compile` directory's own, else (and without a model) the
    installed build's."""
    return (model.package.manifest if model is not None else None) or manifest_record()


def build_info(model: Model | None = None) -> dict:
    """The build's facts (ISA, profile, threads, options); with `model`, of the build that baked it."""
    info = dict((model.package.core if model is not None else _core).build_info())
    info["options"] = manifest_of(model).options
    info["dtype"] = info["options"].get("KILN_DTYPE", "fp16")  # the Cube kernels' operand type
    return info


def kernels() -> list[Kernel]:
    """Every baked kernel, in kernel-list order."""
    return [Kernel(rec) for rec in manifest_record().kernels]


def models() -> list[str]:
    """Names of the models baked into this build (KILN_MODELS)."""
    return [m.name for m in manifest_record().models]


def load(name: str) -> Model:
    """A baked model, by name, by the path of the ONNX file it was baked from, or by the model spec it was baked
    with (the KILN_MODELS entry, e.g. `det.onnx@x=1x3x736x736` or `resnet50@32`)."""
    if isinstance(name, (str, os.PathLike)) and os.path.isdir(name):
        return _load_compiled(Path(name))
    man = manifest_record()
    return Model(model_record(name), man.kernels_by_name(), man.checksums)


def _load_compiled(directory: Path) -> Model:
    """The model `kiln compile` baked into `directory` (kiln/compiled.py), on its own extension module."""
    from .compiled import MARKER, compiled_module
    if not (directory / MARKER).is_file():
        raise KeyError(f"{directory} is a directory but not one `kiln compile` wrote (no {MARKER})")
    man = Manifest.from_json(json.loads((directory / "manifest.json").read_text()))
    return Model(man.models[0], man.kernels_by_name(), man.checksums,
                 Package(compiled_module(directory), directory, man))


def model_record(name: str) -> ModelRecord:
    """The manifest record of a baked model, found as `load` finds it (KeyError naming what this build has)."""
    if not isinstance(name, (str, os.PathLike)):
        raise TypeError(f"kiln.load: expected a model name, ONNX path or model spec (a str), got "
                        f"{type(name).__name__}")
    name = os.fspath(name)
    if os.path.isdir(name):  # a `kiln compile` directory: its own manifest, nothing loaded
        return Manifest.from_json(json.loads((Path(name) / "manifest.json").read_text())).models[0]
    man = manifest_record()
    try:
        return man.model(name)
    except KeyError:
        baked_as = _spec_model_name(name)
        found = [m for m in man.models if baked_as is not None and m.name == baked_as]
        if not found:
            raise KeyError(f"no baked model {name!r}; this build has: {', '.join(models()) or 'none'} "
                           f"(bake more with -Ccmake.define.KILN_MODELS=...)") from None
        return found[0]


def _spec_model_name(text: str) -> str | None:
    """The model name a model spec is baked under (the codegen's one parser), or None when `text` is no spec."""
    from .codegen import KilnError
    from .codegen.frontend.model_spec import parse_model_spec
    from .codegen.options import ZOO_MODELS
    try:
        return parse_model_spec(text, ZOO_MODELS).model_name
    except KilnError:
        return None


def kernel(name: str) -> Kernel:
    """One baked kernel by name (KeyError listing this build's kernels)."""
    if not isinstance(name, str):
        raise TypeError(f"kiln.kernel: expected a kernel name (a str), got {type(name).__name__}")
    man = manifest_record()
    for rec in man.kernels:
        if rec.name == name:
            return Kernel(rec)
    names = ", ".join(r.name for r in man.kernels)
    raise KeyError(f"no baked kernel named {name!r}; this build has: {names}")
