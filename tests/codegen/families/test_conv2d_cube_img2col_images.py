"""Several images per block on the emulator where the default kernel list cannot reach: a convolution with a second
source (ResNet's downsampling bottleneck, whose last 1x1 and downsample 1x1 fusion makes one accumulation). A small
ONNX bottleneck at batch 3 is planned, its fused convolution pinned to two images per block by a tuning record
(so the last block holds one image), and the build must match ONNX Runtime, and its kernel the cost model, alone
and with the model step's L2 plan."""
import json

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from built_model import assert_replayed_exactly, build_and_check, plan_model  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from codegen.cost.model import COST_MODEL_VERSION  # noqa: E402
from codegen.ir.opspec import spec_hash  # noqa: E402

RNG = np.random.default_rng(3)
TILING = {"base_m": 64, "base_n": 32, "base_k1": 2, "c1_step": 1, "images": 2}


def bottleneck(path) -> None:
    """x [3, 32, 14, 14] -> 1x1 16 + ReLU -> 3x3/2 16 + ReLU -> 1x1 64, + the downsample 1x1/2 64 of x, ReLU."""
    inits, nodes = [], []

    def conv(name, x, cout, cin, k, stride, pad):
        w, b = RNG.standard_normal((cout, cin, k, k)) * (1.0 / np.sqrt(cin * k * k)), RNG.standard_normal(cout) * 0.1
        inits.extend([numpy_helper.from_array(w.astype(np.float32), f"{name}.w"),
                      numpy_helper.from_array(b.astype(np.float32), f"{name}.b")])
        nodes.append(helper.make_node("Conv", [x, f"{name}.w", f"{name}.b"], [name], name=name, strides=[stride] * 2,
                                      pads=[pad] * 4))
        return name

    nodes.append(helper.make_node("Relu", [conv("c1", "x", 16, 32, 1, 1, 0)], ["r1"], name="r1"))
    nodes.append(helper.make_node("Relu", [conv("c2", "r1", 16, 16, 3, 2, 1)], ["r2"], name="r2"))
    nodes.append(helper.make_node("Add", [conv("c3", "r2", 64, 16, 1, 1, 0), conv("ds", "x", 64, 32, 1, 2, 0)],
                                  ["s"], name="add"))
    nodes.append(helper.make_node("Relu", ["s"], ["y"], name="relu_out"))
    g = helper.make_graph(nodes, "bottleneck", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 32, 14, 14])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 64, 7, 7])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("images_dual")
    bottleneck(root / "bottleneck.onnx")
    m = plan_model(root, root / "bottleneck.onnx")
    dual = [k.spec for k in m.step_kernels.values() if getattr(k.spec, "cin2", 0)]
    assert len(dual) == 1, [k.spec.name for k in m.step_kernels.values()]  # the fusion this test is about
    records = root / "records.json"
    records.write_text(json.dumps({"format": "kiln-tuning/1", "profile": "ascend910b", "cost_model": COST_MODEL_VERSION,
                                   "records": [{"opspec": spec_hash(dual[0]), "family": "conv2d_cube_img2col",
                                                "simulated_cycles": 1.0, "params": TILING}]}))
    return dual[0], build_and_check(root, root / "bottleneck.onnx", (3, 32, 14, 14), f"KILN_TUNING_RECORDS={records}")


def test_the_second_source_conv_runs_two_images_a_block_and_matches_onnx_runtime(built):
    spec, out = built
    (err, scale), = out["errors"]
    assert err <= 2e-3 * max(1.0, scale), out["errors"]  # fp16 activations, K <= 48 per output
    grouped = {n: k for n, k in out["kernels"].items() if k["tiling"].get("images") == 2}
    assert len(grouped) == 1 and next(iter(grouped)).endswith(spec.name.removeprefix("conv2d_")), out["kernels"]


def test_the_cost_model_replays_every_kernel_exactly(built):
    assert_replayed_exactly(built[1]["kernels"])
