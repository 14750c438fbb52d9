"""`kiln visualize MODEL`: one self-contained HTML report of a baked model.

Everything the page shows is computed here and embedded as JSON; the page's CSS and JavaScript are inline
and it loads nothing (a Content-Security-Policy forbids any fetch), so the file can be mailed or archived.

- the fused graph: one node per kernel launch in launch order, with its source ops; edges are the arena
  tensors between launches (from the manifest's steps: a launch reads what the last earlier launch wrote
  at that arena range), labelled with their shapes; nodes coloured by their share of simulated time;
- per kernel (click a node): opspec, family, variant, tiling, algorithm and the cycles of every algorithm
  compared, predicted per-pipe cycles and the emulator's utilisation, bound unit and type, the roofline
  position against the profile's ridge, the kernel's [OPT] log lines and its instruction-trace summary
  (the cost model's replay, see kiln/trace.py);
- a bottleneck table: kernels above the threshold share of simulated time (and the top three), with type and
  a suggestion replayed on the cost model (kiln/advice.py);
- the memory plan as an offset/time chart with the lower bound; fusion before/after; totals;
- with a measured profile (`kiln bench MODEL --profile FILE`, format kiln-profile/1; `load_profile` checks it
  against the baked model): each launch's median host CPU time of the emulation beside its simulated and
  predicted cycles, a measured CPU-share column in the bottleneck table and the measured total in the header.
"""
from __future__ import annotations

import contextlib
import json
import math
import re
from collections.abc import Sequence
from importlib import resources

from . import advice, trace
from .codegen.ir.manifest import KernelRecord, StepRecord

HEAT_TOP = 3  # the bottleneck table always lists at least this many kernels
PROFILE_FORMAT = "kiln-profile/1"  # what `kiln bench MODEL --profile FILE` writes


class ProfileError(ValueError):
    """A --profile file that cannot be read or was not measured on this build's baked model; the message names
    the file and what differs."""


def _number(v, nullable: bool = False) -> bool:
    if v is None:
        return nullable
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0


