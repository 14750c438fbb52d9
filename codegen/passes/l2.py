"""L2 residency: which GM reads of a model's steps hit the chip's L2, decided once at build time.

The steps run one after another; the L2 is modelled as least-recently-used whole tensors against the
profile's L2 size. Walking the plan in order, a kernel step's read of a tensor hits when the tensor is
resident at the start of the step; then every tensor the step read or wrote becomes the most recent
(reads and writes both allocate: the 910B's L2 is a write-back cache in front of all GM traffic), and the
least recent are evicted until the rest fits. A tensor larger than the L2 streams through it: it evicts
everything and stays resident itself only in part, which counts as absent. Decisions, by kind of tensor:

- an intermediate tensor (one arena root, whatever views of it a step reads) hits when an earlier step wrote
  or read it and less than the L2 size of other tensors has been touched since;
- a weight misses on its first touch in a run (each run starts from a cold L2: the model is run once, the
  weights come from HBM) and hits when a later step reads it again while it is still resident;
- the graph's inputs reach GM from the host (glue steps on the host), so they and any tensor a glue step writes
  are not in L2 until a kernel reads them.

The emulator (kernels/kiln/executor.hpp) and the cost model read the result from the manifest (each kernel
step's `l2_hits`, one per kernel input); a kernel's reads of its own output or of its GM workspace, written by
itself in the same call, hit (codegen/cost/model.py SimCore.hits). docs/ascend-model.md section 12.
"""
from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from ..ir.optlog import OptLog


@dataclass(frozen=True)
class StepAccess:
    """The GM tensors one step touches: (key, bytes) of each kernel input in the kernel's order, and of its
    output. host: a glue step (it runs on the host; what it writes reaches GM without passing the L2)."""
    name: str
    reads: tuple[tuple[str, int], ...]
    write: tuple[str, int]
    host: bool = False


class _Lru:
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.resident: OrderedDict[str, int] = OrderedDict()
        self.used = 0

    def drop(self, key: str) -> None:
        self.used -= self.resident.pop(key, 0)

    def touch(self, key: str, nbytes: int) -> None:
        self.drop(key)
        if nbytes > self.capacity:  # streams through: flushes the L2, keeps none of it whole
            self.resident.clear()
            self.used = 0
            return
        self.resident[key] = nbytes
        self.used += nbytes
        while self.used > self.capacity:
            _, evicted = self.resident.popitem(last=False)
            self.used -= evicted


def plan_l2(model: str, steps: Sequence[StepAccess], l2_bytes: int, log: OptLog) -> list[tuple[bool, ...] | None]:
    """Per step: a hit per kernel input (None for a host step), logged per kernel step."""
    lru = _Lru(l2_bytes)
    out: list[tuple[bool, ...] | None] = []
    for s in steps:
        if s.host:
            lru.drop(s.write[0])
            out.append(None)
            continue
        hits = tuple(key in lru.resident for key, _ in s.reads)
        for key, nbytes in s.reads:
            lru.touch(key, nbytes)
        lru.touch(*s.write)
        out.append(hits)
        hit_bytes = sum(n for (_, n), h in zip(s.reads, hits) if h)
        log.add("l2", f"{model}:{s.name}", "hits=" + "".join("H" if h else "m" for h in hits), "l2_residency",
                hit_bytes=hit_bytes, miss_bytes=sum(n for _, n in s.reads) - hit_bytes, resident=lru.used)
    return out
