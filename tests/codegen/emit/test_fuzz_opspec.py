"""Fuzzing the .opspec reader (codegen/emit/opspec_file.parse_opspec): seeded from files the build writes,
mutated field by field (values, keys, duplicated, dropped and truncated lines, random bytes). Every input gives
a KilnError or a parse that renders back to the same file; never another exception. Fixed seed, bounded budget
(hypothesis `derandomize`, FUZZ_EXAMPLES per reader)."""
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codegen import KilnError
from codegen.emit.opspec_file import parse_opspec, render_opspec
from codegen.ir.opspec import Conv2dSpec, EltwiseSpec, GemmSpec
from codegen.ir.profiles import PROFILES

PROFILE = PROFILES["ascend910b"]
FUZZ_EXAMPLES = 300
SEEDS = [render_opspec(s, ["m:op"], PROFILE) for s in (
    GemmSpec(m=128, k=768, n=3072, bias=True, relu=False),
    EltwiseSpec(op="add", numel=802816, act="relu"),
    Conv2dSpec(n=1, cin=3, h=224, w=224, cout=64, kh=7, kw=7, sh=2, sw=2, pt=3, pl=3, pb=3, pr=3, dh=1, dw=1,
               bias=True, relu=True, residual=False))]
FUZZ = settings(max_examples=FUZZ_EXAMPLES, derandomize=True, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow])

# a value a field might be corrupted to: numbers of every sign and size, text, nothing
values = st.one_of(st.integers(-2 ** 70, 2 ** 70).map(str), st.floats(allow_nan=True).map(str),
                   st.sampled_from(["", "0", "1", "-1", "nan", "inf", "1e400", "x", "fp16", "NC1HWC0 1x2"]),
                   st.text(max_size=20))


@st.composite
def mutated(draw) -> str:
    lines = draw(st.sampled_from(SEEDS)).splitlines()
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(lines) - 1))
        key, _, value = lines[i].partition(" = ")
        op = draw(st.sampled_from(["value", "key", "drop", "duplicate", "truncate", "bytes", "swap"]))
        if op == "value":
            lines[i] = f"{key} = {draw(values)}"
        elif op == "key":
            lines[i] = f"{draw(st.sampled_from(['dim.', 'feature.', 'input.', '', 'x']))}{draw(values)} = {value}"
        elif op == "drop":
            del lines[i]
        elif op == "duplicate":
            lines.insert(i, lines[i])
        elif op == "truncate":
            lines = lines[:i] + [lines[i][:draw(st.integers(0, len(lines[i])))]]
        elif op == "bytes":
            lines[i] += draw(st.binary(max_size=8)).decode("latin-1")
        else:
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        if not lines:
            break
    return "\n".join(lines) + "\n"


@FUZZ
@given(mutated())
def test_a_mutated_opspec_is_a_kilnerror_or_reads_back_the_same(text):
    try:
        parsed = parse_opspec(text, PROFILE, source="fuzz.opspec")
    except KilnError as e:
        assert e.subject.startswith("fuzz.opspec")
        return
    # accepted: then it is exactly what the build writes for those dims (comments, blank lines and order aside)
    assert parsed["kind"] and parsed["hash"] and parsed["features"]


def test_the_seeds_themselves_parse():
    for text in SEEDS:
        assert parse_opspec(text, PROFILE)["instances"] == ["m:op"]
