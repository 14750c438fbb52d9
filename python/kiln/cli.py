"""`kiln` command line: what this build baked and how it was decided."""
from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from importlib import resources

from .argtypes import int_range, output_file, share, threads


def _emit_json(obj) -> None:
    """Machine-readable output of every command: indented JSON and a final newline."""
    json.dump(obj, sys.stdout, indent=1)
    sys.stdout.write("\n")


def _model_kernels(args) -> int:
    """`kiln kernels MODEL`: the model's kernel launches, with simulated cycles from one seeded run."""
    from collections import Counter

    import kiln

    from .validate import index_bounds, seeded_inputs
    model = kiln.load(args.model)
    model.run(*seeded_inputs([shape for _, shape in model.inputs], 0, index_bounds(model)))  # indices in range
    from .codegen.ir.profiles import get_profile
    from .codegen.select.launches import launch_fields
    recs = model.kernel_records
    prof = get_profile(kiln.manifest_of(model).profile)

    def row(k):
        # The launch as this step ran it (its L2 plan): the cost model's figures, which tests hold equal to the
        # emulator's simulated_cycles; bound_unit: the same as bound (a pipe, "L2" or "HBM").
        r, launch = recs[k.kernel], launch_fields(k.launch, prof)
        return {"name": k.kernel, "ops": k.ops, "op_types": k.op_types, "algorithm": r.algorithm,
                "family": r.family, "opspec": r.opspec, "variant": r.variant, "tiling": r.tiling,
                "simulated_cycles": k.simulated_cycles, **launch, "bound_unit": launch["bound"],
                "compared_cycles": r.compared_cycles}
    rows = [row(k) for k in model.kernels]
    cube_busy = sum(k.launch.cube_busy for k in model.kernels if k.launch)
    report = {"model": model.name, "profile": prof.name,
              "kernel_launches": model.kernel_launches, "unique_kernels": len({r["name"] for r in rows}),
              "arena_bytes": model.arena_bytes, "simulated_cycles": model.simulated_cycles,
              "simulated_latency_ms": round(model.simulated_cycles / (prof.clock_ghz * 1e6), 6),
              "mean_cube_utilization": round(cube_busy / (model.simulated_cycles * prof.cube_cores), 4),
              "bounds": dict(sorted(Counter(str(r["bound"]) for r in rows).items())),  # launches per bound unit
              "kernels": rows, **_aicpu_report(model)}
    if args.json:
        _emit_json(report)
        return 0
    print(f"{model.name}: {report['kernel_launches']} kernel launches, {report['unique_kernels']} unique kernels, "
          f"arena {model.arena_bytes} B, {model.simulated_cycles:.0f} simulated cycles "
          f"({report['simulated_latency_ms']:.3f} ms at {prof.clock_ghz} GHz) on {report['profile']}, "
          f"Cube utilisation {100 * report['mean_cube_utilization']:.1f}%")
    for r in rows:
        print(f"  {r['simulated_cycles']:>9.0f}  {r['name']:<62} {', '.join(r['ops'])}")
    if report["aicpu_steps"]:
        print(f"{len(report['aicpu_steps'])} AI CPU step(s), {report['aicpu_cycles']:.0f} predicted cycles (AI CPU "
              f"cost model, host sync included; not in the simulated cycles above)")
    for a in report["aicpu_steps"]:
        print(f"  {a['predicted_cycles']:>9.0f}  AI CPU {a['step']:<55} {', '.join(a['op_types'])} "
              f"(reason={a['reason']})")
    return 0


def _aicpu_report(model) -> dict:
    """The model's AI CPU steps (issue 19's fallback: nodes without an AI Core kernel, run on the host between
    launches) with their predicted cost (codegen/cost/aicpu.py), and the sum."""
    steps = [{"step": s.name, "op_types": list(s.op_types), "reason": s.host.reason, "elements": s.host.elements,
              "predicted_cycles": s.host.predicted_cycles} for s in model.plan_entry.steps if s.host is not None]
    return {"aicpu_steps": steps, "aicpu_cycles": round(sum(a["predicted_cycles"] for a in steps), 3)}


