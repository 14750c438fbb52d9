"""Data movement without copies: Concat producers writing sub-ranges of one arena tensor (the memory plan's
view of it), slices/gathers/squeezes as views at an offset, transposes in canonical form; and the refusals of
what has no kernel yet, naming the node and the reason. (What needs a copy: tests/codegen/passes/test_copy_rules.py.)"""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx_files import model_file as _model

from codegen.frontend.onnx_import import check_onnx, load_onnx
from codegen.passes import memory
from codegen.passes.lowering import lower
from codegen.passes.views import as_swap_0213, canonical_transpose, contiguous_offset


def _relu_concat(tmp_path, channels, extra=()):
    nodes = [helper.make_node("Relu", [f"x{i}"], [f"r{i}"]) for i in range(len(channels))]
    nodes.append(helper.make_node("Concat", [f"r{i}" for i in range(len(channels))], ["y"], axis=1))
    nodes += list(extra)
    out = "z" if extra else "y"
    return _model(tmp_path, nodes, [(f"x{i}", [1, c, 4, 4]) for i, c in enumerate(channels)],
                  [(out, [1, sum(channels), 4, 4])])


def test_concat_producers_write_c0_aligned_sub_ranges_of_one_arena_tensor(tmp_path):
    low = lower(load_onnx(_relu_concat(tmp_path, [16, 32, 5], [helper.make_node("Relu", ["y"], ["z"])])), "m")
    # r0, r1, r2 are views of y at channels 0, 16, 48 (C1 blocks of 4x4x16 fp16 = 512 bytes)
    assert {v: low.aliases[v] for v in ("r0", "r1", "r2")} == {"r0": "y", "r1": "y", "r2": "y"}
    assert [low.alias_offsets.get(v, 0) for v in ("r0", "r1", "r2")] == [0, 512, 3 * 512]
    assert any("Concat in place" in d for d in low.decisions)
    plan = memory.plan_arena(low)
    assert {plan.roots[v] for v in ("r0", "r1", "r2", "y")} == {"y"}
    assert not {"r0", "r1", "r2"} & set(plan.placements)  # only the concat output is placed
    assert memory.overlaps(plan) == []
    y = plan.placements["y"]
    for v in ("r0", "r1", "r2"):  # every producer's bytes lie inside the output and it is alive when written
        start = y.offset + low.alias_offsets.get(v, 0)
        assert start + low.storage[v].nbytes <= y.offset + y.nbytes
        producer = next(i for i, s in enumerate(low.steps) if s.output == v)
        assert y.first <= producer <= y.last
    # a Relu writing a sub-range never moves onto its (dying, equally sized) input: its bytes are fixed
    assert not [out for out, _ in plan.in_place if out in ("r0", "r1", "r2")]


def test_unaligned_channel_concat_is_one_channel_gather_kernel(tmp_path):
    """58 + 58 channels (ShuffleNet): no C0-aligned sub-ranges, so a copy: one kernel reading both inputs."""
    path = _model(tmp_path, [helper.make_node("Relu", ["a"], ["ra"]), helper.make_node("Relu", ["b"], ["rb"]),
                             helper.make_node("Concat", ["ra", "rb"], ["y"], axis=1, name="n")],
                  [("a", [1, 58, 2, 2]), ("b", [1, 58, 2, 2])], [("y", [1, 116, 2, 2])])
    low = lower(load_onnx(path), "m")
    (step,) = [s for s in low.steps if s.kind == "kernel" and s.kernel_op.type == "ChannelGather"]
    a = step.kernel_op.attrs
    assert (step.inputs, a["in_channels"]) == (["ra", "rb"], "58,58")
    assert a["table"].split(",") == [f"0:{c}" for c in range(58)] + [f"1:{c}" for c in range(58)]
    assert any("channel counts [58] are not multiples of C0=16" in d for d in low.decisions)


def test_concat_along_rows_of_nc1hwc0_is_one_copy_kernel(tmp_path):
    path = _model(tmp_path, [helper.make_node("Relu", ["a"], ["ra"]), helper.make_node("Relu", ["b"], ["rb"]),
                             helper.make_node("Concat", ["ra", "rb"], ["y"], axis=2, name="n")],
                  [("a", [1, 16, 2, 2]), ("b", [1, 16, 3, 2])], [("y", [1, 16, 5, 2])])
    low = lower(load_onnx(path), "m")
    (step,) = [s for s in low.steps if s.kind == "kernel" and s.kernel_op.type == "Copy"]
    # NC1HWC0 rows: each input's 2 (3) rows of 2 pixels x 16 lanes land at row 0 (2) of the 5-row output
    assert step.inputs == ["ra", "rb"] and step.kernel_op.attrs["moves"] == "1x64:0x1:0;1x96:0x1:64"
    assert low.storage["y"].layout == "NC1HWC0"


def test_slice_and_gather_are_views_at_their_byte_offset(tmp_path):
    nodes = [helper.make_node("Slice", ["x", "s", "e", "a"], ["y"]),
             helper.make_node("Gather", ["y", "i"], ["g"], axis=1)]
    path = _model(tmp_path, nodes, [("x", [1, 6, 10])], [("g", [1, 10])],
                  [("s", np.array([-4], np.int64)), ("e", np.array([1000], np.int64)), ("a", np.array([1], np.int64)),
                   ("i", np.array(1, np.int64))])
    low = lower(load_onnx(path), "m")
    assert not [s for s in low.steps if s.kind == "kernel"]
    assert low.alias_offsets["y"] == 2 * 10 * 2  # rows 2.. of the 6 x 10 fp16 value
    assert low.alias_offsets["g"] == 3 * 10 * 2  # and row 1 of those


