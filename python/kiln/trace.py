"""`kiln trace MODEL --kernel NAME`: one kernel's instruction stream, the "disassembly" view.

The stream is the cost model's replay (the family's, codegen/families/<family>.py, recorded by `record`):
the instructions the kernel's
template issues, block by block on each AI core, timed with the emulator's pipe and flag rules. Tests hold
the replay's per-pipe instructions, bytes, busy cycles and total cycles equal to the emulator's
(tests/test_costmodel.py), so the stream is the emulated kernel's, instruction by instruction, without
instrumenting the C++ emulator. Chained launches (a convolution's Cube phase then its Vector epilogue, the
three Winograd passes) follow each other on one timeline.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from .codegen.ir.manifest import KernelRecord, ModelRecord, StepRecord, opspec_of_record

SOURCE_NOTE = ("instruction stream from the cost model's replay (codegen/families/), which tests hold equal "
               "to the emulator's timing: per-pipe instructions, bytes, busy cycles and total cycles")


class TraceError(Exception):
    pass


def spec_of(record: KernelRecord | Mapping):
    """The Opspec object of a manifest kernel record (typed or as JSON)."""
    return opspec_of_record(record)


def opspec_label(rec: KernelRecord) -> str:
    """The opspec's readable name, with its hash when the build names opspecs by hash."""
    name = rec.opspec_name
    return f"{name} ({rec.opspec})" if name and name != rec.opspec else rec.opspec


def profile_of_build():
    import kiln

    from .codegen.ir.profiles import PROFILES
    return PROFILES[kiln.manifest_record().profile]


@dataclass
class Event:
    phase: int        # which chained launch (0, 1, ...)
    unit: str         # "cube" or "vector"
    core: int
    pipe: str
    instr: str
    bytes: int
    start: float      # cycles from the kernel's start
    end: float

    @property
    def cycles(self) -> float:
        return self.end - self.start


@dataclass
class Trace:
    kernel: str
    record: KernelRecord
    profile: object
    cycles: float
    pipes: dict                       # the replay's Prediction.pipes: {pipe: PipeCount}
    phases: list[tuple[str, float, int]]   # (unit, cycles, cores) per chained launch
    events: list[Event] = field(default_factory=list)   # issue order within each core, phases in order

    def us(self, cycles: float) -> float:
        return cycles / (self.profile.clock_ghz * 1e3)

    def core_events(self, core: int) -> list[Event]:
        return [e for e in self.events if e.core == core]


def replay(record: KernelRecord, profile=None) -> Trace:
    """Records the cost model's replay of a manifest kernel record."""
    from .codegen.families import registry
    profile = profile or profile_of_build()
    pred, launches = registry.record(spec_of(record), record.family, record.tiling, profile)
    if pred is None:
        raise TraceError(f"the cost model has no replay for family {record.family!r}")
    events, offset, phases = [], 0.0, []
    for i, (unit, cycles, cores) in enumerate(launches):
        for core, stream in cores.items():
            events.extend(Event(i, unit, core, p, ins, nb, offset + s, offset + e) for p, ins, nb, s, e in stream)
        phases.append((unit, cycles, len(cores)))
        offset += cycles
    return Trace(record.name, record, profile, pred.cycles, pred.pipes, phases, events)


def find_kernel(model_name: str, name: str) -> tuple[ModelRecord, list[StepRecord], KernelRecord]:
    """(model record, the model's launch steps that use the kernel, kernel record) for a kernel name, an
    opspec name or a launch (step) name of the model."""
    import kiln
    man = kiln.manifest_record()
    try:  # by name, by the ONNX path it was baked from or by its model spec, as kiln.load finds it
        model = kiln.model_record(model_name)
    except KeyError as e:
        raise TraceError(e.args[0]) from None
    recs = man.kernels_by_name()
    steps = model.kernel_steps
    def names(s):
        r = recs[s.kernel]
        return s.kernel, r.opspec, r.opspec_name
    hit = [s for s in steps if name in names(s)] or [s for s in steps if s.name == name or name in s.ops]
    if not hit:
        names = sorted({s.kernel for s in steps})
        raise TraceError(f"model {model.name} has no kernel or launch named {name!r}; its kernels: "
                         + ", ".join(names))
    kname = hit[0].kernel
    return model, [s for s in steps if s.kernel == kname], recs[kname]


