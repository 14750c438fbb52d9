"""kiln analyze: what an ONNX file holds and what kiln makes of it.

analyze() reports the file as written (node count, op histogram, parameter
bytes) next to the kiln IR after the frontend's passes (node count, op
histogram, FLOPs) and every problem that would stop load_onnx(). It returns
its dict even when the model has unsupported ops; only an unreadable file or a
malformed graph raises KilnError. format_text() renders the dict for the CLI.

FLOPs are counted on the IR (after constant and BatchNormalization folding):
a multiply-add is 2 (Conv, Gemm, MatMul), elementwise ops 1 per output
element, pooling and reductions 1 per element read; data movement (Reshape,
Transpose, ...) 0.
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from . import KilnError
from .frontend import onnx_import as onnx_frontend
from .frontend.model_spec import parse_model_spec
from .frontend.onnx_base import is_static
from .frontend.onnx_read import default_opset, read_model
from .ir.graph import Graph, Node

# TensorProto element types that hold parameters, with their byte sizes
_FLOAT_BYTES = {1: 4, 10: 2, 11: 8, 16: 2}  # FLOAT, FLOAT16, DOUBLE, BFLOAT16
_DATA_MOVEMENT = {"Reshape", "Flatten", "Transpose", "Concat", "Identity"}
_READS_INPUT = {"GlobalAveragePool", "GlobalMaxPool", "ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceL2",
                "Softmax", "LayerNormalization"}


def _float_bytes(tensor) -> int:
    return math.prod(tensor.dims) * _FLOAT_BYTES.get(tensor.data_type, 0)


def _params_bytes(model) -> int:
    """Float initializers, plus float Constant nodes (some exporters store weights that way)."""
    total = sum(_float_bytes(t) for t in model.graph.initializer)
    for n in model.graph.node:
        if n.op_type == "Constant":
            total += sum(_float_bytes(a.t) for a in n.attribute if a.name == "value")
    return total


def node_flops(node: Node, graph: Graph) -> int | None:
    """FLOPs of one IR node; None when a shape it needs is not static."""
    shapes = [graph.values[v].shape if v in graph.values else None for v in [*node.inputs, *node.outputs] if v]
    if not all(is_static(s) for s in shapes):
        return None
    out = math.prod(graph.values[node.outputs[0]].shape)
    op = node.op_type
    if op == "Conv":
        w = graph.values[node.inputs[1]].shape  # [C_out, C_in / group, kh, kw]
        return 2 * out * math.prod(w[1:])
    if op == "Gemm":
        a = graph.values[node.inputs[0]].shape
        return 2 * out * a[1]
    if op == "MatMul":
        return 2 * out * graph.values[node.inputs[0]].shape[-1]
    if op in ("MaxPool", "AveragePool"):
        return out * math.prod(node.attrs.get("kernel_shape", (1,)))
    if op in _READS_INPUT:
        return math.prod(graph.values[node.inputs[0]].shape)
    if op in _DATA_MOVEMENT:
        return 0
    return out


def _listed(shape: tuple[int, ...] | None) -> list[int] | None:
    """A value's shape for the report; None where build_graph could not shape it (a model with problems)."""
    return list(shape) if shape is not None else None


def _spec_of(path: str | Path, batch: int) -> tuple[str, int, dict[str, tuple[int, ...]]]:
    """(file, batch, pinned shapes) for an ONNX path or a model spec on one (frontend/model_spec.py:
    `file.onnx@4`, `file.onnx@x=1x3x736x736`); a spec's @BATCH and a batch other than 1 must agree."""
    if Path(path).is_file():  # an existing file is that file, whatever characters its name holds
        return str(path), batch, {}
    spec = parse_model_spec(str(path), ())
    if spec.batch != 1 and batch not in (1, spec.batch):
        raise KilnError("frontend", f"model spec {spec.text!r}", f"its batch {spec.batch} and the batch {batch} "
                        f"given beside it differ; give one")
    return spec.source, max(batch, spec.batch), spec.pinned


@dataclass(frozen=True)
class AnalysisSettings:
    """The build options a `kiln analyze` run stands for: `fusion`/`max_depth` as ENABLE_FUSION/MAX_FUSION_DEPTH
    (None: KILN_OPT_LEVEL O2's), `flash_attention`/`max_seq_len` as USE_FLASH_ATTENTION/MAX_SEQ_LEN, `target`
    the profile whose buffers and cores the fusion checks."""
    fusion: bool = True
    max_depth: int | None = None
    target: str = "ascend910b"
    flash_attention: bool = True
    max_seq_len: int = 512