def _kernels(args) -> int:
    import kiln
    if args.model:
        try:
            return _model_kernels(args)
        except KeyError as e:
            print(f"kiln: {e.args[0]}", file=sys.stderr)
            return 2
    man = kiln.manifest_record()
    recs = man.kernels
    if args.json:
        _emit_json({"profile": man.profile, "kernels": [r.to_json() for r in recs]})
        return 0
    info = kiln.build_info()
    print(f"{len(recs)} kernels for {info['profile']} (host ISA {info['isa']}, {info['threads']} threads)")
    w = max(len(r.name) for r in recs)
    for r in recs:
        f = r.features
        print(f"{r.name:<{w}}  {r.variant:<40} blocks={r.blocks:<4} "
              f"GFLOP={f['flops'] / 1e9:.3f} AI={f['arithmetic_intensity']:.1f}  [{', '.join(r.instances)}]")
    return 0


def _log(args) -> int:
    """`kiln log [MODEL] [--grep RE]`: the build's [OPT] lines, those of one model, filtered."""
    import re
    path = resources.files("kiln") / "optimization_path.log"
    if not path.is_file():
        print("kiln: this build has no optimisation-path log; rebuild with DEBUG_OPTIMIZATION_PATH=ON, e.g.\n"
              "  pip install . -Ccmake.define.DEBUG_OPTIMIZATION_PATH=ON", file=sys.stderr)
        return 1
    lines = path.read_text().splitlines()
    if args.model:
        import kiln
        try:  # by name, by the ONNX path it was baked from or by its model spec, as the other verbs take it
            name = kiln.model_record(args.model).name
        except KeyError as e:
            print(f"kiln log: {e.args[0]}", file=sys.stderr)
            return 1
        # the model's own log: build-wide lines, its nodes' lines and its kernels' tiling/algorithm lines
        own = resources.files("kiln") / "logs" / f"{name}.log"
        if not own.is_file():
            print(f"kiln: no log for model {args.model!r}; baked models: {', '.join(kiln.models()) or 'none'}",
                  file=sys.stderr)
            return 1
        lines = own.read_text().splitlines()
    if args.grep:
        try:
            pattern = re.compile(args.grep, re.IGNORECASE)
        except re.error as e:
            print(f"kiln log: --grep {args.grep!r} is not a valid regular expression: {e}", file=sys.stderr)
            return 2
        lines = [ln for ln in lines if pattern.search(ln)]
    sys.stdout.write("\n".join(lines) + ("\n" if lines else ""))
    return 0


def _zoo_names() -> list[str]:
    from .codegen.options import ZOO_MODELS  # the zoo's names without importing onnx
    return list(ZOO_MODELS)


def _analyze(args) -> int:
    from .codegen import KilnError
    from .codegen.frontend.model_spec import parse_model_spec
    path, batch = args.file, args.batch
    try:
        spec = None if os.path.exists(path) else parse_model_spec(path, tuple(_zoo_names()))
    except KilnError as e:  # a malformed model spec: the grammar's message names it and what is accepted
        print(f"kiln analyze: {e.subject}: {e.message}", file=sys.stderr)
        return 2
    if spec is None or spec.is_onnx_file:
        if spec is not None and not os.path.exists(spec.source):
            print(f"kiln analyze: {spec.source}: no such file, and not a zoo model ({', '.join(_zoo_names())})",
                  file=sys.stderr)
            return 2
        return _analyze_file(args, path, path, batch)
    if spec.batch != 1 and batch not in (1, spec.batch):
        print(f"kiln analyze: {path}: its batch and --batch {batch} differ; give one", file=sys.stderr)
        return 2
    import tempfile

    from .codegen.frontend import zoo
    from .codegen.ir.files import OutputPathError

    # a zoo model by name: its ONNX file in a directory removed afterwards (resnet50's is about 100 MB)
    try:
        with tempfile.TemporaryDirectory(prefix="kiln-analyze-") as tmp:
            onnx_file = str(zoo.write(spec.source, os.path.join(tmp, f"{spec.source}.onnx")))
            return _analyze_file(args, onnx_file, path, max(batch, spec.batch))
    except (OSError, OutputPathError) as e:  # the temporary directory (TMPDIR) missing, full or unwritable
        print(f"kiln analyze: {path}: cannot write its ONNX file to the temporary directory "
              f"{tempfile.gettempdir()} ({getattr(e, 'strerror', None) or e}); set TMPDIR to a writable directory "
              f"with room", file=sys.stderr)
        return 2


