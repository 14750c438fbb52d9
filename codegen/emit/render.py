"""Render: Jinja2 templates -> C++ sources, headers, manifest.json, .opspec files
and the optimisation-path log, written into the build directory.

Everything is rendered in memory first; a failure leaves the previous output
untouched. Files are replaced atomically and only when their content changed,
so an unchanged kernel is not recompiled.
"""
from __future__ import annotations

import base64
import json
import sys
import time
import zlib
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .. import KilnError
from ..emit.cpp_api import DEFAULT_KERNEL_NAMESPACE, cpp_api_files, kernel_namespace
from ..emit.opspec_file import features as opspec_features
from ..emit.opspec_file import render_opspec, spec_hash
from ..families.registry import FAMILIES
from ..ir.files import write_atomic
from ..ir.manifest import (
    GLUE_CODES,
    SPACE_ARENA,
    SPACE_INPUT,
    SPACE_OUTPUT,
    SPACE_WEIGHTS,
    FusionRecord,
    GenericKernelRecord,
    HostRecord,
    InPlace,
    IoDesc,
    KernelRecord,
    Manifest,
    MemoryRecord,
    ModelRecord,
    PipePrediction,
    Ref,
    Region,
    ShapeBucketsRecord,
    StepRecord,
    TensorDesc,
    TensorPlacement,
)
from ..ir.opspec import features
from ..ir.profiles import POSITIONS, PROFILES, VEC_OPS
from ..select.plan import KernelPlan, ModelPlan, Plan, step_inputs, weight_transform
from ..select.tiling import algorithm_of
from .modes import BAKED_MODE

if TYPE_CHECKING:
    import jinja2

TEMPLATE_DIR = Path(__file__).resolve().parents[2] / "templates"
KERNEL_DIR = "kernels"
OPSPEC_DIR = "opspecs"
LOG_FILE = "optimization_path.log"
LOG_DIR = "logs"  # one log per model


@dataclass(frozen=True)
class CppApi:
    """A build for kiln_add_model (emit/cpp_api.py): the C++ API's name and the directory the files go to (the
    weights blob is linked from there)."""
    name: str
    out_dir: Path


def output_files(plan: Plan, cpp_api: CppApi | None = None) -> list[str]:
    """Every file generate() writes, relative to the output directory."""
    files = ["kiln_profiles.hpp", "kiln_kernel_table.hpp", "kiln_generic_table.hpp", "manifest.json"]
    if cpp_api is not None:
        files += [f"{cpp_api.name}.hpp", f"{cpp_api.name}_model.cpp"]
    files += [f"{KERNEL_DIR}/{k.symbol}.cpp" for k in plan.kernels]
    files += [f"{KERNEL_DIR}/{g.symbol}.cpp" for g in plan.generic_kernels]
    files += list(dict.fromkeys(f"{OPSPEC_DIR}/{spec_hash(k.spec)}.opspec" for k in plan.kernels))  # one per spec
    files += [f"models/{m.name}.weights.bin" for m in plan.models]
    if plan.options.debug_optimization_path:
        files.append(LOG_FILE)
        files += [f"{LOG_DIR}/{m.name}.log" for m in plan.models]
    return files


def model_log(plan: Plan, m: ModelPlan) -> str:
    """The model's share of the log: build-wide lines, its nodes' lines, and the lines of its kernels' specs
    (with shape buckets: those of its bucket plans too, and of its generic kernels)."""
    plans = [m] + (m.shapes.buckets if m.shapes else [])
    names = {p.name for p in plans}
    specs = {k.spec.name for p in plans for k in p.step_kernels.values()}
    specs |= set(m.shapes.generic_symbols) if m.shapes else set()
    keep = []
    for line in plan.log.lines:
        subject = line.split(" ", 3)[2]
        if subject == "build" or subject in names or subject.split(":", 1)[0] in names or subject in specs:
            keep.append(line)
    return "\n".join(keep) + "\n"


WEIGHT_ALIGN = 64


