"""docs/operator-support.md is what the frontend's op table and the family registry give (regenerated here; the
test fails when docs/ differs: run `python -m codegen support-matrix > docs/operator-support.md`)."""
from pathlib import Path

import pytest

pytest.importorskip("onnx")

from codegen.emit.support_matrix import EXAMPLES, support_matrix
from codegen.frontend.onnx_ops import OPS
from codegen.frontend.onnx_rules import ACCEPTED_ATTRIBUTES

DOC = Path(__file__).resolve().parents[3] / "docs" / "operator-support.md"


def test_the_doc_is_the_generated_matrix():
    assert DOC.read_text() == support_matrix(), (
        "docs/operator-support.md is stale: regenerate it with `python -m codegen support-matrix > "
        "docs/operator-support.md`")


def test_every_op_has_a_row_and_every_runtime_op_an_example():
    text = DOC.read_text()
    for op, entry in OPS.items():
        assert f"| {op} | {entry.summary} |" in text, op
        assert entry.build_time_only or op in EXAMPLES, f"{op}: add a one-op example to support_matrix.EXAMPLES"
    assert set(ACCEPTED_ATTRIBUTES) <= set(OPS)
    assert "| Conv |" in text and "`conv2d_cube_img2col`" in text and "`dwconv2d_vector`" in text
