"""Shape buckets and the generic path (KILN_SHAPE_BUCKETS).

An image model (one NCHW input) is baked at its own input size as always. KILN_SHAPE_BUCKETS="224;256" adds
a specialised plan per listed square size S (input H = W = S): the model's graph re-shaped to that size,
fused, lowered, its kernels searched and baked like any other ("bucket" kernels, deduplicated with the
rest), its own arena plan, all sharing the model's one weight blob (weight layouts do not depend on the
spatial size). Any other input size runs on *generic* kernels (codegen/shapes/generic.py): for each structural
spec the model's size-dependent kernels have, one kernel whose spatial dims and tiling are runtime values.
The plan for such a size -- the same graph re-shaped, fused and lowered, a tiling per kernel that fits the
buffers at that size, an arena plan -- is made at first use by `plan_size()`, which the installed package
runs from the manifest (kiln/dispatch.py); kernels whose spec does not depend on the size (a classifier's
GEMM) are the baked ones.

What the runtime needs is recorded in the model's manifest entry under "shape_buckets": the graph's
structure (nodes, attributes, value shapes; weights as shapes only, the values live in the blob), the
weight index of the blob, the generic kernels and the smallest input size the graph accepts.
"""
from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from math import prod

import numpy as np

from .. import KilnError
from ..emit.render import model_record
from ..ir.graph import Graph, Node, Value
from ..ir.manifest import KernelRecord, ModelRecord, opspec_of_record
from ..ir.opspec import Conv2dSpec, DwConv2dSpec, Opspec, Pool2dSpec
from ..ir.optlog import OptLog
from ..passes.l2 import plan_l2
from ..select.launches import record_accesses
from ..select.plan import ModelPlan
from ..select.tiling import choose_variant
from .generic import GenericKernel, generic_key, generic_symbol, runtime_args

WINDOW_OPS = ("Conv", "MaxPool", "AveragePool")
SMALL_CONSTANT = 64  # initializers up to this many elements keep their values in the graph record (scalars,
#                      clip bounds); larger ones are weights, which the runtime reads from the blob
PROBE_GROWTH = 32    # the probe size (own + 32 on both dims) shows which kernels depend on the input size


def bucket_label(model: str, size: int) -> str:
    """Name of a model's plan at bucket size `size` (op instance labels, log subjects): resnet50_s256."""
    return f"{model}_s{size}"


def image_input(graph: Graph) -> tuple[str, tuple[int, ...]] | None:
    """(name, NCHW shape) of the model's input when it is an image model (exactly one 4-D input), else None."""
    if len(graph.inputs) != 1 or len(graph.inputs[0].shape) != 4:
        return None
    return graph.inputs[0].name, tuple(graph.inputs[0].shape)


def _image_input(graph: Graph) -> tuple[str, tuple[int, ...]]:
    """image_input() of a graph that prepare() has accepted for shape buckets (an image model)."""
    found = image_input(graph)
    assert found is not None, f"{graph.name} is not an image model"
    return found


def planning_options(build: dict):
    """Options for planning a model at another size: the build's fusion options and target (so the fused graph
    has the structure the generic kernels were made for), direct convolution (generic kernels exist for img2col
    only) and the rule tiling (instant; generic_tiling then weighs it against the build's searched tilings).
    `build` is the manifest's options (Options.as_dict())."""
    from ..options import parse_options
    onoff = "ON" if build["ENABLE_FUSION"] else "OFF"
    return parse_options({"KILN_MODELS": "", "KILN_TARGET": build["KILN_TARGET"], "ENABLE_FUSION": onoff,
                          "MAX_FUSION_DEPTH": str(build["MAX_FUSION_DEPTH"]), "KILN_OPT_LEVEL": "O0",
                          "FORCE_DIRECT_CONV": "ON", "USE_WINOGRAD": "OFF",
                          "USE_FLASH_ATTENTION": "ON" if build.get("USE_FLASH_ATTENTION", True) else "OFF",
                          "MAX_SEQ_LEN": str(build.get("MAX_SEQ_LEN", 512))})


# ---------------------------------------------------------------- the graph at another size

