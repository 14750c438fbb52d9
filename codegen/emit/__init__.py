"""Emission: Jinja2 templates rendered to C++ files, the opspec feature files and the manifest."""
