"""How much of a model's validate gap is fp16 storage alone, measured in ONNX Runtime (no kiln involved).

kiln holds every activation and weight in fp16 (fp32 accumulation inside a kernel). This script runs an ONNX file
three ways in ONNX Runtime, fp32 throughout: as exported (the reference `kiln validate` uses), with every float
weight rounded to fp16, and with every float weight and every node's float output rounded to fp16 (a Cast to
fp16 and back after each, which is what storing them as fp16 does). It prints, per seed, the cosine, max
relative error and top-1 agreement of the rounded runs against the reference, and with --values the cosine of
each intermediate of the fully rounded run (where the divergence grows). A model whose `kiln validate` cosine is
close to the fully rounded run's owes its gap to fp16 storage, not to a kernel (docs/numerics.md).

    python benchmarks/fp16_storage.py MODEL.onnx [--shape 1x3x299x299] [--seeds 0,1,2] [--values]
"""
from __future__ import annotations

import argparse

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper


def rounded_model(model: onnx.ModelProto, activations: bool) -> onnx.ModelProto:
    """A copy whose float initializers hold fp16-representable values and, with `activations`, whose every float
    node output passes through Cast(fp16) -> Cast(fp32) before any reader sees it (graph outputs included)."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    for init in g.initializer:
        if init.data_type == TensorProto.FLOAT:
            arr = numpy_helper.to_array(init).astype(np.float16).astype(np.float32)
            init.CopyFrom(numpy_helper.from_array(arr, init.name))
    if not activations:
        return m
    inferred = onnx.shape_inference.infer_shapes(m)
    floats = {v.name for v in list(inferred.graph.value_info) + list(g.output) + list(g.input)
              if v.type.tensor_type.elem_type == TensorProto.FLOAT}
    nodes = []
    for i, n in enumerate(g.node):
        renamed = {}
        for j, o in enumerate(n.output):
            if o in floats:
                renamed[o] = f"{o}__fp32"
                n.output[j] = renamed[o]
        nodes.append(n)
        for o, raw in renamed.items():
            nodes += [helper.make_node("Cast", [raw], [f"{o}__fp16"], to=TensorProto.FLOAT16, name=f"r{i}_{o}_h"),
                      helper.make_node("Cast", [f"{o}__fp16"], [o], to=TensorProto.FLOAT, name=f"r{i}_{o}_f")]
    for x in g.input:
        if x.name in floats:  # the input is staged as fp16 too
            for n in nodes:
                for j, v in enumerate(n.input):
                    if v == x.name:
                        n.input[j] = f"{x.name}__staged"
            nodes[:0] = [helper.make_node("Cast", [x.name], [f"{x.name}__h"], to=TensorProto.FLOAT16),
                         helper.make_node("Cast", [f"{x.name}__h"], [f"{x.name}__staged"], to=TensorProto.FLOAT)]
    del g.node[:]
    g.node.extend(nodes)
    return m


def session(model: onnx.ModelProto, extra: list[str] = ()) -> ort.InferenceSession:
    m = onnx.ModelProto()
    m.CopyFrom(model)
    have = {o.name for o in m.graph.output}
    m.graph.output.extend(helper.make_empty_tensor_value_info(v) for v in extra if v not in have)
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # keep every Cast where it is
    opts.log_severity_level = 3
    return ort.InferenceSession(m.SerializeToString(), opts, providers=["CPUExecutionProvider"])


def compare(got: np.ndarray, ref: np.ndarray) -> tuple[float, float, bool]:
    g, r = got.astype(np.float64).ravel(), ref.astype(np.float64).ravel()
    cos = float(g @ r / (np.linalg.norm(g) * np.linalg.norm(r) + 1e-300))
    rel = float(np.max(np.abs(g - r)) / (np.max(np.abs(r)) + 1e-300))
    return cos, rel, bool(got.ndim == 2 and (got.argmax(-1) == ref.argmax(-1)).all())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--shape", default="", help="input shape, e.g. 1x3x299x299 (default: the file's, batch 1)")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--values", action="store_true", help="cosine of every intermediate of the rounded run")
    a = ap.parse_args()
    model = onnx.load(a.model)
    x = model.graph.input[0]
    shape = [int(d) for d in a.shape.split("x")] if a.shape else \
        [d.dim_value or 1 for d in x.type.tensor_type.shape.dim]
    ref_sess, w_sess = session(model), session(rounded_model(model, False))
    full = rounded_model(model, True)
    names = [o for n in model.graph.node for o in n.output] if a.values else []
    full_sess, ref_values = session(full, names), session(model, names)
    for seed in (int(s) for s in a.seeds.split(",")):
        feed = {x.name: np.random.default_rng(seed).standard_normal(shape).astype(np.float32)}
        ref = ref_sess.run(None, feed)[0]
        for label, sess in (("weights fp16", w_sess), ("weights + activations fp16", full_sess)):
            cos, rel, top1 = compare(sess.run(None, feed)[0], ref)
            print(f"seed {seed} {label}: cosine {cos:.6f} max rel err {rel:.5f} top-1 {'same' if top1 else 'differs'}")
        if a.values:
            got = dict(zip([o.name for o in full_sess.get_outputs()], full_sess.run(None, feed)))
            want = dict(zip([o.name for o in ref_values.get_outputs()], ref_values.run(None, feed)))
            for v in names:
                if v in got and v in want and got[v].dtype == np.float32 and got[v].size > 1:
                    print(f"  {v}: cosine {compare(got[v], want[v])[0]:.6f}")


if __name__ == "__main__":
    main()