def analyze(path: str | Path, batch: int = 1, settings: AnalysisSettings = AnalysisSettings(),
            prediction: bool = False) -> dict[str, Any]:
    """`path`: an ONNX file or a model spec on one (`file.onnx@x=1x3x736x736`, `file.onnx@4`); `settings` the
    build options it is analysed under. Raises OptionError (naming the build option) for an out-of-range value."""
    options = analysis_options(settings)
    path, batch, pinned = _spec_of(path, batch)
    model = read_model(path)
    file_ops = Counter(n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}.{n.op_type}"
                       for n in model.graph.node)
    report: dict[str, Any] = {
        "model": str(path),
        "batch": batch,
        "opset": default_opset(model),
        "nodes": len(model.graph.node),
        "op_histogram": dict(file_ops.most_common()),
        "params_bytes": _params_bytes(model),
    }
    log: list[str] = []
    graph, problems = onnx_frontend.build_graph(model, path, batch, log, pinned)  # binds the inputs in place

    flops_by_op: Counter[str] = Counter()
    complete = True
    for node in graph.nodes:
        f = node_flops(node, graph)
        if f is None:
            complete = False
        else:
            flops_by_op[node.op_type] += f
    report.update({
        "inputs": {v.name: _listed(v.shape) for v in graph.inputs},
        "outputs": {v.name: _listed(v.shape) for v in graph.outputs},
        "flops": sum(flops_by_op.values()),
        "flops_by_op": dict(flops_by_op.most_common()),
        "flops_complete": complete,  # False: some node's shapes were unknown and it was not counted
        "unsupported": [p.as_dict() for p in problems],
        "ir_nodes": len(graph.nodes),
        "ir_op_histogram": dict(Counter(n.op_type for n in graph.nodes).most_common()),
        "passes": log,
    })
    if pinned:
        report["pinned"] = {k: list(v) for k, v in pinned.items()}
    if not problems:
        report.update(_bake_preview((path, batch, pinned), report, options))
    if prediction and report.get("supported"):
        report["prediction"] = predict_launches((path, batch, pinned), options)
    return report


def _model_entry(path: str, batch: int, pinned: dict[str, tuple[int, ...]]) -> str:
    """The KILN_MODELS entry of (file, batch, pinned shapes)."""
    if pinned:
        return path + "@" + "+".join(f"{k}={'x'.join(map(str, v))}" for k, v in pinned.items())
    return path if batch == 1 else f"{path}@{batch}"


def predict_launches(model: tuple[str, int, dict], options) -> dict[str, Any]:
    """What a build of model = (path, batch, pinned) with `options` reports, without compiling: the model planned
    as the build plans it (codegen/pipeline.py plan, the kernel list left out), then per kernel launch the fields
    `kiln kernels MODEL --json` gives (select/launches.py launch_fields), and the model's totals as it sums them.
    Launches of a family the cost model does not replay have null fields and are counted apart."""
    import tempfile

    from .cost.model import COST_MODEL_VERSION
    from .pipeline import plan
    from .select.launches import launch_fields
    from .select.search_cache import default_jobs
    path, batch, pinned = model
    options = replace(options, kiln_models=(_model_entry(path, batch, pinned),))
    # the tiling search spread over the CPUs as the build's (KILN_CODEGEN_JOBS); results are the same for any count
    with tempfile.TemporaryDirectory(prefix="kiln-analyze-plan-") as work:
        planned = plan(options, Path(__file__).resolve().parent, Path(work), kernel_list=False, jobs=default_jobs())
    m = next(mp for mp in planned.models if mp.name == Path(path).stem)
    profile = planned.profile
    kernels = []
    for i in sorted(m.step_kernels):
        k, launch = m.step_kernels[i], m.launches.get(i)
        kernels.append({"step": m.lowered.steps[i].name, "name": k.symbol, "family": k.variant.family,
                        "tiling": dict(k.variant.params), **launch_fields(launch, profile)})
    aicpu: list[dict[str, Any]] = [{"step": m.lowered.steps[i].name, "op_type": m.lowered.steps[i].op_types[0],
                                    "predicted_cycles": c} for i, c in sorted(m.host_cycles.items())]
    launches = [m.launches.get(i) for i in sorted(m.step_kernels)]
    cycles = sum(x.predicted_cycles for x in launches if x is not None)
    cube = sum(x.cube_busy for x in launches if x is not None)
    vector = sum(x.vector_busy for x in launches if x is not None)
    return {"profile": profile.name, "cost_model": COST_MODEL_VERSION, "batch": batch,
            "kernel_launches": len(kernels), "unpredicted_launches": sum(x is None for x in launches),
            "cycles": round(cycles, 3), "latency_ms": round(cycles / (profile.clock_ghz * 1e6), 6),
            "mean_cube_utilization": round(cube / (cycles * profile.cube_cores), 4) if cycles else 0.0,
            "mean_vector_utilization": round(vector / (cycles * profile.vector_cores), 4) if cycles else 0.0,
            "bounds": dict(sorted(Counter(str(k["bound"]) for k in kernels).items())),
            "kernels": kernels, "aicpu_steps": aicpu,
            "aicpu_cycles": round(sum(a["predicted_cycles"] for a in aicpu), 3)}