def packed_weights(m: ModelPlan) -> dict[str, np.ndarray]:
    """The model's weights in the layouts its chosen kernels read: lowering packs FRACTAL_Z, and a conv whose
    variant is Winograd gets its weights transformed (G g G^T) here, once, at build time. With shape buckets
    one blob serves every plan of the model: the packed weights have the same names and layouts at every size,
    a transformed copy exists per Winograd tile some plan uses, and a FRACTAL_Z original is kept wherever a
    direct kernel reads it -- always when the model has a generic path, whose convolutions are direct."""
    plans = [m] + (m.shapes.buckets if m.shapes else [])
    read: set[str] = set()
    transformed: dict[str, tuple[str, Callable[[np.ndarray], np.ndarray]]] = {}  # name -> (FRACTAL_Z name, transform)
    for p in plans:
        for name, arr in p.lowered.weights.items():
            if name not in m.lowered.weights or m.lowered.weights[name].shape != arr.shape:
                raise KilnError("render", f"{p.name}: weight '{name}'", "differs from the weight of the same name "
                                "at the model's own input size; shape buckets need size-independent weights")
        for i in range(len(p.lowered.steps)):
            read.update(step_inputs(p, i))
        for i, k in p.step_kernels.items():
            t = weight_transform(k)
            if t is not None:
                name = p.lowered.steps[i].inputs[1]
                transformed[name + t[0]] = (name, t[1])
    keep_all = bool(m.shapes and m.shapes.generic_symbols)
    weights: dict[str, np.ndarray] = {}
    for name, arr in m.lowered.weights.items():  # first-use order, each transformed copy beside its original
        if keep_all or name in read:
            weights[name] = arr
        for blob_name, (orig, transform) in sorted(transformed.items(), key=lambda kv: kv[0]):
            if orig == name:
                weights[blob_name] = transform(arr)
    return weights


def weights_blob(m: ModelPlan) -> tuple[bytes, dict[str, tuple[int, int]]]:
    """All packed weights of a model in one blob: name -> (offset, bytes)."""
    parts, index, off = [], {}, 0
    for name, arr in packed_weights(m).items():
        # fp16, bf16 bit patterns (uint16: Cube weights of KILN_DTYPE=bf16) or fp32, as packed
        data = (arr if arr.dtype in (np.float16, np.uint16) else arr.astype(np.float32)).tobytes()
        pad = (-off) % WEIGHT_ALIGN
        parts.append(b"\0" * pad)
        off += pad
        index[name] = (off, len(data))
        parts.append(data)
        off += len(data)
    return b"".join(parts), index


def model_record(m: ModelPlan, kernel_symbols: dict[int, str], windex: dict[str, tuple[int, int]],
                 blob_bytes: int) -> ModelRecord:
    low, mem = m.lowered, m.memory
    inputs = [n for n, _ in low.graph_inputs]
    outputs = [f"{n}@out" for n, _ in low.graph_outputs]

    def ref(v: str) -> Ref:
        if v in windex:
            return Ref(SPACE_WEIGHTS, *windex[v])
        if v in inputs:
            shape = dict(low.graph_inputs)[v]
            return Ref(SPACE_INPUT, inputs.index(v), int(np.prod(shape)) * 4)
        if v in outputs:
            return Ref(SPACE_OUTPUT, outputs.index(v), low.storage[v].nbytes)
        return Ref(SPACE_ARENA, mem.placements[mem.roots[v]].offset + low.alias_offsets.get(v, 0),
                   low.storage[v].nbytes)

    frees: dict[int, list[Region]] = {}  # step -> arena regions whose tensor is dead after it
    for p in mem.placements.values():
        frees.setdefault(p.last, []).append(Region(p.offset, p.nbytes))
    names = [s.name for s in low.steps]
    steps = []
    for i, s in enumerate(low.steps):
        st = low.storage[s.output]
        steps.append(StepRecord(
            s.name, s.kind, tuple(s.ops), tuple(s.op_types), kernel_symbols.get(i), GLUE_CODES.get(s.glue),
            tuple(s.params), tuple(ref(v) for v in step_inputs(m, i)), ref(s.output),
            # the ONNX value this step produces, as held on the device (for per-kernel checks)
            s.output, st.layout, tuple(st.logical), tuple(sorted(frees.get(i, []))),
            l2_hits=m.l2_hits.get(i), launch=m.launches.get(i), host=host_record(m, i), l2_reads=m.l2_reads.get(i)))
    memory = MemoryRecord(
        mem.lower_bound_bytes, mem.naive_bytes, mem.strategy, mem.strategies, round(mem.fragmentation, 6),
        mem.alignment, tuple(InPlace(o, i) for o, i in mem.in_place),
        tuple(TensorPlacement(p.value, p.offset, p.nbytes, names[p.first], names[p.last], p.first, p.last)
              for p in sorted(mem.placements.values(), key=lambda p: (p.offset, p.first))))
    fusion = FusionRecord(m.fusion.ops_before if m.fusion else None, tuple(m.fusion.fused) if m.fusion else (),
                          tuple(m.fusion.audit) if m.fusion else ())
    return ModelRecord(
        m.name, m.onnx_path, tuple(IoDesc(n, tuple(sh)) for n, sh in low.graph_inputs),
        tuple(IoDesc(n, tuple(sh), "int64" if n in low.int64_outputs else "float32") for n, sh in low.graph_outputs),
        f"models/{m.name}.weights.bin", blob_bytes,
        mem.arena_bytes, memory, sum(1 for s in low.steps if s.kind == "kernel"), fusion,
        len(set(kernel_symbols.values())), tuple(steps),
        shape_buckets_record(m, windex, blob_bytes) if m.shapes is not None else None)


