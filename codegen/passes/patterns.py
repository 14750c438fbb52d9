"""Patterns lowering turns into one kernel, found over the fused graph before anything is lowered: a MatMul's
bias Add, a Transpose that only feeds a MatMul as its B operand, and decomposed GELU and LayerNormalization
chains (matched numerically, in whatever order an exporter wrote them). One consumer index, one record
(Patterns) that lowering reads; the pipeline runs it right after fusion."""
from __future__ import annotations

from dataclasses import dataclass, field
from math import prod

import numpy as np

from ..ir.graph import Graph, Node


@dataclass
class Patterns:
    """What the patterns absorbed, keyed by node name, and the lowering decisions they explain."""
    skip: set[str] = field(default_factory=set)                 # nodes absorbed by a pattern
    bias_add: dict[str, Node] = field(default_factory=dict)     # MatMul name -> the Add that is its bias
    b_transposes: set[str] = field(default_factory=set)         # Transposes that produce a transposed-B operand
    gelu_chain: dict[str, list[str]] = field(default_factory=dict)  # last node of a GELU chain -> its nodes
    gelu_input: dict[str, str] = field(default_factory=dict)    # last node of a GELU chain -> its input
    layernorm_chain: dict[str, tuple] = field(default_factory=dict)  # last node -> (names, x, gamma, beta, eps)
    channel_shuffle: dict[str, tuple[str, int]] = field(default_factory=dict)  # last Reshape -> (x, groups)
    shuffle_channels: dict[str, int] = field(default_factory=dict)  # last Reshape -> channels of x
    decisions: list[str] = field(default_factory=list)

    def shuffle_sources(self, name: str) -> list[tuple[str, int]]:
        """(value, channel) of each output channel of a channel shuffle: j = c * groups + g reads g * C/g + c."""
        x, groups = self.channel_shuffle[name]
        per = self.shuffle_channels[name] // groups
        return [(x, (j % groups) * per + j // groups) for j in range(per * groups)]

    def absorbed(self, name: str) -> bool:
        """Whether lowering handles this node through a pattern rather than by its op type."""
        return (name in self.skip or name in self.gelu_chain or name in self.layernorm_chain
                or name in self.channel_shuffle)


def find_patterns(g: Graph) -> Patterns:
    """Every pattern of `g` (after fusion: sibling GEMMs fused into a GEMM are looked at too)."""
    finder = _Finder(g)
    finder.find()
    return finder.found


class _Finder:
    def __init__(self, g: Graph):
        self.g = g
        self.found = Patterns()

    def shape(self, v: str) -> tuple[int, ...]:
        return tuple(self.g.values[v].shape)

    def find(self) -> None:
        g = self.g
        consumers: dict[str, list[Node]] = {}
        for n in g.nodes:
            for i in n.inputs:
                consumers.setdefault(i, []).append(n)
        outputs = {v.name for v in g.outputs}
        siblings = [m for n in g.nodes for m in n.fused.siblings]  # fused into a GEMM before them
        for n in list(g.nodes) + siblings:
            # MatMul(x, W) + Add(constant row of N): the Add is the GEMM's bias
            if (n.op_type == "MatMul" and n.inputs[1] in g.initializers and n.outputs[0] not in outputs
                    and not n.fused.activation):  # relu(xW) + b is not relu(xW + b)
                cs = consumers.get(n.outputs[0], [])
                if len(cs) == 1 and cs[0].op_type == "Add":
                    other = [i for i in cs[0].inputs if i != n.outputs[0]]
                    n_out = self.shape(n.outputs[0])[-1]
                    if len(other) == 1 and other[0] in g.initializers and g.initializers[other[0]].size == n_out:
                        self.found.bias_add[n.name] = cs[0]
                        self.found.skip.add(cs[0].name)
            # Transpose feeding only a MatMul as B, whose perm with the last two axes swapped is 0,2,1,3
            if n.op_type == "Transpose":
                perm = tuple(n.attrs["perm"])
                cs = consumers.get(n.outputs[0], [])
                if (len(perm) == 4 and perm[:2] + (perm[3], perm[2]) == (0, 2, 1, 3) and len(cs) == 1
                        and n.outputs[0] not in outputs
                        and cs[0].op_type in ("MatMul", "Attention") and cs[0].inputs[1] == n.outputs[0]
                        and cs[0].inputs[0] != n.outputs[0]):
                    self.found.b_transposes.add(n.name)
        self.find_channel_shuffles(consumers, outputs)
        self.find_layernorm_chains(consumers, outputs)
        self.find_gelu_chains(consumers, outputs)

    def find_channel_shuffles(self, consumers, outputs) -> None:
        """ShuffleNet's channel shuffle: Reshape (N,C,H,W) -> (N,g,C/g,H,W), Transpose (0,2,1,3,4), Reshape back
        to (N,C,H,W), neither intermediate used elsewhere: one channel permutation of x."""
        for last in self.g.nodes:
            if last.op_type != "Reshape":
                continue
            t = self.producer(last.inputs[0])
            if t is None or t.op_type != "Transpose" or tuple(t.attrs["perm"]) != (0, 2, 1, 3, 4):
                continue
            first = self.producer(t.inputs[0])
            if first is None or first.op_type != "Reshape":
                continue
            x = first.inputs[0]
            xs, mid, ys = self.shape(x), self.shape(first.outputs[0]), self.shape(last.outputs[0])
            inner = [first.outputs[0], t.outputs[0]]
            if (len(xs) != 4 or ys != xs or len(mid) != 5 or mid[0] != xs[0] or mid[1] * mid[2] != xs[1]
                    or mid[3:] != xs[2:] or any(v in outputs or len(consumers.get(v, [])) != 1 for v in inner)):
                continue
            self.found.channel_shuffle[last.name] = (x, mid[1])
            self.found.shuffle_channels[last.name] = xs[1]
            self.found.skip.update((first.name, t.name))
            self.found.decisions.append(f"{first.name}, {t.name}, {last.name}: channel shuffle of {list(xs)} in "
                                        f"{mid[1]} groups, one channel permutation")

    def producer(self, v: str) -> Node | None:
        return next((n for n in self.g.nodes if v in n.outputs), None)

    def find_gelu_chains(self, consumers, outputs) -> None:
        """Decomposed GELU (exporters write x*0.5*(1+erf(x/sqrt 2)) in several orders): the elementwise
        nodes between x and one output, around an Erf, are accepted if they compute GELU numerically."""
        g = self.g
        elementwise = {"Mul", "Div", "Add", "Sub", "Erf"}
        for erf in (n for n in g.nodes if n.op_type == "Erf"):
            pre = g.producer(erf.inputs[0])
            if pre is None or pre.op_type not in ("Div", "Mul"):
                continue
            xs = [i for i in pre.inputs if i not in g.initializers]
            if len(xs) != 1:
                continue
            x = xs[0]
            grown, values = [], {x}
            for n in g.nodes:  # topological: elementwise nodes fed only by x, constants and each other
                if n.op_type in elementwise and any(i in values for i in n.inputs) \
                        and all(i in values or i in g.initializers for i in n.inputs):
                    grown.append(n)
                    values.update(n.outputs)
            for end in grown:  # the smallest sub-chain ending at `end` that computes GELU
                needed, chain = {end.outputs[0]}, list[Node]()
                for n in reversed(grown[: grown.index(end) + 1]):
                    if n.outputs[0] in needed:
                        chain.insert(0, n)
                        needed.update(i for i in n.inputs if i != x and i not in g.initializers)
                if erf not in chain:
                    continue
                leaving = [n for n in chain if n.outputs[0] in outputs or
                           any(c not in chain for c in consumers.get(n.outputs[0], []))]
                if leaving != [end] or not self.computes_gelu(chain, x):
                    continue
                self.found.gelu_chain[end.name] = [n.name for n in chain]
                self.found.gelu_input[end.name] = x
                for n in chain[:-1]:
                    self.found.skip.add(n.name)
                self.found.decisions.append(f"{end.name}: {len(chain)} nodes ({', '.join(n.op_type for n in chain)}) "
                                      f"compute GELU; one gelu kernel")
                break

    def find_layernorm_chains(self, consumers, outputs) -> None:
        """Decomposed LayerNormalization (ReduceMean, Sub, Pow or Mul, ReduceMean, Add eps, Sqrt, Div, then
        Mul gamma, Add beta), in whatever order an exporter wrote it: the nodes between x and one output are
        accepted if, evaluated on random rows, they compute layernorm with the gamma, beta and eps they hold."""
        g = self.g
        ops = {"ReduceMean", "Sub", "Pow", "Mul", "Add", "Sqrt", "Div"}
        for first in (n for n in g.nodes if n.op_type == "ReduceMean"):
            x = first.inputs[0]
            if x in g.initializers or x not in g.values or not self.shape(x):
                continue
            L = self.shape(x)[-1]
            grown, values = [], {x}
            for n in g.nodes:
                if n.op_type in ops and any(i in values for i in n.inputs) \
                        and all(i in values or i in g.initializers for i in n.inputs if i):
                    grown.append(n)
                    values.update(n.outputs)
            if sum(n.op_type == "ReduceMean" for n in grown) < 2 or first not in grown:
                continue
            for end in reversed(grown):  # the longest chain first: it includes gamma and beta
                needed, chain = {end.outputs[0]}, list[Node]()
                for n in reversed(grown[: grown.index(end) + 1]):
                    if n.outputs[0] in needed:
                        chain.insert(0, n)
                        needed.update(i for i in n.inputs if i and i != x and i not in g.initializers)
                leaving = [n for n in chain if n.outputs[0] in outputs or
                           any(c not in chain for c in consumers.get(n.outputs[0], []))]
                if first not in chain or leaving != [end] or any(n.name in self.found.skip for n in chain):
                    continue
                params = self.layernorm_params(chain, x, L)
                if params is None:
                    continue
                self.found.layernorm_chain[end.name] = ([n.name for n in chain], x, *params)
                for n in chain[:-1]:
                    self.found.skip.add(n.name)
                self.found.decisions.append(f"{end.name}: {len(chain)} nodes ({', '.join(n.op_type for n in chain)}) "
                                      f"compute LayerNormalization (eps {params[2]:g}); one layernorm kernel")
                break

    def eval_chain(self, chain: list[Node], x: str, xv: np.ndarray) -> np.ndarray:
        env = {x: xv}
        for n in chain:
            a = [env[i] if i in env else np.asarray(self.g.initializers[i], np.float64) for i in n.inputs if i]
            if n.op_type == "ReduceMean":
                axes = tuple(n.attrs.get("axes", [-1]))
                env[n.outputs[0]] = a[0].mean(axis=axes, keepdims=bool(n.attrs.get("keepdims", 1)))
            elif n.op_type == "Sqrt":
                env[n.outputs[0]] = np.sqrt(a[0])
            elif n.op_type == "Erf":
                from math import erf
                env[n.outputs[0]] = np.vectorize(erf)(a[0])
            else:
                env[n.outputs[0]] = {"Sub": np.subtract, "Pow": np.power, "Mul": np.multiply, "Add": np.add,
                                     "Div": np.divide}[n.op_type](*a)
        return env[chain[-1].outputs[0]]

    def layernorm_params(self, chain: list[Node], x: str, L: int):
        """(gamma, beta, eps) if the chain is a layernorm over the last axis, else None."""
        g = self.g
        vecs = {n.op_type: np.asarray(g.initializers[i], np.float64).reshape(-1) for n in chain for i in n.inputs
                if i in g.initializers and g.initializers[i].size == L and n.op_type in ("Mul", "Add")}
        scalars = [float(np.asarray(g.initializers[i]).reshape(-1)[0]) for n in chain if n.op_type == "Add"
                   for i in n.inputs if i in g.initializers and g.initializers[i].size == 1]
        if len(scalars) != 1 or not 0 < scalars[0] < 1e-2:
            return None
        gamma, beta, eps = vecs.get("Mul", np.ones(L)), vecs.get("Add", np.zeros(L)), scalars[0]
        shape = self.shape(x)
        xv = np.random.default_rng(0).standard_normal((1,) * (len(shape) - 2) + (min(3, prod(shape[:-1])), L)) * 2 + 0.5
        try:
            with np.errstate(all="ignore"):
                got = self.eval_chain(chain, x, xv)
        except (KeyError, ValueError):
            return None
        mu = xv.mean(-1, keepdims=True)
        want = (xv - mu) / np.sqrt(((xv - mu) ** 2).mean(-1, keepdims=True) + eps) * gamma + beta
        return (gamma, beta, eps) if got.shape == want.shape and np.allclose(got, want, rtol=1e-6, atol=1e-7) else None

    def computes_gelu(self, chain: list[Node], x: str) -> bool:
        from math import erf, sqrt
        if any(i in self.g.initializers and self.g.initializers[i].size != 1 for n in chain for i in n.inputs):
            return False  # the probe below evaluates scalars only
        t = np.linspace(-4, 4, 33)
        env = {x: t}
        fns = {"Mul": np.multiply, "Div": np.divide, "Add": np.add, "Sub": np.subtract}
        for n in chain:
            args = [env[i] if i in env else np.asarray(self.g.initializers[i], np.float64).reshape(-1)[0]
                    for i in n.inputs]
            env[n.outputs[0]] = np.vectorize(erf)(args[0]) if n.op_type == "Erf" else fns[n.op_type](*args)
        want = 0.5 * t * (1 + np.vectorize(erf)(t / sqrt(2)))
        return bool(np.allclose(env[chain[-1].outputs[0]], want, rtol=1e-5, atol=1e-6))
