"""The plan the codegen hands to render: each unique kernel with its chosen variant, each model with its
lowered steps, memory plan and kernels. Built by codegen/pipeline.py; nothing is written until render."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..cost.model import Prediction
from ..families.base import Variant
from ..families.registry import FAMILIES
from ..ir.manifest import LaunchRecord
from ..ir.opspec import Opspec
from ..ir.optlog import OptLog
from ..ir.profiles import Profile
from ..options import Options
from ..passes.fusion import FusionResult
from ..passes.lowering import LoweredModel
from ..passes.memory import MemoryPlan
from .tiling import kernel_inputs, mte2_bytes


@dataclass(eq=False)
class KernelRequest:
    """A unique kernel before its variant is chosen: the spec, the kernel-list pins and the op instances that share
    them (compared by identity: the build's steps point at their request until the search has planned it)."""
    spec: Opspec
    pinned: str = ""  # algorithm fixed by a kernel-list entry ("" = chosen by the options and the cost model)
    pinned_tiling: tuple = ()  # tiling parameters fixed by a kernel-list entry: ((name, value), ...)
    instances: list[str] = field(default_factory=list)


@dataclass
class KernelPlan:
    spec: Opspec
    variant: Variant
    instances: list[str] = field(default_factory=list)
    prediction: Prediction | None = None  # the cost model's, for the chosen variant
    pinned: str = ""  # algorithm fixed by a kernel-list entry ("" = chosen by the options and the cost model)
    pinned_tiling: tuple = ()  # tiling parameters fixed by a kernel-list entry: ((name, value), ...)
    suffix: str = ""  # set when another kernel of the same spec and family has a different variant

    @property
    def symbol(self) -> str:
        """C++ symbol and public name: the family (and Winograd tile), then the spec's dims."""
        family = FAMILIES[self.variant.family].symbol_of(self.variant)
        pinned = "__" + self.variant.tag[len(self.variant.family) + 1:] if self.pinned_tiling else self.suffix
        return family + self.spec.name[len(self.spec.kind):] + pinned

    @property
    def inputs(self) -> list:
        """Packed input tensors of the generated kernel (the variant may change a weight layout)."""
        return kernel_inputs(self.spec, self.variant)

    @property
    def mte2_bytes(self) -> int:
        return mte2_bytes(self.spec, self.variant)


@dataclass
class ModelPlan:
    name: str
    onnx_path: str
    lowered: LoweredModel
    memory: MemoryPlan
    step_kernels: dict[int, KernelPlan]  # step index -> its kernel
    fusion: FusionResult | None = None
    # KILN_SHAPE_BUCKETS: a codegen/shapes/buckets.py ShapeBuckets (typed Any: that later stage builds on this one)
    shapes: Any = None
    l2_hits: dict[int, tuple[bool, ...]] = field(default_factory=dict)  # kernel step -> a hit per input (passes/l2)
    l2_reads: dict[int, tuple[int, ...]] = field(default_factory=dict)  # kernel step -> bytes read per input
    launches: dict[int, LaunchRecord | None] = field(default_factory=dict)  # kernel step -> its predicted launch
    host_cycles: dict[int, float] = field(default_factory=dict)  # aicpu step -> its predicted AI CPU cycles


def weight_transform(k: KernelPlan | None):
    """(blob-name suffix, transform) where the kernel's family reads its weight in another layout, else None."""
    if k is None:
        return None
    f = FAMILIES[k.variant.family]
    return f.weight_transform(k.spec, k.variant) if f.weight_transform else None


def step_inputs(m: ModelPlan, i: int) -> list[str]:
    """The values step i reads; a Winograd kernel reads its weight transformed (its family's weight_transform)."""
    s, t = m.lowered.steps[i], weight_transform(m.step_kernels.get(i))
    if t is None:
        return list(s.inputs)
    return [s.inputs[0], s.inputs[1] + t[0], *s.inputs[2:]]


@dataclass
class Plan:
    options: Options
    profile: Profile
    kernels: list[KernelPlan]
    log: OptLog
    models: list[ModelPlan] = field(default_factory=list)
    generic_kernels: list[Any] = field(default_factory=list)  # shapes/generic.py GenericKernels (KILN_SHAPE_BUCKETS)
