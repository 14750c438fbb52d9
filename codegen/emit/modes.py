"""The two modes a template renders in: baked (every dim and tiling parameter a constexpr) and generic (the
size-dependent values members of a struct filled from a RuntimeShape at each launch; codegen/shapes/generic.py).
The templates mark each namespace-scope constant with `{{ dyn }}` or `{{ fixed }}` and bracket their code with
`{{- kernel_struct_begin }}`, `{{ kernel_entry(k) }}` and `{{ kernel_entry_end(k) }}`."""
from __future__ import annotations

BAKED_MODE = {
    "generic": False,
    "dyn": "constexpr",
    "fixed": "constexpr",
    "dyn_fn": "constexpr ",  # a helper function that reads shape-dependent values
    "kernel_struct_begin": "",
    "kernel_entry": lambda k: f"}}  // namespace\n\nKernelStats {k}(const void* const* in, void* out) {{",
    "kernel_entry_end": lambda k: "",
}


_STRUCT_BEGIN = """
// Generic kernel: the values below marked `const` follow the input size (and the tiling chosen for it) given at
// each launch as a RuntimeShape `rt`; the static constexpr ones are this kernel's structure.
struct Kernel {
  explicit Kernel(const RuntimeShape& shape) : rt(shape) {}
  const RuntimeShape rt;  // first member: the shape-dependent members below are initialised from it
"""


def _generic_entry_end(k: str) -> str:
    return (f"\n}};  // struct Kernel\n}}  // namespace\n\n"
            f"KernelStats {k}(const void* const* in, void* out, const RuntimeShape& rt) {{\n"
            f"  return Kernel(rt).run(in, out);\n}}")


GENERIC_MODE = {
    "generic": True,
    "dyn": "const",             # a const member initialised from rt
    "fixed": "static constexpr",
    "dyn_fn": "",                # a member function, reading the const members
    "kernel_struct_begin": _STRUCT_BEGIN.rstrip("\n"),
    "kernel_entry": lambda k: "KernelStats run(const void* const* in, void* out) {",
    "kernel_entry_end": _generic_entry_end,
}
