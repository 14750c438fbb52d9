"""The manifest's records, typed: what render writes into manifest.json and what the runtime (python/kiln),
the shape-bucket planner and the tests read back. One class per record, each with `to_json()` (the exact
dict render writes: same keys, same order) and `from_json()` (the one decoder); `opspec_of_record` is the
one way back from a kernel record to its Opspec.

Values the records only carry (an Opspec's fields, a variant's tiling, the build options, the bucket graph,
fusion's audit) stay the JSON they are; sequences are tuples here and lists in JSON.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from .opspec import SPEC_CLASSES

# a value reference of a step: [space, offset or index, bytes]
SPACE_ARENA, SPACE_WEIGHTS, SPACE_INPUT, SPACE_OUTPUT = 0, 1, 2, 3
GLUE_CODES = {"input_nchw": 0, "input_nd": 1, "to_nchw": 2, "output_nd": 3, "output_nchw": 4, "to_nc1hwc0": 5,
              "aicpu": 6, "input_index": 7, "input_nchw_c04": 8}  # aicpu: a host step evaluated by the runtime's
# callback (the AI CPU fallback); input_index: a graph input of indices (int64/int32 in ONNX, fp32 from the caller)
# kept as fp32; input_nchw_c04: a small-channel image input staged as NC1HWC0_C04 (N, 1, H, W, 4)

Json = dict[str, Any]


class Ref(NamedTuple):
    """Where a step reads or writes a value: the arena (offset), the weights blob (offset), the call's input or
    output number `at`; `nbytes` long. JSON: [space, at, nbytes]."""
    space: int
    at: int
    nbytes: int

    def to_json(self) -> list[int]:
        return [self.space, self.at, self.nbytes]

    @classmethod
    def from_json(cls, v: Sequence[int]) -> Ref:
        return cls(*v)

    @property
    def in_arena(self) -> bool:
        return self.space == SPACE_ARENA


class Region(NamedTuple):
    """An arena region, [offset, nbytes] in JSON (a step's `frees`)."""
    offset: int
    nbytes: int

    def to_json(self) -> list[int]:
        return [self.offset, self.nbytes]


def _tuple(v) -> tuple:
    return tuple(v)


# ---------------------------------------------------------------- kernels

@dataclass(frozen=True)
class TensorDesc:
    """A kernel operand as the kernel takes it: packed shape, dtype, device layout."""
    name: str
    shape: tuple[int, ...]
    dtype: str
    layout: str

    def to_json(self) -> Json:
        return {"name": self.name, "shape": list(self.shape), "dtype": self.dtype, "layout": self.layout}

    @classmethod
    def from_json(cls, d: Mapping) -> TensorDesc:
        return cls(d["name"], _tuple(d["shape"]), d["dtype"], d["layout"])


@dataclass(frozen=True)
class PipePrediction:
    instrs: int
    bytes: int
    busy: float

    def to_json(self) -> Json:
        return {"instrs": self.instrs, "bytes": self.bytes, "busy": self.busy}

    @classmethod
    def from_json(cls, d: Mapping) -> PipePrediction:
        return cls(d["instrs"], d["bytes"], d["busy"])


@dataclass(frozen=True)
class KernelRecord:
    """One baked kernel: its spec, variant, buffers, features and the cost model's prediction."""
    name: str
    family: str
    variant: str
    unit: str
    opspec: str                       # the spec's hash (its .opspec file)
    opspec_name: str
    spec: Json                        # the Opspec's fields (opspec_of_record rebuilds it)
    tiling: Json
    blocks: int
    buffers: Json
    features: Json
    mte2_bytes: int
    algorithm: str
    compared_cycles: Json
    predicted_cycles: float | None
    bound_unit: str | None
    predicted_pipes: dict[str, PipePrediction] | None
    inputs: tuple[TensorDesc, ...]
    output: TensorDesc
    instances: tuple[str, ...]

    @property
    def kind(self) -> str:
        """The op kind of its spec (features["kind"])."""
        return self.features["kind"]

    def to_json(self) -> Json:
        d: Json = {
            "name": self.name, "family": self.family, "variant": self.variant, "unit": self.unit,
            "opspec": self.opspec, "opspec_name": self.opspec_name, "spec": self.spec, "tiling": self.tiling,
            "blocks": self.blocks, "buffers": self.buffers, "features": self.features, "mte2_bytes": self.mte2_bytes,
            "algorithm": self.algorithm, "compared_cycles": self.compared_cycles,
        }
        if self.predicted_cycles is None:  # (the key order render has always written)
            d.update(predicted_cycles=None, predicted_pipes=None, bound_unit=None)
        else:
            d.update(predicted_cycles=self.predicted_cycles, bound_unit=self.bound_unit,
                     predicted_pipes={n: p.to_json() for n, p in (self.predicted_pipes or {}).items()})
        d.update(inputs=[t.to_json() for t in self.inputs], output=self.output.to_json(),
                 instances=list(self.instances))
        return d

    @classmethod
    def from_json(cls, d: Mapping) -> KernelRecord:
        pipes = d["predicted_pipes"]
        return cls(d["name"], d["family"], d["variant"], d["unit"], d["opspec"], d["opspec_name"], d["spec"],
                   d["tiling"], d["blocks"], d["buffers"], d["features"], d["mte2_bytes"], d["algorithm"],
                   d["compared_cycles"], d["predicted_cycles"], d["bound_unit"],
                   None if pipes is None else {n: PipePrediction.from_json(p) for n, p in pipes.items()},
                   tuple(TensorDesc.from_json(t) for t in d["inputs"]), TensorDesc.from_json(d["output"]),
                   _tuple(d["instances"]))


def opspec_of_record(k: KernelRecord | Mapping):
    """The Opspec a manifest kernel record was baked from (its class by features["kind"], its fields from
    "spec"): the one decoder of a kernel record back into a spec. Takes the record or its JSON (read by
    attribute, not isinstance: the installed package's records are another module's class)."""
    kind, fields = (k["features"]["kind"], k["spec"]) if isinstance(k, Mapping) else (k.kind, k.spec)
    return SPEC_CLASSES[kind](**fields)


@dataclass(frozen=True)
class GenericKernelRecord:
    """A generic kernel (runtime shapes, KILN_SHAPE_BUCKETS)."""
    name: str
    family: str
    runtime_fields: tuple[str, ...]
    inputs: int
    instances: tuple[str, ...]

    def to_json(self) -> Json:
        return {"name": self.name, "family": self.family, "runtime_fields": list(self.runtime_fields),
                "inputs": self.inputs, "instances": list(self.instances)}

    @classmethod
    def from_json(cls, d: Mapping) -> GenericKernelRecord:
        return cls(d["name"], d["family"], _tuple(d["runtime_fields"]), d["inputs"], _tuple(d["instances"]))


# ---------------------------------------------------------------- models

@dataclass(frozen=True)
class IoDesc:
    """A model input or output: ONNX name and shape; dtype: what the runtime returns (int64: ArgMax/ArgMin
    positions, computed as float values; written to the manifest only when not float32)."""
    name: str
    shape: tuple[int, ...]
    dtype: str = "float32"

    def to_json(self) -> Json:
        d: Json = {"name": self.name, "shape": list(self.shape)}
        if self.dtype != "float32":
            d["dtype"] = self.dtype
        return d

    @classmethod
    def from_json(cls, d: Mapping) -> IoDesc:
        return cls(d["name"], _tuple(d["shape"]), d.get("dtype", "float32"))


@dataclass(frozen=True)
class LaunchRecord:
    """The cost model's prediction of one kernel launch as a model step runs it: with the step's L2 plan (its
    hits), not called on its own. The one producer is codegen/select/launches.py launch_record."""
    predicted_cycles: float
    core_cycles: float      # the slowest cores, without the chip's memory bound
    bound: str              # what limits it: a pipe (M, V, MTE1, MTE2, MTE3, FIX, S), "L2" or "HBM"
    l2_hit_bytes: int       # GM reads served by L2
    hbm_bytes: int          # GM reads that missed L2, plus every GM write
    cube_macs: int
    useful_macs: int
    cube_busy: float        # M pipe busy cycles over all cores
    vector_busy: float      # V pipe busy cycles over all cores

    def to_json(self) -> Json:
        return {"predicted_cycles": self.predicted_cycles, "core_cycles": self.core_cycles, "bound": self.bound,
                "l2_hit_bytes": self.l2_hit_bytes, "hbm_bytes": self.hbm_bytes, "cube_macs": self.cube_macs,
                "useful_macs": self.useful_macs, "cube_busy": self.cube_busy, "vector_busy": self.vector_busy}

    @classmethod
    def from_json(cls, d: Mapping) -> LaunchRecord:
        return cls(d["predicted_cycles"], d["core_cycles"], d["bound"], d["l2_hit_bytes"], d["hbm_bytes"],
                   d["cube_macs"], d["useful_macs"], d["cube_busy"], d["vector_busy"])


@dataclass(frozen=True)
class HostRecord:
    """An aicpu step's op (the AI CPU fallback): the node alone as a base64 ONNX model the runtime evaluates with
    onnx.reference (its inputs: the step's inputs in order, ND fp16 in the arena), why it runs on the AI CPU (a
    reason code of the [OPT] log), the elements it reads and writes, and its predicted cycles
    (codegen/cost/aicpu.py, in AI Core clock cycles)."""
    model: str
    reason: str
    elements: int
    predicted_cycles: float

    def to_json(self) -> Json:
        return {"model": self.model, "reason": self.reason, "elements": self.elements,
                "predicted_cycles": self.predicted_cycles}

    @classmethod
    def from_json(cls, d: Mapping) -> HostRecord:
        return cls(d["model"], d["reason"], d["elements"], d["predicted_cycles"])


@dataclass(frozen=True)
class StepRecord:
    """One step of a model's plan, as the executor takes it: a kernel launch or host glue."""
    name: str
    kind: str                         # kernel | glue
    ops: tuple[str, ...]
    op_types: tuple[str, ...]
    kernel: str | None                # the kernel's symbol (kernel steps)
    glue: int | None                  # GLUE_CODES (glue steps)
    params: tuple[int, ...]
    inputs: tuple[Ref, ...]
    output: Ref
    value: str                        # the ONNX value it produces, as held on the device
    layout: str
    shape: tuple[int, ...]
    frees: tuple[Region, ...]         # arena regions dead after it
    runtime_shape: Json | None = None  # a generic kernel's runtime arguments at this size
    l2_hits: tuple[bool, ...] | None = None  # kernel steps: per input, a read hits L2 (codegen/passes/l2.py)
    launch: LaunchRecord | None = None  # kernel steps with a cost-model replay: the launch as this step runs it
    host: HostRecord | None = None    # aicpu steps: the node the host evaluates, and its AI CPU cost
    l2_reads: tuple[int, ...] | None = None  # with l2_hits: per input, the bytes the step's cores read of it

    @property
    def is_kernel(self) -> bool:
        return self.kind == "kernel"

    @property
    def is_aicpu(self) -> bool:
        return self.kind == "aicpu"

    @property
    def generic(self) -> bool:
        """A generic kernel (runtime shapes) serves it."""
        return self.runtime_shape is not None

    def to_json(self) -> Json:
        d: Json = {"name": self.name, "kind": self.kind, "ops": list(self.ops), "op_types": list(self.op_types),
                   "kernel": self.kernel, "glue": self.glue, "params": list(self.params),
                   "inputs": [r.to_json() for r in self.inputs], "output": self.output.to_json(),
                   "value": self.value, "layout": self.layout, "shape": list(self.shape),
                   "frees": [r.to_json() for r in self.frees]}
        if self.runtime_shape is not None:
            d["runtime_shape"] = self.runtime_shape
        if self.l2_hits is not None:
            d["l2_hits"] = list(self.l2_hits)
        if self.l2_reads is not None:
            d["l2_reads"] = list(self.l2_reads)
        if self.launch is not None:
            d["launch"] = self.launch.to_json()
        if self.host is not None:
            d["host"] = self.host.to_json()
        return d

    @classmethod
    def from_json(cls, d: Mapping) -> StepRecord:
        return cls(d["name"], d["kind"], _tuple(d["ops"]), _tuple(d["op_types"]), d["kernel"], d["glue"],
                   _tuple(d["params"]), tuple(Ref.from_json(r) for r in d["inputs"]), Ref.from_json(d["output"]),
                   d["value"], d["layout"], _tuple(d["shape"]), tuple(Region(*r) for r in d["frees"]),
                   d.get("runtime_shape"), None if d.get("l2_hits") is None else _tuple(d["l2_hits"]),
                   None if d.get("launch") is None else LaunchRecord.from_json(d["launch"]),
                   None if d.get("host") is None else HostRecord.from_json(d["host"]),
                   None if d.get("l2_reads") is None else _tuple(d["l2_reads"]))


@dataclass(frozen=True)
class TensorPlacement:
    """An arena tensor: where it lives and over which steps."""
    name: str
    offset: int
    nbytes: int
    first_kernel: str
    last_kernel: str
    first_step: int
    last_step: int

    def to_json(self) -> Json:
        return {"name": self.name, "offset": self.offset, "bytes": self.nbytes, "first_kernel": self.first_kernel,
                "last_kernel": self.last_kernel, "first_step": self.first_step, "last_step": self.last_step}

    @classmethod
    def from_json(cls, d: Mapping) -> TensorPlacement:
        return cls(d["name"], d["offset"], d["bytes"], d["first_kernel"], d["last_kernel"], d["first_step"],
                   d["last_step"])


@dataclass(frozen=True)
class InPlace:
    """An output that reuses its input's arena region (an alias)."""
    output: str
    input: str

    def to_json(self) -> Json:
        return {"output": self.output, "input": self.input}

    @classmethod
    def from_json(cls, d: Mapping) -> InPlace:
        return cls(d["output"], d["input"])


@dataclass(frozen=True)
class MemoryRecord:
    """The arena plan: its bounds, the strategies tried, aliases and placements."""
    lower_bound_bytes: int
    naive_bytes: int
    strategy: str
    strategies: dict[str, int]
    fragmentation: float
    alignment: int
    in_place: tuple[InPlace, ...]
    tensors: tuple[TensorPlacement, ...]

    def to_json(self) -> Json:
        return {"lower_bound_bytes": self.lower_bound_bytes, "naive_bytes": self.naive_bytes,
                "strategy": self.strategy, "strategies": self.strategies, "fragmentation": self.fragmentation,
                "alignment": self.alignment, "in_place": [p.to_json() for p in self.in_place],
                "tensors": [t.to_json() for t in self.tensors]}

    @classmethod
    def from_json(cls, d: Mapping) -> MemoryRecord:
        return cls(d["lower_bound_bytes"], d["naive_bytes"], d["strategy"], d["strategies"], d["fragmentation"],
                   d["alignment"], tuple(InPlace.from_json(p) for p in d["in_place"]),
                   tuple(TensorPlacement.from_json(t) for t in d["tensors"]))


@dataclass(frozen=True)
class FusionRecord:
    """What fusion did (fused: one dict per op fused into a kernel) and did not (audit, with the reason)."""
    ir_ops_before: int | None
    fused: tuple[Json, ...]
    audit: tuple[Json, ...]

    def to_json(self) -> Json:
        return {"ir_ops_before": self.ir_ops_before, "fused": list(self.fused), "audit": list(self.audit)}

    @classmethod
    def from_json(cls, d: Mapping) -> FusionRecord:
        return cls(d["ir_ops_before"], _tuple(d["fused"]), _tuple(d["audit"]))


@dataclass(frozen=True)
class ShapeBucketsRecord:
    """A model's shape buckets (KILN_SHAPE_BUCKETS): its bucket plans and what its generic path needs."""
    sizes: tuple[int, ...]
    input: str
    own_size: tuple[int, int]
    plans: tuple[ModelRecord, ...]   # one per bucket other than the own size (each with input_size)
    min_size: tuple[int, int]
    graph: Json                        # the pre-fusion graph (codegen/shapes/buckets.py graph_record)
    weights: dict[str, tuple[int, int]]  # blob name -> (offset, bytes)
    generic_kernels: tuple[str, ...]
    generic_unavailable: str

    @property
    def own_is_bucket(self) -> bool:
        return tuple(self.own_size) in {(s, s) for s in self.sizes}

    def to_json(self) -> Json:
        return {"sizes": list(self.sizes), "input": self.input, "own_size": list(self.own_size),
                "plans": [p.to_json() for p in self.plans], "min_size": list(self.min_size), "graph": self.graph,
                "weights": {n: list(r) for n, r in self.weights.items()},
                "generic_kernels": list(self.generic_kernels), "generic_unavailable": self.generic_unavailable}

    @classmethod
    def from_json(cls, d: Mapping) -> ShapeBucketsRecord:
        return cls(_tuple(d["sizes"]), d["input"], _tuple(d["own_size"]),
                   tuple(ModelRecord.from_json(p) for p in d["plans"]), _tuple(d["min_size"]), d["graph"],
                   {n: _tuple(r) for n, r in d["weights"].items()}, _tuple(d["generic_kernels"]),
                   d["generic_unavailable"])


@dataclass(frozen=True)
class ModelRecord:
    """A model's plan at one input size: inputs, outputs, weights blob, arena, steps (the executor's format)."""
    name: str
    onnx: str
    inputs: tuple[IoDesc, ...]
    outputs: tuple[IoDesc, ...]
    weights_file: str
    weights_bytes: int
    arena_bytes: int
    memory: MemoryRecord
    kernel_launches: int
    fusion: FusionRecord
    unique_kernels: int
    steps: tuple[StepRecord, ...]
    shape_buckets: ShapeBucketsRecord | None = None
    input_size: tuple[int, int] | None = None  # a bucket's or a generic plan's size

    @property
    def kernel_steps(self) -> list[StepRecord]:
        return [s for s in self.steps if s.is_kernel]

    def steps_json(self) -> list[Json]:
        """The steps as the executor (_core.Executor) takes them."""
        return [s.to_json() for s in self.steps]

    def to_json(self) -> Json:
        d: Json = {
            "name": self.name, "onnx": self.onnx, "inputs": [i.to_json() for i in self.inputs],
            "outputs": [o.to_json() for o in self.outputs], "weights_file": self.weights_file,
            "weights_bytes": self.weights_bytes, "arena_bytes": self.arena_bytes, "memory": self.memory.to_json(),
            "kernel_launches": self.kernel_launches, "fusion": self.fusion.to_json(),
            "unique_kernels": self.unique_kernels, "steps": self.steps_json(),
        }
        if self.shape_buckets is not None:
            d["shape_buckets"] = self.shape_buckets.to_json()
        if self.input_size is not None:
            d["input_size"] = list(self.input_size)
        return d

    @classmethod
    def from_json(cls, d: Mapping) -> ModelRecord:
        sb = d.get("shape_buckets")
        size = d.get("input_size")
        return cls(d["name"], d["onnx"], tuple(IoDesc.from_json(i) for i in d["inputs"]),
                   tuple(IoDesc.from_json(o) for o in d["outputs"]), d["weights_file"], d["weights_bytes"],
                   d["arena_bytes"], MemoryRecord.from_json(d["memory"]), d["kernel_launches"],
                   FusionRecord.from_json(d["fusion"]), d["unique_kernels"],
                   tuple(StepRecord.from_json(s) for s in d["steps"]),
                   None if sb is None else ShapeBucketsRecord.from_json(sb), None if size is None else _tuple(size))


# ---------------------------------------------------------------- the manifest

@dataclass(frozen=True)
class Manifest:
    """manifest.json: the build's profile and options, its kernels, models and generic kernels, and the CRC-32
    of every installed file the runtime reads besides it (weights blobs, .opspec files), by path relative to
    the package: loading checks them, so a damaged or swapped file is named instead of silently used."""
    profile: str
    options: Json
    kernels: tuple[KernelRecord, ...]
    models: tuple[ModelRecord, ...]
    generic_kernels: tuple[GenericKernelRecord, ...]
    checksums: dict[str, int]

    def kernel(self, name: str) -> KernelRecord:
        """The kernel record of that symbol (KeyError when the build has none)."""
        return self.kernels_by_name()[name]

    def kernels_by_name(self) -> dict[str, KernelRecord]:
        return {k.name: k for k in self.kernels}

    def model(self, name: str) -> ModelRecord:
        """The model record of that name or ONNX path (KeyError when the build has none)."""
        for m in self.models:
            if name in (m.name, m.onnx):
                return m
        raise KeyError(name)

    def to_json(self) -> Json:
        return {"profile": self.profile, "options": self.options, "kernels": [k.to_json() for k in self.kernels],
                "models": [m.to_json() for m in self.models],
                "generic_kernels": [g.to_json() for g in self.generic_kernels], "checksums": dict(self.checksums)}

    @classmethod
    def from_json(cls, d: Mapping) -> Manifest:
        return cls(d["profile"], d["options"], tuple(KernelRecord.from_json(k) for k in d["kernels"]),
                   tuple(ModelRecord.from_json(m) for m in d["models"]),
                   tuple(GenericKernelRecord.from_json(g) for g in d["generic_kernels"]), dict(d["checksums"]))
