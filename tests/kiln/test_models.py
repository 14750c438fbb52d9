"""Whole baked models: the executor against ONNX Runtime on the same ONNX file,
input checking, concurrency, and the memory plan's bookkeeping."""
import threading

import numpy as np
import pytest

import kiln

MODELS = kiln.models()
pytestmark = pytest.mark.skipif(not MODELS, reason="this build bakes no models (KILN_MODELS is empty)")


@pytest.mark.parametrize("name", MODELS)
def test_model_matches_onnxruntime(name):
    pytest.importorskip("onnxruntime")
    from kiln.validate import cosine_min, validate
    report = validate(kiln.load(name), seeds=(0, 1))
    for o in report["outputs"]:
        assert o["cosine"] >= cosine_min(), report
    if report["top1_agreement"] is not None:
        assert report["top1_agreement"] == 1.0, report
    assert report["passed"]


@pytest.mark.parametrize("name", MODELS)
def test_model_structure_and_memory_plan(name):
    m = kiln.load(name)
    rec = m.record
    assert m.kernel_launches == len(m.kernels) > 0
    assert 0 < rec["memory"]["lower_bound_bytes"] <= m.arena_bytes <= rec["memory"]["naive_bytes"]
    for k in m.kernels:  # every launch names its source ops and a baked kernel
        assert k.ops and kiln.kernel(k.kernel).name == k.kernel
    x = np.random.default_rng(0).standard_normal(m.inputs[0][1]).astype(np.float32)
    m.run(x)
    assert all(k.simulated_cycles > 0 for k in m.kernels)


def test_wrong_input_shape_names_expected_shape():
    m = kiln.load(MODELS[0])
    name, shape = m.inputs[0]
    bad = np.zeros((1,) + tuple(s + 1 for s in shape[1:]), np.float32)
    with pytest.raises(ValueError, match=rf"input '{name}' must have shape"):
        m.run(bad)
    with pytest.raises(TypeError, match="takes 1 input"):
        m.run()
    with pytest.raises(KeyError, match="no baked model"):
        kiln.load("no_such_model")


def test_concurrent_runs_agree_with_sequential():
    m = kiln.load(MODELS[0])
    rng = np.random.default_rng(5)
    xs = [rng.standard_normal(m.inputs[0][1]).astype(np.float32) for _ in range(3)]
    want = [m.run(x).copy() for x in xs]
    got = [None] * 3

    def work(i):
        got[i] = m.run(xs[i])
    threads = [threading.Thread(target=work, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_out_argument_is_filled():
    m = kiln.load(MODELS[0])
    x = np.random.default_rng(1).standard_normal(m.inputs[0][1]).astype(np.float32)
    y = np.empty(m.outputs[0][1], np.float32)
    assert m.run(x, out=y) is y
    np.testing.assert_array_equal(y, m.run(x))


@pytest.mark.parametrize("name", MODELS)
def test_every_kernel_output_matches_onnxruntime(name):
    """The isolated per-kernel check (kiln/isolate.py) on every launch, device-only values included (their ONNX
    counterparts are derived), and the chained cosine beside it."""
    pytest.importorskip("onnxruntime")
    from kiln.validate import cosine_min, per_kernel
    m = kiln.load(name)
    rows = per_kernel(m)
    assert len(rows) == m.kernel_launches
    assert all(r["checked"] for r in rows), [(r["step"], r.get("note")) for r in rows if not r["checked"]]
    failed = [(r["step"], r["error_ratio"]) for r in rows if not r["passed"]]
    assert not failed, failed
    bad = [r for r in rows if r["cosine"] < cosine_min()]  # the zoo's chained values stay above the output gate
    assert not bad, bad[:3]
    # intermediates carry signal: no kernel output is all zero in ONNX Runtime or in kiln
    assert all(r["ref_scale"] > 0 for r in rows)