def same_padding(path) -> dict[str, str]:
    """Node name -> auto_pad for the windowed nodes of an ONNX file that use SAME_UPPER/SAME_LOWER: the frontend
    resolved their pads for the model's own size, and with a stride > 1 the pads differ at other sizes."""
    from ..frontend.onnx_read import node_names, read_model
    model = read_model(path)
    out = {}
    for n, name in zip(model.graph.node, node_names(model)):
        for a in n.attribute:
            if a.name == "auto_pad" and a.s.decode() in ("SAME_UPPER", "SAME_LOWER") and n.op_type in WINDOW_OPS:
                out[name] = a.s.decode()
    return out


def graph_at_size(graph: Graph, size: tuple[int, int], model: str, same_pads: dict[str, str] | None = None) -> Graph:
    """The graph with its image input at spatial size `size` = (H, W): every shape re-inferred by the frontend's
    shape rules (frontend.onnx_ops.OPS), SAME pads re-resolved. New node objects, so fusion may edit them; the
    initializers are shared. A KilnError names the first node that cannot take the size."""
    from ..frontend.onnx_base import ShapeUnknown, Unsupported
    from ..frontend.onnx_ops import OPS
    from ..frontend.onnx_rules import window_attrs
    name, shape = _image_input(graph)
    h, w = size
    where = f"{model} at input size {h}x{w}"
    if h < 1 or w < 1:
        raise KilnError("shapes", where, "the input size must be positive")
    nodes = [Node(n.name, n.op_type, list(n.inputs), list(n.outputs), copy.deepcopy(n.attrs), list(n.source))
             for n in graph.nodes]
    g = Graph(graph.name, [], [], nodes, dict(graph.values), graph.initializers, graph.opset, graph.source_path)
    g.values[name] = Value(name, (shape[0], shape[1], h, w), graph.values[name].dtype)
    for node in nodes:
        entry = OPS.get(node.op_type)
        if entry is None or entry.infer is None:
            raise KilnError("shapes", f"node '{node.name}' ({node.op_type}) of {where}", "no shape rule for this op")
        try:
            if same_pads and node.name in same_pads:
                kernel = tuple(node.attrs["kernel_shape"])
                node.attrs.update(window_attrs(Node(node.name, node.op_type, node.inputs, node.outputs,
                                                    {**node.attrs, "auto_pad": same_pads[node.name]}), g, kernel))
            shapes = entry.infer(node, g, node.attrs)
        except Unsupported as e:
            raise KilnError("shapes", f"node '{node.name}' ({node.op_type}) of {where}", str(e)) from None
        except ShapeUnknown as e:
            raise KilnError("shapes", f"node '{node.name}' ({node.op_type}) of {where}",
                            f"the shape of '{e.value}' is unknown") from None
        if node.op_type in ("Reshape", "Flatten"):
            have, want = prod(g.values[node.inputs[0]].shape), prod(shapes[0])
            if have != want:  # a target folded at build time for the model's own size
                raise KilnError("shapes", f"node '{node.name}' ({node.op_type}) of {where}",
                                f"its target shape {tuple(shapes[0])} was fixed at build time for the model's own "
                                f"input size; it cannot hold {have} elements")
        for out, s in zip(node.outputs, shapes):
            if out:
                g.values[out] = Value(out, tuple(int(d) for d in s), graph.values[out].dtype)
    g.inputs = [g.values[name]]
    g.outputs = [g.values[v.name] for v in graph.outputs]
    return g


def same_pad_choices(node: Node, auto_pad: str) -> set[tuple[int, int, int, int]]:
    """Every (top, left, bottom, right) padding a SAME-padded window takes over input sizes: with a stride > 1
    it follows the size modulo the stride, so each choice needs its own generic kernel (pads are compiled in).
    Sizes up to a few windows cover the small sizes and whole periods of the large ones."""
    from ..frontend.onnx_rules import window_attrs
    kernel = tuple(node.attrs["kernel_shape"])
    probe = Node(node.name, node.op_type, ["x"], node.outputs, {**node.attrs, "auto_pad": auto_pad})
    bound = 4 * max(max(node.attrs["strides"]), 1) * max(kernel) * max(node.attrs.get("dilations", (1, 1)))
    out = set()
    for h in range(1, bound + 1):
        for w in range(1, bound + 1):
            g = Graph("probe", [], [], [], {"x": Value("x", (1, 1, h, w))}, {}, 0)
            top, left, bottom, right = window_attrs(probe, g, kernel)["pads"]
            out.add((top, left, bottom, right))
    return out