def host_record(m: ModelPlan, i: int) -> HostRecord | None:
    """Step i's record as an AI CPU step (the node as a base64 ONNX model, reason, cost), None for other steps."""
    host = m.lowered.steps[i].host
    if host is None:
        return None
    return HostRecord(base64.b64encode(host.model).decode(), host.reason, host.elements, m.host_cycles[i])


def shape_buckets_record(m: ModelPlan, windex: dict[str, tuple[int, int]], blob_bytes: int) -> ShapeBucketsRecord:
    """The model's "shape_buckets" manifest entry: a plan per bucket (with its input size) and the generic path."""
    sb = m.shapes  # codegen/shapes/buckets.py ShapeBuckets
    assert sb is not None, f"{m.name} has no shape buckets"
    plans = tuple(replace(model_record(b, {i: k.symbol for i, k in b.step_kernels.items()}, windex, blob_bytes),
                          input_size=(size, size))
                  for b, (_, size, _) in zip(sb.buckets, sb.pending))
    return ShapeBucketsRecord(tuple(sb.sizes), sb.input_name, tuple(sb.own_size), plans, tuple(sb.min_size), sb.graph,
                              dict(windex), tuple(sb.generic_symbols),
                              sb.generic_unavailable)


def _env(template_dir: Path) -> jinja2.Environment:
    import jinja2  # only rendering needs it: the installed package plans shape buckets with this module at run time
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(template_dir)), undefined=jinja2.StrictUndefined,
                             keep_trailing_newline=True)
    env.filters["extract"] = lambda key, mapping: mapping[key]
    env.filters["cfloat"] = cfloat
    for f in FAMILIES.values():
        env.globals.update(f.template_globals)
    env.globals.update(BAKED_MODE)  # a generic kernel's render overrides these (codegen/emit/modes.py)
    env.globals["kernel_namespace"] = DEFAULT_KERNEL_NAMESPACE
    return env


def cfloat(v: float) -> str:
    """A C++ float literal that is exactly v (as float32), including the infinities."""
    import math
    v = float(v)
    if math.isinf(v):
        return "INFINITY" if v > 0 else "-INFINITY"
    if math.isnan(v):
        raise ValueError("NaN is not a valid kernel constant")
    return repr(v) + "f" if ("." in repr(v) or "e" in repr(v)) else repr(v) + ".0f"


def spec_instances(plan: Plan) -> dict:
    """Each unique spec with the op instances of every kernel that implements it."""
    out: dict = {}
    for k in plan.kernels:
        out.setdefault(k.spec, []).extend(k.instances)
    return out


