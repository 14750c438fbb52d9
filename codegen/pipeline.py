"""The codegen pipeline, top to bottom: options -> frontend -> fusion -> lowering -> opspecs -> variants -> memory.

`plan_model()` is the one place a model graph goes through the stages (the build, `kiln analyze`, the shape
buckets and the runtime's generic planning all call it); `plan()` plans a whole build with it: the kernel list,
every model of KILN_MODELS and their shape buckets, then one variant per unique kernel (identical Opspecs are one
kernel). It returns a Plan; nothing is written until render.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from . import KilnError
from .families.registry import attention_capacity, channel_norm_cycles, rule_cycles
from .frontend.kernel_list import load_kernel_list
from .frontend.model_spec import ModelSpec, parse_model_spec
from .ir.graph import Graph, OpInstance
from .ir.manifest import KernelRecord, ModelRecord
from .ir.opspec import Opspec, is_depthwise, opspec_of
from .ir.optlog import OptLog
from .ir.profiles import get_profile
from .options import ZOO_MODELS, Options
from .passes.eltwise_programs import form_programs
from .passes.fusion import FusionLimits, FusionResult, fuse
from .passes.lowering import LoweredModel, lower
from .passes.memory import MemoryPlan, plan_arena
from .passes.patterns import find_patterns
from .passes.program_epilogue import absorb_program_epilogues
from .select import search_cache
from .select.conv_transpose import chooser as convt_chooser
from .select.l2_search import rank_with_l2_plans
from .select.launches import attach_launches
from .select.plan import KernelPlan, KernelRequest, ModelPlan, Plan
from .select.recurrent import chooser as recurrence_chooser
from .select.tuning import load_records
from .shapes import buckets as shape_buckets
from .shapes.buckets import ShapeBuckets

BUILD_PROFILE = object()  # plan_model's default fusion profile: the build target's


@dataclass
class ModelStages:
    """One model graph after the stages: what fusion did, the lowered steps, each kernel step's op spec (step
    index -> Opspec; a step's instance is labelled `model:node`) and the arena."""
    fusion: FusionResult
    lowered: LoweredModel
    specs: dict[int, Opspec]
    memory: MemoryPlan | None


def spec_of_step(op: OpInstance) -> Opspec:
    try:
        return opspec_of(op)
    except (KeyError, ValueError, TypeError) as e:  # a lowering rule left an attribute out
        raise KilnError("opspec", op.label, f"cannot describe this op as a kernel: {e}") from None


def plan_model(graph: Graph, name: str, options: Options, log: OptLog, fusion_profile=BUILD_PROFILE,
               memory: bool = True, log_lowering: bool = True) -> ModelStages:
    """Fusion (rewrites `graph`), lowering, the op spec of every kernel step and the arena of one model.
    fusion_profile: the profile whose capacities fusion checks (None: no size-dependent chains; default: the
    build target's). The choice of each kernel's variant is the caller's (the build dedups and searches all
    kernels at once; the runtime's generic planning chooses per step). log_lowering: the lowering's layout
    decisions go to `log` (the build's log; the runtime's plan log leaves them to the build's)."""
    profile = get_profile(options.kiln_target)
    limits = FusionLimits.of(options, profile if fusion_profile is BUILD_PROFILE else fusion_profile,
                             attention_capacity, channel_norm_cycles)
    fusion = fuse(graph, name, limits, log)
    patterns = find_patterns(graph)
    patterns.decisions.extend(form_programs(graph, patterns, name, limits, log))
    absorb_program_epilogues(graph, name, limits, log, fusion, rule_cycles)
    lowered = lower(graph, name, options.kiln_dtype, patterns,
                    convt_chooser(name, profile, options, log if log_lowering else OptLog()))
    lowered.int64_outputs = tuple(v.name for v in graph.outputs if graph.values[v.name].dtype == "int64")
    for d in lowered.decisions if log_lowering else ():
        node, _, detail = d.partition(":")
        log.add("lowering", f"{name}:{node}", "decision", "view_or_relayout", detail=detail.strip())
    for st in lowered.steps if log_lowering else ():
        if st.host is not None:  # the AI CPU fallback: a host step between AI Core launches
            log.add("lowering", f"{name}:{st.name}", "aicpu", st.host.reason, op=st.op_types[0])
    specs = {}
    for i, st in enumerate(lowered.steps):
        if st.kind == "kernel":
            st.instance = OpInstance(f"{name}:{st.name}", st.kernel_op.type, st.kernel_op.attrs)
            specs[i] = spec_of_step(st.instance)
    return ModelStages(fusion, lowered, specs, plan_arena(lowered, profile.gm_alignment) if memory else None)


