"""The elementwise program's op table (codegen/ir/eltwise_program.py): each op's Vector instruction sequence,
replayed in float32 with the emulator's semantics (kernels/kiln/simd.hpp), against its float64 reference: the
error bounds docs/numerics.md states, the limits at +-inf and NaN, and the powi sequences."""
import numpy as np
import pytest

from codegen.ir.eltwise_program import PROGRAM_OPS, check_program, scalar_of

F = np.float32


def _cmp(fn):
    return lambda a, b: fn(a, b).astype(F)


BINARY = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide,
          "Max": lambda a, b: np.where(a > b, a, b), "Min": lambda a, b: np.where(a < b, a, b),
          "CmpLt": _cmp(np.less), "CmpGt": _cmp(np.greater), "CmpEq": _cmp(np.equal), "CmpLe": _cmp(np.less_equal),
          "CmpGe": _cmp(np.greater_equal)}
SCALAR = {"Adds": np.add, "Muls": np.multiply, "Maxs": lambda a, s: np.where(a > s, a, F(s)),
          "Mins": lambda a, s: np.where(a < s, a, F(s)),
          "LeakyRelu": lambda a, s: np.where(a < 0, a * F(s), a)}
UNARY = {"Relu": lambda a: np.where(a < 0, F(0), a), "Exp": np.exp, "Ln": np.log, "Sqrt": np.sqrt, "Abs": np.abs,
         "Reciprocal": lambda a: F(1) / a, "Copy": lambda a: a}


def replay(op: str, params: tuple, *args: np.ndarray) -> np.ndarray:
    """One step's instruction sequence in float32, as the emulator runs it (scalar operands rounded to fp32)."""
    reg = {r: a.astype(F) for r, a in zip("abc", args)}
    with np.errstate(all="ignore"):
        for vec_op, dst, src, *rest in PROGRAM_OPS[op].sequence(params):
            if vec_op == "Dup":
                reg[dst] = np.full(args[0].shape, scalar_of(rest[0], op, params), F)
            elif vec_op == "Sel":  # the condition is the destination before the op
                reg[dst] = np.where(reg[dst] != 0, reg[src], reg[rest[0]]).astype(F)
            elif vec_op in BINARY:
                reg[dst] = BINARY[vec_op](reg[src], reg[rest[0]]).astype(F)
            elif rest:
                reg[dst] = SCALAR[vec_op](reg[src], F(scalar_of(rest[0], op, params))).astype(F)
            else:
                reg[dst] = UNARY[vec_op](reg[src]).astype(F)
    return reg["d"]


