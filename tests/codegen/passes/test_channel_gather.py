"""The channel_gather_mte path in lowering: the channel shuffle Reshape -> Transpose(0,2,1,3,4) -> Reshape found
as one permutation (and not when an intermediate is used elsewhere), unaligned channel slices as copies, the
ChannelGather spec's runs (bursts within one C0 block on both sides) and the kernel list's table forms."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from codegen.frontend.kernel_list import gather_table
from codegen.frontend.onnx_import import load_onnx
from codegen.ir.opspec import ChannelGatherSpec
from codegen.passes.lowering import lower
from codegen.passes.patterns import find_patterns


def _shuffle_model(tmp_path, c: int, groups: int, extra_output: bool = False):
    shape = [1, c, 3, 3]
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Reshape", ["r", "s5"], ["r5"], name="first"),
             helper.make_node("Transpose", ["r5"], ["t5"], perm=[0, 2, 1, 3, 4], name="t"),
             helper.make_node("Reshape", ["t5", "s4"], ["y"], name="last")]
    outs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)]
    if extra_output:  # the 5-D transpose is also a graph output: the pattern must not take it
        outs.append(helper.make_tensor_value_info("t5", TensorProto.FLOAT, [1, c // groups, groups, 3, 3]))
    graph = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)], outs,
                              [numpy_helper.from_array(np.array([1, groups, c // groups, 3, 3], np.int64), "s5"),
                               numpy_helper.from_array(np.array(shape, np.int64), "s4")])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    path = tmp_path / "m.onnx"
    onnx.save(m, path)
    return path


@pytest.mark.parametrize("c, groups", [(116, 2), (10, 2), (21, 3)])
def test_channel_shuffle_is_one_permutation_kernel(tmp_path, c, groups):
    g = load_onnx(_shuffle_model(tmp_path, c, groups))
    patterns = find_patterns(g)
    assert patterns.channel_shuffle == {"last": ("r", groups)} and {"first", "t"} <= patterns.skip
    low = lower(g, "m", patterns=patterns)
    gathers = [s for s in low.steps if s.kind == "kernel" and s.kernel_op.type == "ChannelGather"]
    assert len(gathers) == 1 and gathers[0].output == "y"
    sources = [int(e.split(":")[1]) for e in gathers[0].kernel_op.attrs["table"].split(",")]
    want = np.arange(c).reshape(groups, c // groups).T.reshape(-1)  # torch's view, transpose(1, 2), view
    assert sources == list(want)


def test_channel_shuffle_with_a_used_intermediate_is_not_taken(tmp_path):
    patterns = find_patterns(load_onnx(_shuffle_model(tmp_path, 10, 2, extra_output=True)))
    assert not patterns.channel_shuffle and not {"first", "t"} & patterns.skip


def test_kernel_list_shuffle_table_is_the_onnx_channel_shuffle():
    sources = [int(e.split(":")[1]) for e in gather_table([12], 3).split(",")]
    assert sources == list(np.arange(12).reshape(3, 4).T.reshape(-1))
    assert gather_table([2, 1]) == "0:0,0:1,1:0"


def test_runs_stop_at_c0_blocks_of_either_side():
    table = [f"0:{c}" for c in range(20)] + [f"1:{c}" for c in range(3, 40)]
    spec = ChannelGatherSpec(1, 2, 2, "20,40", ",".join(table))
    runs = spec.runs()
    assert runs == [(0, 0, 0, 16), (0, 16, 16, 4), (1, 3, 20, 12), (1, 15, 32, 1), (1, 16, 33, 15), (1, 31, 48, 1),
                    (1, 32, 49, 8)]
    assert sum(r[3] for r in runs) == spec.out_channels == 57


def test_a_table_outside_the_inputs_is_refused():
    with pytest.raises(ValueError, match="outside inputs"):
        ChannelGatherSpec(1, 2, 2, "5", "0:5")