def load_profile(path, model_name: str, steps: Sequence[StepRecord], hw_profile: str) -> dict:
    """Reads a kiln-profile/1 file and checks it belongs to the baked model: format, model name, hardware
    profile, and the same steps (names and kernels) in the same order. Raises ProfileError otherwise."""
    import os

    def bad_constant(c):
        raise ValueError(f"non-finite number {c}")
    from .codegen.ir.files import InputPathError, check_input_file
    try:
        check_input_file(path)  # a FIFO would block the read
        with open(path, encoding="utf-8") as f:
            doc = json.load(f, parse_constant=bad_constant)
    except InputPathError as e:
        raise ProfileError(f"{path}: cannot read the profile ({e.reason})") from None
    except OSError as e:
        raise ProfileError(f"{path}: cannot read the profile ({e.strerror or e})") from None
    except (ValueError, UnicodeDecodeError, RecursionError) as e:  # JSONDecodeError is a ValueError
        raise ProfileError(f"{path}: not a kiln profile, the JSON does not parse ({e})") from None
    if not isinstance(doc, dict):
        raise ProfileError(f"{path}: not a kiln profile (expected a JSON object, found {type(doc).__name__})")
    fmt = doc.get("format")
    if fmt != PROFILE_FORMAT:
        raise ProfileError(f"{path}: format is {fmt!r}, expected {PROFILE_FORMAT!r} "
                           "(the file `kiln bench MODEL --profile FILE` writes)")
    if doc.get("model") != model_name:
        raise ProfileError(f"{path}: measured on model {doc.get('model')!r}, not on {model_name!r}")
    if doc.get("profile") != hw_profile:
        raise ProfileError(f"{path}: measured on a build for profile {doc.get('profile')!r}, this build is for "
                           f"{hw_profile!r}")
    for key, ok in (("total_cpu_ms", _number(doc.get("total_cpu_ms"))),
                    ("simulated_cycles", _number(doc.get("simulated_cycles"), nullable=True)),
                    ("threads", isinstance(doc.get("threads"), int) and not isinstance(doc.get("threads"), bool)),
                    ("repeat", isinstance(doc.get("repeat"), int) and not isinstance(doc.get("repeat"), bool)),
                    ("isa", isinstance(doc.get("isa"), str)), ("date", isinstance(doc.get("date"), str)),
                    ("steps", isinstance(doc.get("steps"), list))):
        if not ok:
            what = "missing" if key not in doc else f"invalid ({doc[key]!r})"
            raise ProfileError(f"{path}: field {key!r} is {what}")
    got = doc["steps"]
    if len(got) != len(steps):
        raise ProfileError(f"{path}: {len(got)} steps, but {model_name} as baked here has {len(steps)} "
                           "(measured on another build of the model?)")
    out_steps = []
    for i, (g, s) in enumerate(zip(got, steps)):
        if not isinstance(g, dict):
            raise ProfileError(f"{path}: step {i} is not a JSON object")
        if g.get("name") != s.name:
            raise ProfileError(f"{path}: step {i} is {g.get('name')!r}, but step {i} of the baked {model_name} is "
                               f"{s.name!r}")
        if g.get("kernel") != s.kernel:
            raise ProfileError(f"{path}: step {i} ({s.name}) ran kernel {g.get('kernel')!r}, the baked "
                               f"{model_name} runs {s.kernel!r} there (measured on another build?)")
        if "index" in g and g["index"] != i:
            raise ProfileError(f"{path}: step {i} ({s.name}) has index {g['index']!r}")
        if not _number(g.get("cpu_ms")):
            raise ProfileError(f"{path}: step {i} ({s.name}): cpu_ms is {g.get('cpu_ms')!r}, expected a "
                               "non-negative number of milliseconds")
        if not _number(g.get("simulated_cycles"), nullable=True):
            raise ProfileError(f"{path}: step {i} ({s.name}): simulated_cycles is {g.get('simulated_cycles')!r}, "
                               "expected a non-negative number or null")
        out_steps.append({"cpu_ms": float(g["cpu_ms"]), "simulated_cycles": g.get("simulated_cycles")})
    steps_ms = sum(g["cpu_ms"] for g in out_steps)
    kernel_ms = sum(g["cpu_ms"] for g, s in zip(out_steps, steps) if s.is_kernel)
    if not math.isfinite(steps_ms):  # each finite, the sum beyond a float: no report could show it
        raise ProfileError(f"{path}: the steps' cpu_ms add up to more than a float holds ({steps_ms}); "
                           "expected milliseconds of one run")
    return {"file": os.path.basename(os.fspath(path)), "format": fmt, "model": doc["model"],
            "profile": doc["profile"], "isa": doc["isa"], "threads": doc["threads"], "repeat": doc["repeat"],
            "date": doc["date"], "total_cpu_ms": float(doc["total_cpu_ms"]),
            "simulated_cycles": doc.get("simulated_cycles"), "steps_cpu_ms": steps_ms, "kernel_cpu_ms": kernel_ms,
            "glue_cpu_ms": steps_ms - kernel_ms, "steps": out_steps}


def _optlog_lines(model: str, root=None) -> list[str] | None:
    """The model's own optimisation log (logs/<model>.log) or else the build's, None without either; `root`: a
    `kiln compile` directory instead of the installed package."""
    base = resources.files("kiln") if root is None else root
    for path in (base / "logs" / f"{model}.log", base / "optimization_path.log"):
        if path.is_file():
            return path.read_text().splitlines()
    return None


def _kernel_log(lines: list[str], model: str, rec: KernelRecord, ops: set[str]) -> list[str]:
    """The [OPT] lines about one kernel: its opspec/kernel name anywhere as a word, or one of its source ops
    as the subject (`model:op`, `model.op`)."""
    names = {rec.opspec, rec.name, rec.opspec_name or rec.opspec}
    subjects = {f"{model}:{op}" for op in ops} | {f"{model}.{op}" for op in ops}
    out = []
    for ln in lines:
        parts = ln.split()
        if len(parts) < 4:
            continue
        words = set(parts[2:4]) | {p.split("=", 1)[-1] for p in parts[4:]}
        if parts[2] in subjects or names & words:
            out.append(ln)
    return out


def _gantt(tr: trace.Trace, core: int = 0, max_segments: int = 160) -> dict[str, list[list[float]]]:
    """Core `core`'s busy intervals per pipe, neighbours closer than a small gap merged (for drawing)."""
    out: dict[str, list[list[float]]] = {}
    span = max(tr.cycles, 1.0)
    for pipe in {e.pipe for e in tr.events if e.core == core}:
        iv = sorted((e.start, e.end) for e in tr.events if e.core == core and e.pipe == pipe)
        tol = span / 2000
        while True:
            merged: list[list[float]] = []
            for s, e in iv:
                if merged and s - merged[-1][1] <= tol:
                    merged[-1][1] = max(merged[-1][1], e)
                else:
                    merged.append([s, e])
            if len(merged) <= max_segments:
                break
            tol *= 2
        out[pipe] = [[round(s, 1), round(e, 1)] for s, e in merged]
    return out