def min_input_size(graph: Graph, model: str, same_pads: dict[str, str] | None = None) -> tuple[int, int]:
    """Smallest H (at the model's own W) and smallest W (at its own H) the graph's shapes accept."""
    _, (_, _, h0, w0) = _image_input(graph)

    def smallest(make) -> int:
        for s in range(1, max(h0, w0) + 1):
            try:
                graph_at_size(graph, make(s), model, same_pads)
                return s
            except KilnError:
                continue
        return max(h0, w0)
    return smallest(lambda s: (s, w0)), smallest(lambda s: (h0, s))


# ---------------------------------------------------------------- the graph record (structure only)

def _jsonable(v):
    """An attribute value as strict JSON (the manifest is read by browsers too): sequences as lists, NumPy
    scalars as Python ones, a non-finite float as {"float": "inf" | "-inf" | "nan"}."""
    if isinstance(v, (list, tuple, np.ndarray)):
        return [_jsonable(x) for x in v]
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and not np.isfinite(v):
        return {"float": repr(v)}
    return v


def _from_json(v):
    """Inverse of _jsonable; lists come back as tuples, as the frontend normalises attributes."""
    if isinstance(v, list):
        return tuple(_from_json(x) for x in v)
    if isinstance(v, dict) and set(v) == {"float"}:
        return float(v["float"])
    return v


def graph_record(graph: Graph, same_pads: dict[str, str]) -> dict:
    """The graph without its weights: nodes, attributes, value shapes, initializer shapes (small constants with
    their values, so lowering sees the same scalars), and the nodes whose pads follow the size."""
    inits = {}
    for name, arr in graph.initializers.items():
        arr = np.asarray(arr)
        inits[name] = {"shape": list(arr.shape), "dtype": arr.dtype.name,
                       "values": _jsonable(arr.reshape(-1)) if arr.size <= SMALL_CONSTANT else None}
    return {
        "name": graph.name, "opset": graph.opset,
        "inputs": [v.name for v in graph.inputs], "outputs": [v.name for v in graph.outputs],
        "values": {v.name: [list(v.shape), v.dtype] for v in graph.values.values()},
        "initializers": inits,
        "nodes": [{"name": n.name, "op_type": n.op_type, "inputs": n.inputs, "outputs": n.outputs,
                   "attrs": {k: _jsonable(a) for k, a in n.attrs.items()}, "source": n.source} for n in graph.nodes],
        "same_pads": same_pads,
    }


def graph_from_record(rec: dict) -> Graph:
    """The graph of graph_record(); weights are zero placeholders of the right shape (lowering packs them, and
    the plan then reads the real ones from the blob by name)."""
    values = {name: Value(name, tuple(shape), dtype) for name, (shape, dtype) in rec["values"].items()}
    inits = {}
    for name, t in rec["initializers"].items():
        inits[name] = (np.asarray(_from_json(t["values"]), t["dtype"]).reshape(t["shape"]) if t["values"] is not None
                       else np.zeros(t["shape"], t["dtype"]))
    nodes = [Node(n["name"], n["op_type"], list(n["inputs"]), list(n["outputs"]),
                  {k: _from_json(a) for k, a in n["attrs"].items()}, list(n["source"])) for n in rec["nodes"]]
    return Graph(rec["name"], [values[i] for i in rec["inputs"]], [values[o] for o in rec["outputs"]], nodes, values,
                 inits, rec["opset"])


# ---------------------------------------------------------------- build time

@dataclass
class ShapeBuckets:
    """A model's shape buckets and generic path, as the build planned them."""
    input_name: str
    own_size: tuple[int, int]
    sizes: tuple[int, ...]                   # KILN_SHAPE_BUCKETS
    graph: dict                              # graph_record() of the pre-fusion graph
    pending: list[tuple[str, int, Graph]]    # (label, size, graph) of the buckets other than the own size
    min_size: tuple[int, int]
    buckets: list = field(default_factory=list)       # their ModelPlans, after planning
    generic_symbols: list[str] = field(default_factory=list)  # the generic kernels the model's steps can use
    generic_unavailable: str = ""            # why other sizes cannot run, when they cannot


