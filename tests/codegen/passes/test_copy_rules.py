"""What the copy_mte kernel serves, from the source tree (no build): the stored-byte form of a Transpose on
NC1HWC0 and row-major values, checked against NumPy for every 4-D permutation; the kernel's own item arithmetic
(copy_mte.item_walk, which the template repeats) moving every element to its place; the lowering of Transpose,
Concat and ReduceMean to it; Concats of Concats in place (DenseNet), in the memory plan too."""
import itertools

import numpy as np
import pytest
from onnx import helper
from onnx_files import model_file as _model

from codegen import KilnError
from codegen.families.copy_mte import capacity, item_table, item_walk, total_items
from codegen.frontend.onnx_import import load_onnx
from codegen.ir.copy_spec import CopySpec, canonical_move, concat_copy, transpose_copy
from codegen.ir.profiles import PROFILES
from codegen.passes import memory
from codegen.passes.lowering import lower
from codegen.passes.views import blocked_transpose


def _nc1hwc0(x: np.ndarray) -> np.ndarray:
    n, c, h, w = x.shape
    return x.reshape(n, c // 16, 16, h, w).transpose(0, 1, 3, 4, 2).reshape(-1)


@pytest.mark.parametrize("shape", [(1, 32, 3, 16), (2, 16, 32, 5), (2, 48, 3, 16)])
def test_blocked_transpose_moves_the_stored_bytes_of_every_permutation(shape):
    x = np.random.default_rng(0).standard_normal(shape)
    for perm in itertools.permutations(range(4)):
        for in_blocked, out_blocked in itertools.product((False, True), repeat=2):
            if out_blocked and shape[perm[1]] % 16:
                continue
            dims, strides = blocked_transpose(shape, perm, in_blocked, out_blocked)
            y = np.full(x.size, np.nan)
            np.lib.stride_tricks.as_strided(y, dims, [s * 8 for s in strides], writeable=True)[...] = \
                (_nc1hwc0(x) if in_blocked else x.reshape(-1)).reshape(dims)
            want = x.transpose(perm)
            np.testing.assert_array_equal(y, _nc1hwc0(want) if out_blocked else want.reshape(-1))


def _walk(spec: CopySpec, cap: int) -> np.ndarray:
    """The output the kernel writes, by its item arithmetic (each input's elements numbered from 1000 * t)."""
    ins = [np.arange(m.numel) + 1000 * t for t, m in enumerate(spec.parsed)]
    y = np.full(spec.out_numel, -1)
    table = item_table(spec, cap)
    for i in range(total_items(spec, cap)):
        e = next(e for e in reversed(table) if e["first"] <= i)
        at, out, rows, length = item_walk(e, i - e["first"])
        m = e["move"]
        for r in range(rows):
            y[out + r * m.strides[-2] + np.arange(length) * m.strides[-1]] = ins[e["input"]][at + r * length:
                                                                                           at + (r + 1) * length]
    return y


@pytest.mark.parametrize("cap", [16, 48, 4096])  # pieces of one row, chunks of rows, whole inputs
@pytest.mark.parametrize("shape, perm", [((4, 5, 6), (2, 0, 1)), ((2, 3, 4, 5, 6), (0, 3, 1, 4, 2)),
                                         ((3, 5, 7, 16), (2, 0, 1, 3)), ((6, 70), (1, 0))])
def test_item_walk_moves_every_element_of_a_transpose(shape, perm, cap):
    want = np.arange(np.prod(shape)).reshape(shape).transpose(perm).reshape(-1)
    np.testing.assert_array_equal(_walk(transpose_copy(shape, perm), cap), want)


@pytest.mark.parametrize("cap", [16, 336, 8192])
def test_item_walk_moves_every_element_of_a_concat(cap):
    shapes, axis = [(2, 3, 100), (2, 5, 100), (2, 1, 100)], 1
    want = np.concatenate([(np.arange(np.prod(s)) + 1000 * t).reshape(s) for t, s in enumerate(shapes)], axis)
    np.testing.assert_array_equal(_walk(concat_copy(shapes, axis), cap), want.reshape(-1))


def test_canonical_move_merges_axes_that_stay_neighbours():
    assert canonical_move((2, 3, 4), (12, 4, 1)) == ((1, 24), (0, 1))  # the identity: one run
    assert canonical_move((2, 1, 3, 4), (1, 99, 8, 2)) == ((2, 12), (1, 2))
    assert canonical_move((5,), (3,)) == ((1, 5), (0, 3))


def test_moves_that_do_not_tile_the_output_are_refused():
    with pytest.raises(ValueError, match="do not tile an output of 10 elements"):
        CopySpec(10, "2x4:4x1:0")
    with pytest.raises(ValueError, match="do not tile"):
        CopySpec(8, "2x4:4x1:1")


def test_buffers_leave_work_for_every_core_and_fit_ub():
    prof = PROFILES["ascend910b"]
    big, small = transpose_copy((64, 56, 56), (1, 2, 0)), transpose_copy((4, 5, 6), (2, 0, 1))
    assert capacity(big, prof) <= prof.capacity["UB"] // 4 and capacity(small, prof) == 16
    assert total_items(big, capacity(big, prof)) >= prof.cores_for("vector")




def _kernels(low) -> list[str]:
    return [s.kernel_op.type for s in low.steps if s.kind == "kernel"]


def test_transpose_of_a_blocked_activation_reads_its_bytes_as_held(tmp_path):
    """Relu (NC1HWC0, 32 channels) then NCHW -> NHWC: one Copy of the stored bytes, no host relayout."""
    path = _model(tmp_path, [helper.make_node("Relu", ["x"], ["r"]),
                             helper.make_node("Transpose", ["r"], ["y"], perm=[0, 2, 3, 1])],
                  [("x", [1, 32, 5, 6])], [("y", [1, 5, 6, 32])])
    low = lower(load_onnx(path), "m")
    assert _kernels(low) == ["Relu", "Copy"] and not [s for s in low.steps if s.glue == "to_nchw"]
    copy = next(s for s in low.steps if s.kind == "kernel" and s.kernel_op.type == "Copy")
    assert copy.kernel_op.attrs["moves"] == "2x30x16:16x32x1:0"  # C1 blocks of 30 pixels x 16 lanes: 32-byte bursts


@pytest.mark.parametrize("c, kernels", [(32, ["Copy", "Conv"]), (16, ["Conv"])])  # NHWC of one C0 block: NC1HWC0
def test_nhwc_input_feeding_a_conv_is_written_as_nc1hwc0(tmp_path, c, kernels):
    w = np.ones((8, c, 1, 1), np.float32)
    path = _model(tmp_path, [helper.make_node("Transpose", ["x"], ["t"], perm=[0, 3, 1, 2]),
                             helper.make_node("Conv", ["t", "w"], ["y"])],
                  [("x", [1, 5, 6, c])], [("y", [1, 8, 5, 6])], [("w", w)])
    low = lower(load_onnx(path), "m")
    assert _kernels(low) == kernels and low.storage["t"].layout == "NC1HWC0"


@pytest.mark.parametrize("c, kernels", [(3, ["Transpose0213", "Conv"]), (20, ["Transpose0213", "Conv"])])
def test_nhwc_input_of_partial_c0_blocks_is_relaid_out_for_the_conv(tmp_path, c, kernels):
    """C not whole C0 blocks: the Transpose writes rows (N, C, H, W), one relayout step pads them to NC1HWC0 (the
    padded lanes zero) for the Conv."""
    w = np.ones((8, c, 1, 1), np.float32)
    path = _model(tmp_path, [helper.make_node("Transpose", ["x"], ["t"], perm=[0, 3, 1, 2]),
                             helper.make_node("Conv", ["t", "w"], ["y"], name="conv")],
                  [("x", [2, 5, 6, c])], [("y", [2, 8, 5, 6])], [("w", w)])
    low = lower(load_onnx(path), "m")
    assert _kernels(low) == kernels and low.storage["t"].layout == "ND"
    relayout = [s for s in low.steps if s.glue == "to_nc1hwc0"]
    assert [(s.inputs, s.output, s.params) for s in relayout] == [(["t"], "t@nc1hwc0", [2, c, 5, 6])]
    assert low.storage["t@nc1hwc0"].layout == "NC1HWC0"
    conv = next(s for s in low.steps if s.kind == "kernel" and s.kernel_op.type == "Conv")
    assert conv.inputs[0] == "t@nc1hwc0"
    assert any("conv: t is held as rows" in d and "host relayout" in d for d in low.decisions)


def test_reduce_means_over_the_same_axes_share_one_moved_copy(tmp_path):
    """The moved input is named by its permutation (isolate.py derives its ONNX counterpart from it): two
    ReduceMeans over the channels of one value read one Copy."""
    nodes = [helper.make_node("ReduceMean", ["x"], [f"y{i}"], axes=[1], keepdims=k) for i, k in enumerate((0, 1))]
    path = _model(tmp_path, nodes, [("x", [2, 20, 3, 4])], [("y0", None), ("y1", None)], opset=13)
    low = lower(load_onnx(path), "m")
    assert _kernels(low) == ["Copy", "Gemm", "Gemm"]
    copy = next(s for s in low.steps if s.kind == "kernel" and s.kernel_op.type == "Copy")
    assert copy.output == "x@perm_0_2_3_1"


@pytest.mark.parametrize("axes, kernels", [([1], ["Copy", "Gemm"]), ([3], ["Gemm"]), ([1, 2, 3], ["Gemm"]),
                                           ([2], ["Copy", "Gemm"]), ([0, 1], ["Copy", "Gemm"])])
def test_reduce_mean_moves_the_reduced_axes_last_then_a_gemm(tmp_path, axes, kernels):
    path = _model(tmp_path, [helper.make_node("ReduceMean", ["x"], ["y"], axes=axes, keepdims=0)],
                  [("x", [2, 20, 3, 4])], [("y", None)], opset=13)
    low = lower(load_onnx(path), "m")
    assert _kernels(low) == kernels
    gemm = next(s for s in low.steps if s.kind == "kernel" and s.kernel_op.type == "Gemm")
    reduced = int(np.prod([[2, 20, 3, 4][a] for a in axes]))
    assert gemm.kernel_op.attrs["a"] == (480 // reduced, reduced)  # 2 x 20 x 3 x 4 values


def _dense_block(tmp_path, layers: int):
    nodes, inits, features = [helper.make_node("Relu", ["x"], ["f0"])], [], ["f0"]
    for k in range(1, layers + 1):
        c = 16 + 16 * (k - 1)
        inits.append((f"w{k}", np.ones((16, c, 1, 1), np.float32)))
        nodes += [helper.make_node("Conv", [features[0] if k == 1 else f"cat{k - 1}", f"w{k}"], [f"c{k}"]),
                  helper.make_node("Relu", [f"c{k}"], [f"f{k}"])]
        features.append(f"f{k}")
        nodes.append(helper.make_node("Concat", list(features), [f"cat{k}"], axis=1, name=f"cat{k}"))
    return _model(tmp_path, nodes, [("x", [1, 16, 4, 4])], [(f"cat{layers}", [1, 16 * (layers + 1), 4, 4])], inits)


def test_dense_block_concats_are_one_arena_tensor(tmp_path):
    """Each layer's Concat holds the previous one's inputs and one more: every feature is written once, into its
    channels of the block's last Concat, and each earlier Concat is a prefix of it."""
    low = lower(load_onnx(_dense_block(tmp_path, 3)), "m")
    assert "Copy" not in _kernels(low) and "ChannelGather" not in _kernels(low)
    plan = memory.plan_arena(low)
    assert {plan.roots[v] for v in ("f0", "f1", "f2", "f3", "cat1", "cat2", "cat3")} == {"cat3"}
    assert [low.alias_offsets.get(v, 0) for v in ("f0", "f1", "f2", "f3", "cat1", "cat2")] == \
        [0, 512, 1024, 1536, 0, 0]
    assert memory.overlaps(plan) == []
    root = plan.placements["cat3"]
    assert root.first <= next(i for i, s in enumerate(low.steps) if s.output == "f0")


def test_concat_of_a_concat_result_places_it_whole(tmp_path):
    nodes = [helper.make_node("Relu", [f"x{i}"], [f"r{i}"]) for i in range(3)]
    nodes += [helper.make_node("Concat", ["r0", "r1"], ["ab"], axis=1),
              helper.make_node("Concat", ["ab", "r2"], ["y"], axis=1)]
    path = _model(tmp_path, nodes, [("x0", [1, 16, 2, 2]), ("x1", [1, 32, 2, 2]), ("x2", [1, 7, 2, 2])],
                  [("y", [1, 55, 2, 2])])
    low = lower(load_onnx(path), "m")
    assert _kernels(low) == ["Relu"] * 3
    assert {low.aliases[v] for v in ("r0", "r1", "r2", "ab")} == {"y"}
    assert [low.alias_offsets.get(v, 0) for v in ("r0", "r1", "ab", "r2")] == [0, 128, 0, 384]


def test_a_concat_reusing_part_of_an_earlier_one_copies(tmp_path):
    """cat(r0, r1) then cat(r1, r2): r1 already lives in the first result, so the second is a copy."""
    nodes = [helper.make_node("Relu", [f"x{i}"], [f"r{i}"]) for i in range(3)]
    nodes += [helper.make_node("Concat", ["r0", "r1"], ["a"], axis=1),
              helper.make_node("Concat", ["r1", "r2"], ["b"], axis=1, name="second")]
    path = _model(tmp_path, nodes, [(f"x{i}", [1, 16, 2, 2]) for i in range(3)],
                  [("a", [1, 32, 2, 2]), ("b", [1, 32, 2, 2])])
    low = lower(load_onnx(path), "m")
    assert _kernels(low) == ["Relu"] * 3 + ["Copy"]
    assert any("second: Concat along axis 1 copies" in d for d in low.decisions)


def test_reduce_mean_needing_more_than_fp16_holds_is_refused(tmp_path):
    path = _model(tmp_path, [helper.make_node("ReduceMean", ["x"], ["y"], axes=[1, 2, 3], name="rm")],
                  [("x", [1, 64, 16, 17])], [("y", None)], opset=13)
    with pytest.raises(KilnError, match=r"node 'rm' \(ReduceMean\).*1/17408 is below fp16's normal range"):
        lower(load_onnx(path), "m")
