"""The elementwise Vector program: the one table of the ops a fused elementwise kernel
(codegen/families/eltwise_program_vector.py) runs, each as its Vector instruction sequence and its NumPy
reference. Adding an op is one PROGRAM_OPS entry; the template, the cost replay, the reference check and the
chain pass (codegen/passes/eltwise_programs.py) all read it.

A program is a tuple of steps (op, args, params): args index the kernel's inputs (0..k-1) and earlier steps
(k, k+1, ...); params are the op's constants (fp32). Every value is a full fp32 tile of the output: a
broadcast input is expanded into one before the program runs, so the instructions never see a broadcast.
In an instruction, "d" is the step's own buffer, "a" and "b" its first and second argument; a scalar operand
is a number or the name of one of the op's params.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

Instr = tuple  # (VecOp, dst, src0[, src1 | scalar]): src1 for binary VecOps, scalar for the *s forms and Dup
BINARY_VECOPS = ("Add", "Sub", "Mul", "Div", "Max", "Min")


@dataclass(frozen=True)
class ProgramOp:
    """One op of the program: its arity, its parameters (in order), its fp32 Vector instruction sequence, its
    float64 NumPy reference, and how many source ops it counts toward MAX_FUSION_DEPTH."""
    arity: int
    params: tuple[str, ...]
    instrs: tuple[Instr, ...]
    reference: Callable[..., np.ndarray]
    depth: int = 1


def _hardsigmoid(x, alpha, beta):
    return np.clip(alpha * x + beta, 0.0, 1.0)


PROGRAM_OPS: dict[str, ProgramOp] = {
    # Sigmoid = 1 / (1 + exp(-x)): exp of the negation, add 1, reciprocal (exp overflows to inf -> 0, the limit)
    "sigmoid": ProgramOp(1, (), (("Muls", "d", "a", -1.0), ("Exp", "d", "d"), ("Adds", "d", "d", 1.0),
                                 ("Reciprocal", "d", "d")), lambda x: 1.0 / (1.0 + np.exp(-x))),
    "hardsigmoid": ProgramOp(1, ("alpha", "beta"), (("Muls", "d", "a", "alpha"), ("Adds", "d", "d", "beta"),
                                                    ("Maxs", "d", "d", 0.0), ("Mins", "d", "d", 1.0)), _hardsigmoid),
    # HardSwish = x * hardsigmoid(x) with ONNX's alpha 1/6, beta 1/2
    "hardswish": ProgramOp(1, (), (("Muls", "d", "a", 1.0 / 6.0), ("Adds", "d", "d", 0.5), ("Maxs", "d", "d", 0.0),
                                   ("Mins", "d", "d", 1.0), ("Mul", "d", "d", "a")),
                           lambda x: x * _hardsigmoid(x, 1.0 / 6.0, 0.5)),
    "relu": ProgramOp(1, (), (("Relu", "d", "a"),), lambda x: np.maximum(x, 0.0)),
    "clip": ProgramOp(1, ("lo", "hi"), (("Maxs", "d", "a", "lo"), ("Mins", "d", "d", "hi")),
                      lambda x, lo, hi: np.minimum(np.maximum(x, lo), hi)),
    "add": ProgramOp(2, (), (("Add", "d", "a", "b"),), np.add),
    "sub": ProgramOp(2, (), (("Sub", "d", "a", "b"),), np.subtract),
    "mul": ProgramOp(2, (), (("Mul", "d", "a", "b"),), np.multiply),
    "div": ProgramOp(2, (), (("Div", "d", "a", "b"),), np.divide),
    # a scalar constant operand: x + c, x * c (x - c and x / c lower to these with -c and 1/c), c - x, c / x
    "adds": ProgramOp(1, ("c",), (("Adds", "d", "a", "c"),), lambda x, c: x + c),
    "muls": ProgramOp(1, ("c",), (("Muls", "d", "a", "c"),), lambda x, c: x * c),
    "rsubs": ProgramOp(1, ("c",), (("Muls", "d", "a", -1.0), ("Adds", "d", "d", "c")), lambda x, c: c - x),
    "rdivs": ProgramOp(1, ("c",), (("Reciprocal", "d", "a"), ("Muls", "d", "d", "c")), lambda x, c: c / x),
}

Step = tuple[str, tuple[int, ...], tuple[float, ...]]


def f32(v: float) -> float:
    return float(np.float32(v))


def check_program(inputs: int, steps: tuple[Step, ...]) -> str | None:
    """Why (inputs, steps) is not a well-formed program, or None."""
    if not steps:
        return "a program needs at least one step"
    for j, (op, args, params) in enumerate(steps):
        entry = PROGRAM_OPS.get(op)
        if entry is None:
            return f"step {j}: unknown op {op!r}; known: {', '.join(sorted(PROGRAM_OPS))}"
        if len(args) != entry.arity or any(not 0 <= a < inputs + j for a in args):
            return f"step {j} ({op}): needs {entry.arity} argument(s) among the inputs and earlier steps, got {args}"
        if len(params) != len(entry.params):
            return f"step {j} ({op}): needs params {entry.params}, got {params}"
    return None


def evaluate_all(steps: tuple[Step, ...], inputs: list[np.ndarray]) -> list[np.ndarray]:
    """Every value of the program (the inputs, then each step's result) in float64 over broadcastable inputs."""
    values = [np.asarray(x, np.float64) for x in inputs]
    for op, args, params in steps:
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            values.append(np.asarray(PROGRAM_OPS[op].reference(*[values[a] for a in args], *params), np.float64))
    return values


def evaluate(steps: tuple[Step, ...], inputs: list[np.ndarray]) -> np.ndarray:
    """The program's float64 reference: its last step's value."""
    return evaluate_all(steps, inputs)[-1]


def depth(steps: tuple[Step, ...]) -> int:
    return sum(PROGRAM_OPS[op].depth for op, _, _ in steps)


def vector_ops(steps: tuple[Step, ...]) -> list[str]:
    """The VecOps the program issues per repeat, in order."""
    return [ins[0] for op, _, _ in steps for ins in PROGRAM_OPS[op].instrs]


def scalar_of(ref, op: str, params: tuple[float, ...]) -> float:
    """An instruction's scalar operand: a number, or one of the op's params by name."""
    return f32(params[PROGRAM_OPS[op].params.index(ref)] if isinstance(ref, str) else ref)


def encode(steps: tuple[Step, ...] | list[Step]) -> str:
    """A program as text, the form specs, kernel lists and .opspec files hold: 'sigmoid(0);mul(0,1)',
    params after a bar: 'hardsigmoid(0|0.2,0.5)'."""
    def one(op: str, args, params) -> str:
        body = ",".join(str(int(a)) for a in args)
        return f"{op}({body}" + ("|" + ",".join(repr(f32(p)) for p in params) if params else "") + ")"
    return ";".join(one(*s) for s in steps)


def decode(text: str, inputs: int) -> tuple[Step, ...]:
    """encode()'s inverse, checked (ValueError naming the problem)."""
    steps: list[Step] = []
    for part in text.split(";"):
        op, paren, rest = part.strip().partition("(")
        if not paren or not rest.endswith(")"):
            raise ValueError(f"program step {part!r} is not op(args[|params])")
        args_text, _, params_text = rest[:-1].partition("|")
        try:
            args = tuple(int(a) for a in args_text.split(",") if a.strip())
            params = tuple(f32(float(p)) for p in params_text.split(",") if p.strip())
        except ValueError:
            raise ValueError(f"program step {part!r}: arguments are integers, params numbers") from None
        steps.append((op, args, params))
    problem = check_program(inputs, tuple(steps))
    if problem:
        raise ValueError(problem)
    return tuple(steps)
