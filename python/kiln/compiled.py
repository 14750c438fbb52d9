"""`kiln compile`: one model baked outside the installed package, into a directory of its own, and `kiln.load(DIR)`.

The directory holds a small CMake project (CMakeLists.txt) that calls kiln's own CMake functions
(cmake/KilnAddModel.cmake: kiln_add_model, then kiln_add_python_module over it), its build directory (build/),
and what `kiln.load` reads: the module `_core` (this model's kernels and kiln's executor), manifest.json, the
weights blob and the .opspec files, plus kiln_compiled.json saying what was compiled. The installed kiln is
not touched. A second compile with the same model and options finds nothing to do (ninja's own check); another
option rewrites that model's options file, so only its codegen and changed kernels rebuild.
"""
from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

MARKER = "kiln_compiled.json"
_MODULES: dict[str, ModuleType] = {}  # a directory's _core, loaded once per process


class CompileError(Exception):
    """A compile that could not run or failed: the message names the model, the option or the step."""


@dataclass(frozen=True)
class CompileResult:
    directory: Path
    api: str
    seconds: float
    rebuilt: bool  # False: everything was up to date


def _api_name(model_name: str) -> str:
    """The C++ namespace of the compiled model: its name made a C identifier."""
    name = re.sub(r"[^A-Za-z0-9_]", "_", model_name)
    return name if re.match(r"[A-Za-z_]", name) else f"m_{name}"


def cmake_dir() -> str:
    """The installed CMake package (`kiln --cmake-dir`)."""
    return str(Path(__file__).resolve().parent / "cmake")


def _project(model: str, shapes: str, api: str, options: list[str]) -> str:
    opts = " ".join(f'"{o}"' for o in options)
    pins = f' SHAPES "{shapes}"' if shapes else ""
    return f"""# Written by `kiln compile`; rewritten by the next compile of this directory.
cmake_minimum_required(VERSION 3.24)
project(kiln_compiled_{api} LANGUAGES CXX)
set(CMAKE_CXX_STANDARD 17)
if(NOT CMAKE_BUILD_TYPE)
  set(CMAKE_BUILD_TYPE Release)
endif()
find_package(kiln CONFIG REQUIRED)
kiln_add_model({api} MODEL "{model}"{pins} OPTIONS {opts})
kiln_add_python_module({api}_module MODEL {api})
"""


def _write_if_changed(path: Path, text: str) -> None:
    if not path.is_file() or path.read_text() != text:
        path.write_text(text)


def _run_step(cmd: list[str], what: str, log) -> None:
    """One cmake step with its output on the terminal (`log`); CompileError with its tail when it fails."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    tail: list[str] = []
    for line in proc.stdout:
        log(line.rstrip("\n"))
        tail = (tail + [line.rstrip("\n")])[-30:]
    if proc.wait() != 0:
        raise CompileError(f"{what} failed:\n" + "\n".join(tail))


def compile_model(spec: str, out_dir: str | os.PathLike, options: list[str], log=print) -> CompileResult:
    """Bakes the model `spec` (an ONNX path, optionally @BATCH or @INPUT=DxD pins; or a zoo name) with `options`
    (NAME=VALUE, kiln's build options) into out_dir."""
    from .codegen import KilnError
    from .codegen.frontend.model_spec import parse_model_spec
    from .codegen.options import ZOO_MODELS, OptionError, model_options
    try:
        parsed = parse_model_spec(spec, ZOO_MODELS)
        model_options(spec, options, "")  # each NAME=VALUE checked before any build, as configure checks it
    except KilnError as e:
        raise CompileError(f"{e.subject}: {e.message}") from None
    except OptionError as e:
        raise CompileError(f"invalid --option:\n{e}") from None
    model = parsed.source if parsed.source in ZOO_MODELS else str(Path(parsed.source).resolve())
    if model not in ZOO_MODELS and not Path(model).is_file():
        raise CompileError(f"{parsed.source}: no such file, and not a zoo model ({', '.join(ZOO_MODELS)})")
    cmake = shutil.which("cmake")
    if cmake is None:
        raise CompileError("cmake is not on PATH (pip install cmake ninja)")
    if any('"' in o or "\n" in o for o in options):
        raise CompileError(f"--option values may not hold quotes or line breaks: {options}")
    out = Path(out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    api = _api_name(parsed.model_name)
    shapes = spec[len(parsed.source):].lstrip("@")
    _write_if_changed(out / "CMakeLists.txt", _project(model, shapes, api, options))
    build = out / "build"
    t0 = time.perf_counter()
    stamp_before = _stamp(out, api)
    if not any((build / f).is_file() for f in ("build.ninja", "Makefile")):  # never configured, or that failed
        generator = ["-G", "Ninja"] if shutil.which("ninja") else []
        _run_step([cmake, "-S", str(out), "-B", str(build), *generator, f"-Dkiln_DIR={cmake_dir()}",
                   f"-DPython_EXECUTABLE={sys.executable}"], f"configuring {spec}", log)
    _run_step([cmake, "--build", str(build)], f"building {spec}", log)
    _collect(out, build, api)
    (out / MARKER).write_text(json.dumps({"model": spec, "api": api, "options": options}, indent=1) + "\n")
    return CompileResult(out, api, time.perf_counter() - t0, _stamp(out, api) != stamp_before)


def _stamp(out: Path, api: str) -> float | None:
    """When the model's module was last linked (None: never)."""
    found = sorted((out / "build").glob("_core*.so"))
    return found[0].stat().st_mtime if found else None


def _collect(out: Path, build: Path, api: str) -> None:
    """The files kiln.load(DIR) reads, copied from the build where they changed."""
    generated = build / f"kiln_{api}"
    module = sorted(build.glob("_core*.so"))
    if not module:
        raise CompileError(f"the build in {build} made no _core module")
    pairs = [(module[0], out / module[0].name), (generated / "manifest.json", out / "manifest.json")]
    pairs += [(p, out / p.relative_to(generated)) for sub in ("models", "opspecs", "logs")
              for p in sorted((generated / sub).glob("*")) if p.is_file()]
    for src, dst in pairs:
        if not dst.is_file() or dst.read_bytes() != src.read_bytes():
            dst.parent.mkdir(parents=True, exist_ok=True)
            tmp = dst.with_name(dst.name + ".tmp")
            shutil.copyfile(src, tmp)
            os.replace(tmp, dst)


def is_compiled_dir(path: str | os.PathLike) -> bool:
    return Path(path).is_dir() and (Path(path) / MARKER).is_file()


def compiled_module(directory: Path) -> ModuleType:
    """The directory's _core, loaded once per process under a name of its own (its init function stays
    PyInit__core, so the last component of the name is _core)."""
    key = str(directory.resolve())
    if key not in _MODULES:
        found = sorted(directory.glob("_core*.so"))
        if not found:
            raise FileNotFoundError(f"{directory}: no compiled module _core*.so; run kiln compile again")
        name = f"kiln_compiled_{hashlib.sha1(key.encode()).hexdigest()[:12]}._core"
        loader = importlib.machinery.ExtensionFileLoader(name, str(found[0]))
        spec = importlib.util.spec_from_file_location(name, found[0], loader=loader)
        assert spec is not None
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
        _MODULES[key] = module
    return _MODULES[key]
