"""reduce_vector's sizing and replay structure: the row slot and partial stride per length, the rule's rows per
tile (one tile per Vector core, halved while UB overflows), and the WholeReduce instructions the replay issues
(chunks of at most 248 repeats; a second level only past 64 values). Emulator equality: tests/codegen/cost."""
import math

import pytest

from codegen.families import reduce_vector as rv
from codegen.families.registry import predict
from codegen.ir.optlog import OptLog
from codegen.ir.profiles import PROFILES
from codegen.ir.reduce_spec import ReduceSpec

P = PROFILES["ascend910b"]


@pytest.mark.parametrize("length, partials, stride", [(1, 1, 1), (64, 1, 1), (65, 2, 8), (300, 5, 8), (577, 10, 16),
                                                      (4096, 64, 64)])
def test_partials_and_stride(length, partials, stride):
    s = ReduceSpec("max", 3, length)
    assert (s.partials, s.stride) == (partials, stride)
    assert s.output().shape == (3, 1) and s.inputs()[0].shape == (3, length)


def test_lengths_past_two_levels_and_unknown_ops_are_rejected():
    with pytest.raises(ValueError, match=r"1\.\.4096 are supported"):
        ReduceSpec("l2", 2, 4097)
    with pytest.raises(ValueError, match="is not one of max, min, l2"):
        ReduceSpec("sum", 2, 10)  # type: ignore[arg-type]


@pytest.mark.parametrize("op, rows, length", [("max", 7, 100), ("min", 200, 64), ("l2", 1920, 100),
                                              ("l2", 3, 4096), ("max", 100000, 33)])
def test_rule_fills_the_cores_within_ub(op, rows, length):
    spec = ReduceSpec(op, rows, length)
    v = rv.reduce_rule(spec, P, OptLog())
    rpt = v.params["rows_per_tile"]
    assert v.buffers["UB"] <= P.capacity["UB"]
    assert v.blocks == min(P.cores_for("vector"), math.ceil(rows / rpt))
    assert rpt <= math.ceil(rows / P.cores_for("vector"))


def test_replay_chunks_and_levels():
    """1920 rows of 100 on 48 cores: one tile of 40 rows per core. Per tile: the neutral fill of 40 slots of 512
    (320 repeats: 255 + 65), per row a cast and a square in two pieces (64 + 36), the first level's 320 repeats as
    248 + 72, one second-level instruction, the square root, the narrowing cast: 2 + 160 + 2 + 1 + 1 + 1."""
    spec = ReduceSpec("l2", 1920, 100)
    v = rv.reduce_rule(spec, P, OptLog())
    assert (v.params["rows_per_tile"], v.blocks) == (40, 48)
    pred = predict(spec, "reduce_vector", v.params, P)
    assert pred.pipes["V"].instrs == 48 * 167
    assert pred.pipes["MTE2"].bytes == spec.rows * spec.length * 2 == rv.reduce_mte2(spec, v)
    assert pred.pipes["MTE3"].bytes == spec.rows * 2
