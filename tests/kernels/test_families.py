"""Every registered kernel family, by construction: a family added to codegen/families/registry.py is checked
here without a test of its own. It must have its module and its template, the default kernel list must bake at
least one kernel of it, and each of those kernels must fit the profile's buffers, replay in the cost model
exactly as the emulator runs it, and pass the per-kind reference check of tests/test_kernels.py."""
import sys

import numpy as np
import pytest
from conftest import REPO

import kiln
from codegen.families.registry import ORDER, predict
from codegen.ir import opspec
from codegen.ir.profiles import PROFILES
from kiln.runtime import as_packed

SPEC_CLASS = {c.kind: c for c in vars(opspec).values()
              if isinstance(c, type) and isinstance(getattr(c, "kind", None), str)}
SPEC_CLASS.update(softmax=opspec.RowSpec, logsoftmax=opspec.RowSpec, layernorm=opspec.RowSpec)
PROFILE = PROFILES[kiln.build_info()["profile"]]
BF16_BUILD = kiln.build_info()["dtype"] == "bf16"
BAKED = {f.name: [k for k in kiln.kernels() if k.record["family"] == f.name] for f in ORDER}
IDS = [f.name for f in ORDER]


def baked(family) -> list:
    kernels = BAKED[family.name]
    if not kernels and BF16_BUILD and family.name == "conv2d_winograd":
        pytest.skip("a KILN_DTYPE=bf16 build bakes no Winograd kernel (its error bound is for fp16)")
    assert kernels, (f"the default kernel list (kernels/default.toml) bakes no {family.name} kernel: add an entry "
                     f"whose op the family implements ({family.kind})")
    return kernels


@pytest.mark.parametrize("family", ORDER, ids=IDS)
def test_family_has_its_module_and_template(family):
    module = sys.modules[family.replay.__module__]
    assert module.__file__ and "codegen/families/" in module.__file__.replace("\\", "/")
    assert (REPO / "templates" / f"{family.name}.cpp.j2").is_file()
    assert family.unit in ("cube", "vector") and family.kind in SPEC_CLASS


@pytest.mark.parametrize("family", ORDER, ids=IDS)
def test_baked_kernels_fit_the_buffers(family):
    for k in baked(family):
        for pos, used in k.record["buffers"].items():
            assert used <= PROFILE.capacity[pos], (k.name, pos, used, PROFILE.capacity[pos])


@pytest.mark.parametrize("family", ORDER, ids=IDS)
def test_replay_equals_the_emulator(family):
    for k in baked(family):
        k.run_packed(*[as_packed(np.zeros(t["shape"]), t["dtype"]) for t in k.record["inputs"]])
        st = k.last_stats
        p = predict(SPEC_CLASS[k.record["features"]["kind"]](**k.spec), family.name, k.tiling, PROFILE)
        assert p is not None, f"{family.name} has no replay"
        for pipe, got in st["pipes"].items():
            assert (p.pipes[pipe].instrs, p.pipes[pipe].bytes) == (got["instructions"], got["bytes"]), (k.name, pipe)
        assert p.cycles == pytest.approx(st["cycles"], rel=1e-9), k.name


@pytest.mark.parametrize("family", ORDER, ids=IDS)
def test_a_reference_check_covers_it(family):
    from test_kernels import test_kernel_matches_reference
    test_kernel_matches_reference(baked(family)[0])