def _analyze_file(args, path: str, shown: str, batch: int) -> int:
    """`kiln analyze` of `path` (an ONNX file or a model spec of one), reported under the name the user gave."""
    from .codegen import KilnError
    from .codegen.analyze import AnalysisSettings, analyze, format_text
    from .codegen.options import OptionError
    settings = AnalysisSettings(fusion=args.fusion == "on", max_depth=args.max_fusion_depth, target=args.target,
                                flash_attention=args.flash_attention == "on", max_seq_len=args.max_seq_len)
    try:
        report = analyze(path, batch=batch, settings=settings, prediction=args.predict)
    except KilnError as e:
        print(f"kiln analyze: {shown if e.subject == path else e.subject}: {e.message}", file=sys.stderr)
        return 2
    except OptionError as e:  # an option combination the build would refuse, as the build options
        print(f"kiln analyze: {e}", file=sys.stderr)
        return 2
    report["model"] = shown
    if args.json:
        _emit_json(report)
    else:
        print(format_text(report))
    return 0 if not report["unsupported"] else 1


def _input_size(text: str) -> tuple[int, int]:
    """--input-size S or HxW."""
    parts = text.lower().split("x")
    if len(parts) not in (1, 2) or not all(p.isascii() and p.isdigit() and int(p) > 0 for p in parts):
        raise ValueError(f"--input-size {text!r}: expected S or HxW with positive integers, e.g. 240 or 240x320")
    return (int(parts[0]), int(parts[-1]))


def _validate(args) -> int:
    import kiln

    from . import validate as v
    try:
        model = kiln.load(args.model)
    except KeyError as e:
        print(f"kiln: {e.args[0]}", file=sys.stderr)
        return 2
    try:
        size = _input_size(args.input_size) if args.input_size else None
        given = v.read_inputs(model, args.inputs, size) if args.inputs else None
        report = v.validate(model, seeds=tuple(range(args.seeds)), input_size=size, inputs=given)
    except ValueError as e:
        print(f"kiln: {e}", file=sys.stderr)
        return 2
    if given is not None:
        report["inputs"] = args.inputs
    if args.per_kernel:
        report["kernels"] = v.per_kernel(model, input_size=size, inputs=given)
        bad = [k for k in report["kernels"] if not k["passed"]]
        report["first_failed_kernel"] = bad[0]["step"] if bad else None
        report["passed"] = report["passed"] and not bad
    if args.json:
        _emit_json(report)
    else:
        print(v.format_text(report))
    return 0 if report["passed"] else 1


def _read_input(path: str):
    """The --input array: an .npy file of real numbers (kiln/npyfile.py names the file for anything else; the
    shape is the model's to check)."""
    import numpy as np

    from .npyfile import read_npy
    x = read_npy(path, f"--input {path}")
    if x.dtype.kind not in "biuf":
        raise ValueError(f"--input {path}: holds {x.dtype} values; expected real numbers (float32)")
    return x.astype(np.float32)


def _run(args) -> int:
    import io

    import numpy as np

    import kiln

    from .codegen.ir.files import write_atomic
    try:
        model = kiln.load(args.model)
        from .validate import index_bounds, seeded_inputs  # seed 0: every input, indices in range
        xs = [_read_input(args.input)] if args.input else \
            seeded_inputs([shape for _, shape in model.inputs], 0, index_bounds(model))
        try:
            y = model.run(*xs)
        except (ValueError, TypeError) as e:  # a shape the model does not take: say which file it came from
            raise type(e)(f"--input {args.input}: {e}" if args.input else str(e)) from None
    except KeyError as e:
        print(f"kiln: {e.args[0]}", file=sys.stderr)
        return 2
    except (OSError, ValueError, TypeError) as e:  # kiln.NumericsError (KILN_STRICT=1) is a ValueError
        print(f"kiln run: {e}", file=sys.stderr)
        return 2
    y = y if isinstance(y, np.ndarray) else y[0]
    if args.output:  # exactly the name given (np.save would append .npy), whole or not at all
        buf = io.BytesIO()
        np.save(buf, y)
        write_atomic(args.output, buf.getvalue())
    print(f"{model.name}: output {model.outputs[0][0]} shape {y.shape}, simulated {model.simulated_cycles:.0f} cycles "
          f"over {model.kernel_launches} kernel launches ({kiln.build_info(model)['profile']})"
          + (f"; wrote {args.output}" if args.output else ""))
    return 0


