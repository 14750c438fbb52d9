"""The elementwise Vector program: the one table of the ops a fused elementwise kernel
(codegen/families/eltwise_program_vector.py) runs, each as its Vector instruction sequence and its NumPy
reference. Adding an op is one PROGRAM_OPS entry; the template, the cost replay, the reference check and the
chain pass (codegen/passes/eltwise_programs.py) all read it.

A program is a tuple of steps (op, args, params): args index the kernel's inputs (0..k-1) and earlier steps
(k, k+1, ...); params are the op's constants (fp32). Every value is a full fp32 tile of the output: a
broadcast input is expanded into one before the program runs, so the instructions never see a broadcast.
In an instruction, "d" is the step's own buffer, "a", "b" and "c" its first, second and third argument, "t" and "u"
its scratch buffers (an op declaring `scratch` gets that many fp32 tiles of its own); a scalar operand is a number or
the name of one of the op's params. An op whose sequence depends on a param (powi) gives `instrs` as a function of
the params, and `check` says which param values it takes.

A condition (Where's first input, a comparison's result) is a tile of 1.0 (true) and 0.0 (false): a comparison
(Cmp*, vcmpv) writes 1 or 0 per lane, and Sel (vsel) reads its condition from its own destination ("d = d != 0 ?
a : b"), so a select first copies the condition there. A Dup writes its scalar to every lane of "d" (no source).
"""
from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

Instr = tuple  # (VecOp, dst, src0[, src1 | scalar]): src1 for binary VecOps, scalar for the *s forms and Dup
BINARY_VECOPS = ("Add", "Sub", "Mul", "Div", "Max", "Min", "CmpLt", "CmpGt", "CmpEq", "CmpLe", "CmpGe", "Sel")


@dataclass(frozen=True)
class ProgramOp:
    """One op of the program: its arity, its parameters (in order), its fp32 Vector instruction sequence (or a
    function of the params giving it), its float64 NumPy reference, how many source ops it counts toward
    MAX_FUSION_DEPTH, its scratch buffers, and why given params are not taken (None: all are)."""
    arity: int
    params: tuple[str, ...]
    instrs: tuple[Instr, ...] | Callable[[tuple[float, ...]], tuple[Instr, ...]]
    reference: Callable[..., np.ndarray]
    depth: int = 1
    scratch: int = 0
    check: Callable[[tuple[float, ...]], str | None] | None = None

    def sequence(self, params: tuple[float, ...]) -> tuple[Instr, ...]:
        return self.instrs(params) if callable(self.instrs) else self.instrs


def _hardsigmoid(x, alpha, beta):
    return np.clip(alpha * x + beta, 0.0, 1.0)


POWI_MAX = 16  # the largest |n| of an integer power done by multiplications


def _powi_instrs(params: tuple[float, ...]) -> tuple[Instr, ...]:
    """x**n for an integer n != 0: left-to-right binary exponentiation by Mul (one squaring per bit after the
    leading one, one multiply by x per set bit), then a Reciprocal when n < 0; n = +-1 is a copy (Muls 1)."""
    n = int(params[0])
    bits = bin(abs(n))[3:]
    seq: list[Instr] = [] if bits else [("Muls", "d", "a", 1.0)]
    for j, bit in enumerate(bits):
        src = "a" if j == 0 else "d"
        seq.append(("Mul", "d", src, src))
        if bit == "1":
            seq.append(("Mul", "d", "d", "a"))
    return tuple(seq) + ((("Reciprocal", "d", "d"),) if n < 0 else ())


def _powi_check(params: tuple[float, ...]) -> str | None:
    n = params[0]
    if n != int(n) or n == 0 or abs(n) > POWI_MAX:
        return f"powi takes an integer exponent n, 0 < |n| <= {POWI_MAX}; got {n}"
    return None


# erf(x) for x clamped to [-4, 4] (|erf| = 1 in fp32 beyond): x * P(x^2) / Q(x^2), the odd rational approximation
# of Eigen's generic_fast_erf_float (XLA's and TensorFlow's fp32 Erf); no exp, so nothing overflows.
_ERF_P = (-2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06, -5.69250639462346e-05,
          -7.34990630326855e-04, -2.95459980854025e-03, -1.60960333262415e-02)  # x^13 .. x^1