def prepare(graph: Graph, name: str, path, options, log: OptLog) -> ShapeBuckets | None:
    """The bucket graphs of a model (before fusion edits its graph), or None when KILN_SHAPE_BUCKETS is empty or
    the model is not an image model."""
    sizes = options.kiln_shape_buckets
    if not sizes:
        return None
    img = image_input(graph)
    if img is None:
        log.add("shapes", name, "skipped", "not_image_model",
                inputs=";".join(f"{v.name}:{'x'.join(map(str, v.shape))}" for v in graph.inputs))
        return None
    input_name, (_, _, h, w) = img
    pads = same_padding(path)
    pending = []
    for s in sizes:
        if (s, s) != (h, w):
            pending.append((bucket_label(name, s), s, graph_at_size(graph, (s, s), name, pads)))
    shapes = ShapeBuckets(input_name, (h, w), tuple(sizes), graph_record(graph, pads), pending,
                          min_input_size(graph, name, pads))
    log.add("shapes", name, "buckets=" + "x".join(map(str, sizes)), "shape_buckets", input=input_name,
            own=f"{h}x{w}", bucket_plans=len(pending), min_size="x".join(map(str, shapes.min_size)))
    return shapes


def attach(model_plans: list, bucketed: dict[str, ShapeBuckets], profile, options, log: OptLog,
           plan_model) -> tuple[list, list]:
    """Moves every bucket plan under its model (ModelPlan.shapes) and decides the generic kernels (planning the
    model at other sizes with the pipeline's plan_model). Returns (top-level model plans, generic kernels)."""
    by_name = {m.name: m for m in model_plans}
    labels = {label: name for name, sb in bucketed.items() for label, _, _ in sb.pending}
    top = [m for m in model_plans if m.name not in labels]
    generic: dict = {}
    for name, sb in bucketed.items():
        m = by_name[name]
        m.shapes = sb
        sb.buckets = [by_name[label] for label, _, _ in sb.pending]
        for b, (label, size, _) in zip(sb.buckets, sb.pending):
            others = {id(k) for p in [m] + sb.buckets if p is not b for k in p.step_kernels.values()}
            own = {k.symbol for k in b.step_kernels.values() if id(k) not in others}
            log.add("shapes", label, "baked", "shape_bucket", size=f"{size}x{size}",
                    launches=len(b.step_kernels), kernels=len({k.symbol for k in b.step_kernels.values()}),
                    bucket_only_kernels=len(own), arena=b.memory.arena_bytes)
        _generic_path(m, sb, profile, options, log, generic, plan_model)
    return top, list(generic.values())


def fusion_profiles(profile) -> dict[str, object]:
    """The profiles fusion is run with to see every structure a size can take. Fusion's only size-dependent
    decision is a chain's (Conv -> Conv 1x1 in one kernel), refused on a map with fewer 16-pixel tiles than
    Cube cores: "build" decides as the build does, "chained" as on a one-core device (every legal chain taken),
    "unchained" without the profile (no chain at all). A step's fused spec follows its own pair's chain state
    only, so these cover the structures of every size (plan_size falls back to "unchained" otherwise)."""
    return {"build": profile, "chained": replace(profile, cube_cores=1), "unchained": None}


def step_specs(graph: Graph, name: str, size, pads, options, fusion_profile,
               plan_model) -> list[tuple[str, Opspec | None]]:
    """(step name, opspec, or None for glue) of the model planned at `size` (fusion and lowering only)."""
    stages = plan_model(graph_at_size(graph, size, name, pads), name, options, OptLog(), fusion_profile, memory=False)
    return [(st.name, stages.specs.get(i)) for i, st in enumerate(stages.lowered.steps)]


