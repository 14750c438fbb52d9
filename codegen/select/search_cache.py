"""The per-kernel tiling search, cached in the build directory and spread over the CPU cores.

Choosing a kernel's variant (tiling.choose_variant, which replays hundreds of tilings on the cost model)
and predicting its cycles (costmodel.predict) is nearly all of the codegen's time: about 18 s on one core
for the default zoo. A build runs the codegen twice (`outputs` at configure time lists the files, then
`generate` writes them), and every reconfigure or option change plans all kernels again, although an
option like MAX_FUSION_DEPTH leaves most of them as they were. So each kernel's result is kept under a key
of everything it is computed from:

- the codegen's own source (every codegen/*.py; any edit starts a fresh cache) and the cost model's version
  (COST_MODEL_VERSION: an entry made under other costs is never reused, even by the same sources),
- the Opspec, the kernel-list pins (algorithm, tiling), the profile and the kernel's tuning record,
- the build options the search actually read, with their values: the options object handed to the search
  records each attribute it reads, and an entry is reused only when all of those still have the same
  value, so an option the search does not look at (MAX_FUSION_DEPTH, KILN_MODELS...) does not invalidate
  it, and one it starts to read later is tracked without a list here to keep up to date.

An entry holds the variant, the prediction and the [OPT] lines the search wrote, replayed into the log in
kernel order, so the generated sources, manifest and log are byte-identical with and without the cache.
Kernels not in the cache are searched in parallel worker processes (fork; one per CPU by default) when
there are several; results are collected in kernel order, so the output is the same for any job count.
"""
from __future__ import annotations

import hashlib
import json
import os
import pickle
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..cost.model import COST_MODEL_VERSION
from ..families.registry import predict
from ..ir.opspec import spec_hash
from ..ir.optlog import OptLog
from ..select.tiling import choose_variant
from .plan import KernelPlan, KernelRequest

FORMAT = 1
MAX_ENTRIES = 8  # per key: results for different values of the options the search read
CODEGEN_DIR = Path(__file__).resolve().parent.parent