def _roofline(rec: KernelRecord, cycles: float, profile) -> dict:
    """Arithmetic intensity (flops per byte of the kernel's operands) against the profile's ridge for the
    kernel's unit: Cube 16x16x16 fp16 MACs per cycle per core, Vector 128 fp16 lanes per cycle per core; GM
    read rate per core times the cores."""
    unit = rec.unit
    if unit == "cube":
        peak, bw = 2 * 4096 * profile.cube_cores, profile.gm_to_l1_bpc * profile.cube_cores
    else:
        peak, bw = 128 * profile.cores_for("vector"), profile.gm_to_ub_bpc * profile.cores_for("vector")
    f = rec.features
    flops, nbytes = f["flops"], max(1, f["bytes"])
    pp = rec.predicted_pipes or {}
    moved = sum(pp[p].bytes for p in ("MTE2", "MTE3") if p in pp) + \
        (pp["FIX"].bytes if unit == "cube" and "FIX" in pp else 0)
    ai = flops / nbytes
    attainable = min(peak, ai * bw)
    achieved = flops / cycles if cycles else 0.0
    return {"unit": unit, "peak_flops_per_cycle": peak, "gm_bytes_per_cycle": bw, "ridge": peak / bw,
            "ai": ai, "ai_moved": flops / moved if moved else None, "attainable": attainable,
            "achieved": achieved, "of_attainable": achieved / attainable if attainable else None,
            "side": "memory" if ai < peak / bw else "compute",
            "peaks": {"cube": [2 * 4096 * profile.cube_cores, profile.gm_to_l1_bpc * profile.cube_cores],
                      "vector": [128 * profile.cores_for("vector"),
                                 profile.gm_to_ub_bpc * profile.cores_for("vector")]}}


def _zeros(rec: KernelRecord):
    import numpy as np
    return [np.zeros(t.shape, {"fp16": np.float16, "bf16": np.uint16}.get(t.dtype, np.float32)) for t in rec.inputs]