def _generic_path(m, sb: ShapeBuckets, profile, options, log: OptLog, generic: dict, plan_model) -> None:
    """The generic kernels of a model: one per structural spec of the kernels of a family with a generic mode,
    over every structure the model takes (fusion_profiles at its own size and at a probe size, and its bucket
    plans); the kernels of other families must not depend on the size (the baked one serves every size).
    Or why the model has no generic path."""
    graph = graph_from_record(sb.graph)
    pads = sb.graph["same_pads"]
    probe = (sb.own_size[0] + PROBE_GROWTH, sb.own_size[1] + PROBE_GROWTH)
    structures = []  # (own-size steps, probe-size steps) per fusion mode
    try:
        for mode, fusion_profile in fusion_profiles(profile).items():
            structures.append((mode, step_specs(graph, m.name, sb.own_size, pads, options, fusion_profile, plan_model),
                               step_specs(graph, m.name, probe, pads, options, fusion_profile, plan_model)))
    except KilnError as e:
        sb.generic_unavailable = f"the graph does not take other sizes: {e}"
        log.add("shapes", m.name, "generic:unavailable", "size_dependent_constant", detail=str(e))
        return
    plan_opts = planning_options(options.as_dict())
    found, size_independent = [], set()  # (key, spec, variant, step): committed to `generic` once all are known
    for mode, own, at_probe in structures:
        if [n for n, _ in own] != [n for n, _ in at_probe]:  # only chains change with the size, and modes fix them
            sb.generic_unavailable = f"its steps differ between input sizes under {mode} fusion"
            log.add("shapes", m.name, "generic:unavailable", "no_generic_form", detail=sb.generic_unavailable)
            return
        for (step, spec), (_, spec_probe) in zip(own, at_probe):
            if spec is None:
                continue
            variants: list[Opspec] = [spec]
            if step in pads:  # its pads follow the size: a generic kernel per padding it can take
                assert isinstance(spec, (Conv2dSpec, DwConv2dSpec, Pool2dSpec)), f"{step} is a window op"
                node = next(n for n in graph.nodes if n.name == step)
                variants = [replace(spec, pt=t, pl=left, pb=b, pr=r)
                            for t, left, b, r in sorted(same_pad_choices(node, pads[step]))]
            for sp in variants:
                v = choose_variant(sp, profile, OptLog(), plan_opts)
                key = generic_key(sp, v)
                if key is not None:
                    found.append((key, sp, v, step))
                elif spec_probe == spec:
                    size_independent.add(step)  # e.g. a classifier's GEMM: its baked kernel serves every size
                else:
                    sb.generic_unavailable = (f"node '{step}' runs a {v.family} kernel, which depends on the "
                                              f"input size and has no generic form")
                    log.add("shapes", m.name, "generic:unavailable", "no_generic_form", node=step, family=v.family)
                    return
    for key, sp, v, step in found:
        if key not in generic:
            generic[key] = GenericKernel(key, sp, v, [])
            log.add("shapes", generic_symbol(key), "new_kernel", "generic_kernel", family=v.family,
                    first=f"{m.name}:{step}")
        if f"{m.name}:{step}" not in generic[key].instances:
            generic[key].instances.append(f"{m.name}:{step}")
    sb.generic_symbols = sorted({generic_symbol(key) for key, *_ in found})
    log.add("shapes", m.name, "generic", "generic_path", generic_kernels=len(sb.generic_symbols),
            size_independent_steps=len(size_independent), fusion_modes=len(structures),
            min_size="x".join(map(str, sb.min_size)))


# ---------------------------------------------------------------- run time: the plan for one input size

@dataclass
class SizedPlan:
    """A model's plan at one input size, as the executor takes it (a model record) plus what served each kernel
    step."""
    model: ModelRecord
    generic_steps: int
    baked_steps: int
    log: OptLog
    kernels: dict = field(default_factory=dict)  # step index -> (Opspec, Variant) of each generic launch

    @property
    def record(self) -> dict:
        """The plan's model record as JSON."""
        return self.model.to_json()


def baked_tilings(model: ModelRecord, kernels: Sequence[KernelRecord]) -> dict[str, list[tuple]]:
    """Step name -> (input size, kernel, family, tiling, spec) of that step in each of the model's baked plans
    (its own size and its buckets): the tilings the build searched."""
    by_name = {k.name: k for k in kernels}
    out: dict[str, list] = {}
    sb = model.shape_buckets
    assert sb is not None, f"{model.name} has no shape buckets"
    for p in [model, *sb.plans]:
        size = tuple(p.inputs[0].shape[2:])
        for st in p.kernel_steps:
            k = by_name[st.kernel or ""]  # (a kernel step always names its kernel)
            out.setdefault(st.name, []).append((size, k.name, k.family, k.tiling, opspec_of_record(k)))
    return out


