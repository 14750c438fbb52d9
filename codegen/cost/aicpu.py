"""The AI CPU's cost model (issue 19's fallback): what an aicpu step (a node no AI Core kernel runs, evaluated on
the chip's AI CPU between AI Core launches) costs, in the profile's AI Core clock cycles like every launch.

    cycles = sync + elements x cycles_per_element / ai_cpu_cores x (AI Core clock / AI CPU clock)

- sync: the host <-> device synchronisation around the step: the AI Core stream drains, the task scheduler
  starts the AI CPU kernel and the next AI Core launch waits for its end.
- elements: what the step reads and writes (its run-time inputs plus its output), spread over the AI CPU cores.
The figures and their sources (or "assumed" and why) are in docs/ascend-model.md, section "AI CPU".
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir.profiles import Profile


@dataclass(frozen=True)
class AiCpu:
    cores: int                 # AI CPU cores of the chip (CANN's SoCInfo ai_cpu_cnt)
    clock_ghz: float           # their clock
    cycles_per_element: float  # AI CPU cycles per element read or written (a generic C++ kernel's loop)
    sync_us: float             # host <-> device synchronisation around one AI CPU step


AI_CPUS = {
    "ascend910b": AiCpu(cores=6, clock_ghz=1.8, cycles_per_element=8.0, sync_us=20.0),
    "ascend310p": AiCpu(cores=16, clock_ghz=1.6, cycles_per_element=8.0, sync_us=20.0),
}


def aicpu_cycles(elements: int, profile: Profile) -> float:
    """An AI CPU step over `elements` (read + written) on `profile`'s chip, in its AI Core clock cycles."""
    cpu = AI_CPUS[profile.name]
    sync = cpu.sync_us * 1e3 * profile.clock_ghz
    work = elements * cpu.cycles_per_element / cpu.cores * (profile.clock_ghz / cpu.clock_ghz)
    return round(sync + work, 3)
