"""What a model's plan is made of at run time, shared by kiln/model.py and kiln/dispatch.py (which plans the
launches for an input size): imports point model -> dispatch -> steps."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class KernelStep:
    """One kernel launch of a model: which ops it runs and with which kernel."""
    name: str
    ops: list[str]
    op_types: list[str]
    kernel: str
    simulated_cycles: float | None = None
    generic: bool = False  # a generic kernel (runtime shapes) served this launch (KILN_SHAPE_BUCKETS)