_ERF_Q = (-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03, -7.37332916720468e-03,
          -1.42647390514189e-02)  # x^8 .. x^0


def _horner(dst: str, var: str, coeffs: tuple[float, ...]) -> tuple[Instr, ...]:
    """dst = polynomial in var (coefficients from the highest power) by Horner's rule."""
    seq: list[Instr] = [("Muls", dst, var, coeffs[0]), ("Adds", dst, dst, coeffs[1])]
    for c in coeffs[2:]:
        seq += [("Mul", dst, dst, var), ("Adds", dst, dst, c)]
    return tuple(seq)


_ERF = ((("Maxs", "d", "a", -4.0), ("Mins", "d", "d", 4.0), ("Mul", "t", "d", "d"))
        + _horner("u", "t", _ERF_P) + (("Mul", "u", "u", "d"),) + _horner("d", "t", _ERF_Q)
        + (("Div", "d", "u", "d"),))


def _erf(x):
    from math import erf
    return np.vectorize(erf, otypes=[np.float64])(x)


def _softplus(x):
    return np.maximum(x, 0.0) + np.log1p(np.exp(-np.abs(x)))


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
    # the elementwise catalogue (issue 19)
    "max": ProgramOp(2, (), (("Max", "d", "a", "b"),), np.maximum),
    "min": ProgramOp(2, (), (("Min", "d", "a", "b"),), np.minimum),
    "maxs": ProgramOp(1, ("c",), (("Maxs", "d", "a", "c"),), np.maximum),
    "mins": ProgramOp(1, ("c",), (("Mins", "d", "a", "c"),), np.minimum),
    "exp": ProgramOp(1, (), (("Exp", "d", "a"),), np.exp),
    "log": ProgramOp(1, (), (("Ln", "d", "a"),), np.log),
    "sqrt": ProgramOp(1, (), (("Sqrt", "d", "a"),), np.sqrt),
    "rsqrt": ProgramOp(1, (), (("Sqrt", "d", "a"), ("Reciprocal", "d", "d")), lambda x: 1.0 / np.sqrt(x)),
    "reciprocal": ProgramOp(1, (), (("Reciprocal", "d", "a"),), lambda x: 1.0 / x),
    "abs": ProgramOp(1, (), (("Abs", "d", "a"),), np.abs),
    "neg": ProgramOp(1, (), (("Muls", "d", "a", -1.0),), np.negative),
    # x**n, n a nonzero integer (Pow with 2, 3, -1, ...); a general exponent p as exp(p * ln x): NaN for x < 0
    # as the spec's real-valued pow, 0 ** p = 0 (p > 0) or inf (p < 0)
    "powi": ProgramOp(1, ("n",), _powi_instrs, np.power, check=_powi_check),
    "powf": ProgramOp(1, ("p",), (("Ln", "d", "a"), ("Muls", "d", "d", "p"), ("Exp", "d", "d")), np.power),
    "leakyrelu": ProgramOp(1, ("alpha",), (("LeakyRelu", "d", "a", "alpha"),),
                           lambda x, alpha: np.where(x < 0, alpha * x, x)),
    # PRelu(x, slope) = relu(x) + slope * min(x, 0): exact (one term is 0), NaN kept by the Relu
    "prelu": ProgramOp(2, (), (("Relu", "t", "a"), ("Mins", "d", "a", 0.0), ("Mul", "d", "d", "b"),
                               ("Add", "d", "d", "t")), lambda x, s: np.where(x < 0, s * x, x), scratch=1),
    # tanh(x) = 2 / (1 + exp(-2x)) - 1: exp overflows to inf only where the limit -1 is the answer
    "tanh": ProgramOp(1, (), (("Muls", "d", "a", -2.0), ("Exp", "d", "d"), ("Adds", "d", "d", 1.0),
                              ("Reciprocal", "d", "d"), ("Muls", "d", "d", 2.0), ("Adds", "d", "d", -1.0)), np.tanh),
    # softplus(x) = max(x, 0) + ln(1 + exp(-|x|)): the exp is at most 1, so nothing overflows
    "softplus": ProgramOp(1, (), (("Relu", "t", "a"), ("Abs", "d", "a"), ("Muls", "d", "d", -1.0), ("Exp", "d", "d"),
                                  ("Adds", "d", "d", 1.0), ("Ln", "d", "d"), ("Add", "d", "d", "t")), _softplus,
                          scratch=1),
    "erf": ProgramOp(1, (), _ERF, _erf, scratch=2),
}


