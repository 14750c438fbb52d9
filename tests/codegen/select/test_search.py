"""The tiling search (codegen/families/ranking.py and each searched family's module) as its log shows it:
hundreds of candidates per conv before the
buffer-fit pruning, the counts, the rule's and the winner's cycles, and the L1 partition it arrived at."""
import re
import textwrap

from conftest import REPO

from codegen.families.conv2d_cube_img2col import conv_l1_partition
from codegen.ir.profiles import PROFILES
from codegen.options import parse_options
from codegen.pipeline import plan


def test_conv_search_line_counts_candidates_and_gives_the_l1_partition(tmp_path):
    (tmp_path / "k.toml").write_text(textwrap.dedent("""
        [[op]]
        label = "c"
        type = "Conv"
        input = [1, 64, 56, 56]
        weight = [64, 64, 3, 3]
        pads = [1, 1, 1, 1]
        bias = true
        activation = "Relu"
    """))
    p = plan(parse_options({"KILN_MODELS": "", "KILN_KERNEL_LIST": str(tmp_path / "k.toml"),
                            "DEBUG_OPTIMIZATION_PATH": "ON"}), REPO)
    (k,) = p.kernels
    line = next(x for x in p.log.lines if x.startswith(f"[OPT] search {k.spec.name} "))
    facts = dict(re.findall(r"(\w+)=([\d.]+)", line))
    assert int(facts["candidates"]) >= 200 and 0 < int(facts["fitting"]) <= int(facts["candidates"])
    assert float(facts["best_cycles"]) <= float(facts["rule_cycles"])
    # the shares are the winner's feature-map and weight chunks in L1, which its buffers must hold
    fm, w = conv_l1_partition(k.spec, k.variant.params)
    l1 = PROFILES["ascend910b"].capacity["L1"]
    assert (float(facts["l1_data_share"]), float(facts["l1_weight_share"])) == (round(fm / l1, 3), round(w / l1, 3))
    assert fm + w <= k.variant.buffers["L1"] <= l1