def _plan(args) -> int:
    """`kiln plan MODEL`: the arena plan, with a text timeline of offsets over the kernel order."""
    import kiln
    try:
        rec = kiln.load(args.model).entry
    except KeyError as e:
        print(f"kiln: {e.args[0]}", file=sys.stderr)
        return 2
    mem = rec.memory
    report = {"model": rec.name, "arena_bytes": rec.arena_bytes, "lower_bound_bytes": mem.lower_bound_bytes,
              "naive_bytes": mem.naive_bytes, "fragmentation": mem.fragmentation, "strategy": mem.strategy,
              "strategies": mem.strategies, "alignment": mem.alignment,
              "in_place": [p.to_json() for p in mem.in_place], "tensors": [t.to_json() for t in mem.tensors]}
    if args.json:
        _emit_json(report)
        return 0
    steps = len(rec.steps)
    print(f"{rec.name}: arena {rec.arena_bytes} B, lower bound {mem.lower_bound_bytes} B "
          f"(fragmentation {100 * mem.fragmentation:.2f}%), no reuse {mem.naive_bytes} B "
          f"({mem.naive_bytes / max(1, rec.arena_bytes):.1f}x); strategy {mem.strategy} of "
          f"{', '.join(f'{k} {v} B' for k, v in mem.strategies.items())}; {len(mem.in_place)} outputs in place; "
          f"alignment {mem.alignment} B")
    width = min(steps, 72)
    print(f"{'offset':>10} {'bytes':>9}  {'lifetime over ' + str(steps) + ' steps':<{width}}  tensor")
    for t in mem.tensors:
        a, b = t.first_step * width // steps, t.last_step * width // steps
        bar = "." * a + "#" * (b - a + 1) + "." * (width - b - 1)
        print(f"{t.offset:>10} {t.nbytes:>9}  {bar}  {t.name}")
    return 0


def _option_range(name: str):
    """The validator of a command-line twin of a build option: the option table's range (codegen/options.py)."""
    from .codegen.options import OPTIONS
    spec = next(o for o in OPTIONS if o.name == name)
    return int_range(spec.lo, spec.hi, f"as {name}")


def _bench(args) -> int:
    """`kiln bench MODEL`: kiln and the installed peers on the same ONNX file, each in its own process."""
    from . import bench
    try:
        report = bench.run(args.model, batch=args.batch, threads=args.threads, peers=bench.parse_peers(args.peers),
                           timing=bench.Timing(args.repeat, args.warmup, args.rounds))
    except bench.BenchError as e:
        print(f"kiln bench: {e}", file=sys.stderr)
        return 2
    if args.profile:  # per-step host times of kiln's own run, for `kiln visualize --profile`
        report["profile_file"] = bench.write_profile(report["load"], args.profile, threads=report["threads"],
                                                     warmup=args.warmup, repeat=args.repeat)
    if args.json:
        _emit_json(report)
    else:
        print(bench.format_text(report))
        if args.profile:
            print(f"per-kernel profile written to {args.profile} (kiln visualize {report['load']} --profile "
                  f"{args.profile})")
    return 0


def _opspec(args) -> int:
    """`kiln opspec MODEL [--json]`: the .opspec feature files of a model's kernels, each checked on reading."""
    import kiln

    from .codegen import KilnError
    from .codegen.emit.opspec_file import parse_opspec
    from .codegen.ir.files import InputPathError, check_input_file
    from .codegen.ir.profiles import get_profile
    from .integrity import InstallError, check_file
    man = kiln.manifest_record()
    try:  # by name, by the ONNX path it was baked from or by its model spec, as the other verbs take it
        rec = kiln.model_record(args.model)
    except KeyError as e:
        print(f"kiln opspec: {e.args[0]}", file=sys.stderr)
        return 1
    by_name = man.kernels_by_name()
    used = list(dict.fromkeys(s.kernel for s in rec.steps if s.kernel))
    profile = get_profile(man.profile)
    rows = []
    for name in used:
        h = by_name[name].opspec
        path = resources.files("kiln") / "opspecs" / f"{h}.opspec"
        try:
            check_input_file(str(path), "installed file")  # a FIFO would block the read
            data = path.read_bytes()
            check_file(f"opspecs/{h}.opspec", data, man.checksums, shown_as=path)
            parsed = parse_opspec(data.decode(), profile, source=str(path))
        except (OSError, UnicodeDecodeError, KilnError, InstallError, InputPathError) as e:
            print(f"kiln opspec: {e}", file=sys.stderr)
            return 1
        rows.append({"hash": h, "kernel": name, "features": parsed["features"]})
    if args.json:
        _emit_json(rows)
        return 0
    for r in rows:
        f = r["features"]
        print(f"{r['hash']}  {r['kernel']:<64} {f['fused_chain']:<16} {int(f['flops']):>12} FLOP  "
              f"AI {float(f['arithmetic_intensity']):8.2f} FLOP/B")
    return 0