def plan_size(model: ModelRecord | Mapping, kernels: Sequence[KernelRecord | Mapping], build_options: dict,
              size: tuple[int, int],
              generic_names: set[str], prefer_baked: bool = True) -> shape_buckets.SizedPlan:
    """A model's plan at an input size no bucket was baked for (the runtime's generic planning, kiln/dispatch.py):
    codegen/shapes/buckets.py plan_size through plan_model."""
    return shape_buckets.plan_size(model, kernels, build_options, size, generic_names, plan_model, prefer_baked)


def with_cube_dtype(op: OpInstance, dtype: str) -> OpInstance:
    """A kernel-list entry of a Cube op (convolution, GEMM, batched MatMul) in the build's KILN_DTYPE (entries
    have no dtype field of their own). Depthwise convolutions run on the Vector cores and stay fp16."""
    a = op.attrs
    cube = op.type in ("Gemm", "MatMul", "BatchedMatMul") or (
        op.type == "Conv" and not is_depthwise(a.get("group", 1), a["input"][1], a["weight"]))
    if dtype == "fp16" or not cube:
        return op
    return OpInstance(op.label, op.type, {**a, "dtype": dtype})


def default_kernel_list(source_dir: Path) -> Path:
    return source_dir / "kernels" / "default.toml"


def model_onnx(entry: str, work_dir: Path) -> tuple[str, Path, ModelSpec]:
    """(model name, ONNX path, parsed spec) for a KILN_MODELS entry in the model-spec grammar
    (frontend/model_spec.py): `zoo_name` or `path.onnx`, optionally `@BATCH` or `@INPUT=DxD...` pins. A zoo
    name is built into work_dir/models; a batch other than 1 and pinned shapes are part of the name."""
    from .frontend import zoo  # imports onnx: only when models are baked
    spec = parse_model_spec(entry, ZOO_MODELS)
    if spec.source in zoo.ZOO:
        return spec.model_name, _zoo_cached(zoo, spec.source, work_dir / "models"), spec
    return spec.model_name, Path(spec.source), spec


def check_model_entries(entries: tuple[str, ...] | list[str]) -> None:
    """Every KILN_MODELS entry parses and names a zoo model or an existing file (configure time): a KilnError
    naming the entry otherwise."""
    for entry in entries:
        spec = parse_model_spec(entry, ZOO_MODELS)
        if spec.is_onnx_file and not Path(spec.source).is_file():
            raise KilnError("frontend", f"model spec {entry!r}", f"file {spec.source!r} does not exist (relative "
                            f"paths are relative to the source dir)")


ZOO_SEED = 0


def _zoo_cached(zoo, name: str, models_dir: Path) -> Path:
    """Builds a zoo model once; rebuilt when the builder's source changes (configure and build share it)."""
    import hashlib
    key = hashlib.sha256((Path(zoo.__file__).read_text() + f"{name}:{ZOO_SEED}").encode()).hexdigest()
    path = models_dir / f"{name}.onnx"
    keyfile = models_dir / f"{name}.onnx.key"
    if path.is_file() and keyfile.is_file() and keyfile.read_text() == key:
        return path
    models_dir.mkdir(parents=True, exist_ok=True)
    zoo.write(name, path, seed=ZOO_SEED)
    keyfile.write_text(key)
    return path