def pipe_summary(tr: Trace) -> dict[str, dict]:
    """Per pipe over all cores: instructions, bytes, busy cycles (equal to the replay's counters), the busy
    share of the cores that ran the pipe's launches, and the instruction mix by cycles."""
    out: dict[str, dict] = {}
    cap: dict[str, float] = {}
    for i, (_unit, cycles, cores) in enumerate(tr.phases):
        for p in {e.pipe for e in tr.events if e.phase == i}:
            cap[p] = cap.get(p, 0.0) + cycles * cores
    for e in tr.events:
        s = out.setdefault(e.pipe, {"instrs": 0, "bytes": 0, "busy": 0.0, "mix": {}})
        s["instrs"] += 1
        s["bytes"] += e.bytes
        s["busy"] += e.cycles
        m = s["mix"].setdefault(e.instr, [0, 0.0, 0])
        m[0] += 1
        m[1] += e.cycles
        m[2] += e.bytes
    for p, s in out.items():
        s["active_utilisation"] = s["busy"] / cap[p] if cap.get(p) else 0.0
        s["mix"] = sorted(([k, *v] for k, v in s["mix"].items()), key=lambda r: -r[2])
    order = {p: i for i, p in enumerate(("M", "MTE1", "MTE2", "MTE3", "FIX", "V", "S"))}
    return dict(sorted(out.items(), key=lambda kv: order.get(kv[0], 99)))


def chrome_trace(tr: Trace, model: str = "") -> dict:
    """Chrome / Perfetto trace-event JSON: one complete ("X") event per instruction, pid = core, tid = pipe
    (numbered, named by thread_name metadata), ts/dur in simulated microseconds at the profile's clock."""
    from .codegen.cost.model import PIPES
    tid = {p: i for i, p in enumerate(PIPES)}
    evs: list[dict] = []
    for core in sorted({e.core for e in tr.events}):
        units = sorted({e.unit for e in tr.events if e.core == core})
        evs.append({"ph": "M", "name": "process_name", "pid": core, "tid": 0,
                    "args": {"name": f"core {core} ({'+'.join(units)})"}})
        evs.append({"ph": "M", "name": "process_sort_index", "pid": core, "tid": 0, "args": {"sort_index": core}})
        for p in PIPES:
            evs.append({"ph": "M", "name": "thread_name", "pid": core, "tid": tid[p], "args": {"name": p}})
            evs.append({"ph": "M", "name": "thread_sort_index", "pid": core, "tid": tid[p],
                        "args": {"sort_index": tid[p]}})
    scale = 1.0 / (tr.profile.clock_ghz * 1e3)
    for e in tr.events:
        evs.append({"name": e.instr or e.pipe, "cat": e.pipe, "ph": "X", "pid": e.core, "tid": tid[e.pipe],
                    "ts": e.start * scale, "dur": e.cycles * scale,
                    "args": {"bytes": e.bytes, "start_cycle": e.start, "end_cycle": e.end, "phase": e.phase,
                             "unit": e.unit}})
    return {"traceEvents": evs, "displayTimeUnit": "ns",
            "otherData": {"model": model, "kernel": tr.kernel, "profile": tr.profile.name,
                          "clock_ghz": tr.profile.clock_ghz, "cycles": tr.cycles,
                          "simulated_us": tr.us(tr.cycles), "source": SOURCE_NOTE}}


def format_text(tr: Trace, steps: list[StepRecord], limit: int = 40, core: int = 0) -> str:
    rec, prof = tr.record, tr.profile
    lines = [f"kernel {tr.kernel}",
             f"  opspec {opspec_label(rec)}, variant {rec.variant}, algorithm {rec.algorithm}",
             "  launches: " + "; ".join(f"{s.name} ({', '.join(s.ops)})" for s in steps),
             f"  {tr.cycles:.0f} cycles = {tr.us(tr.cycles):.3f} us on {prof.name} at {prof.clock_ghz} GHz; "
             + ", then ".join(f"{u} launch {c:.0f} cycles on {n} cores" for u, c, n in tr.phases),
             f"  source: {SOURCE_NOTE}", ""]
    mine = tr.core_events(core)
    lines.append(f"core {core}: first {min(limit, len(mine))} of {len(mine)} instructions, in issue order "
                 f"(start/end: cycles from the kernel's start)")
    lines.append(f"  {'#':>5} {'ph':>2} {'pipe':<5} {'instruction':<16} {'bytes':>9} {'start':>10} {'end':>10} "
                 f"{'cycles':>8}")
    for i, e in enumerate(mine[:limit]):
        lines.append(f"  {i:>5} {e.phase:>2} {e.pipe:<5} {e.instr:<16} {e.bytes:>9} {e.start:>10.1f} "
                     f"{e.end:>10.1f} {e.cycles:>8.1f}")
    if len(mine) > limit:
        lines.append(f"  ... {len(mine) - limit} more (--limit N)")
    lines += ["", f"per pipe, all {sum(n for _, _, n in tr.phases)} core launches "
              "(util: busy share of the cores running the pipe's launches):",
              f"  {'pipe':<5} {'instrs':>8} {'bytes':>12} {'busy':>12} {'util':>6}  instruction mix (by cycles)"]
    for p, s in pipe_summary(tr).items():
        mix = ", ".join(f"{name} x{n} {cyc:.0f}" for name, n, cyc, _ in s["mix"][:4])
        lines.append(f"  {p:<5} {s['instrs']:>8} {s['bytes']:>12} {s['busy']:>12.0f} "
                     f"{100 * s['active_utilisation']:>5.1f}%  {mix}")
    return "\n".join(lines)