def _tune(args) -> int:
    """`kiln tune MODEL`: measure the best tilings on the emulator, write tuning records."""
    from .codegen import KilnError
    from .tune import tune
    try:
        res = tune(args.model, args.output, k=args.k, build_dir=args.build_dir,
                   progress=lambda m: print(f"[kiln tune] {m}", file=sys.stderr, flush=True))
    except (ValueError, RuntimeError, KilnError, OSError) as e:
        print(f"kiln tune: {e}", file=sys.stderr)
        return 1
    print(f"{res['records']} tuning records in {res['file']}; build with -DKILN_TUNING_RECORDS={res['file']}")
    return 0


def _trace(args) -> int:
    """`kiln trace MODEL --kernel NAME`: one kernel's instruction stream from the cost model's replay."""
    from . import trace
    from .codegen.ir.files import write_atomic
    try:
        _, steps, rec = trace.find_kernel(args.model, args.kernel)
        tr = trace.replay(rec)
    except trace.TraceError as e:
        print(f"kiln trace: {e}", file=sys.stderr)
        return 2
    cores = sorted({e.core for e in tr.events})
    if args.core not in cores:
        print(f"kiln trace: --core {args.core}: {tr.kernel} runs on virtual cores {cores[0]}..{cores[-1]}",
              file=sys.stderr)
        return 2
    if args.chrome:
        write_atomic(args.chrome, json.dumps(trace.chrome_trace(tr, args.model)))
    print(trace.format_text(tr, steps, limit=args.limit, core=args.core))
    if args.chrome:
        print(f"\nwrote {len(tr.events)} instructions to {args.chrome} (Chrome/Perfetto trace: pid = core, tid = pipe, "
              f"microseconds at {tr.profile.clock_ghz} GHz); open it in ui.perfetto.dev or chrome://tracing")
    return 0


def _visualize(args) -> int:
    """`kiln visualize MODEL`: a self-contained HTML report (graph, bottlenecks, memory plan, fusion)."""
    import os

    from . import visualize
    from .codegen.ir.files import OutputPathError, check_output_path
    # a `kiln compile` directory's report is named after the directory
    default = os.path.basename(os.path.abspath(args.model)) if os.path.isdir(args.model) else args.model
    out = args.output or f"{default.replace('/', '_')}_report.html"
    try:
        check_output_path(out, "kiln visualize -o")  # the default name, too, before the work
    except OutputPathError as e:
        print(e, file=sys.stderr)
        return 2
    try:
        data = visualize.write(args.model, out, args.threshold, profile_path=args.profile)
    except KeyError as e:
        print(f"kiln: {e.args[0]}", file=sys.stderr)
        return 2
    except visualize.ProfileError as e:  # names the file and what differs
        print(f"kiln visualize: --profile {e}", file=sys.stderr)
        return 2
    t = data["totals"]
    print(f"wrote {out} ({os.path.getsize(out)} bytes): {data['model']}, {t['kernel_launches']} kernel launches, "
          f"{t['simulated_us']:.1f} us simulated on {data['profile']['name']}")
    ms = data.get("measured")
    if ms:
        print(f"measured (host emulation, {ms['file']}, {ms['date']}, {ms['threads']} threads, {ms['isa']}): "
              f"{ms['total_cpu_ms']:.2f} ms CPU")
    for i, b in enumerate(data["bottlenecks"], 1):
        cpu = f"  cpu {100 * b['cpu_share']:5.1f}%" if ms and b.get("cpu_share") is not None else ""
        print(f"  {i}. {100 * b['share']:5.1f}%  {b['type']:<13} {b['kernel']}{cpu}\n"
              f"       {b['source']}: {b['suggestion']}")
    if args.serve is not None:
        visualize.serve(out, args.serve)
    return 0


