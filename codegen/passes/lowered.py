"""The lowering's output types: how a device value is held (Storage), one step of the model (Step), the lowered
model (LoweredModel). Their own module so the rule modules beside lowering.py (copy_rules) build steps without
importing the lowerer."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from math import prod
from typing import Protocol

import numpy as np

from .. import KilnError
from ..ir.graph import Graph, Node, OpInstance

C0 = 16


@dataclass(frozen=True)
class Storage:
    """How a value is held in device memory."""
    layout: str               # NC1HWC0 | NC1HWC0_C04 (a small-channel graph input) | ND
    logical: tuple[int, ...]  # the ONNX shape
    dtype: str = "fp16"

    @property
    def packed(self) -> tuple[int, ...]:
        if self.layout == "NC1HWC0":
            n, c, h, w = self.logical
            return (n, -(-c // C0), h, w, C0)
        if self.layout == "NC1HWC0_C04":
            n, _, h, w = self.logical
            return (n, 1, h, w, 4)
        return self.logical

    @property
    def nbytes(self) -> int:
        return prod(self.packed) * (2 if self.dtype == "fp16" else 4)


@dataclass(frozen=True)
class HostOp:
    """An aicpu step's op: the node alone as a serialised ONNX model (its run-time inputs, ND fp16 in the arena,
    are the model's inputs in step order; its constant inputs are inside), why it runs on the AI CPU (a reason code
    of the [OPT] log's catalogue), and the elements it reads and writes (the AI CPU cost model's measure)."""
    model: bytes
    reason: str
    elements: int


@dataclass
class Step:
    kind: str                      # kernel | glue | aicpu (a host step: the AI CPU fallback)
    name: str                      # the node (or nodes) it comes from
    ops: list[str]                 # source ONNX node names
    op_types: list[str]
    inputs: list[str]              # value or weight names
    output: str
    instance: OpInstance | None = None   # kernel steps
    glue: str = ""                       # glue steps: input_nchw(_c04), input_nd, to_nchw, to_nc1hwc0, output_nd/nchw
    params: list[int] = field(default_factory=list)
    host: HostOp | None = None           # aicpu steps: what the host evaluates

    @property
    def kernel_op(self) -> OpInstance:
        """A kernel step's op instance (a glue step has none)."""
        assert self.instance is not None, f"step {self.name} is not a kernel"
        return self.instance


@dataclass
class LoweredModel:
    name: str
    source: str
    graph_inputs: list[tuple[str, tuple[int, ...]]]
    graph_outputs: list[tuple[str, tuple[int, ...]]]
    steps: list[Step]
    storage: dict[str, Storage]     # every device value (staged inputs, intermediates, outputs)
    aliases: dict[str, str]         # view value -> the value whose bytes it shares
    weights: dict[str, np.ndarray]  # packed, in first-use order
    decisions: list[str] = field(default_factory=list)
    alias_offsets: dict[str, int] = field(default_factory=dict)  # view value -> byte offset in its root (slices)
    int64_outputs: tuple[str, ...] = ()  # graph outputs the runtime returns as int64 (ArgMax/ArgMin positions)


class LowererState(Protocol):
    """What the rule modules beside lowering.py (copy_rules) read and extend of the lowerer: typed here so they
    need not import lowering.py (which imports them)."""
    g: Graph
    dtype: str
    steps: list[Step]
    storage: dict[str, Storage]
    aliases: dict[str, str]
    alias_offsets: dict[str, int]
    decisions: list[str]
    device: dict[str, str]
    convt_chooser: Callable | None

    def cube_dtype(self) -> dict: ...
    def fail(self, node: Node, why: str) -> KilnError: ...
    def shape(self, v: str) -> tuple[int, ...]: ...
    def weight(self, name: str, arr: np.ndarray, masked_value_ok: bool = False) -> str: ...
    def act(self, node: Node, v: str, layout: str) -> str: ...
    def out(self, node: Node, layout: str) -> str: ...
    def new_value(self, name: str, st: Storage, alias_of: str | None = None, offset: int = 0) -> str: ...
    def view(self, node: Node, dv: str) -> str: ...
    def gather(self, node: Node) -> None: ...
    def conv(self, node: Node) -> None: ...
