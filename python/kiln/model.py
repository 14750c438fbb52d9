"""A baked model: the whole graph runs in one C++ call (kernels on the emulated
AI Core, layout glue on the host), intermediates in one arena planned at build
time, weights from the blob packed at build time."""
from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import cached_property
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from . import _core, envvars, numerics
from .codegen.ir.files import InputPathError, check_input_file
from .codegen.ir.manifest import KernelRecord, Manifest, ModelRecord
from .dispatch import Dispatcher, describe, log_line
from .integrity import InstallError, check_file
from .runtime import Kernel
from .steps import KernelStep, executor, kernel_steps

__all__ = ["KernelStep", "Model", "Package"]


@dataclass(frozen=True)
class Package:
    """Where a model's extension and files are: the installed kiln (root None: its package data), or a
    `kiln compile` directory with its own _core (kiln/compiled.py)."""
    core: Any = _core
    root: Path | None = None
    manifest: Manifest | None = None  # the compiled directory's manifest (None: the installed build's)


class Model:
    """`kiln.load(name)`; thread-safe: every run has its own arena.

    A model baked with KILN_SHAPE_BUCKETS also takes other input sizes (kiln/dispatch.py): `last_dispatch` says
    which path served the latest call, and `kernels` are the launches of that call's plan."""

    def __init__(self, entry: ModelRecord, kernels: dict[str, KernelRecord], checksums: dict[str, int],
                 package: Package | None = None):
        self.entry = entry  # its manifest record (`record` is the same as JSON)
        self.name: str = entry.name
        self.inputs = [(i.name, tuple(i.shape)) for i in entry.inputs]
        self.outputs = [(o.name, tuple(o.shape)) for o in entry.outputs]
        self.arena_bytes: int = entry.arena_bytes
        self.kernel_launches: int = entry.kernel_launches
        self.kernel_records = kernels  # its kernels' manifest records, by name
        self.package = package or Package()
        weights = _read_weights(entry, checksums, self.package.root)
        self._exec = executor(self.name, entry, weights, self.package.core)
        self.kernels = kernel_steps(entry)
        self.last_dispatch: dict | None = None  # {"path": baked|bucket|generic, "input_size": (H, W), "kernels", ...}
        self._served = entry
        self._dispatch = Dispatcher(self, self._exec, weights)

    @cached_property
    def record(self) -> dict:
        """Its manifest record as JSON (manifest.json's entry)."""
        return self.entry.to_json()

    def kernel(self, name: str) -> Kernel:
        """One of its kernels on its own (`kiln.kernel`, but from the extension that baked this model)."""
        return Kernel(self.kernel_records[name], self.package.core)

    def __repr__(self) -> str:
        return (f"<kiln.Model {self.name}: {self.kernel_launches} kernel launches, "
                f"{len({k.kernel for k in self.kernels})} unique kernels, arena {self.arena_bytes} B>")

    def run(self, *inputs: np.ndarray, out: np.ndarray | list[np.ndarray] | None = None,
            poison_freed: bool = False, force_generic: bool = False, strict: bool | None = None):
        """fp32 in, fp32 out (int64 for an ArgMax/ArgMin result; with `out`, its positions as float32 values), in
        the ONNX model's shapes (with shape buckets: any input size the model's
        graph takes, see `accepted_inputs`). Returns one array per output
        (a single array when the model has one output); with `out`, fills the caller's arrays.
        The boundary always converts (fp32 <-> fp16 and the device layouts), so inputs are read and
        outputs written once by the first and last step; nothing else copies them.
        poison_freed: a debugging check of the memory plan: every arena region is overwritten with
        NaNs as soon as its tensor is dead, so a read of a dead tensor shows in the result.
        force_generic: run the generic kernels even at a baked size (to check or time them against the
        bucket's); needs a build with KILN_SHAPE_BUCKETS.
        strict: an input or output outside fp16's range or non-finite raises kiln.NumericsError instead of the
        kiln.NumericsWarning said once per model and tensor (None: KILN_STRICT=1 means strict; kiln/numerics.py)."""
        outs, _ = self._run(inputs, out, capture=False, poison=poison_freed, force_generic=force_generic,
                            strict=strict)
        return outs[0] if len(outs) == 1 else outs

    def run_capture(self, *inputs: np.ndarray, force_generic: bool = False
                    ) -> tuple[list[np.ndarray], dict[str, np.ndarray]]:
        """Runs and also returns every kernel's output: {ONNX value name: fp32 array in its ONNX shape}."""
        return self._run(inputs, None, capture=True, force_generic=force_generic)

    def accepted_inputs(self) -> str:
        """The input shapes `run` takes, in words (the baked shape, or with shape buckets the sizes)."""
        return self._dispatch.accepted()

    def _run(self, inputs, out, capture: bool, poison: bool = False, force_generic: bool = False,
             strict: bool | None = None):
        if len(inputs) != len(self.inputs):
            raise TypeError(f"model {self.name} takes {len(self.inputs)} input(s) "
                            f"({', '.join(n for n, _ in self.inputs)}), got {len(inputs)}")
        if force_generic and not (self._dispatch.shapes and self._dispatch.shapes.generic_kernels):
            raise ValueError(f"model {self.name} has no generic kernels (build with KILN_SHAPE_BUCKETS)")
        xs = [_as_input(self.name, n, x) for (n, _), x in zip(self.inputs, inputs)]
        if strict is not None and not isinstance(strict, (bool, np.bool_)):
            raise TypeError(f"model {self.name}: strict must be True, False or None (KILN_STRICT decides), got "
                            f"{strict!r}")
        strict = numerics.strict_from_env() if strict is None else bool(strict)
        # the fp16 boundary: said before the run (strict stops it), and again for what comes back
        numerics.check(f"model {self.name}", "input", [(n, x) for (n, _), x in zip(self.inputs, xs)], strict)
        plan, planned = self._dispatch.plan_for([x.shape for x in xs], force_generic)
        if out is None:
            outs = [np.empty(shape, np.float32) for shape in plan.output_shapes]
        else:
            outs = _check_out(self.name, out, plan.output_shapes, [n for n, _ in self.outputs])
            # an output that shares memory with an input (run(x, out=x)) would be written while the input may
            # still be read: that input is copied first
            xs = [x.copy() if any(np.may_share_memory(x, o) for o in outs) else x for x in xs]
        results = plan.executor.run(xs, outs, capture, poison)
        numerics.check(f"model {self.name}", "output", [(n, o) for (n, _), o in zip(self.outputs, outs)], strict)
        if out is None:  # ArgMax/ArgMin positions: held as float values, returned as the int64 the spec says
            outs = [np.rint(o).astype(np.int64) if d.dtype == "int64" else o for d, o in zip(self.entry.outputs, outs)]
        self._exec = plan.executor  # last_step_seconds: the executor that ran last
        self._served = plan.record
        self.kernels = plan.kernels
        self.last_dispatch = describe(self.name, plan, [x.shape for x in xs], planned)
        if envvars.log_level():
            print(log_line(self.name, self.last_dispatch), file=sys.stderr, flush=True)
        ks = iter(plan.kernels)
        captured: dict[str, np.ndarray] = {}
        for step, r in zip(plan.record.steps, results):
            if not step.is_kernel:
                continue
            if capture:
                r, data = r
                captured[step.value] = _unpack(np.frombuffer(data, np.float16), step.layout, step.shape)
            next(ks).simulated_cycles = r
        return outs, captured

    @property
    def plan_entry(self) -> ModelRecord:
        """The record (steps, arena, inputs) of the plan that served the latest call: the model's own before any."""
        return self._served

    @property
    def plan_record(self) -> dict:
        """plan_entry as JSON."""
        return self.record if self._served is self.entry else self._served.to_json()

    @property
    def last_step_seconds(self) -> list[float]:
        """Host wall time of every step (kernels and glue) of the latest run, in seconds."""
        return list(self._exec.last_step_seconds)

    @property
    def simulated_cycles(self) -> float:
        """Sum over kernel launches of the last run (kernels run one after another)."""
        return sum(k.simulated_cycles or 0 for k in self.kernels)


