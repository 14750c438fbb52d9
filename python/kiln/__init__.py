"""kiln: kernels baked at build time for an emulated Ascend AI Core.

    import kiln
    kiln.kernels()                 # what this build baked, with spec and variant
    k = kiln.kernel(name)
    y = k(x, w, bias)              # natural layouts in (NCHW, OIHW, [K, N]), fp16 out
    k.last_stats                   # simulated cycles, per-pipe utilisation, bytes
"""
from __future__ import annotations

import json
from functools import lru_cache

from . import _core
from ._core import AlignmentError, BoundsError, CapacityError, EmulationError, SyncError
from .model import Model
from .runtime import Kernel

__all__ = [
    "AlignmentError",
    "BoundsError",
    "CapacityError",
    "Core",
    "EmulationError",
    "Kernel",
    "Model",
    "SyncError",
    "build_info",
    "kernel",
    "kernels",
    "load",
    "manifest",
    "models",
    "set_num_threads",
]

Core = _core.Core  # an emulated AI core driven one instruction at a time


def set_num_threads(n: int) -> None:
    """Host threads the emulated AI cores run on (default: all CPU cores, or KILN_NUM_THREADS).
    A kernel's blocks go to its virtual cores exactly as its variant split them (blockDim); the threads
    only decide how many virtual cores run at once, so simulated figures do not depend on them."""
    limit = _max_threads()
    if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= limit:
        raise ValueError(f"number of threads must be an integer 1..{limit} (4 per CPU core), got {n!r}")
    _core.set_num_threads(n)


def _max_threads() -> int:
    import os
    return 4 * (os.cpu_count() or 1)


def _threads_from_env() -> None:
    import os
    raw = os.environ.get("KILN_NUM_THREADS", "").strip()
    if not raw:
        return
    if not raw.isdigit() or not 1 <= int(raw) <= _max_threads():
        import sys
        print(f"kiln: ignoring KILN_NUM_THREADS={raw!r}: expected an integer 1..{_max_threads()} (threads for the "
              f"emulated AI cores); using all CPU cores", file=sys.stderr)
        return
    _core.set_num_threads(int(raw))


_threads_from_env()


@lru_cache(maxsize=1)
def manifest() -> dict:
    """The build's manifest: profile, options and one record per baked kernel."""
    return json.loads(_core.manifest_json())


def build_info() -> dict:
    info = dict(_core.build_info())
    info["options"] = manifest()["options"]
    info["dtype"] = info["options"].get("KILN_DTYPE", "fp16")  # the Cube kernels' operand type
    return info


def kernels() -> list[Kernel]:
    """Every baked kernel, in kernel-list order."""
    return [Kernel(rec) for rec in manifest()["kernels"]]


def models() -> list[str]:
    """Names of the models baked into this build (KILN_MODELS)."""
    return [m["name"] for m in manifest()["models"]]


def load(name: str) -> Model:
    """A baked model, by name, by the path of the ONNX file it was baked from, or by the model spec it was baked
    with (the KILN_MODELS entry, e.g. `det.onnx@x=1x3x736x736` or `resnet50@32`)."""
    for rec in manifest()["models"]:
        if name in (rec["name"], rec["onnx"]):
            return Model(rec, {k["name"]: k for k in manifest()["kernels"]})
    baked_as = _spec_model_name(name)
    for rec in manifest()["models"]:
        if baked_as is not None and rec["name"] == baked_as:
            return Model(rec, {k["name"]: k for k in manifest()["kernels"]})
    raise KeyError(f"no baked model {name!r}; this build has: {', '.join(models()) or 'none'} "
                   f"(bake more with -Ccmake.define.KILN_MODELS=...)")


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
    for rec in manifest()["kernels"]:
        if rec["name"] == name:
            return Kernel(rec)
    names = ", ".join(r["name"] for r in manifest()["kernels"])
    raise KeyError(f"no baked kernel named {name!r}; this build has: {names}")