def generic_tiling(spec, rule, searched: list, size: tuple[int, int], profile, log: OptLog):
    """The tiling of a generic launch at `size`: the rule's (the largest tiles that fit at this size, spread over
    the cores) or the tiling the build searched for the same node at a baked size, if it fits the buffers here,
    whichever the cost model predicts fastest. A full search costs about 0.4 s per convolution, too much for
    a first call; one exact prediction per candidate costs about 1.5 ms."""
    from ..families.registry import FAMILIES, predicted_cycles, tunable
    from ..select.tiling import variant_from_params
    if rule.family not in tunable():
        return rule  # the other generic families have one rule and no search, at build time too
    cands = [("rule", rule)]
    for _at, kernel, family, tiling, baked_spec in searched:
        # the same node's kernel at a baked size, if it has this step's structure (chained or not, Winograd or not)
        if family != rule.family or generic_key(baked_spec, rule) != generic_key(spec, rule):
            continue
        # the generic kernel is compiled with the rule's structural parameters (its key): a borrowed tiling keeps
        # those (e.g. a baked conv's prefetch, which the generic kernel of the rule's key does not run)
        form = FAMILIES[family].generic
        structural = form.structural if form is not None else ()
        tiling = dict({n: x for n, x in tiling.items() if n not in structural},
                      **{n: rule.params[n] for n in structural if n in rule.params})
        try:
            cands.append((kernel, variant_from_params(spec, profile, family, tiling, f"the tiling of {kernel}",
                                                      whole=True)))
        except KilnError:  # does not fit the buffers at this size (an L1 slab holds rows of W pixels)
            continue
    cycles = [predicted_cycles(spec, v.family, v.params, profile) for _, v in cands]
    best = min(range(len(cands)), key=lambda j: (cycles[j], j))
    log.add("shapes", spec.name, cands[best][1].tag, "cost_model", size=f"{size[0]}x{size[1]}", source=cands[best][0],
            candidates=len(cands), rule_cycles=round(cycles[0]), best_cycles=round(cycles[best]))
    return cands[best][1]


def _step_reads(model: ModelRecord, symbols: dict, chosen: dict, profile) -> dict[int, tuple[int, ...] | None]:
    """Per kernel step of a sized plan, the bytes its kernel reads of each input (StepRecord.l2_reads): a generic
    launch's by the cost model's count at this size, a baked kernel's as the build recorded them for its steps."""
    from ..families.registry import input_reads
    sb = model.shape_buckets
    assert sb is not None
    baked = {st.kernel: st.l2_reads for p in [model, *sb.plans] for st in p.kernel_steps if st.l2_reads is not None}
    return {i: input_reads(chosen[i][0], chosen[i][1].family, chosen[i][1].params, profile) if i in chosen
            else baked.get(sym) for i, sym in symbols.items()}


class MissingKernel(KilnError):
    """A step of a plan at some size has neither a baked nor a generic kernel."""


def plan_size(model: ModelRecord | Mapping, kernels: Sequence[KernelRecord | Mapping], build_options: dict,
              size: tuple[int, int], generic_names: set[str], plan_model, prefer_baked: bool = True) -> SizedPlan:
    """Plans `model` (its manifest record) at input size `size` = (H, W) on the generic kernels: the stored graph
    re-shaped, fused and lowered as the build would, per kernel step the baked kernel of the same spec (when one
    exists with the default weight layouts and `prefer_baked`, or when the step has no generic kernel) or the
    generic kernel of its structural spec with a tiling for this size (generic_tiling), then the arena. Weights
    are the blob's, by name. Fusion decides as the build does; should that give a step no kernel of this build
    (a chain the build's probes did not see), the plan is made again without the size-dependent chains, whose
    structure the generic kernels always cover. Raises KilnError naming the node when a step cannot be served.
    The records may also be given as their JSON (manifest.json's entries)."""
    from ..ir.profiles import get_profile
    if not isinstance(model, ModelRecord):
        model = ModelRecord.from_json(model)
    records = [k if isinstance(k, KernelRecord) else KernelRecord.from_json(k) for k in kernels]
    sb = model.shape_buckets
    if sb is None:
        raise KilnError("shapes", model.name, "the model was baked without KILN_SHAPE_BUCKETS: it takes only its "
                                              "own input size")
    if sb.generic_unavailable:
        raise KilnError("shapes", model.name, f"this build has no generic path for the model: "
                                              f"{sb.generic_unavailable}")
    options = planning_options(build_options)
    profile = get_profile(options.kiln_target)
    modes = fusion_profiles(profile)
    req = _SizeRequest(model, records, size, generic_names, prefer_baked)
    try:
        return _plan_with(req, options, profile, modes["build"], plan_model)
    except MissingKernel as e:
        sized = _plan_with(req, options, profile, modes["unchained"], plan_model)
        sized.log.add("shapes", model.name, "fusion=unchained", "no_generic_form", size=f"{size[0]}x{size[1]}",
                      detail=e.message)
        return sized