class _Kernels:
    """The build's unique kernels: identical Opspecs (with the same kernel-list pins) are one kernel."""

    def __init__(self, log: OptLog) -> None:
        self.log = log
        self.by_spec: dict[tuple[Opspec, str, tuple], KernelRequest] = {}

    def add(self, op: OpInstance, spec: Opspec | None = None) -> KernelRequest:
        spec = spec_of_step(op) if spec is None else spec
        key = (spec, op.attrs.get("algorithm", ""), op.attrs.get("tiling", ()))
        if key in self.by_spec:
            self.log.add("opspec", op.label, spec.name, "dedup")
        else:
            self.by_spec[key] = KernelRequest(spec, pinned=key[1], pinned_tiling=key[2])
            self.log.add("opspec", op.label, spec.name, "new_kernel")
        self.by_spec[key].instances.append(op.label)
        return self.by_spec[key]


@dataclass
class _Model:
    name: str
    path: Path
    stages: ModelStages
    steps: dict[int, KernelRequest]


def _log_options(options: Options, profile, log: OptLog) -> None:
    log.add("options", "build", f"target={profile.name}", "option", isa=options.isa_resolved or options.kiln_isa,
            dtype=options.kiln_dtype)
    for name in options.from_level:
        value = options.as_dict()[name]
        value = ("ON" if value else "OFF") if isinstance(value, bool) else value
        log.add("options", "build", f"{name}={value}", "opt_level", KILN_OPT_LEVEL=options.kiln_opt_level)


def _log_frontend(graph: Graph, name: str, spec: ModelSpec, log: OptLog) -> None:
    """The frontend's decisions that change what is baked: an opset conversion, pinned input shapes, an op
    rewritten into others (InstanceNormalization, GroupNormalization, LRN: codegen/frontend/onnx_norm.py)."""
    if graph.source_opset:
        log.add("frontend", name, f"opset={graph.source_opset}->{graph.opset}", "opset_converted",
                converter="onnx.version_converter")
    for inp, dims in spec.pins:
        log.add("frontend", name, f"input={inp}", "pinned_shape", shape=dims)
    for node, what in graph.rewrites.items():
        log.add("frontend", f"{name}:{node}", "rewritten", "frontend_pass", into=what)


def _plan_models(options: Options, work_dir: Path | None, progress, log: OptLog, kernels: _Kernels):
    """Every KILN_MODELS entry through plan_model, then each of its shape buckets' graphs as a model of its own.
    Returns (the models, their shape buckets by model name)."""
    models: list[_Model] = []
    names: set[str] = set()
    bucketed: dict[str, ShapeBuckets] = {}

    def add_model(name: str, path: Path, graph) -> None:
        stages = plan_model(graph, name, options, log)
        steps = {i: kernels.add(stages.lowered.steps[i].kernel_op, spec) for i, spec in stages.specs.items()}
        models.append(_Model(name, path, stages, steps))

    if work_dir is None:  # never build zoo files into the caller's cwd (it may be the source tree); one shared
        import tempfile  # cache: zoo files are reused by key, not rebuilt per call
        work_dir = Path(tempfile.gettempdir()) / "kiln-codegen-cache"
    for entry in options.kiln_models:
        from .frontend.onnx_import import load_onnx  # imports onnx: only when models are baked
        name, path, spec = model_onnx(entry, work_dir)
        batch = spec.batch
        if name in names:
            raise KilnError("frontend", entry, f"two KILN_MODELS entries are both named '{name}'")
        names.add(name)
        if progress:
            progress(f"model {name}: frontend ({path})")
        graph = load_onnx(path, batch=batch, pinned=spec.pinned,
                          recurrence=recurrence_chooser(name, get_profile(options.kiln_target), log))
        _log_frontend(graph, name, spec, log)
        if batch != 1 and any(v.shape and v.shape[0] != batch for v in graph.inputs):
            raise KilnError("frontend", entry, f"{path} has a fixed batch dimension, so it cannot be baked at batch "
                            f"{batch}; only models whose first input dim is symbolic take @BATCH")
        shapes = shape_buckets.prepare(graph, name, path, options, log)  # before fusion edits the graph
        add_model(name, path, graph)
        if shapes is not None:
            bucketed[name] = shapes
            for label, _, sized in shapes.pending:  # one more plan per bucket size, baked like a model
                if label in names:
                    raise KilnError("shapes", entry, f"the plan of shape bucket '{label}' and a model share this name")
                names.add(label)
                if progress:
                    progress(f"model {name}: shape bucket {label}")
                add_model(label, path, sized)
    return models, bucketed


