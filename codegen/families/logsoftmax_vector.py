"""logsoftmax_vector: log-softmax over the last axis, a tile of rows per Vector block
(templates/logsoftmax_vector.cpp.j2, softmax's template with x - max - ln(sum) for the scaling; the sizing and the
replay are the row kernels' shared ones, codegen/families/rows.py)."""
from __future__ import annotations

from .base import Family, register
from .rows import replay_rows, row_mte2, row_rule, row_space

FAMILY = register(Family("logsoftmax_vector", "logsoftmax", "vector", row_rule, row_mte2, replay_rows,
                         space=row_space))
