"""Kernel families: one module per family (its tiling rule, buffers, GM bytes, cost-model replay, tuning space
and generic form) plus its template; registry.py lists them, a line each, and is what the other stages import."""