def build(model_name: str, threshold: float = 0.15, suggest: bool = True, profile_path=None) -> dict:
    """Everything the report shows, as plain data (JSON-serialisable). With `profile_path` (a kiln-profile/1
    file) the measured CPU times are folded in; a file that does not match the baked model raises ProfileError
    before anything is run."""
    import numpy as np

    import kiln

    from .codegen.ir.profiles import PROFILES
    model = kiln.load(model_name)  # a baked model's name, or a `kiln compile` directory
    man = kiln.manifest_of(model)
    rec_m = model.entry
    profile = PROFILES[man.profile]
    recs = man.kernels_by_name()
    measured = load_profile(profile_path, model.name, rec_m.steps, profile.name) if profile_path else None
    rng = np.random.default_rng(0)
    model.run(*[rng.standard_normal(shape).astype(np.float32) for _, shape in model.inputs])
    steps = rec_m.steps
    total = model.simulated_cycles or 1.0

    nodes, terms, edges = _graph(steps, model, recs, total)
    log_lines = _optlog_lines(model.name, model.package.root)
    kernels = _kernel_table(nodes, recs, profile, log_lines, model)
    for k in kernels.values():
        k["share"] = k["cycles_total"] / total
    if measured:
        _fold_measured(measured, nodes, kernels)
    rows = _bottleneck_rows(kernels, recs, profile, threshold, suggest, measured, total)
    # ---- totals
    util: dict[str, float] = {}
    by_type: dict[str, float] = {}
    flops = 0
    for n in nodes:
        k = kernels[n["kernel"]]
        c = n["cycles"] or 0
        for p, v in k["stats"]["pipes"].items():
            util[p] = util.get(p, 0.0) + v["utilisation"] * c
        by_type[k["type"]] = by_type.get(k["type"], 0.0) + c
        flops += k["features"]["flops"]
    mem = rec_m.memory
    fusion = rec_m.fusion
    patterns: dict[str, int] = {}
    for f in fusion.fused:
        key = f"{f['pattern']} ({f['where']})"
        patterns[key] = patterns.get(key, 0) + 1
    data = {
        "model": model.name, "onnx": rec_m.onnx, "threshold": threshold,
        "profile": {"name": profile.name, "clock_ghz": profile.clock_ghz, "cube_cores": profile.cube_cores,
                    "vector_cores": profile.vector_cores},
        "options": man.options,
        "totals": {"simulated_cycles": model.simulated_cycles,
                   "simulated_us": model.simulated_cycles / (profile.clock_ghz * 1e3),
                   "predicted_cycles": sum(n["predicted"] or 0 for n in nodes),
                   "kernel_launches": rec_m.kernel_launches, "unique_kernels": len(kernels),
                   "flops": flops,
                   "cube_peak_share": flops / (total * 2 * 4096 * profile.cube_cores),
                   "pipe_utilisation": {p: u / total for p, u in util.items()},
                   "time_by_type": {t: c / total for t, c in sorted(by_type.items(), key=lambda kv: -kv[1])}},
        "fusion": {"ir_ops_before": fusion.ir_ops_before, "kernel_launches": rec_m.kernel_launches,
                   "source_ops_in_kernels": sum(len(n["ops"]) for n in nodes),
                   "fused": list(fusion.fused), "patterns": patterns, "audit": list(fusion.audit)},
        "memory": {"arena_bytes": rec_m.arena_bytes, "lower_bound_bytes": mem.lower_bound_bytes,
                   "naive_bytes": mem.naive_bytes, "strategy": mem.strategy, "fragmentation": mem.fragmentation,
                   "in_place": len(mem.in_place), "steps": len(steps),
                   "step_names": [s.name for s in steps],
                   "tensors": [{"name": t.name, "offset": t.offset, "bytes": t.nbytes,
                                "first": t.first_step, "last": t.last_step} for t in mem.tensors]},
        "nodes": nodes, "terminals": terms, "edges": edges, "kernels": kernels, "bottlenecks": rows,
        "log_available": log_lines is not None,
        "trace_note": trace.SOURCE_NOTE,
        # the AI CPU fallback's host steps (ops without an AI Core kernel), with their predicted cost
        "aicpu": [{"step": s.name, "op_types": list(s.op_types), "reason": s.host.reason,
                   "predicted_cycles": s.host.predicted_cycles} for s in steps if s.host is not None],
    }
    if measured:
        data["measured"] = {k: v for k, v in measured.items() if k != "steps"}
    return data


def _fold_measured(measured: dict, nodes: list[dict], kernels: dict) -> None:
    """The median host CPU time of each launch; shares of the sum over all steps (glue included)."""
    denom = measured["steps_cpu_ms"]
    for n in nodes:
        ms = measured["steps"][n["step"]]
        n["cpu_ms"], n["measured_cycles"] = ms["cpu_ms"], ms["simulated_cycles"]
        n["cpu_share"] = n["cpu_ms"] / denom if denom else None
    for k in kernels.values():
        k["cpu_ms_total"] = sum(nodes[i]["cpu_ms"] for i in k["launches"])
        k["cpu_share"] = k["cpu_ms_total"] / denom if denom else None


