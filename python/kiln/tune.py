"""`kiln tune MODEL`: measure the cost model's best tilings on the emulator and keep the winners.

For every direct convolution and GEMM kernel of a baked model, the k fastest tilings by the cost model
(codegen/select/search.py) are baked side by side into a scratch build (a kernel list pinning each tiling),
run on the emulator, and the one with the fewest simulated cycles is written as a tuning record keyed by
the kernel's opspec hash (codegen/select/tuning.py). A later build with -DKILN_TUNING_RECORDS=<file> uses the
records instead of searching.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .codegen.ir.manifest import KernelRecord, ModelRecord

RUN_CANDIDATES = """
import json, numpy as np, kiln
out = {}
for k in kiln.kernels():
    ins = [np.zeros(t.shape, {"fp16": np.float16, "bf16": np.uint16}.get(t.dtype, np.float32))
           for t in k.entry.inputs]
    k.run_packed(*ins)
    for label in k.entry.instances:
        out[label] = {"kernel": k.name, "cycles": k.last_stats["cycles"], "tiling": k.tiling}
print(json.dumps(out))
"""


def tuned_families() -> tuple[str, ...]:
    """The families `kiln tune` measures: those with a searched tiling space (codegen/families/*.py candidates)."""
    from .codegen.families.registry import FAMILIES
    return tuple(f.name for f in FAMILIES.values() if f.candidates is not None)


def _entry(label: str, spec: dict, kind: str, tiling: dict) -> str:
    """A kernel-list [[op]] table for `spec` with its tiling pinned."""
    t = ", ".join(f"{k} = {v}" for k, v in tiling.items())
    if kind == "gemm":
        body = ['type = "Gemm"', f"a = [{spec['m']}, {spec['k']}]", f"b = [{spec['k']}, {spec['n']}]",
                f"bias = {str(spec['bias']).lower()}", f'activation = "{"Relu" if spec["relu"] else ""}"']
    else:
        act = "Clip" if spec["clip_hi"] else "Relu" if spec["relu"] else ""
        body = ['type = "Conv"', f"input = [{spec['n']}, {spec['cin']}, {spec['h']}, {spec['w']}]",
                f"weight = [{spec['cout']}, {spec['cin']}, {spec['kh']}, {spec['kw']}]",
                f"strides = [{spec['sh']}, {spec['sw']}]",
                f"pads = [{spec['pt']}, {spec['pl']}, {spec['pb']}, {spec['pr']}]",
                f"dilations = [{spec['dh']}, {spec['dw']}]", f"bias = {str(spec['bias']).lower()}",
                f"residual = {str(spec['residual']).lower()}", f'activation = "{act}"', 'algorithm = "direct_img2col"']
        if act == "Clip":
            body += ["min = 0.0", f"max = {spec['clip_hi']}"]
    return "\n".join(["[[op]]", f'label = "{label}"', *body, f"tiling = {{ {t} }}", ""]) + "\n"


def baked_model(model: str) -> tuple[ModelRecord, object, dict[str, KernelRecord]]:
    """(the model's manifest record, its hardware profile, kernel records by name); ValueError if not baked."""
    import kiln

    from .codegen.ir.profiles import get_profile
    man = kiln.manifest_record()
    try:  # by name, by the ONNX path it was baked from or by its model spec, as kiln.load finds it
        rec = kiln.model_record(model)
    except KeyError as e:
        raise ValueError(e.args[0]) from None
    return rec, get_profile(man.profile), man.kernels_by_name()


def _pinned(params: dict, family: str, tunable: dict[str, tuple[str, ...]]) -> dict:
    """A candidate's tiling as a pin and a record set it: the family's tunable parameters (a chained conv: all but
    base_n, and its 1x1 tiling), and the images per block or a chain's resident weights where the candidate has
    them (what the pin would otherwise bake is another tiling than the one ranked)."""
    from .codegen.families.base import CHAIN_TILING
    pin = {n: params[n] for n in (*tunable[family], *CHAIN_TILING) if n in params}
    return pin | ({"images": params["images"]} if params.get("images", 1) > 1 else {}) | (
        {"resident": params["resident"]} if params.get("resident") else {})


def tune(model: str, out: str, k: int = 3, build_dir: str | None = None, progress=print) -> dict:
    from .codegen.families.registry import tunable
    from .codegen.ir.manifest import opspec_of_record
    from .codegen.select.search import top_candidates
    TUNABLE = tunable()
    from .codegen.select.tuning import write_records

    rec, profile, kernels = baked_model(model)
    _source_tree()  # before the search: a KILN_SOURCE_DIR that is no checkout stops here, and so does
    check_build_dir(build_dir)  # a --build-dir that cannot be one
    used = [kernels[n] for n in dict.fromkeys(s.kernel for s in rec.steps if s.kernel)]
    todo = [kr for kr in used if kr.family in tuned_families()]
    lines, cands = [], {}
    for i, kr in enumerate(todo):
        spec = opspec_of_record(kr)
        top = top_candidates(spec, kr.family, profile, k)
        cands[kr.opspec] = (kr, top)
        for j, (_, params) in enumerate(top):
            lines.append(_entry(f"{kr.opspec}#{j}", kr.spec, kr.kind, _pinned(params, kr.family, TUNABLE)))
        progress(f"[{i + 1}/{len(todo)}] {kr.name}: {len(top)} candidates")
    if not lines:
        raise ValueError(f"nothing to tune in {model}: it has no direct convolution or GEMM kernel")
    from . import build_info
    with scratch_dir(build_dir, f"kiln-tune-{rec.name}-") as work:
        (work / "candidates.toml").write_text("".join(lines))
        measured = _build_and_run(work, profile.name, progress, build_info()["dtype"])
    records = []
    for h, (kr, top) in cands.items():
        runs = [(measured[f"{h}#{j}"]["cycles"], j, top[j][1]) for j in range(len(top))]
        best_cycles, _, best = min(runs, key=lambda r: (r[0], r[1]))
        records.append({"opspec": h, "name": kr.opspec_name, "family": kr.family,
                        "params": _pinned(best, kr.family, TUNABLE), "simulated_cycles": best_cycles,
                        "candidates": [{"params": _pinned(p, kr.family, TUNABLE), "simulated_cycles": c,
                                        "predicted_cycles": top[j][0]} for c, j, p in runs]})
    write_records(out, profile, records)
    progress(f"wrote {len(records)} records to {out}")
    return {"records": len(records), "file": out, "build_dir": build_dir}


@contextmanager
def scratch_dir(build_dir: str | None, prefix: str) -> Iterator[Path]:
    """The scratch build directory: --build-dir as given (created, and kept for the next run), else a temporary
    directory removed afterwards, whatever happens (a scratch build is hundreds of MB)."""
    if not build_dir:
        with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
            yield Path(tmp)
        return
    p = check_build_dir(build_dir)
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise RuntimeError(f"--build-dir {build_dir}: cannot create it ({e.strerror or e})") from None
    yield p


def check_build_dir(build_dir: str | None) -> Path | None:
    """--build-dir as a Path (None: a temporary one); RuntimeError naming it when it exists and is not a
    directory, or its nearest existing parent is not a writable directory. Nothing is created."""
    if not build_dir:
        return None
    p = Path(build_dir)
    if p.exists() and not p.is_dir():
        raise RuntimeError(f"--build-dir {build_dir}: exists and is not a directory; give a directory (it is created "
                           f"if missing)")
    parent = next(q for q in (p.absolute(), *p.absolute().parents) if q.exists())
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise RuntimeError(f"--build-dir {build_dir}: cannot create it ({parent} is not a writable directory)")
    return p


def _build_and_run(work: Path, target: str, progress, dtype: str = "fp16") -> dict:
    """Bakes candidates.toml from the source tree next to the installed package or the repo, runs every kernel."""
    repo = _source_tree()
    if not shutil.which("cmake"):
        raise RuntimeError("cmake is not on PATH: `pip install cmake ninja` (the scratch build bakes the candidates)")
    gen = ["-G", "Ninja"] if shutil.which("ninja") else []
    for cmd in (["cmake", "-S", str(repo), "-B", str(work / "build"), *gen, f"-DPython_EXECUTABLE={sys.executable}",
                 "-DKILN_MODELS=", f"-DKILN_KERNEL_LIST={work / 'candidates.toml'}", f"-DKILN_TARGET={target}",
                 f"-DKILN_DTYPE={dtype}"],  # the candidates' opspec hashes are the build's kernels'
                ["cmake", "--build", str(work / "build"), "-j", str(os.cpu_count() or 2)]):
        progress("$ " + " ".join(cmd[:4]) + " ...")
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode:
            raise RuntimeError(f"{' '.join(cmd[:3])} failed:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    pkg = work / "pkg" / "kiln"
    if pkg.exists():
        shutil.rmtree(pkg)
    shutil.copytree(repo / "python" / "kiln", pkg)
    shutil.copytree(repo / "codegen", pkg / "codegen", ignore=shutil.ignore_patterns("__pycache__"))
    for so in (work / "build").glob("_core*"):
        shutil.copy(so, pkg)
    env = dict(os.environ, PYTHONPATH=str(pkg.parent))
    r = subprocess.run([sys.executable, "-c", RUN_CANDIDATES], capture_output=True, text=True, env=env)
    if r.returncode:
        raise RuntimeError(f"running the candidates failed:\n{r.stderr[-2000:]}")
    return json.loads(r.stdout)


def _source_tree() -> Path:
    """kiln's source tree (CMakeLists.txt, codegen/, templates/, kernels/): KILN_SOURCE_DIR, or the checkout
    this package was installed from if it is still there."""
    env = os.environ.get("KILN_SOURCE_DIR")
    if env and not ((Path(env) / "CMakeLists.txt").is_file() and (Path(env) / "codegen").is_dir()):
        raise RuntimeError(f"KILN_SOURCE_DIR={env!r} is not kiln's source tree (expected the checkout: the directory "
                           f"with CMakeLists.txt and codegen/)")
    cands = [Path(env)] if env else []
    from importlib import resources
    recorded = resources.files("kiln") / "kiln_source_dir.txt"  # written by the build that installed this package
    if recorded.is_file():
        cands.append(Path(recorded.read_text().strip()))
    for c in cands:
        if (c / "CMakeLists.txt").is_file() and (c / "codegen").is_dir():
            return c
    raise RuntimeError("kiln tune needs kiln's source tree to bake the candidates: set KILN_SOURCE_DIR to the "
                       "checkout (the directory with CMakeLists.txt)")
