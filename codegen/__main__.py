"""Command line of the build-time compiler (run by CMake, see cmake/KilnCodegen.cmake).

    python -m codegen options-cmake                 CMake declarations of every option
    python -m codegen check-options OPTIONS.json    validate options (configure time)
    python -m codegen outputs OPTIONS.json          files `generate` will write, one per line
    python -m codegen generate OPTIONS.json OUT_DIR [--stamp FILE]
    python -m codegen support-matrix                the operator-support matrix (docs/operator-support.md)
    python -m codegen model-options OUT.json --model SPEC --isa-resolved ISA [--set NAME=VALUE ...]
                                                    one kiln_add_model() model's options file, checked
    outputs/generate --cpp-api NAME                 that model's C++ API too (codegen/emit/cpp_api.py)
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from . import KilnError
from .emit.cpp_api import check_api_name
from .emit.render import CppApi, output_files, progress_printer, render, write_outputs
from .ir.files import OutputPathError, write_atomic
from .options import OptionError, cmake_declarations, load_options, model_options
from .pipeline import check_model_entries, plan
from .select import search_cache

SOURCE_DIR = Path(__file__).resolve().parent.parent
SEARCH_CACHE_DIR = ".search-cache"  # in the work dir (build/generated): codegen/select/search_cache.py


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m codegen", description="kiln build-time kernel generator")
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("options-cmake")
    sub.add_parser("support-matrix")
    sub.add_parser("check-options").add_argument("options")
    mo = sub.add_parser("model-options")  # kiln_add_model's options file (cmake/KilnAddModel.cmake)
    mo.add_argument("out")
    mo.add_argument("--model", required=True)
    mo.add_argument("--isa-resolved", required=True)
    mo.add_argument("--set", action="append", default=[], dest="settings", metavar="NAME=VALUE")
    o = sub.add_parser("outputs")
    o.add_argument("options")
    o.add_argument("--work-dir", help="where models are built (the generate OUT_DIR)")
    g = sub.add_parser("generate")
    g.add_argument("options")
    g.add_argument("out_dir")
    g.add_argument("--stamp", help="file touched after a successful generation")
    for parser in (o, g):  # kiln_add_model (cmake/KilnAddModel.cmake): one model, its C++ API, no kernel list
        parser.add_argument("--cpp-api", metavar="NAME", help="also write NAME.hpp, NAME_model.cpp")
    args = ap.parse_args(argv)

    try:
        if args.cmd == "options-cmake":
            sys.stdout.write(cmake_declarations())
            return 0
        if args.cmd == "support-matrix":
            from .emit.support_matrix import support_matrix  # imports onnx: only for this command
            sys.stdout.write(support_matrix())
            return 0
        if args.cmd == "model-options":
            return write_model_options(args.out, args.model, args.settings, args.isa_resolved)
        options = load_options(args.options)
        check_model_entries(options.kiln_models)  # the model-spec grammar, and that each file exists
        if args.cmd == "check-options":
            return 0
        work = Path(args.out_dir if args.cmd == "generate" else (args.work_dir or "."))
        # `outputs` (configure) and `generate` (build) plan the same kernels: the first run's search results
        # are kept in the work dir, so the second one and later rebuilds search only what changed.
        cache = work / SEARCH_CACHE_DIR if args.cmd == "generate" or args.work_dir else None
        cpp_api = CppApi(args.cpp_api, work) if args.cpp_api else None
        if cpp_api is not None:
            check_api_name(cpp_api.name)
        p = plan(options, SOURCE_DIR, work, progress=progress_printer, jobs=search_cache.default_jobs(),
                 search_cache_dir=cache, kernel_list=cpp_api is None)
        if args.cmd == "outputs":
            sys.stdout.write("\n".join(output_files(p, cpp_api)) + "\n")
            return 0
        t0 = time.perf_counter()
        out = Path(args.out_dir)
        if args.stamp:  # a failed run must not look up to date
            Path(args.stamp).unlink(missing_ok=True)
        progress_printer(f"{len(p.kernels)} kernels for {p.profile.name}")
        files = render(p, progress=progress_printer, cpp_api=cpp_api)
        changed = write_outputs(files, out)
        progress_printer(f"wrote {len(changed)} of {len(files)} files in {time.perf_counter() - t0:.2f}s")
        if args.stamp:
            Path(args.stamp).write_text("ok\n")
        return 0
    except OptionError as e:
        print(f"kiln: invalid build option(s):\n{e}", file=sys.stderr)
        return 2
    except KilnError as e:
        print(f"kiln codegen: error in stage '{e.stage}' for {e.subject}: {e.message}", file=sys.stderr)
        return 1
    except OutputPathError as e:  # the build directory refused a generated file (full disk, read-only)
        print(f"kiln codegen: {e}", file=sys.stderr)
        return 1


def write_model_options(out: str, model: str, settings: list[str], isa_resolved: str) -> int:
    """One kiln_add_model() model's options file, checked; rewritten only when it changes (its timestamp is what
    reruns that model's codegen, and only that model's)."""
    raw = model_options(model, settings, isa_resolved)
    check_model_entries((model,))
    text = json.dumps(raw, indent=1, sort_keys=True) + "\n"
    path = Path(out)
    if not path.is_file() or path.read_text() != text:
        write_atomic(path, text, durable=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
