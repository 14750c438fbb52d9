"""Single-op (and small multi-op) ONNX models checked against ONNX Runtime by tests/kiln/test_ops.py, all baked
in one shared build. Each module of this package (one per op group: eltwise.py, structure.py, ...) defines
CASES, a list of OpCase; the test collects every module, so adding a case is adding a line to its module."""
from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class OpCase:
    """name: unique, a valid file stem (the baked model's name); model: the ONNX model (onnx.helper) whose graph
    inputs are all runtime inputs (weights as initializers); tol: the bound on max|got - ref| / max|ref| over
    each output (fp16 storage: a few units of 2**-11 for an op without a reduction); inputs: per graph input,
    a function of an rng giving its fp32 value (default: standard normal); launches: the kernel launches the
    baked model must have (None: not checked); reference: the model ONNX Runtime runs instead, when it cannot run
    `model` itself (same inputs and outputs; e.g. a layout-1 LSTM as Transposes around a layout-0 one)."""
    name: str
    model: object
    tol: float = 4e-3
    inputs: dict = field(default_factory=dict)
    launches: int | None = None
    reference: object | None = None

    def feeds(self, seed: int = 0) -> dict[str, np.ndarray]:
        rng = np.random.default_rng(seed)
        init = {i.name for i in self.model.graph.initializer}  # type: ignore[attr-defined]
        out = {}
        for vi in self.model.graph.input:  # type: ignore[attr-defined]
            if vi.name in init:
                continue
            shape = [d.dim_value for d in vi.type.tensor_type.shape.dim]
            make = self.inputs.get(vi.name)
            dtype = {7: np.int64, 6: np.int32}.get(vi.type.tensor_type.elem_type, np.float32)  # indices: as declared
            out[vi.name] = np.asarray(make(rng, shape) if make else rng.standard_normal(shape), dtype)  # 0-d too
        return out


def all_cases() -> list[OpCase]:
    cases: list[OpCase] = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        cases += importlib.import_module(f"{__name__}.{info.name}").CASES
    names = [c.name for c in cases]
    dup = {n for n in names if names.count(n) > 1}
    assert not dup, f"op case names must be unique: {sorted(dup)}"
    return cases


def single_op(op_type: str, inputs: list[tuple[str, list[int]]], outputs: list[tuple[str, list[int] | None]],
              initializers: dict[str, np.ndarray] | None = None, opset: int = 17, **attrs):
    """A one-node model at `opset`: the node reads the graph inputs (name, shape) first, then the initializers
    (name -> array, e.g. a weight or an int64 axes tensor) in the order given; outputs (name, shape or None)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    init = initializers or {}
    node = helper.make_node(op_type, [n for n, _ in inputs] + list(init), [n for n, _ in outputs], **attrs)
    graph = helper.make_graph(
        [node], op_type.lower(),
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in init.items()])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    if any(s is None for _, s in outputs):  # output shapes left to onnx's shape inference
        m = onnx.shape_inference.infer_shapes(m, strict_mode=True)
    onnx.checker.check_model(m)
    return m


def graph_case(name: str, nodes: list, x: list[int], y: list[int] | None, init: dict[str, np.ndarray], tol: float,
               launches: int | None) -> OpCase:
    """A small multi-op case: `nodes` (onnx.helper) from graph input x to output y, the initializers as fp32."""
    from onnx import TensorProto, helper, numpy_helper
    graph = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, x)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, y)],
                              [numpy_helper.from_array(v.astype(np.float32), k) for k, v in init.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return OpCase(name, model, tol=tol, launches=launches)
