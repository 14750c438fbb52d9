"""kiln's build-time compiler.

Stages, each one module, data flowing one way:

    options    typed build options (the CMake cache variables)
    frontend   op instances to bake (kernel list; ONNX arrives with the model frontend)
    opspec     one Opspec per unique kernel: dims, layout, FLOPs, bytes, name = spec
    tiling     implementation variant per Opspec that fits the profile's buffers
    render     Jinja2 templates -> C++ sources, manifest.json, .opspec files, [OPT] log

Modules import each other only relatively so the package runs from the source
tree during the build (``python -m codegen``) and installed as ``kiln.codegen``.
"""

__all__ = ["KilnError"]


class KilnError(Exception):
    """A codegen error that names the stage and the thing at fault."""

    def __init__(self, stage: str, subject: str, message: str):
        self.stage, self.subject, self.message = stage, subject, message
        super().__init__(f"[{stage}] {subject}: {message}")