def analysis_options(settings: AnalysisSettings):
    """The parsed build options `settings` stand for."""
    from .options import parse_options
    raw = {"ENABLE_FUSION": "ON" if settings.fusion else "OFF", "KILN_TARGET": settings.target,
           "MAX_SEQ_LEN": str(settings.max_seq_len),
           "USE_FLASH_ATTENTION": "ON" if settings.flash_attention else "OFF", "KILN_MODELS": ""}
    if settings.max_depth is not None:
        raw["MAX_FUSION_DEPTH"] = str(settings.max_depth)
    return parse_options(raw)


def _bake_preview(model: tuple[str, int, dict], report: dict[str, Any], options) -> dict[str, Any]:
    """What a build would bake of model = (path, batch, pinned shapes): kernel launches before and after fusion,
    what fused, the fusion audit (every opportunity not taken, with its reason) and the unique kernels; or the
    nodes no kernel serves yet."""
    from .ir.optlog import OptLog
    from .ir.profiles import get_profile
    from .passes.lowering import unsupported_nodes
    from .pipeline import plan_model
    from .select.recurrent import chooser
    path, batch, pinned = model
    recurrence = chooser(Path(path).stem, get_profile(options.kiln_target), OptLog())  # looped or not, as the build
    graph = onnx_frontend.load_onnx(path, batch, pinned=pinned, recurrence=recurrence)
    missing = unsupported_nodes(graph, Path(path).stem)
    if missing:
        report["unsupported"] = [{"node": n.name, "op_type": n.op_type,
                                  "reason": f"no kernel lowers {n.op_type} yet (the frontend accepts it)"}
                                 for n in missing]
        return {"supported": False}
    try:
        unfused_options = replace(options, enable_fusion=False)
        unfused = len(plan_model(graph, Path(path).stem, unfused_options, OptLog(), memory=False).specs)
        # fusion rewrites the graph: a fresh one
        graph = onnx_frontend.load_onnx(path, batch, pinned=pinned, recurrence=recurrence)
        stages = plan_model(graph, Path(path).stem, options, OptLog(), memory=False)
        result, lowered, specs = stages.fusion, stages.lowered, list(stages.specs.values())
    except KilnError as e:
        report["unsupported"] = [{"node": e.subject, "op_type": "", "reason": e.message}]
        return {"supported": False}
    return {"supported": True, "would_bake": {
        "kernel_launches": len(specs), "unique_kernels": len(set(specs)),
        "glue_steps": sum(1 for s in lowered.steps if s.kind == "glue"),
        "kernels": sorted({s.name for s in specs})},
        "aicpu": [{"node": s.name, "op_type": s.op_types[0], "reason": s.host.reason, "elements": s.host.elements}
                  for s in lowered.steps if s.host is not None],
        "fusion": {"enable": options.enable_fusion, "max_depth": options.max_fusion_depth,
                   "flash_attention": options.use_flash_attention, "max_seq_len": options.max_seq_len,
                   "target": options.kiln_target, "launches_unfused": unfused,
                   "launches_fused": len(specs), "fused": result.fused, "audit": result.audit}}


def _si(x: float, unit: str) -> str:
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= scale:
            return f"{x / scale:.3g} {prefix}{unit}"
    return f"{x:.3g} {unit}"


