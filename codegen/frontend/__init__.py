"""Frontends: ONNX import, the kernel list (TOML) and the built-in model zoo; each yields the shared graph or op
instances."""