def _optimize(args) -> int:
    """`kiln optimize MODEL [--feedback]`: suggestions for the bottleneck kernels, applied if they help."""
    from .codegen import KilnError
    from .optimize import optimize
    try:
        rep = optimize(args.model, args.output, threshold=args.threshold, build_dir=args.build_dir,
                       feedback=args.feedback, progress=lambda m: print(f"[kiln optimize] {m}", file=sys.stderr,
                                                                      flush=True))
    except (ValueError, RuntimeError, KilnError, OSError) as e:
        print(f"kiln optimize: {e}", file=sys.stderr)
        return 1
    if args.json:
        _emit_json(rep)
        return 0
    for i in rep["kernels"]:
        print(f"{100 * i['share']:5.1f}%  {i['kernel']}: {i['outcome']}")
    print(f"{rep['model']}: {rep['total_cycles']:.0f} -> {rep['total_cycles_after']:.0f} simulated cycles"
          + (f"; rebuild with -DKILN_TUNING_RECORDS={rep['records']}" if rep.get("records") else ""))
    return 0


def _info(args) -> int:
    import kiln
    _emit_json(kiln.build_info())
    return 0


def _parser_kernels(sub) -> None:
    k = sub.add_parser("kernels", help="list the baked kernels with spec and variant (of one model, if given)")
    k.add_argument("model", nargs="?", help="a baked model's name or ONNX path")
    k.add_argument("--json", action="store_true", help="machine-readable output")
    k.set_defaults(fn=_kernels)


def _parser_log(sub) -> None:
    lg = sub.add_parser("log", help="print the optimisation-path log of this build (of one model, filtered)")
    lg.add_argument("model", nargs="?")
    lg.add_argument("--grep", help="only lines matching this regular expression (case-insensitive)")
    lg.set_defaults(fn=_log)


def _parser_info(sub) -> None:
    sub.add_parser("info", help="build options, profile, host ISA").set_defaults(fn=_info)


def _parser_optimize(sub) -> None:
    oz = sub.add_parser("optimize", help="suggest faster variants for the bottleneck kernels; --feedback "
                        "rebuilds, measures and keeps those that help as tuning records")
    oz.add_argument("model")
    oz.add_argument("--feedback", action="store_true", help="rebuild and measure the suggestions on the emulator")
    oz.add_argument("--threshold", type=share, default=0.15,
                    help="share of simulated time (0..1) that makes a bottleneck (default 0.15)")
    oz.add_argument("-o", "--output", type=output_file, default="kiln_tuning.json",
                    help="tuning records to write (default kiln_tuning.json)")
    oz.add_argument("--build-dir")
    oz.add_argument("--json", action="store_true")
    oz.set_defaults(fn=_optimize)


def _parser_tune(sub) -> None:
    tn = sub.add_parser("tune", help="measure the cost model's best tilings on the emulator; write tuning records")
    tn.add_argument("model")
    tn.add_argument("-k", type=int_range(1), default=3, help="candidates per kernel, >= 1 (default 3)")
    tn.add_argument("-o", "--output", type=output_file, default="kiln_tuning.json",
                    help="tuning records to write (default kiln_tuning.json)")
    tn.add_argument("--build-dir", help="scratch build directory (default: a new temporary one)")
    tn.set_defaults(fn=_tune)


def _parser_opspec(sub) -> None:
    op = sub.add_parser("opspec", help="the .opspec features of a baked model's kernels (docs/opspec.md)")
    op.add_argument("model")
    op.add_argument("--json", action="store_true")
    op.set_defaults(fn=_opspec)


def _parser_analyze(sub) -> None:
    a = sub.add_parser("analyze", help="what an ONNX file holds and what kiln would bake from it: ops before "
                                       "fusion, kernels after, and the fusion audit")
    a.add_argument("file", help="a model spec: an ONNX file or a zoo model name (resnet50, mobilenet_v2, bert_layer), "
                                "optionally @BATCH or @INPUT=DxD... pins joined with + (file.onnx@x=1x3x736x736)")
    a.add_argument("--batch", type=int_range(1, 4096), default=1, help="value for a symbolic batch dimension, "
                   "1..4096 (as KILN_MODELS' @BATCH)")
    a.add_argument("--fusion", choices=("on", "off"), default="on", help="as ENABLE_FUSION (default on)")
    a.add_argument("--max-fusion-depth", type=_option_range("MAX_FUSION_DEPTH"), default=None,
                   help="as MAX_FUSION_DEPTH, 1..8 (default: the O2 level's)")
    a.add_argument("--flash-attention", choices=("on", "off"), default="on",
                   help="as USE_FLASH_ATTENTION (default on)")
    a.add_argument("--max-seq-len", type=_option_range("MAX_SEQ_LEN"), default=512,
                   help="as MAX_SEQ_LEN, 1..65536 (default 512)")
    a.add_argument("--target", default="ascend910b", choices=("ascend910b", "ascend310p"),
                   help="profile whose buffers and cores the fusion checks")
    a.add_argument("--predict", action="store_true",
                   help="also plan the model as a build would (the tiling search: seconds to minutes) and report "
                        "its predicted launches on --target: cycles, bound, L2/HBM bytes, utilisation")
    a.add_argument("--json", action="store_true")
    a.set_defaults(fn=_analyze)