# comparisons (ONNX Less, Greater, Equal, LessOrEqual, GreaterOrEqual) to a 1 / 0 condition: of two tensors, or of a
# tensor and a scalar constant c (Dup'ed into a scratch tile; a constant on the left is the mirrored comparison)
COMPARISONS = {"less": ("CmpLt", np.less), "greater": ("CmpGt", np.greater), "equal": ("CmpEq", np.equal),
               "lessequal": ("CmpLe", np.less_equal), "greaterequal": ("CmpGe", np.greater_equal)}
MIRRORED = {"less": "greater", "greater": "less", "equal": "equal", "lessequal": "greaterequal",
            "greaterequal": "lessequal"}


def _compare(fn: Callable) -> Callable[..., np.ndarray]:
    return lambda a, b: fn(a, b).astype(np.float64)


for _name, (_vec, _fn) in COMPARISONS.items():
    PROGRAM_OPS[_name] = ProgramOp(2, (), ((_vec, "d", "a", "b"),), _compare(_fn))
    PROGRAM_OPS[_name + "s"] = ProgramOp(1, ("c",), (("Dup", "t", "", "c"), (_vec, "d", "a", "t")),
                                         _compare(_fn), scratch=1)


def _where(c, x, y):
    return np.where(c != 0, x, y)


PROGRAM_OPS.update({
    # Not of a condition: 1 - c
    "not": ProgramOp(1, (), (("Muls", "d", "a", -1.0), ("Adds", "d", "d", 1.0)), lambda c: 1.0 - c),
    # Where(c, x, y): the condition copied to d, then d = d != 0 ? x : y; a scalar constant x or y Dup'ed first
    "where": ProgramOp(3, (), (("Copy", "d", "a"), ("Sel", "d", "b", "c")), _where),
    "wherex": ProgramOp(2, ("x",), (("Dup", "t", "", "x"), ("Copy", "d", "a"), ("Sel", "d", "t", "b")),
                        lambda c, y, x: _where(c, x, y), scratch=1),
    "wherey": ProgramOp(2, ("y",), (("Dup", "t", "", "y"), ("Copy", "d", "a"), ("Sel", "d", "b", "t")),
                        lambda c, x, y: _where(c, x, y), scratch=1),
    "wherexy": ProgramOp(1, ("x", "y"), (("Dup", "t", "", "x"), ("Dup", "u", "", "y"), ("Copy", "d", "a"),
                                         ("Sel", "d", "t", "u")), lambda c, x, y: _where(c, x, y), scratch=2),
})

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
        problem = entry.check(params) if entry.check else None
        if problem:
            return f"step {j} ({op}): {problem}"
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
    return [ins[0] for op, _, params in steps for ins in PROGRAM_OPS[op].sequence(params)]


def scratch_names(steps: tuple[Step, ...]) -> list[str]:
    """The scratch buffers of a program's steps: t<j>, u<j> for step j."""
    return [f"{r}{j}" for j, (op, _, _) in enumerate(steps) for r in "tu"[:PROGRAM_OPS[op].scratch]]


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


def epilogue_steps(program: str) -> tuple[Step, ...]:
    """The steps of a one-input program applied as a kernel's epilogue (DwConv2dSpec.program; "": none)."""
    return decode(program, 1) if program else ()


def epilogue_tag(program: str) -> str:
    """A kernel name's suffix for a program epilogue: its ops and a digest of its text ("" for none)."""
    if not program:
        return ""
    digest = hashlib.sha256(program.encode()).hexdigest()[:6]
    return "_" + "_".join(op for op, _, _ in epilogue_steps(program)) + f"_{digest}"
