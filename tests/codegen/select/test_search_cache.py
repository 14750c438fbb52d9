"""The tiling search's cache in the build directory (codegen/select/search_cache.py): a second run reuses every result,
its output is byte-identical to an uncached serial run whatever the job count, an option the search reads
re-searches the kernels it affects and an option it does not read reuses them, and results of another
codegen version are dropped."""

import pytest
from conftest import REPO

from codegen.emit.render import render
from codegen.options import parse_options
from codegen.pipeline import plan
from codegen.select import search_cache

SOURCE = REPO

KERNELS = """
[[op]]
label = "c.conv3x3"
type = "Conv"
input = [1, 32, 14, 14]
weight = [32, 32, 3, 3]
pads = [1, 1, 1, 1]
bias = true
activation = "Relu"

[[op]]
label = "c.conv1x1"
type = "Conv"
input = [1, 32, 14, 14]
weight = [64, 32, 1, 1]

[[op]]
label = "c.gemm"
type = "Gemm"
a = [64, 96]
b = [96, 48]
bias = true

[[op]]
label = "c.add"
type = "Add"
shape = [4, 300]
"""


def options(tmp_path, **extra):
    kl = tmp_path / "k.toml"
    kl.write_text(KERNELS)
    return parse_options({"KILN_MODELS": "", "KILN_KERNEL_LIST": str(kl), "DEBUG_OPTIMIZATION_PATH": "ON", **extra})


def planned(opts, cache=None, jobs=1):
    lines = []
    p = plan(opts, SOURCE, progress=lines.append, jobs=jobs, search_cache_dir=cache)
    return p, render(p), lines


def searched(lines) -> int:
    """How many kernels a run searched (not taken from the cache), from its progress line."""
    line = next(x for x in lines if x.startswith("search: ") and "searching" in x)
    return int(line.split("searching ")[1].split()[0])


def test_cached_and_parallel_runs_write_what_a_plain_run_writes(tmp_path):
    opts = options(tmp_path)
    _, plain, _ = planned(opts)
    cache = tmp_path / "cache"
    p1, cold, lines1 = planned(opts, cache, jobs=2)
    p2, warm, lines2 = planned(opts, cache)
    assert searched(lines1) == len(p1.kernels) == 4 and searched(lines2) == 0
    assert cold == plain and warm == plain  # sources, manifest, opspecs and the [OPT] log, byte for byte
    assert p2.log.lines == p1.log.lines


def test_options_the_search_reads_are_part_of_the_key(tmp_path):
    cache = tmp_path / "cache"
    planned(options(tmp_path), cache)
    # MAX_FUSION_DEPTH steers fusion, not the search: every result is reused
    _, files, lines = planned(options(tmp_path, MAX_FUSION_DEPTH="5"), cache)
    assert searched(lines) == 0
    # FORCE_DIRECT_CONV is read for the convolutions only: they are searched again, the others are reused
    forced = options(tmp_path, FORCE_DIRECT_CONV="ON")
    _p, files, lines = planned(forced, cache)
    assert searched(lines) == 2
    assert files == planned(forced)[1]
    # ... and both option values now have their entries: going back searches nothing
    assert searched(planned(options(tmp_path), cache)[2]) == 0
    assert searched(planned(forced, cache)[2]) == 0


def test_other_codegen_versions_are_dropped_and_unreadable_entries_are_misses(tmp_path):
    cache = tmp_path / "cache"
    old = cache / "0123456789abcdef"
    old.mkdir(parents=True)
    (old / "x.pkl").write_bytes(b"stale")
    opts = options(tmp_path)
    planned(opts, cache)
    assert not old.exists()
    current = cache / search_cache.codegen_digest()
    entries = sorted(current.glob("*.pkl"))
    assert len(entries) == 4
    entries[0].write_bytes(b"truncated")
    _, files, lines = planned(opts, cache)
    assert searched(lines) == 1 and files == planned(opts)[1]


def test_entries_made_under_another_cost_model_are_never_reused(tmp_path):
    """An entry of the same sources and key but another COST_MODEL_VERSION (or the older 4-field entry, made
    before the version existed) is ignored: that kernel is searched again, with the same result as no cache."""
    import pickle
    cache = tmp_path / "cache"
    opts = options(tmp_path)
    planned(opts, cache)
    entries = sorted((cache / search_cache.codegen_digest()).glob("*.pkl"))
    old, older = entries[0], entries[1]
    old.write_bytes(pickle.dumps([e[:4] + ("kiln-cost/1",) for e in pickle.loads(old.read_bytes())]))
    older.write_bytes(pickle.dumps([e[:4] for e in pickle.loads(older.read_bytes())]))
    _, files, lines = planned(opts, cache)
    assert searched(lines) == 2 and files == planned(opts)[1]


def test_search_errors_name_the_kernel_with_jobs_too(tmp_path):
    kl = tmp_path / "k.toml"
    kl.write_text(KERNELS + '\n[[op]]\nlabel = "c.pinned"\ntype = "Gemm"\na = [64, 96]\nb = [96, 48]\n'
                  'tiling = {base_m = 4096, base_n = 4096, base_k1 = 64, k1_step = 64}\n')
    opts = parse_options({"KILN_MODELS": "", "KILN_KERNEL_LIST": str(kl)})
    from codegen import KilnError
    with pytest.raises(KilnError) as serial:
        plan(opts, SOURCE)
    with pytest.raises(KilnError) as parallel:
        plan(opts, SOURCE, jobs=2, search_cache_dir=tmp_path / "cache")
    assert str(parallel.value) == str(serial.value) and "gemm_m64_k96_n48" in str(serial.value)
