"""The codegen pipeline, top to bottom: options -> frontend -> opspecs -> variants.

`plan()` runs every stage that decides something and returns a Plan; nothing is
written until render. Identical Opspecs become one kernel.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from . import KilnError
from .frontend import OpInstance, load_kernel_list
from .opspec import Opspec, opspec_of
from .options import Options
from .optlog import OptLog
from .profiles import Profile, get_profile
from .tiling import Variant, choose_variant, mte2_bytes


@dataclass
class KernelPlan:
    spec: Opspec
    variant: Variant | None = None
    instances: list[str] = field(default_factory=list)

    @property
    def symbol(self) -> str:
        """C++ symbol and public name: the family, then the spec's dims."""
        return self.variant.family + self.spec.name[len(self.spec.kind):]

    @property
    def mte2_bytes(self) -> int:
        return mte2_bytes(self.spec, self.variant)


@dataclass
class Plan:
    options: Options
    profile: Profile
    kernels: list[KernelPlan]
    log: OptLog


def default_kernel_list(source_dir: Path) -> Path:
    return source_dir / "kernels" / "default.toml"


def plan(options: Options, source_dir: Path) -> Plan:
    log = OptLog()
    profile = get_profile(options.kiln_target)
    log.add("options", "build", f"target={profile.name}", "option", isa=options.isa_resolved or options.kiln_isa)
    if options.kiln_models:
        raise KilnError("frontend", "KILN_MODELS", "baking models needs the ONNX frontend, which this version does "
                        "not have yet; list op instances in a kernel list instead (KILN_KERNEL_LIST, "
                        "default kernels/default.toml)")
    kernel_list = Path(options.kiln_kernel_list) if options.kiln_kernel_list else default_kernel_list(source_dir)
    ops: list[OpInstance] = load_kernel_list(kernel_list)

    by_spec: dict[Opspec, KernelPlan] = {}
    for op in ops:
        spec = opspec_of(op)
        if spec in by_spec:
            log.add("opspec", op.label, spec.name, "dedup")
        else:
            by_spec[spec] = KernelPlan(spec)
            log.add("opspec", op.label, spec.name, "new_kernel")
        by_spec[spec].instances.append(op.label)

    kernels = list(by_spec.values())
    for k in kernels:
        k.variant = choose_variant(k.spec, profile, log)
    names = [k.symbol for k in kernels]
    assert len(set(names)) == len(names), "kernel names must be unique"
    return Plan(options, profile, kernels, log)