def _parser_validate(sub) -> None:
    v = sub.add_parser("validate", help="compare a baked model with ONNX Runtime on the same ONNX file")
    v.add_argument("model", help="baked model name or the ONNX path it was baked from")
    v.add_argument("--json", action="store_true")
    v.add_argument("--seeds", type=int_range(1, 100), default=3, metavar="N",
                   help="number of random inputs (seeds 0..N-1), 1..100")
    v.add_argument("--per-kernel", action="store_true",
                   help="also check every kernel alone: run on ONNX Runtime's values of its inputs, its output "
                        "within c*u*sqrt(K)*max|ref| of ONNX Runtime's (the chained cosine beside it)")
    v.add_argument("--inputs", metavar="DIR",
                   help="run on your own inputs instead of the seeds: DIR/<input name>.npy per model input "
                        "(float32, the input's shape)")
    v.add_argument("--input-size", metavar="S|HxW",
                   help="run the image input at this spatial size (a model baked with KILN_SHAPE_BUCKETS: a bucket "
                        "size runs its specialised kernels, any other the generic ones)")
    v.set_defaults(fn=_validate)


def _compile(args) -> int:
    from .compiled import CompileError, compile_model
    try:
        r = compile_model(args.model, args.output, args.option, log=lambda line: print(line, file=sys.stderr))
    except CompileError as e:
        print(f"kiln compile: {e}", file=sys.stderr)
        return 2
    state = "compiled" if r.rebuilt else "up to date, nothing rebuilt"
    print(f"kiln compile: {args.model} -> {r.directory} ({state}, {r.seconds:.1f} s); "
          f"kiln.load({str(r.directory)!r}) runs it")
    return 0


def _parser_compile(sub) -> None:
    c = sub.add_parser("compile", help="bake one model into a directory of its own (outside the installed kiln)")
    c.add_argument("model", help="an ONNX file, optionally @BATCH or @INPUT=DxD... pins, or a zoo name")
    c.add_argument("-o", "--output", required=True, metavar="DIR", help="the directory to bake into")
    c.add_argument("--option", action="append", default=[], metavar="NAME=VALUE",
                   help="a build option for this model (README, Build options); repeatable")
    c.set_defaults(fn=_compile)


def _parser_plan(sub) -> None:
    pl = sub.add_parser("plan", help="a baked model's memory plan: arena, lower bound, offsets over time")
    pl.add_argument("model")
    pl.add_argument("--json", action="store_true")
    pl.set_defaults(fn=_plan)


def _parser_run(sub) -> None:
    r = sub.add_parser("run", help="run a baked model once")
    r.add_argument("model")
    r.add_argument("--input", help=".npy input (default: seeded random)")
    r.add_argument("--output", type=output_file, help="write the output to this file (.npy format, the name as "
                   "given)")
    r.set_defaults(fn=_run)


def _parser_bench(sub) -> None:
    b = sub.add_parser("bench", help="time a baked model against ONNX Runtime / OpenVINO on the same ONNX file")
    b.add_argument("model", help="baked model name or the ONNX path it was baked from")
    b.add_argument("--batch", type=int_range(1, 4096),
                   help="batch size (default: the baked one; NAME_bN must be baked for another)")
    b.add_argument("--threads", type=threads, help="threads for every engine, 1..4 per CPU core (default: all cores)")
    b.add_argument("--peers", help="comma-separated: ort, openvino, torch (default: ort,openvino)")
    b.add_argument("--repeat", type=int_range(1), default=10, help="timed runs per engine per round (default 10)")
    b.add_argument("--warmup", type=int_range(0), default=2, help="untimed runs before them (default 2)")
    b.add_argument("--rounds", type=int_range(1), default=3,
                   help="rounds over the engines, timings merged (default 3)")
    b.add_argument("--json", action="store_true")
    b.add_argument("--profile", metavar="FILE", type=output_file,
                   help="also write kiln's per-kernel host times and simulated cycles "
                   "(JSON, kiln-profile/1) for `kiln visualize --profile`")
    b.set_defaults(fn=_bench)


