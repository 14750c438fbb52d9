"""A model's kernel launches as its steps run them: the L2 plan of the model (codegen/passes/l2.py, after the
memory plan) and, per kernel step, the cost model's prediction with that step's L2 hits. One function makes the
per-launch record the manifest keeps (`launch_record`) and one the per-kernel fields `kiln kernels MODEL --json`
reports from it (`launch_fields`); `kiln analyze --json` is to reuse both, so a prediction before a build and
the build's report are the same numbers.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

from ..cost.aicpu import aicpu_cycles
from ..cost.model import Prediction
from ..families.registry import input_reads, predict
from ..ir.manifest import LaunchRecord, StepRecord
from ..ir.optlog import OptLog
from ..ir.profiles import Profile
from ..passes.l2 import StepAccess, plan_l2
from .plan import KernelPlan, ModelPlan, step_inputs


def step_accesses(m: ModelPlan) -> list[StepAccess]:
    """The GM tensors each step of `m` touches, each by its arena root (views share their root's bytes) or
    its weight's name, with the bytes the kernel reads of it (its packed input) or writes."""
    def read_bytes(i: int) -> list[int] | None:
        k = m.step_kernels.get(i)
        return None if m.lowered.steps[i].kind != "kernel" or k is None else [t.nbytes for t in k.inputs]
    return _accesses(m, read_bytes)


def record_accesses(m: ModelPlan, steps: Sequence[StepRecord]) -> list[StepAccess]:
    """step_accesses for a plan whose kernels are known only by their step records (a generic plan at a runtime
    size: codegen/shapes/buckets.py): each kernel input's bytes from its record's reference."""
    return _accesses(m, lambda i: [ref.nbytes for ref in steps[i].inputs] if steps[i].is_kernel else None)


def _accesses(m: ModelPlan, read_bytes: Callable[[int], list[int] | None]) -> list[StepAccess]:
    """Per step: its reads (step_inputs by arena root, with read_bytes(i) each; None: a host step) and write."""
    low, roots = m.lowered, m.memory.roots
    out = []
    for i, s in enumerate(low.steps):
        write = (roots.get(s.output, s.output), low.storage[s.output].nbytes)
        sizes = read_bytes(i)
        if sizes is None:
            out.append(StepAccess(s.name, (), write, host=True))
            continue
        out.append(StepAccess(s.name, tuple((roots.get(v, v), n) for v, n in zip(step_inputs(m, i), sizes)), write))
    return out


def launch_prediction(k: KernelPlan, hits: tuple[bool, ...] | None, profile: Profile) -> Prediction | None:
    """The cost model's prediction of kernel `k` launched with these L2 hits (None: called on its own)."""
    return predict(k.spec, k.variant.family, k.variant.params, profile, l2=hits)


def launch_record(k: KernelPlan, hits: tuple[bool, ...] | None, profile: Profile) -> LaunchRecord | None:
    """The manifest's record of one launch (None where the family has no cost-model replay)."""
    p = launch_prediction(k, hits, profile)
    return None if p is None else prediction_record(p)


def prediction_record(p: Prediction) -> LaunchRecord:
    """The manifest's record of a launch the cost model predicted as `p`."""
    return LaunchRecord(round(p.cycles, 3), round(p.core_cycles, 3), p.bound_unit(), p.mem.l2_hit_bytes,
                        p.mem.hbm_bytes, p.cube_macs, p.useful_macs, round(p.pipes["M"].busy, 3),
                        round(p.pipes["V"].busy, 3))


def kernel_reads(k: KernelPlan, profile: Profile) -> tuple[int, ...] | None:
    """The bytes kernel k's cores read of each input (its steps' `l2_reads`: whatever exceeds an input's size is
    a re-read, at the L2 rate in part: docs/ascend-model.md section 12)."""
    return input_reads(k.spec, k.variant.family, k.variant.params, profile)


def attach_launches(m: ModelPlan, profile: Profile, log: OptLog) -> None:
    """Fills m.l2_hits, m.l2_reads and m.launches: the L2 plan, then each kernel step's launch with its hits (one
    replay per distinct kernel and hits)."""
    hits = plan_l2(m.name, step_accesses(m), profile.l2_bytes, log)
    done: dict[tuple[str, tuple[bool, ...]], LaunchRecord | None] = {}
    for i, k in m.step_kernels.items():
        h = hits[i]
        assert h is not None, f"{m.name}: kernel step {i} has no L2 plan"
        m.l2_hits[i] = h
        reads = kernel_reads(k, profile)
        if reads is not None:
            m.l2_reads[i] = reads
        if (k.symbol, h) not in done:
            done[(k.symbol, h)] = launch_record(k, h, profile)
        m.launches[i] = done[(k.symbol, h)]
    for i, s in enumerate(m.lowered.steps):  # the AI CPU fallback's host steps (codegen/cost/aicpu.py)
        if s.host is not None:
            m.host_cycles[i] = aicpu_cycles(s.host.elements, profile)


def launch_fields(launch: LaunchRecord | None, profile: Profile) -> dict:
    """The per-kernel fields of a launch in `kiln kernels MODEL --json` (and `kiln analyze --json`): predicted
    cycles, the bound (a pipe, "L2" or "HBM"), L2 hit and HBM bytes, Cube and Vector utilisation over the chip's
    cores for the launch's time (None throughout for a family the cost model does not replay)."""
    if launch is None:
        return dict.fromkeys(("predicted_cycles", "core_cycles", "bound", "l2_hit_bytes", "hbm_bytes",
                              "cube_utilization", "vector_utilization"))
    c = launch.predicted_cycles
    return {"predicted_cycles": c, "core_cycles": launch.core_cycles, "bound": launch.bound,
            "l2_hit_bytes": launch.l2_hit_bytes, "hbm_bytes": launch.hbm_bytes,
            "cube_utilization": round(launch.cube_busy / (c * profile.cube_cores), 4) if c else 0.0,
            "vector_utilization": round(launch.vector_busy / (c * profile.vector_cores), 4) if c else 0.0}
