"""The .opspec feature files: written for every kernel, read back only when unchanged, and listed per model."""
import json

import pytest
from conftest import REPO, run
from test_costmodel import spec_of

import kiln
from codegen import KilnError
from codegen.emit.opspec_file import FEATURES, parse_opspec, render_opspec, spec_hash
from codegen.ir.profiles import PROFILES

PROFILE = PROFILES[kiln.build_info()["profile"]]
KERNELS = kiln.kernels()


def kiln_cmd():
    import shutil
    return shutil.which("kiln") or "kiln"


def test_at_least_23_documented_features():
    assert len(FEATURES) >= 23
    doc = (REPO / "docs" / "opspec.md").read_text()
    for name in FEATURES:
        assert f"`{name}`" in doc, name


@pytest.mark.parametrize("k", KERNELS, ids=[k.name for k in KERNELS])
def test_every_kernel_has_a_valid_installed_opspec(k):
    from importlib import resources
    h = k.record["opspec"]
    assert h == spec_hash(spec_of(k))
    text = (resources.files("kiln") / "opspecs" / f"{h}.opspec").read_text()
    parsed = parse_opspec(text, PROFILE)
    assert parsed["hash"] == h and parsed["kind"] == k.record["features"]["kind"]
    assert set(parsed["features"]) == set(FEATURES)
    assert set(k.record["instances"]) <= set(parsed["instances"])


def conv_text():
    k = next(k for k in KERNELS if k.record["features"]["kind"] == "conv2d")
    return render_opspec(spec_of(k), ["m:conv"], PROFILE)


@pytest.mark.parametrize("edit,field", [
    (lambda t: t.replace("feature.flops = ", "feature.flops = 9"), "feature.flops"),
    (lambda t: t.replace("format = kiln-opspec/1", "format = kiln-opspec/2"), "format"),
    (lambda t: "\n".join(x for x in t.splitlines() if not x.startswith("feature.macs")), "feature.macs"),
    (lambda t: t + "feature.flops = 1\n", "feature.flops"),
    (lambda t: t + "feature.color = red\n", "feature.color"),
    (lambda t: t.replace("dim.cin = ", "dim.cin = x"), "dim.cin"),
    (lambda t: t.replace("hash = ", "hash = 0"), "hash"),
    (lambda t: t[: len(t) // 2], ""),  # truncated
])
def test_edited_or_corrupted_files_are_rejected_naming_the_field(edit, field):
    with pytest.raises(KilnError) as e:
        parse_opspec(edit(conv_text()), PROFILE, source="x.opspec")
    assert "x.opspec" in str(e.value) and f"field '{field}" in str(e.value)


def test_identical_specs_share_one_file_and_kernel():
    hashes = [k.record["opspec"] for k in KERNELS]
    by_hash = {}
    for k in KERNELS:
        by_hash.setdefault(k.record["opspec"], set()).add(k.record["family"])
    # one kernel per (spec, algorithm): a hash repeats only for a conv pinned to several algorithms
    assert all(len(fams) == hashes.count(h) for h, fams in by_hash.items())


def test_kiln_opspec_lists_a_models_kernels():
    if "resnet50" not in kiln.models():
        pytest.skip("resnet50 not baked")
    r = run([kiln_cmd(), "opspec", "resnet50", "--json"])
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert rows and all(set(x) == {"hash", "kernel", "features"} for x in rows)
    assert all(len(x["features"]) >= 23 for x in rows)
    assert len({x["kernel"] for x in rows}) == len(rows)
    r = run([kiln_cmd(), "opspec", "no_such_model"])
    assert r.returncode == 1 and "no_such_model" in r.stderr
