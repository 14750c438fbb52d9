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

__all__ = ["kernels", "kernel", "load", "models", "build_info", "manifest", "Kernel", "Model", "EmulationError",
           "CapacityError", "AlignmentError", "SyncError", "BoundsError", "Core"]

Core = _core.Core  # an emulated AI core driven one instruction at a time


@lru_cache(maxsize=1)
def manifest() -> dict:
    """The build's manifest: profile, options and one record per baked kernel."""
    return json.loads(_core.manifest_json())


def build_info() -> dict:
    info = dict(_core.build_info())
    info["options"] = manifest()["options"]
    return info


def kernels() -> list[Kernel]:
    """Every baked kernel, in kernel-list order."""
    return [Kernel(rec) for rec in manifest()["kernels"]]


def models() -> list[str]:
    """Names of the models baked into this build (KILN_MODELS)."""
    return [m["name"] for m in manifest()["models"]]


def load(name: str) -> Model:
    """A baked model, by name or by the path of the ONNX file it was baked from."""
    for rec in manifest()["models"]:
        if name in (rec["name"], rec["onnx"]):
            return Model(rec, {k["name"]: k for k in manifest()["kernels"]})
    raise KeyError(f"no baked model {name!r}; this build has: {', '.join(models()) or 'none'} "
                   f"(bake more with -Ccmake.define.KILN_MODELS=...)")


def kernel(name: str) -> Kernel:
    for rec in manifest()["kernels"]:
        if rec["name"] == name:
            return Kernel(rec)
    names = ", ".join(r["name"] for r in manifest()["kernels"])
    raise KeyError(f"no baked kernel named {name!r}; this build has: {names}")
