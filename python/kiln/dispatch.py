"""Which plan serves a call of `Model.run`: the model's own baked plan, a shape bucket's (KILN_SHAPE_BUCKETS),
or the generic path, planned at the first use of an input size and cached (codegen/shapes/buckets.py plan_size:
the stored graph re-shaped, fused and lowered, a tiling per generic kernel that fits that size, an arena;
weights from the baked blob).

`Model.last_dispatch` says which path served the latest call; with KILN_LOG=1 each call prints one line on
stderr (KILN_LOG=2 also prints the [OPT] lines of a size's plan when it is made).
"""
from __future__ import annotations

import json
import sys
import threading
import time

import numpy as np

from . import _core, envvars
from .codegen.ir.manifest import Manifest, ModelRecord
from .steps import ServingPlan, executor, kernel_steps

__all__ = ["Dispatcher", "ServingPlan", "describe", "log_line"]


class Dispatcher:
    """The plans of one model by input shapes; makes bucket executors and generic plans on first use."""

    def __init__(self, model, own_executor, weights: np.ndarray):
        self.model = model
        self.weights = weights
        rec: ModelRecord = model.entry
        self.shapes = rec.shape_buckets
        own_path = "bucket" if self.shapes and self.shapes.own_is_bucket else "baked"
        own = ServingPlan(own_path, rec, own_executor, model.kernels)
        self._plans: dict[tuple, ServingPlan] = {(tuple(own.input_shapes), False): own}
        self._buckets = {tuple(tuple(i.shape) for i in b.inputs): b for b in (self.shapes.plans if self.shapes else ())}
        self._lock = threading.Lock()

    # ---- what the model accepts
    def accepted(self) -> str:
        """The input shapes this model takes, for error messages."""
        own = self.model.inputs[0][1]
        if not self.shapes:
            return f"{own}"
        n, c = own[:2]
        baked = ", ".join(f"{s}x{s}" for s in self.shapes.sizes)
        if not self.shapes.own_is_bucket:
            baked = f"{own[2]}x{own[3]}, " + baked
        if self.shapes.generic_unavailable:
            return f"({n}, {c}, H, W) with H x W one of the baked sizes {baked} (no generic path: " \
                   f"{self.shapes.generic_unavailable})"
        mh, mw = self.shapes.min_size
        return (f"({n}, {c}, H, W) with H >= {mh} and W >= {mw} (baked sizes {baked}; other sizes run on generic "
                f"kernels)")

    def _bad_input(self, shapes: list[tuple[int, ...]], why: str = "") -> ValueError:
        """A shape outside what the model takes, or (why) one the graph cannot take at that size."""
        name = self.model.inputs[0][0]
        if why:
            return ValueError(f"model {self.model.name}: input '{name}' of shape {shapes[0]} cannot run: {why}; "
                              f"accepted: {self.accepted()}")
        return ValueError(f"model {self.model.name}: input '{name}' must have shape {self.accepted()}, got {shapes[0]}")

    # ---- plans
    def plan_for(self, shapes: list[tuple[int, ...]], force_generic: bool = False) -> tuple[ServingPlan, bool]:
        """(the plan for these input shapes, whether it was made by this call)."""
        key = (tuple(shapes), force_generic)
        plan = self._plans.get(key)
        if plan is not None:
            return plan, False
        with self._lock:  # one planning per size, even when several threads ask at once
            plan = self._plans.get(key)
            if plan is not None:
                return plan, False
            plan = self._make(shapes, force_generic)
            self._plans[key] = plan
        return plan, True

    def _make(self, shapes: list[tuple[int, ...]], force_generic: bool) -> ServingPlan:
        if len(shapes) != 1 or not self.shapes:
            own = [s for _, s in self.model.inputs]
            if shapes != own:
                raise self._bad_input(shapes)
        bucket = self._buckets.get(tuple(shapes))
        if bucket is not None and not force_generic:
            return ServingPlan("bucket", bucket, self._executor(bucket), kernel_steps(bucket))
        own = self.model.inputs[0][1]
        x = shapes[0]
        if len(x) != 4 or tuple(x[:2]) != tuple(own[:2]):
            raise self._bad_input(shapes)
        if self.shapes.generic_unavailable:
            raise self._bad_input(shapes, "this build has no generic path for the model")
        if x[2] < 1 or x[3] < 1:
            raise self._bad_input(shapes)
        return self._generic(x, force_generic)  # too small for the graph: the planner names the node

    def _generic(self, x: tuple[int, ...], force_generic: bool) -> ServingPlan:
        from .codegen import KilnError
        from .codegen.pipeline import plan_size
        t0 = time.perf_counter()
        man = Manifest.from_json(json.loads(_core.manifest_json()))  # kiln.manifest_record(), not imported from here
        try:
            sized = plan_size(self.model.entry, man.kernels, man.options, (x[2], x[3]),
                              set(_core.generic_kernel_names()), prefer_baked=not force_generic)
        except KilnError as e:
            raise self._bad_input([x], f"{e.subject}: {e.message}") from None
        plan = ServingPlan("generic", sized.model, self._executor(sized.model), kernel_steps(sized.model),
                           sized.generic_steps, time.perf_counter() - t0, list(sized.log.lines))
        if envvars.log_level() == 2:
            print("\n".join(plan.log), file=sys.stderr, flush=True)
        return plan

    def _executor(self, record: ModelRecord):
        return executor(self.model.name, record, self.weights)


def describe(model_name: str, plan: ServingPlan, shapes: list[tuple[int, ...]], planned: bool) -> dict:
    """Model.last_dispatch: which path served a call, at which input size, on how many kernels."""
    x = shapes[0]
    return {
        "path": plan.path,
        "input_size": (int(x[2]), int(x[3])) if len(x) == 4 else None,
        "input_shapes": [tuple(int(d) for d in s) for s in shapes],
        "kernels": len(plan.kernels),
        "generic_kernels": plan.generic_launches,
        "baked_kernels": len(plan.kernels) - plan.generic_launches,
        "arena_bytes": plan.record.arena_bytes,
        "planned_now": planned,
        "plan_seconds": plan.plan_seconds if planned else 0.0,
    }


def log_line(model_name: str, d: dict) -> str:
    shape = "x".join(map(str, d["input_shapes"][0]))
    planned = f" planned_ms={1e3 * d['plan_seconds']:.1f}" if d["planned_now"] else ""
    return (f"[kiln] dispatch {model_name} input={shape} path={d['path']} kernels={d['kernels']} "
            f"generic={d['generic_kernels']} baked={d['baked_kernels']} arena={d['arena_bytes']}{planned}")
