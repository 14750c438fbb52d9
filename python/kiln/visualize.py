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

import json
import math
import re
from importlib import resources

from . import advice, trace

HEAT_TOP = 3  # the bottleneck table always lists at least this many kernels
PROFILE_FORMAT = "kiln-profile/1"  # what `kiln bench MODEL --profile FILE` writes


class ProfileError(ValueError):
    """A --profile file that cannot be read or was not measured on this build's baked model; the message names
    the file and what differs."""


def _number(v, nullable: bool = False) -> bool:
    if v is None:
        return nullable
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0


def load_profile(path, model_name: str, steps: list[dict], hw_profile: str) -> dict:
    """Reads a kiln-profile/1 file and checks it belongs to the baked model: format, model name, hardware
    profile, and the same steps (names and kernels) in the same order. Raises ProfileError otherwise."""
    import os

    def bad_constant(c):
        raise ValueError(f"non-finite number {c}")
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f, parse_constant=bad_constant)
    except OSError as e:
        raise ProfileError(f"{path}: cannot read the profile ({e.strerror or e})") from None
    except (ValueError, UnicodeDecodeError) as e:  # JSONDecodeError is a ValueError
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
        if g.get("name") != s["name"]:
            raise ProfileError(f"{path}: step {i} is {g.get('name')!r}, but step {i} of the baked {model_name} is "
                               f"{s['name']!r}")
        if g.get("kernel") != s.get("kernel"):
            raise ProfileError(f"{path}: step {i} ({s['name']}) ran kernel {g.get('kernel')!r}, the baked "
                               f"{model_name} runs {s.get('kernel')!r} there (measured on another build?)")
        if "index" in g and g["index"] != i:
            raise ProfileError(f"{path}: step {i} ({s['name']}) has index {g['index']!r}")
        if not _number(g.get("cpu_ms")):
            raise ProfileError(f"{path}: step {i} ({s['name']}): cpu_ms is {g.get('cpu_ms')!r}, expected a "
                               "non-negative number of milliseconds")
        if not _number(g.get("simulated_cycles"), nullable=True):
            raise ProfileError(f"{path}: step {i} ({s['name']}): simulated_cycles is {g.get('simulated_cycles')!r}, "
                               "expected a non-negative number or null")
        out_steps.append({"cpu_ms": float(g["cpu_ms"]), "simulated_cycles": g.get("simulated_cycles")})
    steps_ms = sum(g["cpu_ms"] for g in out_steps)
    kernel_ms = sum(g["cpu_ms"] for g, s in zip(out_steps, steps) if s["kind"] == "kernel")
    return {"file": os.path.basename(os.fspath(path)), "format": fmt, "model": doc["model"],
            "profile": doc["profile"], "isa": doc["isa"], "threads": doc["threads"], "repeat": doc["repeat"],
            "date": doc["date"], "total_cpu_ms": float(doc["total_cpu_ms"]),
            "simulated_cycles": doc["simulated_cycles"], "steps_cpu_ms": steps_ms, "kernel_cpu_ms": kernel_ms,
            "glue_cpu_ms": steps_ms - kernel_ms, "steps": out_steps}


def _optlog_lines(model: str) -> list[str] | None:
    """The model's own optimisation log (logs/<model>.log) or else the build's, None without either."""
    for path in (resources.files("kiln") / "logs" / f"{model}.log", resources.files("kiln") / "optimization_path.log"):
        if path.is_file():
            return path.read_text().splitlines()
    return None


def _kernel_log(lines: list[str], model: str, rec: dict, ops: set[str]) -> list[str]:
    """The [OPT] lines about one kernel: its opspec/kernel name anywhere as a word, or one of its source ops
    as the subject (`model:op`, `model.op`)."""
    names = {rec["opspec"], rec["name"], rec.get("opspec_name") or rec["opspec"]}
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


def _roofline(rec: dict, cycles: float, profile) -> dict:
    """Arithmetic intensity (flops per byte of the kernel's operands) against the profile's ridge for the
    kernel's unit: Cube 16x16x16 fp16 MACs per cycle per core, Vector 128 fp16 lanes per cycle per core; GM
    read rate per core times the cores."""
    unit = rec.get("unit", "cube")
    if unit == "cube":
        peak, bw = 2 * 4096 * profile.cube_cores, profile.gm_to_l1_bpc * profile.cube_cores
    else:
        peak, bw = 128 * profile.cores_for("vector"), profile.gm_to_ub_bpc * profile.cores_for("vector")
    f = rec["features"]
    flops, nbytes = f["flops"], max(1, f["bytes"])
    pp = rec.get("predicted_pipes") or {}
    moved = sum(pp.get(p, {}).get("bytes", 0) for p in ("MTE2", "MTE3")) + \
        (pp.get("FIX", {}).get("bytes", 0) if unit == "cube" else 0)
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


def _zeros(rec: dict):
    import numpy as np
    return [np.zeros(t["shape"], {"fp16": np.float16, "bf16": np.uint16}.get(t["dtype"], np.float32)) for t in rec["inputs"]]