@dataclass(frozen=True)
class _SizeRequest:
    """What plan_size was asked: the model's and kernels' manifest records, the input size, the generic kernels
    this build has, and whether a baked kernel of the same spec is preferred to a generic one."""
    model: ModelRecord
    kernels: list[KernelRecord]
    size: tuple[int, int]
    generic_names: set[str]
    prefer_baked: bool


def _plan_with(req: _SizeRequest, options, profile, fusion_profile, plan_model) -> SizedPlan:
    model, kernels, size, generic_names, prefer_baked = (req.model, req.kernels, req.size, req.generic_names,
                                                         req.prefer_baked)
    sb = model.shape_buckets
    assert sb is not None, f"{model.name} has no shape buckets"
    name = model.name
    log = OptLog()
    g = graph_at_size(graph_from_record(sb.graph), size, name, sb.graph["same_pads"])
    stages = plan_model(g, name, options, log, fusion_profile, log_lowering=False)
    lowered = stages.lowered
    windex = dict(sb.weights)
    for wname, arr in lowered.weights.items():  # weight layouts do not depend on the size: the blob has them
        nbytes = arr.nbytes  # fp16 / bf16 bits (uint16) / fp32
        if wname not in windex or windex[wname][1] != nbytes:
            raise KilnError("shapes", f"{name}: weight '{wname}'", f"the blob has no {nbytes}-byte weight of this "
                            f"name ({windex.get(wname, 'absent')}); rebuild with KILN_SHAPE_BUCKETS")
    baked: dict[str, str] = {}  # opspec name (a spec's identity) -> a baked kernel taking the default layouts
    for k in kernels:  # (a Winograd kernel reads transformed weights, which the blob holds for its own steps only)
        if all(t.layout != "WINOGRAD_FRACTAL_Z" for t in k.inputs):
            baked.setdefault(k.opspec_name, k.name)
    searched = baked_tilings(model, kernels)
    symbols, args, chosen = {}, {}, {}
    for i, spec in stages.specs.items():
        st = lowered.steps[i]
        v = choose_variant(spec, profile, log, options)
        key = generic_key(spec, v)
        sym = generic_symbol(key) if key else None
        if spec.name in baked and (prefer_baked or sym not in generic_names):
            symbols[i] = baked[spec.name]
            continue
        if sym is None or sym not in generic_names:
            raise MissingKernel("shapes", f"node '{st.name}' of {name} at input size {size[0]}x{size[1]}",
                                f"its kernel {spec.name} ({v.family}) is neither baked nor generic in this build")
        v = generic_tiling(spec, v, searched.get(st.name, []), size, profile, log)
        symbols[i], args[i] = sym, runtime_args(spec, v)
        chosen[i] = (spec, v)
        log.add("shapes", spec.name, sym, "generic_kernel", node=st.name, **args[i])
    plan = ModelPlan(name, model.onnx, lowered, stages.memory, {}, stages.fusion)
    rec = model_record(plan, symbols, windex, model.weights_bytes)
    hits = plan_l2(name, record_accesses(plan, rec.steps), profile.l2_bytes, log)  # as the build plans its own
    reads = _step_reads(model, symbols, chosen, profile)
    steps = tuple(replace(s, runtime_shape=args.get(i), l2_hits=hits[i], l2_reads=reads.get(i)) if s.is_kernel
                  else s for i, s in enumerate(rec.steps))
    return SizedPlan(replace(rec, steps=steps, input_size=(size[0], size[1])), len(args), len(symbols) - len(args), log,
                     chosen)