def _histogram(h: dict[str, int]) -> str:
    return ", ".join(f"{op} {k}" for op, k in h.items())


def _aicpu_lines(aicpu: list[dict[str, Any]]) -> list[str]:
    """The nodes that run on the AI CPU (no AI Core kernel), node by node."""
    if not aicpu:
        return []
    lines = [f"AI CPU      {len(aicpu)} node(s) run on the AI CPU as host steps between AI Core launches "
             f"(no AI Core kernel; the C++ runtime refuses such a model)"]
    lines += [f"  node '{a['node']}' ({a['op_type']}): reason={a['reason']}, {a['elements']} elements" for a in aicpu]
    return lines


def format_text(report: dict[str, Any]) -> str:
    shapes = lambda d: ", ".join(f"{k} {v}" for k, v in d.items())  # noqa: E731
    lines = [
        f"model       {report['model']} (opset {report['opset']}, batch {report['batch']})",
        f"inputs      {shapes(report.get('inputs', {}))}",
        f"outputs     {shapes(report.get('outputs', {}))}",
        f"ONNX nodes  {report['nodes']}: {_histogram(report['op_histogram'])}",
        f"kiln IR     {report['ir_nodes']} nodes after the frontend passes: {_histogram(report['ir_op_histogram'])}",
        f"FLOPs       {_si(report['flops'], 'FLOP')} (multiply-add = 2"
        + ("" if report.get("flops_complete", True) else "; nodes with unknown shapes not counted") + ")"
        + (": " + ", ".join(f"{op} {_si(f, '')}".rstrip() for op, f in report["flops_by_op"].items() if f)
           if report.get("flops_by_op") else ""),
        f"parameters  {_si(report['params_bytes'], 'B')} (float initializers)",
    ]
    for decision in report.get("passes", []):
        lines.append(f"  {decision}")
    problems = report["unsupported"]
    if problems:
        lines.append(f"NOT SUPPORTED: {len(problems)} problem(s)")
        for p in problems:
            where = (f"node '{p['node']}' ({p['op_type']})" if p["op_type"]
                     else (p["node"] and f"'{p['node']}'") or "model")
            lines.append(f"  {where}: {p['reason']}")
    else:
        wb = report.get("would_bake", {})
        lines.append(f"supported   yes: every node compiles, {wb.get('kernel_launches')} kernel launches, "
                     f"{wb.get('unique_kernels')} unique kernels, {wb.get('glue_steps')} host glue steps")
        fu = report.get("fusion")
        if fu:
            lines.append(f"fusion      {fu['launches_unfused']} launches, one per compute op -> {fu['launches_fused']} "
                         f"after fusion (ENABLE_FUSION={'ON' if fu['enable'] else 'OFF'}, MAX_FUSION_DEPTH="
                         f"{fu['max_depth']}, {fu['target']}): {len(fu['fused'])} fused")
            for f in fu["fused"]:
                lines.append(f"  {f['pattern']:<16} {f['node']} into {f['into']} ({f['where']})")
            lines.append(f"audit       {len(fu['audit'])} opportunities not taken")
            for a in fu["audit"]:
                lines.append(f"  {a['pattern']:<16} {a['node']}{' into ' + a['into'] if a['into'] else ''}: "
                             f"{a['reason']} ({a['detail']})")
        lines.append("kernels")
        for name in wb.get("kernels", []):
            lines.append(f"  {name}")
        lines += _aicpu_lines(report.get("aicpu", []))
    pr = report.get("prediction")
    if pr and pr.get("aicpu_steps"):
        lines.append(f"AI CPU      {pr['aicpu_cycles']:.0f} predicted cycles over {len(pr['aicpu_steps'])} step(s) "
                     f"(host sync included; not in the kernels' total below)")
    if pr:
        lines.append(f"predicted   {pr['cycles']:.0f} cycles = {pr['latency_ms']:.3f} ms on {pr['profile']} "
                     f"({pr['cost_model']}), Cube {100 * pr['mean_cube_utilization']:.1f}%, Vector "
                     f"{100 * pr['mean_vector_utilization']:.1f}%; bounds {pr['bounds']}")
        for k in pr["kernels"]:
            cycles = "-" if k["predicted_cycles"] is None else f"{k['predicted_cycles']:.0f}"
            lines.append(f"  {cycles:>9}  {k['bound']!s:<5} {k['name']}")
    return "\n".join(lines)