def build(model_name: str, threshold: float = 0.15, suggest: bool = True, profile_path=None) -> dict:
    """Everything the report shows, as plain data (JSON-serialisable). With `profile_path` (a kiln-profile/1
    file) the measured CPU times are folded in; a file that does not match the baked model raises ProfileError
    before anything is run."""
    import numpy as np
    import kiln
    from .codegen.ir.profiles import PROFILES
    man = kiln.manifest()
    model = kiln.load(model_name)
    rec_m = model.record
    profile = PROFILES[man["profile"]]
    recs = {k["name"]: k for k in man["kernels"]}
    measured = load_profile(profile_path, model.name, rec_m["steps"], profile.name) if profile_path else None
    rng = np.random.default_rng(0)
    model.run(*[rng.standard_normal(shape).astype(np.float32) for _, shape in model.inputs])
    steps = rec_m["steps"]
    total = model.simulated_cycles or 1.0

    # ---- graph: launches, terminals, tensor edges
    node_of: dict[int, str] = {}
    nodes, terms = [], []
    cyc_iter = iter(model.kernels)
    for i, s in enumerate(steps):
        if s["kind"] == "kernel":
            ks = next(cyc_iter)
            nid = f"k{len(nodes)}"
            node_of[i] = nid
            r = recs[s["kernel"]]
            nodes.append({"id": nid, "idx": len(nodes), "step": i, "name": s["name"], "kernel": s["kernel"],
                          "ops": s["ops"], "op_types": s["op_types"], "shape": s["shape"], "layout": s["layout"],
                          "value": s["value"], "cycles": ks.simulated_cycles, "predicted": r.get("predicted_cycles"),
                          "share": (ks.simulated_cycles or 0) / total})
        elif s["op_types"] == ["Input"]:
            nid = f"in{len(terms)}"
            node_of[i] = nid
            terms.append({"id": nid, "kind": "input", "name": s["name"], "shape": s["shape"], "step": i})
    def producer(i: int, off: int, nb: int):
        for j in range(i - 1, -1, -1):
            o = steps[j]["output"]
            if o[0] == 0 and o[1] < off + nb and off < o[1] + o[2]:
                if j in node_of:
                    return j
                ins = [x for x in steps[j]["inputs"] if x[0] == 0]  # a host glue step in between: look through
                return producer(j, ins[0][1], ins[0][2]) if ins else None
        return None
    edges, seen = [], set()
    for i, s in enumerate(steps):
        if s["kind"] == "kernel" or s["op_types"] == ["Output"]:
            if s["kind"] != "kernel":
                nid = f"out{len([t for t in terms if t['kind'] == 'output'])}"
                node_of[i] = nid
                terms.append({"id": nid, "kind": "output", "name": s["name"], "shape": s["shape"], "step": i})
            for x in s["inputs"]:
                if x[0] != 0:
                    continue
                j = producer(i, x[1], x[2])
                if j is None or (node_of[j], node_of[i]) in seen:
                    continue
                seen.add((node_of[j], node_of[i]))
                ps = steps[j]
                edges.append({"src": node_of[j], "dst": node_of[i], "shape": ps["shape"], "layout": ps["layout"],
                              "value": ps["value"], "bytes": x[2]})
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

    # ---- per unique kernel: emulator stats, replayed trace, type, roofline, log lines
    log_lines = _optlog_lines(model.name)
    kernels: dict[str, dict] = {}
    for n in nodes:
        kname = n["kernel"]
        if kname in kernels:
            kernels[kname]["launches"].append(n["idx"])
            kernels[kname]["cycles_total"] += n["cycles"] or 0
            continue
        r = recs[kname]
        k = kiln.kernel(kname)
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
            "name": kname, "family": r["family"], "opspec": trace.opspec_label(r), "variant": r["variant"],
            "unit": r.get("unit"), "algorithm": r.get("algorithm"), "tiling": r["tiling"], "blocks": r["blocks"],
            "buffers": r.get("buffers", {}), "features": r["features"], "spec": r["spec"],
            "compared_cycles": r.get("compared_cycles") or {}, "predicted_cycles": r.get("predicted_cycles"),
            "predicted_pipes": r.get("predicted_pipes") or {}, "bound_unit": r.get("bound_unit"),
            "mte2_bytes": r.get("mte2_bytes"),
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
    for k in kernels.values():
        k["share"] = k["cycles_total"] / total
    if measured:  # median host CPU time of each launch; shares of the sum over all steps (glue included)
        denom = measured["steps_cpu_ms"]
        for n in nodes:
            ms = measured["steps"][n["step"]]
            n["cpu_ms"], n["measured_cycles"] = ms["cpu_ms"], ms["simulated_cycles"]
            n["cpu_share"] = n["cpu_ms"] / denom if denom else None
        for k in kernels.values():
            k["cpu_ms_total"] = sum(nodes[i]["cpu_ms"] for i in k["launches"])
            k["cpu_share"] = k["cpu_ms_total"] / denom if denom else None

    # ---- bottlenecks: above the threshold, and at least the top HEAT_TOP
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
    mem = rec_m["memory"]
    fusion = rec_m["fusion"]
    patterns: dict[str, int] = {}
    for f in fusion.get("fused", []):
        key = f"{f['pattern']} ({f['where']})"
        patterns[key] = patterns.get(key, 0) + 1
    data = {
        "model": model.name, "onnx": rec_m.get("onnx"), "threshold": threshold,
        "profile": {"name": profile.name, "clock_ghz": profile.clock_ghz, "cube_cores": profile.cube_cores,
                    "vector_cores": profile.vector_cores},
        "options": man.get("options", {}),
        "totals": {"simulated_cycles": model.simulated_cycles,
                   "simulated_us": model.simulated_cycles / (profile.clock_ghz * 1e3),
                   "predicted_cycles": sum(n["predicted"] or 0 for n in nodes),
                   "kernel_launches": rec_m["kernel_launches"], "unique_kernels": len(kernels),
                   "flops": flops,
                   "cube_peak_share": flops / (total * 2 * 4096 * profile.cube_cores),
                   "pipe_utilisation": {p: u / total for p, u in util.items()},
                   "time_by_type": {t: c / total for t, c in sorted(by_type.items(), key=lambda kv: -kv[1])}},
        "fusion": {"ir_ops_before": fusion.get("ir_ops_before"), "kernel_launches": rec_m["kernel_launches"],
                   "source_ops_in_kernels": sum(len(n["ops"]) for n in nodes),
                   "fused": fusion.get("fused", []), "patterns": patterns, "audit": fusion.get("audit", [])},
        "memory": {"arena_bytes": rec_m["arena_bytes"], "lower_bound_bytes": mem["lower_bound_bytes"],
                   "naive_bytes": mem["naive_bytes"], "strategy": mem["strategy"], "fragmentation": mem["fragmentation"],
                   "in_place": len(mem.get("in_place", [])), "steps": len(steps),
                   "step_names": [s["name"] for s in steps],
                   "tensors": [{"name": t["name"], "offset": t["offset"], "bytes": t["bytes"],
                                "first": t["first_step"], "last": t["last_step"]} for t in mem["tensors"]]},
        "nodes": nodes, "terminals": terms, "edges": edges, "kernels": kernels, "bottlenecks": rows,
        "log_available": log_lines is not None,
        "trace_note": trace.SOURCE_NOTE,
    }
    if measured:
        data["measured"] = {k: v for k, v in measured.items() if k != "steps"}
    return data


def render(data: dict) -> str:
    blob = json.dumps(data, separators=(",", ":"), allow_nan=False)
    blob = blob.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    title = f"kiln report: {data['model']} on {data['profile']['name']}"
    return (_PAGE.replace("__TITLE__", _html_escape(title)).replace("__CSS__", _CSS)
            .replace("__JS__", _JS).replace("__DATA__", blob))