def kernel_record(k: KernelPlan, profile) -> KernelRecord:
    t = lambda x: TensorDesc(x.name, tuple(x.shape), x.dtype, x.layout)  # noqa: E731
    pred = k.prediction  # the cost model's prediction of the chosen variant (None where the family has no replay yet)
    return KernelRecord(
        k.symbol, k.variant.family, k.variant.tag, k.variant.unit, spec_hash(k.spec), k.spec.name,
        asdict(k.spec), dict(k.variant.params), k.variant.blocks,
        {p: b for p, b in k.variant.buffers.items() if b}, {**features(k.spec), **opspec_features(k.spec, profile)},
        k.mte2_bytes, algorithm_of(k.variant), dict(k.variant.notes.get("compared_cycles", {})),
        None if pred is None else round(pred.cycles, 3), None if pred is None else pred.bound_unit(),
        None if pred is None else {name: PipePrediction(c.instrs, c.bytes, round(c.busy, 3))
                                   for name, c in pred.pipes.items() if c.instrs},
        tuple(t(x) for x in k.inputs), t(k.spec.output()), tuple(k.instances))


def manifest(plan: Plan, blobs: dict[str, tuple[bytes, dict]] | None = None,
             opspecs: dict[str, str] | None = None) -> dict:
    """manifest.json's content (manifest_record(...).to_json())."""
    return manifest_record(plan, blobs, opspecs).to_json()


def opspec_files(plan: Plan) -> dict[str, str]:
    """Each unique spec's .opspec file: installed path -> text (kernels pinned to other algorithms share one)."""
    return {f"{OPSPEC_DIR}/{spec_hash(spec)}.opspec": render_opspec(spec, instances, plan.profile)
            for spec, instances in spec_instances(plan).items()}


def file_checksums(blobs: dict[str, tuple[bytes, dict]], opspecs: dict[str, str]) -> dict[str, int]:
    """CRC-32 (zlib's) of every installed weights blob and .opspec file, by path: the manifest's `checksums`."""
    sums = {f"models/{name}.weights.bin": zlib.crc32(blob) for name, (blob, _) in sorted(blobs.items())}
    sums.update({path: zlib.crc32(text.encode()) for path, text in sorted(opspecs.items())})
    return sums


def manifest_record(plan: Plan, blobs: dict[str, tuple[bytes, dict]] | None = None,
                    opspecs: dict[str, str] | None = None) -> Manifest:
    blobs = blobs if blobs is not None else {m.name: weights_blob(m) for m in plan.models}
    opspecs = opspecs if opspecs is not None else opspec_files(plan)
    return Manifest(
        plan.profile.name, plan.options.as_dict(), tuple(kernel_record(k, plan.profile) for k in plan.kernels),
        tuple(model_record(m, {i: k.symbol for i, k in m.step_kernels.items()}, blobs[m.name][1],
                           len(blobs[m.name][0])) for m in plan.models),
        tuple(GenericKernelRecord(g.symbol, g.family, tuple(g.runtime_fields), g.inputs, tuple(g.instances))
              for g in plan.generic_kernels),
        file_checksums(blobs, opspecs))