def _graph(steps: list, model, recs: dict, total: float) -> tuple[list[dict], list[dict], list[dict]]:
    """The launches, the graph's inputs and outputs, and the tensor edges between them, laid out in layers."""
    node_of: dict[int, str] = {}
    nodes, terms = [], []
    cyc_iter = iter(model.kernels)
    for i, s in enumerate(steps):
        if s.is_kernel:
            ks = next(cyc_iter)
            nid = f"k{len(nodes)}"
            node_of[i] = nid
            r = recs[s.kernel]
            nodes.append({"id": nid, "idx": len(nodes), "step": i, "name": s.name, "kernel": s.kernel,
                          "ops": list(s.ops), "op_types": list(s.op_types), "shape": list(s.shape),
                          "layout": s.layout, "value": s.value, "cycles": ks.simulated_cycles,
                          "predicted": r.predicted_cycles, "share": (ks.simulated_cycles or 0) / total})
        elif s.op_types == ("Input",):
            nid = f"in{len(terms)}"
            node_of[i] = nid
            terms.append({"id": nid, "kind": "input", "name": s.name, "shape": list(s.shape), "step": i})
    def producer(i: int, off: int, nb: int):
        for j in range(i - 1, -1, -1):
            o = steps[j].output
            if o.in_arena and o.at < off + nb and off < o.at + o.nbytes:
                if j in node_of:
                    return j
                ins = [x for x in steps[j].inputs if x.in_arena]  # a host glue step in between: look through
                return producer(j, ins[0].at, ins[0].nbytes) if ins else None
        return None
    edges, seen = [], set()
    for i, s in enumerate(steps):
        if s.is_kernel or s.op_types == ("Output",):
            if not s.is_kernel:
                nid = f"out{len([t for t in terms if t['kind'] == 'output'])}"
                node_of[i] = nid
                terms.append({"id": nid, "kind": "output", "name": s.name, "shape": list(s.shape), "step": i})
            for x in s.inputs:
                if not x.in_arena:
                    continue
                j = producer(i, x.at, x.nbytes)
                if j is None or (node_of[j], node_of[i]) in seen:
                    continue
                seen.add((node_of[j], node_of[i]))
                ps = steps[j]
                edges.append({"src": node_of[j], "dst": node_of[i], "shape": list(ps.shape), "layout": ps.layout,
                              "value": ps.value, "bytes": x.nbytes})
    layer: dict[str, int] = {t["id"]: 0 for t in terms if t["kind"] == "input"}
    preds: dict[str, list[str]] = {}
    for e in edges:
        preds.setdefault(e["dst"], []).append(e["src"])
    for n in nodes + [t for t in terms if t["kind"] == "output"]:
        layer[n["id"]] = 1 + max((layer.get(p, 0) for p in preds.get(n["id"], [])), default=0)
    by_layer: dict[int, list[dict]] = {}
    for n in terms + nodes:
        n["layer"] = layer[n["id"]]
        by_layer.setdefault(n["layer"], []).append(n)
    col: dict[str, float] = {}
    for lay in sorted(by_layer):  # barycentre of the predecessors' columns, then launch order
        row = by_layer[lay]
        row.sort(key=lambda n: (sum(col.get(p, 0) for p in preds.get(n["id"], [])) /
                                max(1, len(preds.get(n["id"], []))), n["step"]))
        for c, n in enumerate(row):
            n["col"] = c
            col[n["id"]] = c

    return nodes, terms, edges


def _kernel_table(nodes: list[dict], recs: dict, profile, log_lines, model) -> dict[str, dict]:
    """Per unique kernel: emulator stats, replayed trace, type, roofline, log lines."""
    kernels: dict[str, dict] = {}
    for n in nodes:
        kname = n["kernel"]
        if kname in kernels:
            kernels[kname]["launches"].append(n["idx"])
            kernels[kname]["cycles_total"] += n["cycles"] or 0
            continue
        r = recs[kname]
        k = model.kernel(kname)  # replayed alone through the extension that baked it
        k.run_packed(*_zeros(r))
        st = k.last_stats
        try:
            tr = trace.replay(r, profile)
            summ = trace.pipe_summary(tr)
            gantt, tcycles = _gantt(tr), tr.cycles
            phases = [{"unit": u, "cycles": c, "cores": m} for u, c, m in tr.phases]
        except trace.TraceError:
            tr, summ, gantt, tcycles, phases = None, {}, {}, None, []
        kind = advice.classify(r, summ)
        ops = {op for m in nodes if m["kernel"] == kname for op in m["ops"]}
        kernels[kname] = {
            "name": kname, "family": r.family, "opspec": trace.opspec_label(r), "variant": r.variant,
            "unit": r.unit, "algorithm": r.algorithm, "tiling": r.tiling, "blocks": r.blocks,
            "buffers": r.buffers, "features": r.features, "spec": r.spec,
            "compared_cycles": r.compared_cycles or {}, "predicted_cycles": r.predicted_cycles,
            "predicted_pipes": {p: c.to_json() for p, c in (r.predicted_pipes or {}).items()},
            "bound_unit": r.bound_unit, "mte2_bytes": r.mte2_bytes,
            "stats": {"cycles": st["cycles"], "cores_used": st["cores_used"], "cores_available": st["cores_available"],
                      "core_kind": st["core_kind"], "cube_macs": st["cube_macs"],
                      "cube_useful_macs": st["cube_useful_macs"],
                      "pipes": {p: {"instrs": v["instructions"], "bytes": v["bytes"], "busy": v["busy_cycles"],
                                    "utilisation": v["utilisation"]} for p, v in st["pipes"].items()}},
            "type": kind["type"], "bound_pipe": kind["pipe"], "bound_utilisation": kind["utilisation"],
            "roofline": _roofline(r, st["cycles"], profile),
            "trace": {"cycles": tcycles, "phases": phases, "events": len(tr.events) if tr else 0,
                      "pipes": summ, "gantt_core0": gantt},
            "log": _kernel_log(log_lines, model.name, r, ops) if log_lines is not None else None,
            "launches": [n["idx"]], "cycles_total": n["cycles"] or 0,
            "diagnosis": advice.diagnose(r, trace.spec_of(r), profile, summ, kind) if tr else "",
            "suggestion": None,
        }
    return kernels