def _html_escape(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def write(model_name: str, out: str, threshold: float = 0.15, profile_path=None) -> dict:
    data = build(model_name, threshold, profile_path=profile_path)
    with open(out, "w", encoding="utf-8") as f:
        f.write(render(data))
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
        try:
            httpd.serve_forever()
        except KeyboardInterrupt:
            pass


_NETWORK = re.compile(r"""(?:src|href|action|poster|data)\s*=\s*["']?\s*(?:https?:)?//""", re.IGNORECASE)


def network_references(html: str) -> list[str]:
    """Attributes in `html` that would load something over the network (the report must have none)."""
    return [m.group(0) for m in _NETWORK.finditer(html)] + re.findall(r"url\(\s*['\"]?(?:https?:)?//", html) + \
        re.findall(r"@import", html)


_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<title>__TITLE__</title>
<style>__CSS__</style>
</head>
<body>
<header id="top"></header>
<main id="main">
  <section id="graph-pane">
    <div class="pane-head"><h2>Fused graph</h2><span id="legend"></span>
      <label class="hint"><input type="checkbox" id="fit" checked> fit width</label></div>
    <div id="graph-scroll"><div id="graph"></div></div>
  </section>
  <aside id="detail"><p class="hint">Click a kernel in the graph (or a row of the bottleneck table) for its
  opspec, tiling, pipes, roofline position, optimisation log and instruction trace.</p></aside>
</main>
<section id="bottlenecks"></section>
<section id="memory"></section>
<section id="fusion"></section>
<footer id="notes"></footer>
<script id="kiln-data" type="application/json">__DATA__</script>
<script>__JS__</script>
</body>
</html>
"""

_CSS = r"""
*{box-sizing:border-box}
body{margin:0;font:13px/1.4 system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;color:#1d2330;background:#f6f7f9}
h1{font-size:20px;margin:0 0 6px}
h2{font-size:15px;margin:0 0 8px}
h3{font-size:13px;margin:14px 0 6px;color:#3b4456;text-transform:uppercase;letter-spacing:.04em}
header{padding:14px 18px;background:#1d2330;color:#eef1f6}
header .sub{color:#aab3c5}
.cards{display:flex;flex-wrap:wrap;gap:10px;margin-top:10px}
.card{background:#2a3244;border-radius:6px;padding:8px 12px;min-width:150px}
.card b{display:block;font-size:17px;color:#fff}
.card span{color:#aab3c5;font-size:12px}
main{display:grid;grid-template-columns:minmax(420px,1.15fr) minmax(380px,1fr);gap:12px;padding:12px 18px}
#graph-pane,#detail,section{background:#fff;border:1px solid #dde1e8;border-radius:8px}
#graph-pane{padding:10px;min-width:0}
.pane-head{display:flex;justify-content:space-between;align-items:center;gap:10px}
#graph-scroll{overflow:auto;max-height:78vh;border-top:1px solid #eef0f4}
#detail{padding:12px 14px;overflow:auto;max-height:calc(78vh + 40px);position:sticky;top:8px}
section{margin:0 18px 12px;padding:12px 14px}
footer{margin:0 18px 20px;color:#5b6475;font-size:12px}
.hint{color:#5b6475}
svg text{font-family:inherit}
g.node{cursor:pointer}
g.node rect{stroke:#7b8497;stroke-width:1}
g.node.hot rect{stroke:#b30000;stroke-width:2.5}
g.node.sel rect{stroke:#1f4fd1;stroke-width:3.5}
g.node:hover rect{stroke:#1f4fd1}
g.node:focus{outline:none}
g.io rect{fill:#eef1f6;stroke:#9aa3b5;stroke-dasharray:4 3}
.t1{font-size:12px;font-weight:600}
.t2{font-size:10.5px}
path.edge{fill:none;stroke:#9aa3b5;stroke-width:1.3}
path.edge.long{stroke:#b9a0d8}
path.edge.hl{stroke:#1f4fd1;stroke-width:2.2}
text.el{font-size:9.5px;fill:#6b7486}
table{border-collapse:collapse;width:100%}
th,td{border-bottom:1px solid #eef0f4;padding:4px 6px;text-align:left;vertical-align:top}
th{font-weight:600;color:#3b4456;background:#f8f9fb}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
tr.click{cursor:pointer}
tr.click:hover{background:#f3f6ff}
.tag{display:inline-block;padding:1px 6px;border-radius:9px;font-size:11px;font-weight:600;white-space:nowrap}
.Cube-bound{background:#dbe8ff;color:#1f3f99}
.Vector-bound{background:#e4f6e0;color:#24661a}
.MTE-bound{background:#fff0d6;color:#8a4b00}
.latency-bound{background:#f2e3f7;color:#6b2389}
.unknown{background:#eee;color:#555}
.chips span{display:inline-block;background:#f0f2f6;border-radius:4px;padding:1px 6px;margin:2px 4px 2px 0;font-family:ui-monospace,Menlo,Consolas,monospace;font-size:11.5px}
pre{background:#f6f7f9;border:1px solid #eef0f4;border-radius:4px;padding:6px 8px;font:11px/1.45 ui-monospace,Menlo,Consolas,monospace;white-space:pre-wrap;word-break:break-all;max-height:260px;overflow:auto}
.bar{height:9px;background:#e9ecf2;border-radius:3px;position:relative;min-width:80px}
.bar i{position:absolute;left:0;top:0;bottom:0;background:#4f7be0;border-radius:3px}
.bar.b i{background:#d7301f}
.kv{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px}
.kv div:nth-child(odd){color:#5b6475}
.kv.measured{background:#eef6f0;border:1px solid #cfe6d5;border-radius:6px;padding:6px 10px;margin:6px 0}
.card.measured{background:#24483a}
.sugg{background:#fff8e6;border:1px solid #f3dfa6;border-radius:6px;padding:8px 10px;margin:6px 0}
.gain{color:#1a7f37;font-weight:600}
.mono{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:11.5px;word-break:break-all}
.legend-grad{display:inline-block;width:120px;height:10px;border-radius:3px;vertical-align:middle;margin:0 6px}
details summary{cursor:pointer;color:#3b4456}
"""

_JS = r"""
(function () {
"use strict";
var D = JSON.parse(document.getElementById("kiln-data").textContent);
var P = D.profile;
var MS = D.measured || null;  // a kiln-profile/1 file folded in (kiln visualize --profile), else null

function esc(s) {
  return String(s).replace(/[&<>"']/g, function (c) {
    return {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c];
  });
}
function fmt(n, d) {
  if (n === null || n === undefined || isNaN(n)) return "–";
  return Number(n).toLocaleString("en-US", {maximumFractionDigits: d === undefined ? 0 : d,
                                             minimumFractionDigits: d === undefined ? 0 : d});
}
function pct(x, d) { return (x === null || x === undefined) ? "–" : fmt(100 * x, d === undefined ? 1 : d) + "%"; }
function mb(b) { return b >= 1048576 ? fmt(b / 1048576, 2) + " MiB" : b >= 1024 ? fmt(b / 1024, 1) + " KiB" : fmt(b) + " B"; }
function us(c) { return fmt(c / (P.clock_ghz * 1e3), 2) + " µs"; }
function shape(s) { return (s || []).join("×"); }
function tag(t) { return '<span class="tag ' + esc(t) + '">' + esc(t) + "</span>"; }
function bar(x, hot) {
  var w = Math.max(0, Math.min(1, x || 0)) * 100;
  return '<div class="bar' + (hot ? " b" : "") + '"><i style="width:' + w.toFixed(1) + '%"></i></div>';
}
var STOPS = [[255, 247, 236], [253, 212, 158], [252, 141, 89], [215, 48, 31], [127, 0, 0]];
function heat(t) {
  t = Math.max(0, Math.min(1, t));
  var x = t * (STOPS.length - 1), i = Math.min(STOPS.length - 2, Math.floor(x)), f = x - i;
  var a = STOPS[i], b = STOPS[i + 1];
  return "rgb(" + [0, 1, 2].map(function (k) { return Math.round(a[k] + (b[k] - a[k]) * f); }).join(",") + ")";
}

// ---------------------------------------------------------------- header
(function header() {
  var T = D.totals, F = D.fusion, M = D.memory;
  var utils = Object.keys(T.pipe_utilisation).filter(function (p) { return T.pipe_utilisation[p] > 0; })
    .map(function (p) { return p + " " + pct(T.pipe_utilisation[p]); }).join(" · ");
  var types = Object.keys(T.time_by_type).map(function (t) { return t + " " + pct(T.time_by_type[t], 0); }).join(" · ");
  document.getElementById("top").innerHTML =
    "<h1>kiln report: " + esc(D.model) + "</h1>" +
    '<div class="sub">' + esc(D.onnx || "") + " · profile " + esc(P.name) + " at " + P.clock_ghz + " GHz (" +
    P.cube_cores + " Cube cores, " + P.vector_cores + " Vector cores) · simulated figures, not measured hardware</div>" +
    '<div class="cards">' +
    '<div class="card" id="total-latency"><b>' + us(T.simulated_cycles) + "</b><span>simulated latency, " +
    fmt(T.simulated_cycles) + " cycles (cost model: " + fmt(T.predicted_cycles) + ")</span></div>" +
    '<div class="card"><b>' + T.kernel_launches + " launches</b><span>" + T.unique_kernels + " unique kernels</span></div>" +
    '<div class="card" id="fusion-counts"><b>' + F.ir_ops_before + " → " + F.kernel_launches +
    "</b><span>IR ops before fusion → kernels after</span></div>" +
    '<div class="card"><b>' + mb(M.arena_bytes) + "</b><span>arena (lower bound " + mb(M.lower_bound_bytes) + ")</span></div>" +
    '<div class="card"><b>' + pct(T.cube_peak_share) + "</b><span>of the Cube fp16 peak (" + fmt(T.flops / 1e9, 2) +
    " GFLOP)</span></div>" +
    '<div class="card"><b>pipe utilisation</b><span>' + esc(utils) + "</span></div>" +
    '<div class="card"><b>time by type</b><span>' + esc(types) + "</span></div>" +
    (MS ? '<div class="card measured" id="measured-total"><b>' + fmt(MS.total_cpu_ms, 2) + " ms</b><span>" +
     "measured CPU (host emulation, not Ascend time): median of " + MS.repeat + " runs, " + MS.threads + " threads, " + esc(MS.isa) +
     ", " + esc(MS.date) + " · " + esc(MS.file) + " · steps: kernels " + fmt(MS.kernel_cpu_ms, 2) + " ms, glue " +
     fmt(MS.glue_cpu_ms, 2) + " ms</span></div>" : "") +
    "</div>";
})();

// ---------------------------------------------------------------- graph
var NW = 236, NH = 42, GX = 46, GY = 38, PADX = 16, PADY = 14;
var all = D.terminals.concat(D.nodes), byId = {};
all.forEach(function (n) { byId[n.id] = n; });
var maxShare = Math.max.apply(null, D.nodes.map(function (n) { return n.share || 0; }).concat([1e-9]));
var hotKernels = {};
D.bottlenecks.forEach(function (b) { if (b.above_threshold) hotKernels[b.kernel] = true; });
var layers = {}, maxCols = 1, maxLayer = 0;
all.forEach(function (n) {
  (layers[n.layer] = layers[n.layer] || []).push(n);
  maxLayer = Math.max(maxLayer, n.layer);
});
Object.keys(layers).forEach(function (l) { maxCols = Math.max(maxCols, layers[l].length); });
var innerW = maxCols * NW + (maxCols - 1) * GX;
all.forEach(function (n) {
  var row = layers[n.layer], w = row.length * NW + (row.length - 1) * GX;
  n.x = PADX + (innerW - w) / 2 + n.col * (NW + GX);
  n.y = PADY + n.layer * (NH + GY);
});
function rightEdge(l0, l1) {
  var r = 0;
  for (var l = l0; l <= l1; l++) (layers[l] || []).forEach(function (n) { r = Math.max(r, n.x + NW); });
  return r;
}
var longs = D.edges.filter(function (e) { return byId[e.dst].layer - byId[e.src].layer > 1; })
  .sort(function (a, b) { return byId[a.src].layer - byId[b.src].layer; });
var laneEnd = [];
longs.forEach(function (e) {
  var s = byId[e.src].layer, t = byId[e.dst].layer, k = 0;
  while (laneEnd[k] !== undefined && laneEnd[k] >= s) k++;
  laneEnd[k] = t;
  e.lane = k;
});
var svgW = Math.max(innerW + 2 * PADX, rightEdge(0, maxLayer) + 30 + 12 * laneEnd.length + 90);
var svgH = PADY * 2 + (maxLayer + 1) * (NH + GY);
function edgePath(e) {
  var a = byId[e.src], b = byId[e.dst];
  if (b.layer - a.layer > 1) {
    var L = rightEdge(a.layer, b.layer) + 16 + 12 * e.lane, y1 = a.y + NH / 2, y2 = b.y + NH / 2;
    e.lx = L + 4; e.ly = (y1 + y2) / 2;
    return "M" + (a.x + NW) + " " + y1 + " C" + L + " " + y1 + " " + L + " " + y1 + " " + L + " " + (y1 + 14) +
      " V" + (y2 - 14) + " C" + L + " " + y2 + " " + L + " " + y2 + " " + (b.x + NW + 4) + " " + y2;
  }
  var x1 = a.x + NW / 2, y1b = a.y + NH, x2 = b.x + NW / 2, y2b = b.y - 4, ym = (y1b + y2b) / 2;
  e.lx = (x1 + x2) / 2 + 5; e.ly = ym + 3;
  return "M" + x1 + " " + y1b + " C" + x1 + " " + ym + " " + x2 + " " + ym + " " + x2 + " " + y2b;
}
(function drawGraph() {
  var s = ['<svg id="graph-svg" width="' + svgW + '" height="' + svgH + '" viewBox="0 0 ' + svgW + " " + svgH +
           '" role="img" aria-label="fused graph">',
           '<defs><marker id="arr" viewBox="0 0 8 8" refX="7" refY="4" markerWidth="7" markerHeight="7" orient="auto">' +
           '<path d="M0 0 L8 4 L0 8 z" fill="#9aa3b5"/></marker></defs><g id="edges">'];
  D.edges.forEach(function (e, i) {
    var d = edgePath(e), long = byId[e.dst].layer - byId[e.src].layer > 1;
    s.push('<path class="edge' + (long ? " long" : "") + '" id="e' + i + '" data-src="' + e.src + '" data-dst="' + e.dst +
           '" d="' + d + '" marker-end="url(#arr)"><title>' + esc(e.value + ": " + shape(e.shape) + " " + e.layout +
           " fp16, " + mb(e.bytes)) + "</title></path>");
    s.push('<text class="el" x="' + e.lx.toFixed(1) + '" y="' + e.ly.toFixed(1) + '">' + esc(shape(e.shape)) + "</text>");
  });
  s.push('</g><g id="nodes">');
  D.terminals.forEach(function (t) {
    s.push('<g class="io" transform="translate(' + t.x + "," + t.y + ')"><rect width="' + NW + '" height="' + NH +
           '" rx="18"/><text class="t1" x="12" y="17">' + esc(t.kind + ": " + t.name.replace(/^(input|output) /, "")) +
           '</text><text class="t2" x="12" y="33">' + esc(shape(t.shape)) + " fp32 (host)</text></g>");
  });
  D.nodes.forEach(function (n) {
    var t = (n.share || 0) / maxShare, fill = heat(t), fg = t > 0.62 ? "#fff" : "#1d2330";
    var k = D.kernels[n.kernel], name = n.name.length > 34 ? n.name.slice(0, 33) + "…" : n.name;
    var ops = n.ops.length > 1 ? n.op_types[0] + " + " + (n.ops.length - 1) + " fused" : n.op_types[0];
    s.push('<g class="node' + (hotKernels[n.kernel] ? " hot" : "") + '" id="' + n.id + '" data-idx="' + n.idx +
           '" data-kernel="' + esc(n.kernel) + '" tabindex="0" transform="translate(' + n.x + "," + n.y + ')">' +
           '<rect width="' + NW + '" height="' + NH + '" rx="6" fill="' + fill + '"/>' +
           '<text class="t1" x="8" y="16" fill="' + fg + '">' + esc(name) + "</text>" +
           '<text class="t2" x="8" y="33" fill="' + fg + '">' + esc(ops + " · " + pct(n.share) + " · " + k.type) + "</text>" +
           "<title>" + esc(n.kernel + "\n" + n.ops.join(", ") + "\n" + fmt(n.cycles) + " cycles (" + pct(n.share) +
           " of the model)" + (MS ? "\nmeasured CPU " + fmt(n.cpu_ms, 3) + " ms (" + pct(n.cpu_share) + ")" : "")) +
           "</title></g>");
  });
  s.push("</g></svg>");
  document.getElementById("graph").innerHTML = s.join("");
  var fit = document.getElementById("fit"), svg = document.getElementById("graph-svg");
  function applyFit() {  // wide graphs (parallel branches) shrink to the pane's width unless unticked
    var avail = document.getElementById("graph-scroll").clientWidth - 4;
    var w = fit.checked && avail > 200 && svgW > avail ? avail : svgW;
    svg.setAttribute("width", w);
    svg.setAttribute("height", svgH * w / svgW);
  }
  fit.addEventListener("change", applyFit);
  window.addEventListener("resize", applyFit);
  applyFit();
  document.getElementById("legend").innerHTML = "share of simulated time: 0" +
    '<span class="legend-grad" style="background:linear-gradient(90deg,' + [0, .25, .5, .75, 1].map(heat).join(",") +
    ')"></span>' + pct(maxShare) + ' · <span style="color:#b30000;font-weight:600">red outline</span>: bottleneck ≥ ' +
    pct(D.threshold, 0);
})();

// ---------------------------------------------------------------- detail panel
function pipeRows(k) {
  var order = ["M", "MTE1", "MTE2", "MTE3", "FIX", "V", "S"], pp = k.predicted_pipes, sp = k.stats.pipes;
  var maxBusy = Math.max.apply(null, order.map(function (p) { return (pp[p] || {}).busy || 0; }).concat([1]));
  return order.filter(function (p) { return (pp[p] && pp[p].instrs) || (sp[p] && sp[p].instrs); }).map(function (p) {
    var a = pp[p] || {instrs: 0, bytes: 0, busy: 0}, b = sp[p] || {};
    return "<tr><td>" + p + (p === k.bound_unit ? " ◀" : "") + '</td><td class="num">' + fmt(a.instrs) +
      '</td><td class="num">' + mb(a.bytes) + '</td><td class="num">' + fmt(a.busy) + "</td><td>" +
      bar(a.busy / maxBusy, p === k.bound_unit) + '</td><td class="num">' + pct(b.utilisation) + "</td></tr>";
  }).join("");
}
function roofSvg(r) {
  var W = 330, H = 170, L = 38, B = 24, xmin = -2, xmax = 4, ymin = 1, ymax = Math.log10(r.peaks.cube[0]) + 0.4;
  function X(ai) { return L + (Math.log10(Math.max(ai, 1e-3)) - xmin) / (xmax - xmin) * (W - L - 8); }
  function Y(f) {
    var v = Math.min(ymax, Math.max(ymin, Math.log10(Math.max(f, 1e-3))));
    return H - B - (v - ymin) / (ymax - ymin) * (H - B - 8);
  }
  var s = ['<svg width="' + W + '" height="' + H + '" class="roof">'];
  for (var e = xmin; e <= xmax; e++) {
    s.push('<line x1="' + X(Math.pow(10, e)) + '" x2="' + X(Math.pow(10, e)) + '" y1="8" y2="' + (H - B) + '" stroke="#eef0f4"/>');
    s.push('<text x="' + X(Math.pow(10, e)) + '" y="' + (H - 8) + '" font-size="9" text-anchor="middle" fill="#6b7486">' +
           (e < 0 ? "1e" + e : Math.pow(10, e)) + "</text>");
  }
  for (var f = Math.ceil(ymin); f <= ymax; f++)
    s.push('<text x="' + (L - 4) + '" y="' + (Y(Math.pow(10, f)) + 3) + '" font-size="9" text-anchor="end" fill="#6b7486">1e' + f + "</text>");
  ["cube", "vector"].forEach(function (u) {
    var pk = r.peaks[u][0], bw = r.peaks[u][1], ridge = pk / bw, col = u === r.unit ? (u === "cube" ? "#1f3f99" : "#24661a") : "#c9ced8";
    var a0 = Math.pow(10, xmin), a1 = Math.pow(10, xmax);
    s.push('<polyline fill="none" stroke="' + col + '" stroke-width="' + (u === r.unit ? 2 : 1) + '" points="' +
           X(a0) + "," + Y(a0 * bw) + " " + X(ridge) + "," + Y(pk) + " " + X(a1) + "," + Y(pk) + '"/>');
    s.push('<text x="' + (X(a1) - 2) + '" y="' + (Y(pk) - 3) + '" font-size="9" text-anchor="end" fill="' + col + '">' + u + " peak</text>");
  });
  s.push('<line x1="' + X(r.ridge) + '" x2="' + X(r.ridge) + '" y1="8" y2="' + (H - B) + '" stroke="#d7301f" stroke-dasharray="3 3"/>');
  s.push('<circle cx="' + X(r.ai) + '" cy="' + Y(r.achieved) + '" r="5" fill="#d7301f" stroke="#fff"><title>achieved ' +
         fmt(r.achieved) + " flop/cycle at " + fmt(r.ai, 2) + " flop/B</title></circle>");
  s.push('<text x="' + (W - 8) + '" y="' + (H - B - 4) + '" font-size="9" text-anchor="end" fill="#6b7486">flop/B →</text>');
  s.push('<text x="' + (L + 4) + '" y="12" font-size="9" fill="#6b7486">flop/cycle ↑</text>');
  s.push("</svg>");
  return s.join("");
}
function ganttSvg(k) {
  var g = k.trace.gantt_core0, pipes = ["M", "MTE1", "MTE2", "MTE3", "FIX", "V", "S"].filter(function (p) { return g[p]; });
  if (!pipes.length || !k.trace.cycles) return "";
  var W = 360, L = 40, RH = 14, H = pipes.length * (RH + 4) + 18, sc = (W - L - 6) / k.trace.cycles, s = [];
  s.push('<svg width="' + W + '" height="' + H + '" class="gantt">');
  pipes.forEach(function (p, i) {
    var y = 4 + i * (RH + 4);
    s.push('<text x="' + (L - 4) + '" y="' + (y + 11) + '" font-size="10" text-anchor="end" fill="#3b4456">' + p + "</text>");
    s.push('<rect x="' + L + '" y="' + y + '" width="' + (W - L - 6) + '" height="' + RH + '" fill="#f3f4f7"/>');
    g[p].forEach(function (iv) {
      s.push('<rect x="' + (L + iv[0] * sc).toFixed(1) + '" y="' + y + '" width="' + Math.max(0.6, (iv[1] - iv[0]) * sc).toFixed(1) +
             '" height="' + RH + '" fill="' + (p === k.bound_unit ? "#d7301f" : "#4f7be0") + '"/>');
    });
  });
  var y = H - 4;
  s.push('<text x="' + L + '" y="' + y + '" font-size="9" fill="#6b7486">0</text><text x="' + (W - 6) + '" y="' + y +
         '" font-size="9" text-anchor="end" fill="#6b7486">' + fmt(k.trace.cycles) + " cycles</text></svg>");
  return s.join("");
}
function suggestionHtml(sg, k) {
  if (!sg) return '<div class="sugg">' + esc(k.diagnosis || "") + '</div><div class="hint">tiling, relayout and ' +
    "algorithm replays are run for the bottleneck table's kernels</div>";
  var h = '<div class="sugg"><b>' + esc(sg.source) + ":</b> " + esc(sg.text) + "</div>";
  (sg.alternatives || []).forEach(function (a) { h += '<div class="sugg">' + esc(a.source) + ": " + esc(a.text) + "</div>"; });
  if (sg.diagnosis && sg.diagnosis !== sg.text) h += '<div class="hint">' + esc(sg.diagnosis) + "</div>";
  return h;
}
var selected = null;
function select(idx, scroll) {
  var n = D.nodes[idx]; if (!n) return;
  var k = D.kernels[n.kernel];
  if (selected !== null) { var o = document.getElementById(D.nodes[selected].id); if (o) o.classList.remove("sel"); }
  selected = idx;
  var el = document.getElementById(n.id); el.classList.add("sel");
  Array.prototype.forEach.call(document.querySelectorAll("path.edge"), function (p) {
    p.classList.toggle("hl", p.getAttribute("data-src") === n.id || p.getAttribute("data-dst") === n.id);
  });
  if (scroll && el.scrollIntoView) el.scrollIntoView({block: "center", inline: "nearest"});
  var fused = {};
  D.fusion.fused.forEach(function (f) { fused[f.node] = f; });
  var ops = n.ops.map(function (o) {
    var f = fused[o];
    return "<li><span class=\"mono\">" + esc(o) + "</span>" + (f ? " — fused: " + esc(f.pattern + ", " + f.where) : "") + "</li>";
  }).join("");
  var ins = D.edges.filter(function (e) { return e.dst === n.id; }).map(function (e) {
    return "<li>" + esc(e.value) + " " + esc(shape(e.shape)) + " " + esc(e.layout) + " (" + mb(e.bytes) + ")</li>"; }).join("");
  var r = k.roofline, f = k.features, tr = k.trace;
  var comp = Object.keys(k.compared_cycles).map(function (a) {
    return "<span>" + esc(a) + "=" + fmt(k.compared_cycles[a]) + (a === k.algorithm ? " ✓" : "") + "</span>"; }).join("");
  var traceRows = Object.keys(tr.pipes || {}).map(function (p) {
    var v = tr.pipes[p];
    return "<tr><td>" + p + '</td><td class="num">' + fmt(v.instrs) + '</td><td class="num">' + fmt(v.busy) +
      '</td><td class="num">' + pct(v.active_utilisation) + '</td><td class="mono">' +
      esc(v.mix.slice(0, 3).map(function (m) { return m[0] + "×" + m[1]; }).join(", ")) + "</td></tr>";
  }).join("");
  var others = k.launches.filter(function (i) { return i !== idx; }).map(function (i) {
    return '<a href="#" data-goto="' + i + '">' + esc(D.nodes[i].name) + "</a>"; }).join(", ");
  var h = [];
  h.push('<h2 id="detail-kernel" class="mono" data-kernel="' + esc(k.name) + '">' + esc(k.name) + "</h2>");
  h.push('<div class="hint">launch #' + idx + " <b>" + esc(n.name) + "</b>: " + fmt(n.cycles) + " simulated cycles (" +
         us(n.cycles) + ", " + pct(n.share) + " of the model); cost model " + fmt(k.predicted_cycles) + "</div>");
  if (MS) {  // measured (kiln bench --profile) beside the predictions
    var many = k.launches.length > 1;
    h.push('<div class="kv measured" id="detail-measured"><div>measured CPU ms (host emulation)</div><div><b>' +
           fmt(n.cpu_ms, 3) + " ms</b> this launch (" + pct(n.cpu_share) + " of the measured steps)" +
           (many ? "; " + fmt(k.cpu_ms_total, 3) + " ms over its " + k.launches.length + " launches" : "") +
           "</div><div>simulated cycles</div><div>" + fmt(n.measured_cycles) + " in the measured run · " +
           fmt(n.cycles) + " in this report's run · " + fmt(k.predicted_cycles) + " predicted (cost model)" +
           "</div><div>share</div><div>" + pct(n.share) + " of the simulated time vs " + pct(n.cpu_share) +
           " of the measured CPU time</div></div>");
  }
  h.push("<p>" + tag(k.type) + " bound unit <b>" + esc(k.bound_unit || "–") + "</b>, busy " + pct(k.bound_utilisation) +
         " of the time on the cores that run it</p>");
  h.push("<h3>Source ops</h3><ul>" + ops + "</ul>" + (ins ? "<h3>Inputs</h3><ul>" + ins + "</ul>" : ""));
  h.push('<h3>Opspec and variant</h3><div class="kv"><div>opspec</div><div class="mono">' + esc(k.opspec) +
         '</div><div>family</div><div class="mono">' + esc(k.family) + '</div><div>variant</div><div class="mono">' +
         esc(k.variant) + "</div><div>algorithm</div><div>" + esc(k.algorithm || "–") + "</div><div>blocks</div><div>" +
         k.blocks + " (" + k.stats.cores_used + " of " + k.stats.cores_available + " cores, " + esc(k.stats.core_kind) + ")</div></div>");
  h.push('<div class="chips">tiling: ' + Object.keys(k.tiling).map(function (t) { return "<span>" + esc(t) + "=" + k.tiling[t] + "</span>"; }).join("") + "</div>");
  if (comp) h.push('<div class="chips">algorithms compared (cycles): ' + comp + "</div>");
  h.push('<div class="chips">buffers: ' + Object.keys(k.buffers).filter(function (b) { return k.buffers[b]; })
         .map(function (b) { return "<span>" + esc(b) + " " + mb(k.buffers[b]) + "</span>"; }).join("") + "</div>");
  var KEY = ["flops", "bytes", "arithmetic_intensity", "reduction_length", "c0_padding_waste"];
  function chip(t) { return "<span>" + esc(t) + "=" + esc(f[t]) + "</span>"; }
  var rest = Object.keys(f).filter(function (t) { return KEY.indexOf(t) < 0; });
  h.push('<div class="chips">features: ' + KEY.filter(function (t) { return t in f; }).map(chip).join("") + "</div>" +
         (rest.length ? '<details class="chips"><summary>all ' + Object.keys(f).length + " opspec features</summary>" +
          rest.map(chip).join("") + "</details>" : ""));
  h.push('<h3>Pipes</h3><table class="pipes"><tr><th>pipe</th><th class="num">instrs</th><th class="num">bytes</th>' +
         '<th class="num">busy (pred.)</th><th></th><th class="num">util (emul.)</th></tr>' + pipeRows(k) + "</table>" +
         '<div class="hint">busy: cycles summed over cores (cost model, equal to the emulator); util: busy / (cycles × ' +
         k.stats.cores_available + " cores available), from the emulator's counters</div>");
  h.push("<h3>Roofline</h3>" + roofSvg(r) + '<div class="hint">arithmetic intensity ' + fmt(r.ai, 1) +
         " flop/B (" + (r.ai_moved ? fmt(r.ai_moved, 1) + " flop/B of the bytes actually moved" : "–") + ") vs the " + esc(r.unit) +
         " ridge " + fmt(r.ridge, 1) + " flop/B: <b>" + esc(r.side) + "-bound side</b>; achieved " + fmt(r.achieved) +
         " flop/cycle = " + pct(r.of_attainable) + " of the attainable " + fmt(r.attainable) + "</div>");
  h.push("<h3>Suggestion</h3>" + suggestionHtml(k.suggestion, k));
  h.push("<h3>Instruction trace (cost-model replay)</h3>" + (tr.cycles ?
         '<div class="hint">' + fmt(tr.events) + " instructions; " + tr.phases.map(function (p) {
           return esc(p.unit) + " launch " + fmt(p.cycles) + " cycles on " + p.cores + " cores"; }).join(", then ") +
         '. Core 0 timeline:</div>' + ganttSvg(k) +
         '<table class="trace"><tr><th>pipe</th><th class="num">instrs</th><th class="num">busy</th><th class="num">active util</th><th>top instructions</th></tr>' +
         traceRows + "</table>" : '<div class="hint">no replay for this family</div>'));
  h.push("<h3>[OPT] log</h3>" + (k.log === null ? '<div class="hint">this build has no optimisation-path log ' +
         "(DEBUG_OPTIMIZATION_PATH=ON)</div>" : "<pre>" + esc(k.log.join("\n") || "(no lines)") + "</pre>"));
  if (others) h.push("<h3>Other launches of this kernel</h3><p>" + others + "</p>");
  var det = document.getElementById("detail");
  det.innerHTML = h.join("");
  det.setAttribute("data-kernel", k.name);
  det.scrollTop = 0;
}
document.getElementById("graph").addEventListener("click", function (ev) {
  var g = ev.target.closest ? ev.target.closest("g.node") : null;
  if (g) select(Number(g.getAttribute("data-idx")), false);
});
document.getElementById("graph").addEventListener("keydown", function (ev) {
  var g = ev.target.closest ? ev.target.closest("g.node") : null;
  if (g && (ev.key === "Enter" || ev.key === " ")) { ev.preventDefault(); select(Number(g.getAttribute("data-idx")), false); }
});
document.getElementById("detail").addEventListener("click", function (ev) {
  var a = ev.target.closest ? ev.target.closest("a[data-goto]") : null;
  if (a) { ev.preventDefault(); select(Number(a.getAttribute("data-goto")), true); }
});

// ---------------------------------------------------------------- bottleneck table
(function bottlenecks() {
  var rows = D.bottlenecks.map(function (b, i) {
    var g = b.predicted_cycles !== null && b.predicted_cycles !== undefined;
    return '<tr class="click" data-launch="' + b.launches[0] + '"><td class="num">' + (i + 1) + '</td><td class="mono">' +
      esc(b.kernel) + '<div class="hint">' + esc(b.launches.map(function (j) { return D.nodes[j].name; }).join(", ")) +
      '</div></td><td class="num">' + pct(b.share) + (b.above_threshold ? "" : '<div class="hint">top-3</div>') +
      '</td><td class="num">' + fmt(b.cycles) + "</td>" +
      (MS ? '<td class="num cpu-share">' + pct(b.cpu_share) + '<div class="hint">' + fmt(b.cpu_ms, 3) + " ms</div></td>" : "") +
      "<td>" + tag(b.type) + '<div class="hint">' + esc(b.bound_pipe || "") +
      " " + pct(b.bound_utilisation, 0) + "</div></td><td>" + esc(b.suggestion) + "</td><td class=\"num\">" +
      (g ? '<span class="gain">' + pct(-b.gain) + "</span><div class=\"hint\">model " + pct(-b.model_gain) + "</div>" : "–") + "</td></tr>";
  }).join("");
  document.getElementById("bottlenecks").innerHTML =
    "<h2>Bottlenecks</h2><p class=\"hint\">Kernels with at least " + pct(D.threshold, 0) +
    " of the simulated time (all launches of the kernel together), and always the top three. Type from the predicted pipes; " +
    "the suggestion is a cost-model replay (tilings the kernel's buffers allow, a relayout of the input, another " +
    "algorithm) or, when none is predicted faster, what limits the kernel." +
    (MS ? " Measured CPU share: the kernel's host CPU time (all launches, medians from " + esc(MS.file) +
          ") over the sum of every step's; the emulation's cost on this CPU, not Ascend time." : "") + "</p>" +
    '<table id="bottleneck-table"><tr><th class="num">#</th><th>kernel (launches)</th><th class="num">share</th>' +
    '<th class="num">cycles</th>' + (MS ? '<th class="num" id="cpu-share-head">measured CPU share</th>' : "") +
    '<th>type</th><th>suggestion</th><th class="num">predicted gain</th></tr>' + rows + "</table>";
  Array.prototype.forEach.call(document.querySelectorAll("#bottleneck-table tr.click"), function (tr) {
    tr.addEventListener("click", function () { select(Number(tr.getAttribute("data-launch")), true); });
  });
})();

// ---------------------------------------------------------------- memory plan
(function memory() {
  var M = D.memory, W = 960, H = 330, L = 70, R = 16, T = 12, B = 34;
  var top = Math.max(M.arena_bytes, M.lower_bound_bytes) * 1.06 || 1, steps = Math.max(1, M.steps);
  function X(s) { return L + s / steps * (W - L - R); }
  function Y(b) { return H - B - b / top * (H - B - T); }
  var s = ['<svg id="memory-svg" width="' + W + '" height="' + H + '">'];
  for (var i = 0; i <= 5; i++) {
    var b = top * i / 5;
    s.push('<line x1="' + L + '" x2="' + (W - R) + '" y1="' + Y(b) + '" y2="' + Y(b) + '" stroke="#eef0f4"/>' +
           '<text x="' + (L - 6) + '" y="' + (Y(b) + 3) + '" font-size="10" text-anchor="end" fill="#6b7486">' + mb(b) + "</text>");
  }
  var tick = Math.max(1, Math.round(steps / 12));
  for (var st = 0; st <= steps; st += tick)
    s.push('<text x="' + X(st) + '" y="' + (H - B + 14) + '" font-size="10" text-anchor="middle" fill="#6b7486">' + st + "</text>");
  s.push('<text x="' + ((L + W) / 2) + '" y="' + (H - 4) + '" font-size="11" text-anchor="middle" fill="#3b4456">step (launch order)</text>');
  M.tensors.forEach(function (t, i) {
    var hue = (i * 47) % 360;
    s.push('<rect class="tensor" x="' + X(t.first).toFixed(1) + '" y="' + Y(t.offset + t.bytes).toFixed(1) + '" width="' +
           Math.max(1, X(t.last + 1) - X(t.first)).toFixed(1) + '" height="' + Math.max(1, Y(t.offset) - Y(t.offset + t.bytes)).toFixed(1) +
           '" fill="hsl(' + hue + ',55%,72%)" stroke="hsl(' + hue + ',45%,45%)" stroke-width="0.6"><title>' +
           esc(t.name + ": " + mb(t.bytes) + " at offset " + fmt(t.offset) + ", steps " + t.first + "–" + t.last +
               " (" + M.step_names[t.first] + " → " + M.step_names[t.last] + ")") + "</title></rect>");
  });
  s.push('<line id="lower-bound" x1="' + L + '" x2="' + (W - R) + '" y1="' + Y(M.lower_bound_bytes) + '" y2="' + Y(M.lower_bound_bytes) +
         '" stroke="#d7301f" stroke-width="1.5" stroke-dasharray="6 4"/><text x="' + (W - R - 4) + '" y="' + (Y(M.lower_bound_bytes) - 4) +
         '" font-size="10" text-anchor="end" fill="#d7301f">lower bound ' + mb(M.lower_bound_bytes) + "</text>");
  if (M.arena_bytes !== M.lower_bound_bytes)
    s.push('<line x1="' + L + '" x2="' + (W - R) + '" y1="' + Y(M.arena_bytes) + '" y2="' + Y(M.arena_bytes) +
           '" stroke="#1d2330" stroke-width="1"/><text x="' + (L + 4) + '" y="' + (Y(M.arena_bytes) - 4) +
           '" font-size="10" fill="#1d2330">arena ' + mb(M.arena_bytes) + "</text>");
  s.push("</svg>");
  document.getElementById("memory").innerHTML = "<h2>Memory plan</h2><p class=\"hint\">Arena " + mb(M.arena_bytes) +
    " (" + esc(M.strategy) + ", fragmentation " + pct(M.fragmentation, 2) + "), lower bound " + mb(M.lower_bound_bytes) +
    " (peak of live bytes), without reuse " + mb(M.naive_bytes) + "; " + M.in_place + " outputs in place. Each box is one " +
    "intermediate tensor: its arena offset range over the steps it is live.</p>" + s.join("");
})();

// ---------------------------------------------------------------- fusion
(function fusion() {
  var F = D.fusion;
  var pats = Object.keys(F.patterns).map(function (p) { return "<tr><td>" + esc(p) + '</td><td class="num">' + F.patterns[p] + "</td></tr>"; }).join("");
  var list = F.fused.map(function (f) { return "<tr><td class=\"mono\">" + esc(f.node) + "</td><td class=\"mono\">" + esc(f.into) +
    "</td><td>" + esc(f.pattern) + "</td><td>" + esc(f.where) + "</td></tr>"; }).join("");
  document.getElementById("fusion").innerHTML = "<h2>Fusion</h2><p id=\"fusion-summary\">" + F.ir_ops_before +
    " IR ops before fusion → " + F.kernel_launches + " kernel launches after (" + F.source_ops_in_kernels +
    " source ops inside them; " + F.fused.length + " ops fused into another op's kernel)" +
    (F.audit.length ? "; audit: " + esc(JSON.stringify(F.audit)) : "") + ".</p>" +
    (pats ? '<table style="max-width:560px"><tr><th>pattern</th><th class="num">count</th></tr>' + pats + "</table>" +
            "<details><summary>every fused op</summary><table><tr><th>op</th><th>into</th><th>pattern</th><th>where</th></tr>" +
            list + "</table></details>" : "<p class=\"hint\">nothing fused in this model</p>");
})();

document.getElementById("notes").innerHTML = "Simulated figures for profile " + esc(P.name) +
  " from the emulator (one seeded run of the model) and the cost model; instruction traces: " + esc(D.trace_note) +
  "." + (MS ? " Measured: " + esc(MS.file) + " (" + esc(MS.format) + ", " + esc(MS.date) + "), median host wall " +
  "time of each step of the emulation over " + MS.repeat + " runs at " + MS.threads + " threads (" + esc(MS.isa) +
  "); total " + fmt(MS.total_cpu_ms, 2) + " ms, simulated " + fmt(MS.simulated_cycles) + " cycles in that run." : "") +
  " Options: " + esc(Object.keys(D.options).map(function (k) { return k + "=" + JSON.stringify(D.options[k]); }).join(", ")) + ".";
window.kilnReport = {select: select, nodes: D.nodes.length};
document.documentElement.setAttribute("data-rendered", String(D.nodes.length));
})();
"""