def _merge_kernels(kernels: list[KernelPlan]) -> tuple[list[KernelPlan], list[KernelPlan]]:
    """One kernel per symbol: a pinned instance that came out as the unpinned kernel joins it; a pinned one that
    differs gets its tiling in its name. Returns (the kernels left, the one each of `kernels` became)."""
    seen: dict[str, KernelPlan] = {}
    became: list[KernelPlan] = []
    for k in kernels:
        first = seen.get(k.symbol)
        became.append(k)
        if first is not None and first.spec == k.spec and first.variant.tag == k.variant.tag:
            first.instances += k.instances
            became[-1] = first
        elif first is not None and first.spec == k.spec:  # e.g. a pinned algorithm beside a tuning record
            k.suffix = "__" + k.variant.tag[len(k.variant.family) + 1:]
            seen[k.symbol] = k
        elif first is not None:
            raise KilnError("opspec", k.symbol, f"two different specs share this kernel name: {first.spec} "
                            f"and {k.spec} (instances {first.instances} and {k.instances})")
        else:
            seen[k.symbol] = k
    return list(seen.values()), became


def _model_plan(m: _Model, planned: dict[KernelRequest, KernelPlan], options: Options, log: OptLog) -> ModelPlan:
    mem = m.stages.memory
    assert mem is not None  # the build plans every model's arena
    for out, src in mem.in_place:
        log.add("memory", m.name, f"{out}->in_place({src})", "in_place")
    log.add("memory", m.name, f"arena={mem.arena_bytes}", "memory_plan", lower_bound=mem.lower_bound_bytes,
            naive=mem.naive_bytes, strategy=mem.strategy, **{f"tried_{k}": v for k, v in mem.strategies.items()})
    steps = {i: planned[r] for i, r in m.steps.items()}
    plan = ModelPlan(m.name, str(m.path), m.stages.lowered, mem, steps, m.stages.fusion)
    attach_launches(plan, get_profile(options.kiln_target), log)  # the L2 plan and each step's predicted launch
    return plan


def plan(options: Options, source_dir: Path, work_dir: Path | None = None, progress=None, jobs: int = 1,
         search_cache_dir: Path | None = None, kernel_list: bool = True) -> Plan:
    """The whole build: the kernel list's op instances and every model's kernel steps, one variant per unique
    kernel (searched in `jobs` processes, results kept in search_cache_dir between runs), the models' memory plans
    and their shape buckets. kernel_list=False: the models alone (`kiln analyze`'s prediction; each kernel's
    variant is chosen per spec, so a model's kernels come out as in the whole build)."""
    log = OptLog()
    profile = get_profile(options.kiln_target)
    _log_options(options, profile, log)
    kernels = _Kernels(log)
    listed = Path(options.kiln_kernel_list) if options.kiln_kernel_list else default_kernel_list(source_dir)
    for op in load_kernel_list(listed) if kernel_list else ():
        kernels.add(with_cube_dtype(op, options.kiln_dtype))
    models, bucketed = _plan_models(options, work_dir, progress, log, kernels)
    requests = list(kernels.by_spec.values())
    records = load_records(options.kiln_tuning_records, profile) if options.kiln_tuning_records else {}
    # Variant and prediction per kernel, from the build dir's cache where an earlier run searched it
    setup = search_cache.SearchSetup(search_cache_dir, jobs, progress)
    chosen = search_cache.choose_all(requests, profile, log, options, records, setup)
    unique, became = _merge_kernels(chosen)
    planned = dict(zip(requests, became))
    model_plans = [_model_plan(m, planned, options, log) for m in models]
    rank_with_l2_plans(model_plans, profile, log, options, records, setup)  # the Cube tilings, as the models' steps run
    model_plans, generic_kernels = shape_buckets.attach(model_plans, bucketed, profile, options, log, plan_model)
    return Plan(options, profile, unique, log, model_plans, generic_kernels)