def _parser_trace(sub) -> None:
    tr = sub.add_parser("trace", help="one kernel's instruction stream (pipe, instruction, bytes, start/end cycle)")
    tr.add_argument("model", help="baked model name or the ONNX path it was baked from")
    tr.add_argument("--kernel", required=True, help="kernel name, opspec name, or a launch (node) name of the model")
    tr.add_argument("--chrome", metavar="OUT.json", type=output_file,
                    help="also write a Chrome/Perfetto trace-event JSON")
    tr.add_argument("--limit", type=int_range(0), default=40, help="instructions of the core to print (default 40)")
    tr.add_argument("--core", type=int_range(0), default=0, help="core whose instructions are printed (default 0)")
    tr.set_defaults(fn=_trace)


def _parser_visualize(sub) -> None:
    vz = sub.add_parser("visualize", help="self-contained HTML report: fused graph, bottlenecks, memory plan")
    vz.add_argument("model", help="baked model name or the ONNX path it was baked from")
    vz.add_argument("-o", "--output", type=output_file, help="HTML file to write (default MODEL_report.html)")
    vz.add_argument("--threshold", type=share, default=0.15,
                    help="share of simulated time (0..1) that makes a kernel a bottleneck (default 0.15)")
    vz.add_argument("--serve", type=int_range(0, 65535, "a TCP port; 0 picks a free one"), metavar="PORT",
                    help="then serve it on http://127.0.0.1:PORT (0: any port)")
    vz.add_argument("--profile", metavar="FILE", help="fold in measured per-kernel CPU times (the kiln-profile/1 "
                    "JSON of `kiln bench MODEL --profile FILE`), shown beside the predictions")
    vz.set_defaults(fn=_visualize)


# One function per verb, in the order `kiln --help` lists them.
PARSERS = (_parser_kernels, _parser_log, _parser_info, _parser_optimize, _parser_tune, _parser_opspec, _parser_analyze,
           _parser_validate, _parser_plan, _parser_run, _parser_bench, _parser_trace, _parser_visualize,
           _parser_compile)


def _say_warnings(cmd: str, shown):
    """A warnings.showwarning that says kiln's own warnings (kiln.NumericsWarning) on one line, as `kiln CMD:
    warning: ...`, not as Python's `file:line: category` with a line of kiln's source; any other warning goes to
    `shown` (the one it replaces)."""
    from .numerics import NumericsWarning

    def show(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, NumericsWarning):
            print(f"kiln {cmd}: warning: {message} (NumericsWarning)", file=sys.stderr)
        else:
            shown(message, category, filename, lineno, file, line)
    return show


class _CMakeDir(argparse.Action):
    """`kiln --cmake-dir`: where kilnConfig.cmake is (find_package(kiln) with -Dkiln_DIR=$(kiln --cmake-dir)),
    as `python -m pybind11 --cmakedir` does."""

    def __init__(self, option_strings, dest, **kw):
        super().__init__(option_strings, dest, nargs=0, help="print the directory of kiln's CMake package and exit")

    def __call__(self, parser, namespace, values, option_string=None):
        from .compiled import cmake_dir
        print(cmake_dir())
        parser.exit()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="kiln", description="kiln: AOT kernels for an emulated Ascend AI Core")
    ap.add_argument("--cmake-dir", action=_CMakeDir)
    sub = ap.add_subparsers(dest="cmd", required=True)
    for add_parser in PARSERS:
        add_parser(sub)
    args = ap.parse_args(argv)
    from .codegen.ir.files import OutputPathError
    from .integrity import InstallError
    shown = warnings.showwarning
    warnings.showwarning = _say_warnings(args.cmd, shown)
    try:
        return args.fn(args)
    except (InstallError, OutputPathError) as e:
        # an installed file damaged or swapped (kiln/integrity.py), an output the disk refused after the work
        # (full, a file-size limit; codegen/ir/files.write_atomic): named, never a traceback
        print(f"kiln {args.cmd}: {e}", file=sys.stderr)
        return 2
    except Warning as e:  # PYTHONWARNINGS=error (or -W error) turned a kiln warning into an exception
        print(f"kiln {args.cmd}: {type(e).__name__} (an error under PYTHONWARNINGS=error): {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `kiln ... | head`: the reader left; not an error of ours
        import os
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    finally:
        warnings.showwarning = shown


if __name__ == "__main__":
    sys.exit(main())