def _bottleneck_rows(kernels: dict, recs: dict, profile, threshold: float, suggest: bool, measured,
                     total: float) -> list[dict]:
    """The bottleneck table: kernels above the threshold, and at least the top HEAT_TOP, with suggestions."""
    ranked = sorted(kernels.values(), key=lambda k: -k["share"])
    table = [k for k in ranked if k["share"] >= threshold]
    table += [k for k in ranked[:HEAT_TOP] if k not in table]
    rows = []
    for k in table:
        r = recs[k["name"]]
        sg = None
        if suggest and k["trace"]["cycles"] is not None:
            sg = advice.suggest(r, trace.spec_of(r), profile, k["trace"]["pipes"],
                                {"type": k["type"], "pipe": k["bound_pipe"], "utilisation": k["bound_utilisation"]})
            k["suggestion"] = sg
        saved = (k["predicted_cycles"] - sg["predicted_cycles"]) * len(k["launches"]) \
            if sg and sg["predicted_cycles"] is not None and k["predicted_cycles"] else 0.0
        rows.append({"kernel": k["name"], "launches": k["launches"], "share": k["share"],
                     "cycles": k["cycles_total"], "type": k["type"], "bound_pipe": k["bound_pipe"],
                     "bound_utilisation": k["bound_utilisation"], "above_threshold": k["share"] >= threshold,
                     "suggestion": sg["text"] if sg else k["diagnosis"],
                     "source": sg["source"] if sg else "diagnosis",
                     "predicted_cycles": sg["predicted_cycles"] if sg else None,
                     "gain": sg["gain"] if sg else 0.0, "model_gain": saved / total})
        if measured:
            rows[-1].update(cpu_ms=k["cpu_ms_total"], cpu_share=k["cpu_share"])

    return rows


def render(data: dict) -> str:
    blob = json.dumps(data, separators=(",", ":"), allow_nan=False)
    blob = blob.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    title = f"kiln report: {data['model']} on {data['profile']['name']}"
    page, css, js = (_asset(name) for name in ("page.html", "report.css", "report.js"))
    return (page.replace("__TITLE__", _html_escape(title)).replace("__CSS__", css)
            .replace("__JS__", js).replace("__DATA__", blob))


def _asset(name: str) -> str:
    """The report page's HTML skeleton, CSS and JavaScript: kiln/report/ (package data)."""
    return (resources.files("kiln") / "report" / name).read_text(encoding="utf-8")


def _html_escape(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def write(model_name: str, out: str, threshold: float = 0.15, profile_path=None) -> dict:
    from .codegen.ir.files import write_atomic
    data = build(model_name, threshold, profile_path=profile_path)
    write_atomic(out, render(data))  # rendered whole first: a failure leaves no file, not an empty one
    return data


def serve(path: str, port: int) -> None:
    """Serves the report's directory on localhost until interrupted."""
    import functools
    import http.server
    import os
    directory, name = os.path.split(os.path.abspath(path))
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=directory)
    with http.server.ThreadingHTTPServer(("127.0.0.1", port), handler) as httpd:
        print(f"serving http://127.0.0.1:{httpd.server_address[1]}/{name} (Ctrl-C stops)", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            httpd.serve_forever()


_NETWORK = re.compile(r"""(?:src|href|action|poster|data)\s*=\s*["']?\s*(?:https?:)?//""", re.IGNORECASE)


def network_references(html: str) -> list[str]:
    """Attributes in `html` that would load something over the network (the report must have none)."""
    return [m.group(0) for m in _NETWORK.finditer(html)] + re.findall(r"url\(\s*['\"]?(?:https?:)?//", html) + \
        re.findall(r"@import", html)
