"""LayerNormalization over channels after a Transpose(0,2,3,1), as ConvNeXt exports it (codegen/passes/channel_norm.py
fuses the pair into one channel_layernorm_vector kernel reading NC1HWC0): channels a multiple of 16 (16, 96) and
not (24, 40: the last C0 block's padded lanes stay out of the statistics), batch 1 and 2, epsilon 1e-6, 1e-5 (the
default, attribute omitted) and 1e-3, with and without the bias input; after a depthwise 7x7 Conv and before a
Linear (MatMul), as in a ConvNeXt block, or straight from the graph input to the graph output. The launch counts
hold the fusion: the Transpose's copy is gone."""
from . import OpCase
from .norm import _f, _n, _net


def _case(name, shape, eps=None, bias=True, dw=False, linear=0, launches=None):
    c = shape[1]
    init = {"s": 1 + 0.2 * _f(c, seed=3)}
    nodes, x = [], "x"
    if dw:
        init["dw"] = _f(c, 1, 7, 7, seed=4) / 7
        nodes.append(_n("Conv", ["x", "dw"], "d", group=c, pads=[3, 3, 3, 3], kernel_shape=[7, 7]))
        x = "d"
    nodes.append(_n("Transpose", [x], "t", perm=[0, 2, 3, 1]))
    if bias:
        init["b"] = 0.3 * _f(c, seed=5)
    attrs = {} if eps is None else {"epsilon": eps}
    nodes.append(_n("LayerNormalization", ["t", "s", "b"] if bias else ["t", "s"], "ln" if linear else "y", axis=-1,
                    **attrs))
    if linear:
        init["fc"] = _f(c, linear, seed=6) / c ** 0.5
        nodes.append(_n("MatMul", ["ln", "fc"], "y"))
    return OpCase(name, _net(name, nodes, list(shape), init, opset=17), launches=launches)


CASES = [
    _case("chln_c96_b1_dw_linear_eps1em6", [1, 96, 9, 9], eps=1e-6, dw=True, linear=32, launches=3),
    _case("chln_c40_b2_nobias", [2, 40, 5, 6], launches=1),
    _case("chln_c16_b2_eps1em3_linear", [2, 16, 4, 4], eps=1e-3, linear=16, launches=2),
    _case("chln_c24_b1_dw_eps1em6", [1, 24, 6, 5], eps=1e-6, dw=True, launches=2),
]