def _read_weights(entry: ModelRecord, checksums: dict[str, int], root: Path | None) -> np.ndarray:
    """The model's weights blob, checked for size and CRC-32 against the manifest (kiln/integrity.py)."""
    path = resources.files("kiln") / entry.weights_file if root is None else root / entry.weights_file
    with resources.as_file(path) as p:
        try:
            check_input_file(p)  # a FIFO would block the read
            weights = np.fromfile(p, dtype=np.uint8)
        except InputPathError as e:
            raise InstallError(f"model {entry.name}: cannot read its weights file {p}: "
                               f"{e.reason}; reinstall kiln") from None
        except OSError as e:
            raise InstallError(f"model {entry.name}: cannot read its weights file {p}: {e.strerror or e}; "
                               f"reinstall kiln") from None
        if weights.size != entry.weights_bytes:
            raise InstallError(f"model {entry.name}: weights file {p} has {weights.size} bytes, expected "
                               f"{entry.weights_bytes} (truncated or replaced); reinstall kiln")
        check_file(entry.weights_file, weights, checksums, shown_as=f"model {entry.name}: weights file {p}")
    return weights


def _check_out(model: str, out, shapes: list[tuple[int, ...]], names: list[str]) -> list[np.ndarray]:
    """run(..., out=): one writable C-contiguous float32 array per output in its shape, distinct; TypeError or
    ValueError naming the output otherwise (the extension would answer a list of numbers with pybind11's
    signature dump)."""
    outs = [out] if isinstance(out, np.ndarray) else out
    if not isinstance(outs, (list, tuple)):
        raise TypeError(f"model {model}: out must be a NumPy array or a list of one per output ({len(shapes)}), "
                        f"got {type(out).__name__}")
    if len(outs) != len(shapes):
        raise ValueError(f"model {model}: out must hold one array per output ({', '.join(names)}), got {len(outs)}")
    for i, (o, shape, name) in enumerate(zip(outs, shapes, names)):
        where = f"model {model}, out[{i}] (output {name!r})"
        if not isinstance(o, np.ndarray):
            raise TypeError(f"{where}: expected a float32 NumPy array of shape {shape}, got {type(o).__name__}")
        problems = [p for p, bad in (
            (f"shape {o.shape}", o.shape != tuple(shape)), (f"dtype {o.dtype}", o.dtype != np.float32),
            ("read-only", not o.flags.writeable), ("not C-contiguous", not o.flags.c_contiguous)) if bad]
        if problems:
            raise ValueError(f"{where}: expected a writable C-contiguous float32 array of shape {tuple(shape)}, got "
                             f"{', '.join(problems)}")
        if any(np.shares_memory(o, other) for other in outs[:i]):
            raise ValueError(f"{where}: shares memory with an earlier out array; give distinct arrays")
    return list(outs)


