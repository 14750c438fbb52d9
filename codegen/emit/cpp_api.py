"""The C++ API of one model baked by kiln_add_model() (cmake/KilnAddModel.cmake), for projects without Python
at run time: `<api>.hpp` declares kiln::model::<api>::Model (typed Inputs/Outputs over kiln/model_api.hpp) and
`<api>_model.cpp` holds its plan as generated tables (no JSON is parsed at run time) and links its weights blob
in with the assembler's .incbin (no C++ array literal). The kernels of such a build are rendered into the
namespace kiln::kernels::<api> (kernel_namespace), so two models baked with different options into one program
never share a symbol.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from .. import KilnError
from ..ir.manifest import ModelRecord, StepRecord

if TYPE_CHECKING:
    import jinja2

    from ..select.plan import Plan

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
DEFAULT_KERNEL_NAMESPACE = "kiln::kernels"
_DTYPES = {"fp16": "F16", "bf16": "BF16", "fp32": "F32"}
_CPP_KEYWORDS = {"and", "auto", "bool", "break", "case", "catch", "char", "class", "const", "continue", "default",
                 "delete", "do", "double", "else", "enum", "explicit", "export", "extern", "false", "float", "for",
                 "friend", "goto", "if", "inline", "int", "long", "namespace", "new", "not", "operator", "or",
                 "private", "protected", "public", "register", "return", "short", "signed", "sizeof", "static",
                 "struct", "switch", "template", "this", "throw", "true", "try", "typedef", "typename", "union",
                 "unsigned", "using", "virtual", "void", "volatile", "while", "xor"}


def check_api_name(api: str) -> None:
    """The API name becomes a C++ namespace and file names: a C identifier, not a keyword."""
    if not _IDENT.match(api) or api in _CPP_KEYWORDS:
        raise KilnError("render", f"C++ API name {api!r}", "must be a C identifier (letters, digits, _; not starting "
                        "with a digit) and not a C++ keyword; kiln_add_model takes it from the target name")


def kernel_namespace(api: str | None) -> str:
    return DEFAULT_KERNEL_NAMESPACE if api is None else f"{DEFAULT_KERNEL_NAMESPACE}::{api}"


def member_names(names: list[str]) -> list[str]:
    """C++ member names for ONNX value names ("input.1" -> input_1), distinct and not keywords."""
    out: list[str] = []
    for n in names:
        m = re.sub(r"[^A-Za-z0-9_]", "_", n) or "_"
        if m[0].isdigit() or m in _CPP_KEYWORDS:
            m = "_" + m
        base, i = m, 2
        while m in out:
            m, i = f"{base}_{i}", i + 1
        out.append(m)
    return out


def asm_string(path: Path) -> str:
    """A path inside the generated .incbin directive (a C string inside an assembler string)."""
    text = str(path)
    if any(c in text for c in "\n\r\0"):
        raise KilnError("render", f"weights file {text!r}", "a build directory whose path holds a line break "
                        "cannot be named to the assembler; use another build directory")
    return text.replace("\\", "\\\\\\\\").replace('"', '\\\\\\"')


def _step_lines(i: int, s: StepRecord, kernel_index: dict[str, int]) -> list[str]:
    """The C++ statements that fill plan step i."""
    ref = lambda r: f"{{Space({r.space}), {r.at}, {r.nbytes}}}"  # noqa: E731
    lines = [f's[{i}].name = "{s.name}";']
    if s.kernel is not None:
        lines.append(f"s[{i}].kernel = &k[{kernel_index[s.kernel]}];  // {s.kernel}")
    else:
        lines.append(f"s[{i}].glue = Glue({s.glue});")
        lines.append(f"s[{i}].params = {{{', '.join(map(str, s.params))}}};")
    lines.append(f"s[{i}].inputs = {{{', '.join(ref(r) for r in s.inputs)}}};")
    lines.append(f"s[{i}].output = {ref(s.output)};")
    if s.frees:
        lines.append(f"s[{i}].frees = {{{', '.join(f'{{{r[0]}, {r[1]}}}' for r in s.frees)}}};")
    if s.l2_hits is not None:
        hits = ", ".join("true" if h else "false" for h in s.l2_hits)
        lines.append(f"s[{i}].has_l2 = true;")
        lines.append(f"s[{i}].l2_hits = {{{hits}}};")
    if s.l2_reads is not None:
        lines.append(f"s[{i}].l2_reads = {{{', '.join(map(str, s.l2_reads))}}};")
    return lines


def cpp_api_files(plan: Plan, record: ModelRecord, api: str, weights_path: Path,
                  env: jinja2.Environment) -> dict[str, str]:
    """`<api>.hpp` and `<api>_model.cpp` for the plan's one model (its manifest record), the weights blob
    linked from weights_path (absolute)."""
    check_api_name(api)
    if plan.options.kiln_shape_buckets or record.shape_buckets is not None:
        raise KilnError("render", f"model {record.name}", "KILN_SHAPE_BUCKETS is not served by the C++ runtime "
                        "(other input sizes are planned at run time in Python); bake the model without it")
    aicpu = [s for s in record.steps if s.is_aicpu]
    if aicpu:
        nodes = "; ".join(f"node '{s.name}' ({', '.join(s.op_types)})" for s in aicpu)
        raise KilnError("render", f"model {record.name}", f"{nodes} run(s) on the AI CPU fallback (no AI Core kernel "
                        f"family), which the Python runtime evaluates with onnx's reference evaluator; the C++ "
                        f"runtime has no AI CPU: bake it with Python (KILN_MODELS), or replace the op")
    ints = [o.name for o in record.outputs if o.dtype != "float32"]
    if ints:
        raise KilnError("render", f"model {record.name}", f"output(s) {ints} are int64 (ArgMax/ArgMin positions); "
                        "the C++ runtime returns float outputs only")
    if any(s.runtime_shape is not None for s in record.steps):
        raise KilnError("render", f"model {record.name}", "a generic-kernel step; the C++ runtime serves baked "
                        "shapes only")
    kernels = {k.symbol: k for k in plan.kernels}
    used = list(dict.fromkeys(s.kernel for s in record.steps if s.kernel is not None))
    kernel_index = {sym: j for j, sym in enumerate(used)}
    io = {"inputs": [{"name": t.name, "member": m, "shape": list(t.shape)}
                     for t, m in zip(record.inputs, member_names([t.name for t in record.inputs]))],
          "outputs": [{"name": t.name, "member": m, "shape": list(t.shape)}
                      for t, m in zip(record.outputs, member_names([t.name for t in record.outputs]))]}
    common = {"api": api, "model": record.name, "onnx": Path(record.onnx).name, "profile": plan.profile,
              "options": plan.options.as_dict(), **io}
    return {
        f"{api}.hpp": env.get_template("cpp_model.hpp.j2").render(**common),
        f"{api}_model.cpp": env.get_template("cpp_model.cpp.j2").render(
            **common, kernels=[kernels[s] for s in used], dtypes=_DTYPES, weights_path=asm_string(weights_path),
            weights_bytes=record.weights_bytes, arena_bytes=record.arena_bytes,
            steps=[_step_lines(i, s, kernel_index) for i, s in enumerate(record.steps)],
            kernel_namespace=kernel_namespace(api)),
    }