def render(plan: Plan, template_dir: Path | None = None, progress=None,
           cpp_api: CppApi | None = None) -> dict[str, str | bytes]:
    import jinja2
    env = _env(template_dir or TEMPLATE_DIR)
    if cpp_api is not None:  # a kiln_add_model build: its kernels in a namespace of their own
        if len(plan.models) != 1:
            raise KilnError("render", f"C++ API {cpp_api.name}", f"bakes one model, got {len(plan.models)}")
        env.globals["kernel_namespace"] = kernel_namespace(cpp_api.name)
    files: dict[str, str | bytes] = {}
    profile_cpp = plan.profile.name
    files["kiln_profiles.hpp"] = env.get_template("kiln_profiles.hpp.j2").render(
        profiles=list(PROFILES.values()), positions=POSITIONS, vec_ops=VEC_OPS, baked=profile_cpp)
    blobs = {m.name: weights_blob(m) for m in plan.models}
    for m in plan.models:
        files[f"models/{m.name}.weights.bin"] = blobs[m.name][0]
    opspecs = opspec_files(plan)
    man = manifest(plan, blobs, opspecs)
    man_json = json.dumps(man, indent=1, sort_keys=False)
    if ")KILNMANIFEST" in man_json:
        raise KilnError("render", "manifest", "manifest contains the raw-string delimiter")
    files["manifest.json"] = man_json + "\n"
    files["kiln_kernel_table.hpp"] = env.get_template("kiln_kernel_table.hpp.j2").render(
        kernels=plan.kernels, manifest_json=json.dumps(man, separators=(",", ":")))
    n = len(plan.kernels)
    for i, k in enumerate(plan.kernels, 1):
        if progress:
            progress(f"[{i}/{n}] {k.symbol} ({k.variant.tag}, {k.variant.blocks} blocks)")
        try:
            tmpl = env.get_template(f"{k.variant.family}.cpp.j2")
            src = tmpl.render(k=k.symbol, s=k.spec, v=k.variant, profile=profile_cpp)
        except jinja2.TemplateError as e:
            raise KilnError("render", k.symbol, f"template {k.variant.family}.cpp.j2: {e}") from None
        files[f"{KERNEL_DIR}/{k.symbol}.cpp"] = (
            f"// Generated by kiln codegen from templates/{k.variant.family}.cpp.j2. Do not edit.\n"
            f"// opspec {k.spec.name}; instances: {', '.join(k.instances)}\n" + src)
    files["kiln_generic_table.hpp"] = env.get_template("kiln_generic_table.hpp.j2").render(
        kernels=plan.generic_kernels)
    for g in plan.generic_kernels:  # the same templates in generic mode (codegen/shapes/generic.py)
        if progress:
            progress(f"[generic] {g.symbol}")
        try:
            src = env.get_template(f"{g.family}.cpp.j2").render(k=g.symbol, profile=profile_cpp, **g.template_vars())
        except jinja2.TemplateError as e:
            raise KilnError("render", g.symbol, f"template {g.family}.cpp.j2 in generic mode: {e}") from None
        files[f"{KERNEL_DIR}/{g.symbol}.cpp"] = (
            f"// Generated by kiln codegen from templates/{g.family}.cpp.j2 in generic mode. Do not edit.\n"
            f"// runtime shape fields: {', '.join(g.runtime_fields)}; serves: {', '.join(g.instances)}\n" + src)
    files.update(opspecs)
    if cpp_api is not None:
        m = plan.models[0]
        files.update(cpp_api_files(plan, ModelRecord.from_json(man["models"][0]), cpp_api.name,
                                   cpp_api.out_dir.resolve() / f"models/{m.name}.weights.bin", env))
    if plan.options.debug_optimization_path:
        files[LOG_FILE] = plan.log.text()
        for m in plan.models:
            files[f"{LOG_DIR}/{m.name}.log"] = model_log(plan, m)
    return files


def write_outputs(files: dict[str, str | bytes], out_dir: Path) -> list[str]:
    """Atomically replaces changed files; removes generated files no longer produced.
    Returns the names that changed."""
    changed = []
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "models").mkdir(exist_ok=True)  # installed as a directory, even when empty
    for name, text in files.items():
        path = out_dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        data = text.encode() if isinstance(text, str) else text
        if path.exists() and path.stat().st_size == len(data) and path.read_bytes() == data:
            continue
        write_atomic(path, data, durable=False)
        changed.append(name)
    (out_dir / LOG_DIR).mkdir(exist_ok=True)  # installed as a directory, even when empty
    for sub, pattern in ((KERNEL_DIR, "*.cpp"), (OPSPEC_DIR, "*.opspec"), ("models", "*.weights.bin"),
                         (LOG_DIR, "*.log")):
        for stale in (out_dir / sub).glob(pattern):
            if f"{sub}/{stale.name}" not in files:
                stale.unlink()
    if LOG_FILE not in files:
        (out_dir / LOG_FILE).unlink(missing_ok=True)
    return changed


_T0 = time.perf_counter()


def progress_printer(msg: str) -> None:
    """One progress line on stderr with the seconds since the codegen started (pip -v and ninja show it)."""
    print(f"[kiln codegen {time.perf_counter() - _T0:5.1f}s] {msg}", flush=True, file=sys.stderr)
