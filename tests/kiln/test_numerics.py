"""The fp16 boundary of a model run (python/kiln/numerics.py, docs/numerics.md): inputs beyond fp16's range or
non-finite and outputs that come back non-finite warn once per model and tensor, or raise when strict."""
import warnings

import numpy as np
import pytest

import kiln
from kiln import numerics


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    """Each test sees every finding anew and no KILN_STRICT from the shell."""
    monkeypatch.setattr(numerics, "_warned", set())
    monkeypatch.delenv("KILN_STRICT", raising=False)


def baked(name: str) -> kiln.Model:
    if name not in kiln.models():
        pytest.skip(f"{name} is not baked")
    return kiln.load(name)


def test_finding_says_what_and_how_much():
    assert numerics.finding(np.array([0.0, -65504.0, 65504.0], np.float32)) is None
    assert numerics.finding(np.zeros(0, np.float32)) is None
    text = numerics.finding(np.array([np.nan, np.inf, 1e5, -2.0], np.float32))
    assert "2 non-finite value(s) (1 NaN, 1 inf) of 4" in text
    assert "finite values span [-2, 100000], 1 beyond fp16's range +-65504" in text
    assert numerics.finding(np.full(3, np.nan, np.float32)) == "3 non-finite value(s) (3 NaN, 0 inf) of 3"


def test_an_input_beyond_fp16_warns_once_naming_the_input():
    m = baked("bert_layer")
    x = np.full(m.inputs[0][1], 1e5, np.float32)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        m.run(x)
    said = [str(w.message) for w in seen if issubclass(w.category, kiln.NumericsWarning)]
    assert said[0] == ("model bert_layer, input 'hidden_states': finite values span [100000, 100000], 98304 beyond "
                       "fp16's range +-65504; fp16 turns values beyond +-65504 into inf, and NaN/inf spread through "
                       "the graph: the result is not what an fp32 engine computes")
    assert len(said) == 2 and said[1].startswith("model bert_layer, output 'output': ")  # what it did inside
    with warnings.catch_warnings():
        warnings.simplefilter("error", kiln.NumericsWarning)
        m.run(x)  # said once per model and input
        m.run(np.zeros(m.inputs[0][1], np.float32))


def test_strict_raises_before_the_run_and_from_the_environment(monkeypatch):
    m = baked("bert_layer")
    x = np.zeros(m.inputs[0][1], np.float32)
    x.flat[7] = np.nan
    out = np.full(m.outputs[0][1], 42.0, np.float32)
    with pytest.raises(kiln.NumericsError, match=r"input 'hidden_states': 1 non-finite value\(s\) \(1 NaN"):
        m.run(x, out=out, strict=True)
    assert (out == 42.0).all()  # stopped before the run: the caller's array untouched
    monkeypatch.setenv("KILN_STRICT", "1")
    with pytest.raises(kiln.NumericsError, match="strict"):
        m.run(x)
    with pytest.warns(kiln.NumericsWarning):
        m.run(x, strict=False)  # the argument wins over the environment
    assert issubclass(kiln.NumericsError, ValueError)


def test_an_overflow_inside_the_model_is_reported_on_the_output():
    """Un-normalised 0..255 pixels: within fp16's range on the way in, inf logits on the way out."""
    m = baked("resnet50")
    x = np.random.default_rng(0).uniform(0, 255, m.inputs[0][1]).astype(np.float32)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        y = m.run(x)
    said = [str(w.message) for w in seen if issubclass(w.category, kiln.NumericsWarning)]
    assert not np.isfinite(y).all()
    assert len(said) == 1 and said[0].startswith("model resnet50, output 'logits': ") and "inf" in said[0]
    with pytest.raises(kiln.NumericsError, match="output 'logits'"):
        m.run(x, strict=True)


def test_one_nan_pixel_gives_a_nan_output_as_onnx_runtime_does():
    """The fused ReLUs keep NaN (before, they mapped it to 0 and the logits came back finite)."""
    m = baked("resnet50")
    x = np.random.default_rng(1).standard_normal(m.inputs[0][1]).astype(np.float32)
    x[0, 0, 100, 100] = np.nan
    with pytest.warns(kiln.NumericsWarning):
        y = m.run(x)
    assert np.isnan(y).any()
