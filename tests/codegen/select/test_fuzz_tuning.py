"""Fuzzing the tuning-record reader (codegen/select/tuning.load_records): a valid file mutated at the JSON
level (any value replaced by any JSON value, keys dropped, the text truncated, bytes flipped). Every input
gives a KilnError naming the file or records that pass the reader's own checks; never another exception.
Fixed seed, bounded budget."""
import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codegen import KilnError
from codegen.cost.model import COST_MODEL_VERSION
from codegen.ir.profiles import PROFILES
from codegen.select.tuning import FORMAT, load_records

PROFILE = PROFILES["ascend910b"]
SEED = {"format": FORMAT, "profile": PROFILE.name, "cost_model": COST_MODEL_VERSION, "records": [
    {"opspec": "a" * 16, "name": "gemm_cube_m128_k768_n3072", "family": "gemm_cube",
     "params": {"base_m": 128, "base_n": 256, "base_k": 64}, "simulated_cycles": 5836.0,
     "candidates": [{"params": {"base_m": 64}, "simulated_cycles": 6000.0, "predicted_cycles": 5900.0}]},
    {"opspec": "b" * 16, "name": "conv", "family": "conv2d_cube_img2col", "params": {"base_m": 256},
     "simulated_cycles": 100}]}
FUZZ = settings(max_examples=300, derandomize=True, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

scalars = st.none() | st.booleans() | st.integers(-2 ** 64, 2 ** 64) | st.floats() | st.text(max_size=8)
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=6)


def _paths(doc, prefix=()):
    """Every (path to a value) in a JSON document."""
    yield prefix
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _paths(v, (*prefix, i))


@st.composite
def mutated(draw) -> str:
    doc = json.loads(json.dumps(SEED))
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(list(_paths(doc))[1:]))
        parent = doc
        for step in path[:-1]:
            parent = parent[step]
        if draw(st.booleans()) and isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent[path[-1]] = draw(json_values)
    text = json.dumps(doc)
    if draw(st.integers(0, 4)) == 0:
        text = text[:draw(st.integers(0, len(text)))]
    return text


@FUZZ
@given(mutated())
def test_a_mutated_tuning_file_is_a_kilnerror_or_checked_records(tmp_path, text):
    path = tmp_path / "t.json"
    path.write_text(text)
    try:
        records = load_records(path, PROFILE)
    except KilnError as e:
        assert str(path) in e.subject
        return
    for h, r in records.items():
        assert r["opspec"] == h and isinstance(r["family"], str)
        assert all(isinstance(v, int) and v >= 1 for v in r["params"].values())
