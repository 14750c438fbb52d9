"""The search with the models' L2 plans (codegen/select/l2_search.py): bert_layer's GEMMs read their activations
from L2, so ranked with their steps' hits some take another tiling than ranked alone; each such decision is
logged with the steps' cycles before and after, and the model's launches are those of the new tilings."""
import re

import pytest
from conftest import REPO, minimal_kernel_list

from codegen.families.registry import FAMILIES, predict
from codegen.options import parse_options
from codegen.pipeline import plan
from codegen.select import l2_search, search_cache
from codegen.select.launches import launch_record


def bert_plan(directory):
    """bert_layer's plan with the search cache in `directory` (the kernel list: one Relu)."""
    return plan(parse_options({"KILN_MODELS": "bert_layer", "DEBUG_OPTIMIZATION_PATH": "ON",
                               "KILN_KERNEL_LIST": str(minimal_kernel_list(directory))}), REPO,
                search_cache_dir=directory / "cache")


@pytest.fixture(scope="module")
def bert_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("l2s")


@pytest.fixture(scope="module")
def bert(bert_dir):
    l2_search._SESSION.clear()  # ranked here, not taken from an earlier plan of this session
    return bert_plan(bert_dir)


def test_gemms_ranked_with_their_steps_hits_are_faster_as_the_model_runs_them(bert):
    m = bert.models[0]
    lines = [ln for ln in bert.log.lines if "reason=l2_plan" in ln]
    assert lines, "no bert_layer GEMM changed tiling with its steps' L2 hits"
    by_name = {k.spec.name: k for k in m.step_kernels.values()}
    for ln in lines:
        _, _, name, tag = ln.split()[:4]
        facts = dict(re.findall(r"(\w+)=(\S+)", ln))
        k = by_name[name]
        assert k.variant.tag == tag and facts["replaced"] != tag
        steps = [i for i, s in m.step_kernels.items() if s is k]
        assert int(facts["steps"]) == len(steps)
        after = sum(m.launches[i].predicted_cycles for i in steps)
        assert abs(after - float(facts["after"])) <= 1 and float(facts["after"]) < float(facts["before"])
        # the replaced tiling, replayed with the same hits, gives `before`
        old = dict(re.findall(r"([a-z])(\d+)", facts["replaced"][len(k.variant.family) + 1:]))
        params = dict(k.variant.params, base_m=int(old["m"]), base_n=int(old["n"]), base_k1=int(old["k"]),
                      k1_step=int(old["s"]))
        before = sum(predict(k.spec, k.variant.family, params, bert.profile, l2=m.l2_hits[i]).cycles for i in steps)
        assert abs(before - float(facts["before"])) <= 1


def test_every_launch_is_predicted_with_the_tiling_the_kernel_bakes(bert):
    m = bert.models[0]
    for i, k in m.step_kernels.items():
        assert m.launches[i] == launch_record(k, m.l2_hits[i], bert.profile)
        if FAMILIES[k.variant.family].replay is not None:  # the kernel's own prediction: called alone
            assert k.prediction is not None
            assert k.prediction.cycles == predict(k.spec, k.variant.family, k.variant.params, bert.profile).cycles


def test_o0_keeps_the_rule_tilings(tmp_path):
    p = plan(parse_options({"KILN_MODELS": "bert_layer", "DEBUG_OPTIMIZATION_PATH": "ON", "KILN_OPT_LEVEL": "O0",
                            "KILN_KERNEL_LIST": str(minimal_kernel_list(tmp_path))}), REPO)
    assert not [ln for ln in p.log.lines if "reason=l2_plan" in ln]


def test_a_cached_ranking_gives_the_same_plan_and_is_never_reused_under_other_costs(bert, bert_dir, monkeypatch):
    entries = sorted((bert_dir / "cache").glob("*/l2-*.pkl"))
    assert entries, "the re-rankings were not kept in the search cache"
    ranked = [ln for ln in bert.log.lines if "reason=l2_plan" in ln]
    l2_search._SESSION.clear()  # from the build's cache now, as a second build reads them
    again = bert_plan(bert_dir)
    assert [ln for ln in again.log.lines if "reason=l2_plan" in ln] == ranked
    assert again.models[0].launches == bert.models[0].launches
    assert [(k.variant, k.prediction) for k in again.kernels] == [(k.variant, k.prediction) for k in bert.kernels]
    cache = search_cache.SearchCache(bert_dir / "cache")
    key = entries[0].stem[len("l2-"):]
    assert cache.get_l2(key) is not None
    monkeypatch.setattr(search_cache, "COST_MODEL_VERSION", "another cost model")
    assert cache.get_l2(key) is None  # made under other costs: ranked again