def codegen_digest() -> str:
    """Hash of the codegen's sources: a cached result is only valid for the code that computed it."""
    h = hashlib.sha256(f"kiln-search-cache/{FORMAT}".encode())
    for p in sorted(CODEGEN_DIR.rglob("*.py")):  # every stage folder
        h.update(p.relative_to(CODEGEN_DIR).as_posix().encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()[:16]


class _ReadOptions:
    """Forwards attribute reads to the build options and remembers which ones were read, with their values."""

    def __init__(self, options) -> None:
        object.__setattr__(self, "_options", options)
        object.__setattr__(self, "read", {})

    def __getattr__(self, name: str):
        value = getattr(self._options, name)
        self.read[name] = value
        return value

    def __setattr__(self, name: str, value) -> None:
        raise AttributeError("the search must not change the build options")


def search_one(spec, profile, options, pinned: str, pinned_tiling: tuple, records: dict):
    """One kernel's variant and prediction, the [OPT] lines its search wrote, the options it read and the cost
    model version it was made under."""
    log = OptLog()
    read = _ReadOptions(options) if options is not None else None
    v = choose_variant(spec, profile, log, read, pinned=pinned, pinned_tiling=dict(pinned_tiling), records=records)
    pred = predict(spec, v.family, v.params, profile)
    return v, pred, log.lines, (dict(read.read) if read is not None else None), COST_MODEL_VERSION


def _key(spec, profile, pinned: str, pinned_tiling: tuple, records: dict, digest: str) -> str:
    record = records.get(spec_hash(spec)) if records else None
    text = "\n".join([digest, COST_MODEL_VERSION, type(spec).__name__, repr(spec), pinned, repr(pinned_tiling),
                      repr(profile), json.dumps(record, sort_keys=True)])
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _valid(entry, options) -> bool:
    if not isinstance(entry, tuple) or len(entry) != 5 or entry[4] != COST_MODEL_VERSION:
        return False  # made under another cost model (or an older entry format): searched again
    deps = entry[3]
    if deps is None:
        return options is None
    return options is not None and all(getattr(options, name, object()) == value for name, value in deps.items())


class SearchCache:
    """Results by key in <dir>/<codegen digest>/<key>.pkl; directories of other codegen versions are removed."""

    def __init__(self, root: Path) -> None:
        self.digest = codegen_digest()
        self.root = Path(root)
        self.dir = self.root / self.digest
        self.dir.mkdir(parents=True, exist_ok=True)
        for old in self.root.iterdir():  # results of an older codegen can never be used again
            if old.is_dir() and old.name != self.digest:
                shutil.rmtree(old, ignore_errors=True)

    def _load(self, key: str) -> list:
        try:
            with open(self.dir / f"{key}.pkl", "rb") as f:
                entries = pickle.load(f)
            return entries if isinstance(entries, list) else []
        except Exception:  # missing, truncated or unreadable: a miss
            return []

    def get(self, key: str, options):
        for entry in self._load(key):
            if _valid(entry, options):
                return entry
        return None

    def put(self, key: str, entry) -> None:
        self._write(key, [entry] + [e for e in self._load(key) if e[3] != entry[3]][:MAX_ENTRIES - 1])


    def get_l2(self, key: str):
        """The L2 re-ranking's result under `key` (codegen/select/l2_search.py), if one was made under this cost
        model."""
        try:
            with open(self.dir / f"l2-{key}.pkl", "rb") as f:
                version, result = pickle.load(f)
            return result if version == COST_MODEL_VERSION else None
        except Exception:  # missing, truncated or unreadable: a miss
            return None

    def put_l2(self, key: str, result) -> None:
        self._write(f"l2-{key}", (COST_MODEL_VERSION, result))

    def _write(self, name: str, data) -> None:
        fd, tmp = tempfile.mkstemp(dir=self.dir, prefix=f".{name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                pickle.dump(data, f, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, self.dir / f"{name}.pkl")
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def parallel_map(fn: Callable, args: list, jobs: int) -> list:
    """[fn(*a) for a in args], in `jobs` forked worker processes where there are several (each item's result, in
    order; an item whose worker failed, or every item where no pool can start, is computed here, so its error is
    raised as without jobs)."""
    results: list = [None] * len(args)
    jobs = max(1, min(jobs, len(args))) if sys.platform.startswith("linux") else 1
    if jobs > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor
        try:
            with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("fork")) as pool:
                results = list(pool.map(_guarded, [(fn, a) for a in args], chunksize=1))
        except (OSError, RuntimeError):
            pass
    return [r if r is not None else fn(*a) for r, a in zip(results, args)]


def _guarded(item):
    fn, args = item
    try:
        return fn(*args)
    except Exception:
        return None


def _worker(args):
    try:
        return search_one(*args)
    except Exception:  # the parent searches this kernel again in order, so the error is raised as without jobs
        return None


def default_jobs() -> int:
    """KILN_CODEGEN_JOBS, else one per CPU this process may run on."""
    env = os.environ.get("KILN_CODEGEN_JOBS", "").strip()
    if env:
        return max(1, int(env))
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


@dataclass(frozen=True)
class SearchSetup:
    """How a build searches: where results are kept between runs, in how many processes, where progress goes."""
    cache_dir: Path | None = None
    jobs: int = 1
    progress: Callable[[str], None] | None = None


def choose_all(kernels: list[KernelRequest], profile, log: OptLog, options, records: dict,
               setup: SearchSetup = SearchSetup()) -> list[KernelPlan]:
    """The plan of every kernel request (its variant and prediction), in order, and their [OPT] lines appended to
    the log in that order: from the cache where it has them and by searching (in `setup.jobs` processes) where
    not."""
    cache_dir, jobs, progress = setup.cache_dir, setup.jobs, setup.progress
    t0 = time.perf_counter()
    cache = SearchCache(cache_dir) if cache_dir is not None else None
    digest = cache.digest if cache else ""
    keys: list[str] = []
    results: list[tuple | None] = []
    for k in kernels:
        key = _key(k.spec, profile, k.pinned, k.pinned_tiling, records, digest) if cache else ""
        keys.append(key)
        results.append(cache.get(key, options) if cache else None)
    todo = [i for i, r in enumerate(results) if r is None]
    hits = len(kernels) - len(todo)
    jobs = max(1, min(jobs, len(todo))) if sys.platform.startswith("linux") else 1  # worker processes fork
    if progress:
        where = f", {hits} from the cache in {cache.dir}" if cache else ""
        progress(f"search: {len(kernels)} kernels{where}; searching {len(todo)}"
                 + (f" in {jobs} processes" if jobs > 1 else ""))
    args = [(kernels[i].spec, profile, options, kernels[i].pinned, kernels[i].pinned_tiling, records) for i in todo]
    if jobs > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor
        try:
            # fork: the workers start with the codegen already imported (no re-import of numpy/onnx per worker)
            with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("fork")) as pool:
                found = pool.map(_worker, args, chunksize=1)
                for n, (i, r) in enumerate(zip(todo, found), 1):
                    results[i] = r
                    if progress and r is not None:
                        progress(f"search: [{n}/{len(todo)}] {kernels[i].spec.name} -> {r[0].tag}")
        except (OSError, RuntimeError) as e:  # no process pool here (e.g. no /dev/shm): search below, serially
            if progress:
                progress(f"search: no worker processes ({e}); searching in this process")
    for n, i in enumerate(todo, 1):
        if results[i] is None:  # no jobs, or a worker failed: search here (raises the kernel's error in order)
            result = results[i] = search_one(*args[n - 1])
            if progress:
                progress(f"search: [{n}/{len(todo)}] {kernels[i].spec.name} -> {result[0].tag}")
        if cache:
            cache.put(keys[i], results[i])
    plans = []
    for k, result in zip(kernels, results):
        assert result is not None  # every miss was searched above
        variant, prediction, lines, _, _ = result
        plans.append(KernelPlan(k.spec, variant, k.instances, prediction, k.pinned, k.pinned_tiling))
        log.lines.extend(lines)
    if progress:  # wall time goes to the progress stream, never into the (byte-identical) log or manifest
        progress(f"search: done in {time.perf_counter() - t0:.1f} s")
    return plans