def _as_input(model: str, name: str, x) -> np.ndarray:
    """A run's input as C-contiguous fp32; TypeError naming the input for anything that is not real numbers (a
    string, an object array), which the extension would answer with pybind11's signature dump."""
    where = f"model {model}, input {name!r}: expected an array of real numbers (float32)"
    try:
        a = np.asarray(x)
    except (TypeError, ValueError) as e:  # ragged nested lists and the like
        raise TypeError(f"{where}, got {type(x).__name__} ({e})") from None
    if a.dtype.kind not in "biuf":
        raise TypeError(f"{where}, got {type(x).__name__} of {a.dtype}")
    return np.asarray(a, dtype=np.float32, order="C")  # not ascontiguousarray: that makes a 0-d input 1-d


def _unpack(flat: np.ndarray, layout: str, shape: list[int]) -> np.ndarray:
    """A device tensor (fp16, NC1HWC0, NC1HWC0_C04 or ND) as fp32 in its ONNX shape."""
    if layout == "NC1HWC0_C04":  # a small-channel input: (N, 1, H, W, 4)
        n, c, h, w = shape
        return flat.reshape(n, h, w, 4)[..., :c].transpose(0, 3, 1, 2).astype(np.float32)
    if layout == "NC1HWC0":
        n, c, h, w = shape
        packed = flat.reshape(n, -(-c // 16), h, w, 16)
        return _core.nc1hwc0_to_nchw(packed.view(np.uint16), c).view(np.float16).astype(np.float32)
    return flat.reshape(shape).astype(np.float32)