@pytest.mark.parametrize("shape, begin, end, offset", [
    ((1, 6, 10), (0, 2, 0), (1, 5, 10), 20),
    ((4, 6, 10), (2, 1, 0), (3, 4, 10), 130),
    ((4, 6, 10), (0, 1, 0), (4, 4, 10), None),  # rows of every outer index: not one range
    ((2, 3), (0, 0), (2, 2), None),
    ((2, 3), (1, 1), (2, 2), 4),
])
def test_contiguous_offset(shape, begin, end, offset):
    assert contiguous_offset(shape, begin, end) == offset


@pytest.mark.parametrize("shape, perm, canon, swap", [
    ((1, 128, 1, 3, 768), (3, 1, 2, 0, 4), ((128, 3, 768), (1, 0, 2)), (1, 128, 3, 768)),  # BERT's packed QKV
    ((1, 2, 58, 28, 28), (0, 2, 1, 3, 4), ((2, 58, 784), (1, 0, 2)), (1, 2, 58, 784)),  # channel shuffle
    ((1, 12, 128, 64), (0, 1, 3, 2), ((12, 128, 64), (0, 2, 1)), (12, 128, 64, 1)),
    ((1, 5, 1, 7), (2, 1, 0, 3), ((35,), (0,)), None),  # only unit axes move: a view
    ((2, 3, 4), (2, 0, 1), ((6, 4), (1, 0)), (1, 6, 4, 1)),
    ((2, 3, 4, 5), (3, 1, 2, 0), ((2, 12, 5), (2, 1, 0)), None),  # a three-group reversal: no kernel
])
def test_canonical_transpose(shape, perm, canon, swap):
    assert canonical_transpose(shape, perm) == canon
    assert as_swap_0213(*canon) == swap or canon[1] == (0,)


def test_transpose_of_three_groups_is_one_copy_kernel(tmp_path):
    path = _model(tmp_path, [helper.make_node("Transpose", ["x"], ["y"], perm=[3, 1, 2, 0], name="t")],
                  [("x", [2, 3, 4, 5])], [("y", [5, 3, 4, 2])])
    low = lower(load_onnx(path), "m")
    (step,) = [s for s in low.steps if s.kind == "kernel"]
    assert step.kernel_op.type == "Copy" and step.kernel_op.attrs["moves"] == "2x12x5:1x2x24:0"


@pytest.mark.parametrize("node, inits, reason", [
    (helper.make_node("Slice", ["x", "s", "e", "a", "st"], ["y"]),
     [("s", [0]), ("e", [4]), ("a", [1]), ("st", [2])], "steps [2]: only step 1 is supported"),
    (helper.make_node("Gather", ["x", "i"], ["y"]), [("i", [0, -3])],
     "index -3 is out of range for axis 0 (size 2)"),
    (helper.make_node("Split", ["x", "s"], ["y", "z"], axis=1), [("s", [2, 3])],
     "split [2, 3] does not divide axis 1 (size 6) into 2 non-empty parts"),
])
def test_frontend_refusals_name_the_attribute(tmp_path, node, inits, reason):
    outs = [(o, None) for o in node.output]
    graph = helper.make_graph([node], "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6, 4])],
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, s) for o, s in outs],
                              [numpy_helper.from_array(np.array(v, np.int64), k) for k, v in inits])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, tmp_path / "m.onnx")
    problems = check_onnx(tmp_path / "m.onnx")
    assert [p["reason"] for p in problems if p["op_type"] == node.op_type] == [reason]


def test_runtime_indices_are_staged_as_fp32_and_drive_one_gather_kernel(tmp_path):
    # an embedding lookup (int64 ids of shape [2, 3] into a [50, 8] table) and a Gather of run-time data on axis 1
    # by the same ids: the ids input is staged once as fp32 (glue input_index), each Gather is one gather_mte kernel
    nodes = [helper.make_node("Gather", ["table", "ids"], ["e"], name="embed"),
             helper.make_node("Gather", ["x", "ids"], ["g"], name="pick", axis=1),
             helper.make_node("Relu", ["e"], ["y"]), helper.make_node("Relu", ["g"], ["z"])]
    graph = helper.make_graph(
        nodes, "m", [helper.make_tensor_value_info("ids", TensorProto.INT64, [2, 3]),
                     helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 50, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.ones((50, 8), np.float32), "table")])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, tmp_path / "m.onnx")
    low = lower(load_onnx(tmp_path / "m.onnx"), "m")
    (staged,) = [s for s in low.steps if s.glue == "input_index"]
    assert staged.output == "ids@staged" and low.storage["ids@staged"].dtype == "fp32"
    gathers = {s.name: s for s in low.steps if s.kind == "kernel" and s.kernel_op.type == "Gather"}
    assert gathers["embed"].kernel_op.attrs["gather"] == (1, 50, 6, 8)
    assert gathers["embed"].inputs == ["embed.data", "ids@staged"]
    assert gathers["pick"].kernel_op.attrs["gather"] == (4, 50, 6, 5) and low.storage["g"].logical == (4, 2, 3, 5)
