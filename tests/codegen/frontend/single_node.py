"""What the frontend says of a one-node model whose node is named "the_node" (the refusal tests' shared check)."""
from codegen.frontend import onnx_import


def refusal(path) -> str:
    """The reason check_onnx gives for the model's one refused node, which must be the_node."""
    (problem,) = onnx_import.check_onnx(path)
    assert problem["node"] == "the_node"
    return problem["reason"]