def reference(op: str, params: tuple, *args: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.asarray(PROGRAM_OPS[op].reference(*[a.astype(np.float64) for a in args], *params), np.float64)


# (op, params, input range, max abs error, max error relative to |ref|): the figures of docs/numerics.md,
# measured on a float32 grid of 200001 points over the range (the bounds are the measured figure rounded up)
ERRORS = [
    ("tanh", (), (-20, 20), 2.0e-7, None),  # absolute: 1 - 2/(1 + e^2x) cancels near 0
    ("erf", (), (-6, 6), 4.3e-7, 4.3e-7),
    ("softplus", (), (-30, 30), 6.0e-7, None),  # absolute: ln(1 + e^-|x|) has no log1p
    ("exp", (), (-20, 20), None, 2.0e-7),
    ("log", (), (1e-4, 1e4), 6.0e-7, 2.0e-7),
    ("sqrt", (), (0, 1e4), None, 6.0e-8),
    ("rsqrt", (), (1e-4, 1e4), None, 1.0e-7),
    ("reciprocal", (), (0.01, 100), None, 6.0e-8),
    ("powi", (2.0,), (-100, 100), None, 6.0e-8),
    ("powi", (3.0,), (-100, 100), None, 1.2e-7),
    ("powi", (-1.0,), (0.01, 100), None, 6.0e-8),
    ("powi", (5.0,), (-10, 10), None, 2.5e-7),
    ("powi", (-2.0,), (0.1, 10), None, 1.0e-7),
    ("powf", (1.7,), (0, 100), None, 1.0e-6),  # |p ln x| eps: grows with the exponent and ln x
    ("powf", (-0.3,), (1e-3, 100), None, 3.0e-7),
    ("leakyrelu", (0.01,), (-100, 100), None, 1.0e-7),  # alpha itself rounded to fp32
]


def _errors(op, params, lo, hi):
    x = np.linspace(lo, hi, 200001).astype(F)
    got, want = replay(op, params, x).astype(np.float64), reference(op, params, x)
    abs_err = np.abs(got - want)
    return float(abs_err.max()), float((abs_err / np.maximum(np.abs(want), 1e-30)).max())


@pytest.mark.parametrize("op,params,span,max_abs,max_rel", ERRORS, ids=[f"{e[0]}{e[1]}" for e in ERRORS])
def test_each_op_is_within_its_stated_error_against_float64(op, params, span, max_abs, max_rel):
    abs_err, rel_err = _errors(op, params, *span)
    if max_abs is not None:
        assert abs_err <= max_abs, (op, abs_err)
    if max_rel is not None:
        assert rel_err <= max_rel, (op, rel_err)


def test_prelu_is_exact_and_keeps_nan():
    x = np.array([-3.0, -0.5, 0.0, 2.0, np.inf, -np.inf, np.nan], F)
    s = np.array([0.25, -2.0, 0.1, 0.3, 0.5, 0.5, 0.5], F)
    got = replay("prelu", (), x, s)
    np.testing.assert_array_equal(got, np.where(x < 0, s * x, x))


@pytest.mark.parametrize("op,params,x,want", [
    ("tanh", (), [np.inf, -np.inf, 60.0, -60.0, np.nan], [1.0, -1.0, 1.0, -1.0, np.nan]),
    ("erf", (), [np.inf, -np.inf, 60.0, -60.0, 0.0], [1.0, -1.0, 1.0, -1.0, 0.0]),
    ("softplus", (), [np.inf, -np.inf, 100.0, -200.0, np.nan], [np.inf, 0.0, 100.0, 0.0, np.nan]),
    ("log", (), [0.0, -1.0, np.inf, np.nan], [-np.inf, np.nan, np.inf, np.nan]),
    ("sqrt", (), [-1.0, 0.0, np.inf], [np.nan, 0.0, np.inf]),
    ("powi", (-1.0,), [0.0, -0.0, np.inf], [np.inf, -np.inf, 0.0]),
    ("powi", (3.0,), [-np.inf, np.nan, -2.0], [-np.inf, np.nan, -8.0]),
    ("powf", (1.7,), [-1.0, 0.0, np.inf, np.nan], [np.nan, 0.0, np.inf, np.nan]),
    ("powf", (-1.5,), [0.0, np.inf], [np.inf, 0.0]),
])
def test_limits_and_nan_as_the_reference(op, params, x, want):
    got = replay(op, params, np.array(x, F))
    np.testing.assert_array_equal(got, np.array(want, F))
    np.testing.assert_array_equal(reference(op, params, np.array(x, F)).astype(F), np.array(want, F))


@pytest.mark.parametrize("n,muls", [(1, 0), (2, 1), (3, 2), (4, 2), (5, 3), (8, 3), (13, 5), (-1, 0), (-3, 2)])
def test_powi_is_binary_exponentiation(n, muls):
    seq = PROGRAM_OPS["powi"].sequence((float(n),))
    assert sum(ins[0] == "Mul" for ins in seq) == muls
    assert (seq[-1][0] == "Reciprocal") == (n < 0)
    x = np.array([-1.5, 0.75, 2.0, -1.0], F)
    np.testing.assert_allclose(replay("powi", (float(n),), x), x.astype(np.float64) ** n, rtol=1e-6)


def test_powi_refuses_exponents_it_does_not_take():
    for n in (0.0, 2.5, 17.0, -20.0):
        assert "powi takes an integer exponent" in check_program(1, (("powi", (0,), (n,)),))
    assert check_program(1, (("powi", (0,), (16.0,)),)) is None


NANS = np.array([-1.0, 0.0, 0.25, np.nan, np.inf, -np.inf, 0.25, -0.0], F)
OTHER = np.array([0.25, 0.0, 0.25, 1.0, np.inf, 0.0, np.nan, 0.0], F)


@pytest.mark.parametrize("op", ["less", "greater", "equal", "lessequal", "greaterequal"])
def test_comparisons_are_exact_one_or_zero_nan_false(op):
    got = replay(op, (), NANS, OTHER)
    np.testing.assert_array_equal(got, reference(op, (), NANS, OTHER).astype(F))
    assert set(np.unique(got)) <= {0.0, 1.0} and got[3] == 0 and got[6] == 0  # NaN compares false
    scalar = replay(op + "s", (0.25,), NANS)
    np.testing.assert_array_equal(scalar, reference(op + "s", (0.25,), NANS).astype(F))


def test_where_forms_select_exactly_and_keep_inf_and_nan():
    c = np.array([1, 0, 1, 0, 1, 0, 1, 0], F)
    want = np.where(c != 0, NANS, OTHER)
    np.testing.assert_array_equal(replay("where", (), c, NANS, OTHER), want)
    np.testing.assert_array_equal(replay("wherex", (-np.inf,), c, OTHER), np.where(c != 0, F(-np.inf), OTHER))
    np.testing.assert_array_equal(replay("wherey", (0.5,), c, NANS), np.where(c != 0, NANS, F(0.5)))
    np.testing.assert_array_equal(replay("wherexy", (0.0, -1e4), c), np.where(c != 0, F(0.0), F(-1e4)))
    np.testing.assert_array_equal(replay("not", (), c), 1 - c)
    for op, args, params in (("where", (c, NANS, OTHER), ()), ("wherex", (c, OTHER), (-np.inf,)),
                             ("wherey", (c, NANS), (0.5,)), ("wherexy", (c,), (0.0, -1e4))):
        np.testing.assert_array_equal(replay(op, params, *args), reference(op, params, *args).astype(F))
