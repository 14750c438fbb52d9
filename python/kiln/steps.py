"""What a model's plans are made of at run time, shared by the model (kiln/model.py) and the dispatcher
(kiln/dispatch.py): a plan's kernel launches and the plan itself (its model record, executor, launches).
Imports point one way: model -> dispatch -> steps."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import _core
from .aicpu import host_steps
from .codegen.ir.manifest import LaunchRecord, ModelRecord


@dataclass
class KernelStep:
    """One kernel launch of a model: which ops it runs and with which kernel."""
    name: str
    ops: list[str]
    op_types: list[str]
    kernel: str
    simulated_cycles: float | None = None
    generic: bool = False  # a generic kernel (runtime shapes) served this launch (KILN_SHAPE_BUCKETS)
    launch: LaunchRecord | None = None  # the build's prediction of this launch, with the step's L2 plan


def kernel_steps(record: ModelRecord) -> list[KernelStep]:
    """The kernel launches of a plan, in order."""
    return [KernelStep(s.name, list(s.ops), list(s.op_types), s.kernel, generic=s.generic, launch=s.launch)
            for s in record.kernel_steps]


def executor(name: str, record: ModelRecord, weights: np.ndarray, core=_core):
    """The C++ executor of a plan (its steps, arena, input and output shapes) over the model's weights blob, from
    `core`: the installed extension, or a `kiln compile` directory's (kiln/compiled.py)."""
    host = host_steps(name, record)  # the AI CPU steps' evaluator (kiln/aicpu.py), passed only when there are some
    return core.Executor(name, record.steps_json(), record.arena_bytes, weights,
                          [list(i.shape) for i in record.inputs], [list(o.shape) for o in record.outputs],
                          **({} if host is None else {"host": host}))


@dataclass
class ServingPlan:
    """One plan of a model: its record (the manifest's model record), executor and kernel launches."""
    path: str                       # baked | bucket | generic
    record: ModelRecord
    executor: object                # _core.Executor
    kernels: list[KernelStep]       # per kernel launch (their simulated_cycles follow the last run)
    generic_launches: int = 0       # launches on generic kernels (the rest are baked kernels)
    plan_seconds: float = 0.0       # time spent planning this size at its first use
    log: list[str] = field(default_factory=list)

    @property
    def input_shapes(self) -> list[tuple[int, ...]]:
        return [tuple(i.shape) for i in self.record.inputs]

    @property
    def output_shapes(self) -> list[tuple[int, ...]]:
        return [tuple(o.shape) for o in self.record.outputs]
