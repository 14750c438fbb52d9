"""The AI CPU fallback at run time (issue 19): a model step no AI Core kernel runs (an `aicpu` step of the plan,
codegen/frontend/onnx_aicpu.py) is evaluated here, on the host, between the executor's AI Core launches.

The C++ executor calls `HostSteps(step, inputs)` at such a step with its run-time inputs as they are in the arena
(ND fp16, as uint16 bits); each is read as fp32 in its ONNX shape, the node alone (the one-node model of the
step's record, constants inside) runs on the onnx package's reference evaluator (onnx.reference), and the first
output goes back as ND fp16 bits. onnx is needed only by models that have such steps."""
from __future__ import annotations

import base64
from typing import Any

import numpy as np

from .codegen.ir.manifest import ModelRecord


class AiCpuError(ImportError):
    """A model with AI CPU steps was loaded without the onnx package its reference evaluator comes from."""


def aicpu_nodes(record: ModelRecord) -> list[str]:
    """The nodes of the plan that run on the AI CPU, in step order."""
    return [s.name for s in record.steps if s.is_aicpu]


class HostSteps:
    """The evaluator of a plan's AI CPU steps: the callable the C++ executor's `host` argument takes."""

    def __init__(self, name: str, record: ModelRecord):
        try:
            import onnx
            from onnx.reference import ReferenceEvaluator
        except ImportError:
            raise AiCpuError(f"model {name} runs {', '.join(repr(n) for n in aicpu_nodes(record))} on the AI CPU "
                             f"fallback, which evaluates them with the onnx package's reference evaluator: "
                             f"pip install onnx (or kiln[validate])") from None
        self.steps: dict[int, tuple[Any, list[str], list[tuple[int, ...]], tuple[int, ...]]] = {}
        for i, s in enumerate(record.steps):
            if s.host is None:
                continue
            model = onnx.load_from_string(base64.b64decode(s.host.model))
            ins = [(v.name, tuple(d.dim_value for d in v.type.tensor_type.shape.dim)) for v in model.graph.input]
            out = tuple(d.dim_value for d in model.graph.output[0].type.tensor_type.shape.dim)
            self.steps[i] = (ReferenceEvaluator(model), [n for n, _ in ins], [sh for _, sh in ins], out)

    def __call__(self, step: int, inputs: list[np.ndarray]) -> np.ndarray:
        evaluator, names, shapes, out_shape = self.steps[step]
        feeds = {n: x.view(np.float16).astype(np.float32).reshape(shape) for n, x, shape in zip(names, inputs, shapes)}
        y = np.asarray(evaluator.run(None, feeds)[0])
        if y.shape != out_shape:
            raise ValueError(f"the reference evaluator returned shape {list(y.shape)}, the plan expects "
                             f"{list(out_shape)}")
        with np.errstate(over="ignore"):  # beyond fp16's range becomes inf, as an AI Core kernel's result would
            return np.ascontiguousarray(y.astype(np.float16)).view(np.uint16).reshape(-1)


def host_steps(name: str, record: ModelRecord) -> HostSteps | None:
    """The plan's AI CPU evaluator, None when it has no AI CPU step."""
    return HostSteps(name, record) if any(s.is_aicpu for s in record.steps) else None
