"""Fuzzing the kiln-profile/1 reader (kiln/visualize.load_profile, `kiln visualize --profile`): a valid profile
mutated at the JSON level and as text. Every input gives a ProfileError naming the file or a profile whose
numbers are finite and non-negative (so the report can always be rendered); never another exception. Fixed
seed, bounded budget."""
import json
import math
from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kiln.visualize import ProfileError, load_profile


@dataclass(frozen=True)
class Step:
    """What load_profile reads of a plan's step record (kiln.codegen.ir.manifest.StepRecord)."""
    name: str
    kernel: str | None
    is_kernel: bool


STEPS = [Step("conv1", "k_conv", True), Step("to_nchw", None, False), Step("fc", "k_fc", True)]
SEED = {"format": "kiln-profile/1", "model": "m", "profile": "ascend910b", "isa": "avx2", "threads": 2, "repeat": 3,
        "date": "2026-12-02T00:00:00Z", "total_cpu_ms": 3.5, "simulated_cycles": 1000.0,
        "steps": [{"index": i, "name": s.name, "kernel": s.kernel, "cpu_ms": 1.0 + i,
                   "simulated_cycles": 10.0 if s.kernel else None} for i, s in enumerate(STEPS)]}
FUZZ = settings(max_examples=300, derandomize=True, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
numbers = st.one_of(st.integers(-2 ** 70, 2 ** 70), st.floats(), st.just(1e308), st.just(-0.0))
json_values = st.one_of(st.none(), st.booleans(), numbers, st.text(max_size=8), st.lists(numbers, max_size=2),
                        st.dictionaries(st.text(max_size=4), numbers, max_size=2))


@st.composite
def mutated(draw) -> str:
    doc = json.loads(json.dumps(SEED))
    for _ in range(draw(st.integers(1, 3))):
        target = doc if draw(st.booleans()) else doc["steps"][draw(st.integers(0, len(doc["steps"]) - 1))] \
            if isinstance(doc.get("steps"), list) and doc["steps"] and all(isinstance(s, dict) for s in doc["steps"]) \
            else doc
        key = draw(st.sampled_from(sorted(target) + ["extra"]))
        if draw(st.integers(0, 3)) == 0:
            target.pop(key, None)
        else:
            target[key] = draw(json_values)
    text = json.dumps(doc)  # NaN and Infinity included: the reader must refuse them
    if draw(st.integers(0, 5)) == 0:
        text = text[:draw(st.integers(0, len(text)))]
    return text


@FUZZ
@given(mutated())
def test_a_mutated_profile_is_a_profileerror_or_finite(tmp_path, text):
    path = tmp_path / "p.json"
    path.write_text(text)
    try:
        got = load_profile(path, "m", STEPS, "ascend910b")
    except ProfileError as e:
        assert str(e).startswith(str(path))
        return
    for v in (got["total_cpu_ms"], got["steps_cpu_ms"], got["kernel_cpu_ms"], *(s["cpu_ms"] for s in got["steps"])):
        assert math.isfinite(v) and v >= 0
