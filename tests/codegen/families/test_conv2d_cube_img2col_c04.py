"""A small-channel image input (Conv2dSpec.c04): a graph input of at most 4 channels that only convs read is staged as
NC1HWC0_C04 and its convs run Load3D's channelSize 4 (four taps of four channels to a K fractal, the weights in that
order). A small ONNX model with an RGB stem (7x7 stride 2, as ResNet's) and a second conv on the same input (3x3,
no bias, asymmetric padding) is built; the model must match ONNX Runtime, each kernel the cost model (alone and with
its step's L2 plan), and the plan must say why the input was staged so."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from built_model import assert_replayed_exactly, build_and_check, plan_model  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

RNG = np.random.default_rng(4)


def rgb_model(path, channels: int = 3, pool: bool = False) -> None:
    """x [2, C, 36, 32] -> 7x7/2 stem 16 + bias + ReLU, and 3x3 (pads 0,1,1,2) 8 of x, both outputs (pool: and a
    max pool of x, a third reader that is no conv)."""
    w1 = (RNG.standard_normal((16, channels, 7, 7)) / np.sqrt(channels * 49)).astype(np.float32)
    w2 = (RNG.standard_normal((8, channels, 3, 3)) / np.sqrt(channels * 9)).astype(np.float32)
    inits = [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2"),
             numpy_helper.from_array((RNG.standard_normal(16) * 0.1).astype(np.float32), "b1")]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="stem", strides=[2, 2], pads=[3, 3, 3, 3]),
             helper.make_node("Relu", ["c1"], ["y1"], name="relu"),
             helper.make_node("Conv", ["x", "w2"], ["y2"], name="side", pads=[0, 1, 1, 2])]
    outs = [helper.make_tensor_value_info("y1", TensorProto.FLOAT, [2, 16, 18, 16]),
            helper.make_tensor_value_info("y2", TensorProto.FLOAT, [2, 8, 35, 33])]
    if pool:
        nodes.append(helper.make_node("MaxPool", ["x"], ["y3"], name="pool", kernel_shape=[2, 2], strides=[2, 2]))
        outs.append(helper.make_tensor_value_info("y3", TensorProto.FLOAT, [2, channels, 18, 16]))
    g = helper.make_graph(nodes, "rgb", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, channels, 36, 32])],
                          outs, inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("c04")
    rgb_model(root / "rgb.onnx")
    return plan_model(root, root / "rgb.onnx"), build_and_check(root, root / "rgb.onnx", (2, 3, 36, 32))


def test_the_input_is_staged_for_channel_size_4_and_both_convs_use_it(built):
    m, out = built
    assert any("input x: staged as NC1HWC0_C04" in d for d in m.lowered.decisions), m.lowered.decisions
    specs = [k.spec for k in m.step_kernels.values()]
    assert len(specs) == 2 and all(s.c04 and s.name.count("_c04") == 1 for s in specs), [s.name for s in specs]
    assert [s.k_fractals for s in specs] == [13, 3]  # 49 taps x 4 -> 13 fractals; 9 x 4 -> 3 (was 49 and 9)
    for k in out["kernels"].values():
        assert k["layouts"][:2] == ["NC1HWC0_C04", "FRACTAL_Z_C04"], k["layouts"]


def test_the_model_matches_onnx_runtime(built):
    for err, scale in built[1]["errors"]:
        assert err <= 2e-3 * max(1.0, scale), built[1]["errors"]  # fp16 operands, K <= 147 per output


def test_the_cost_model_replays_every_kernel_exactly(built):
    assert_replayed_exactly(built[1]["kernels"])


@pytest.mark.parametrize("channels,pool", [(5, False), (3, True)], ids=["five_channels", "pooled_too"])
def test_a_wider_input_or_one_another_op_reads_keeps_16_channel_blocks(tmp_path, channels, pool):
    rgb_model(tmp_path / "m.onnx", channels, pool)
    convs = [k.spec for k in plan_model(tmp_path, tmp_path / "m.onnx").step_kernels.values() if k.spec.kind == "conv2d"]
    assert len(convs) == 2 and not any(s.c04 for s in convs)
