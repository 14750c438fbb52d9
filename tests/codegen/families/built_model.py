"""A small ONNX model built into a package and checked in a subprocess (one process imports one kiln build): its
outputs against ONNX Runtime, and each kernel step's emulator run against the cost model, alone (every read a
miss) and with the step's L2 plan. Shared by the conv family tests that need a model around a kernel form."""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import REPO, build_package

CHECK = textwrap.dedent("""
    import json, os, sys
    import numpy as np
    sys.path[:0] = sys.argv[1].split(os.pathsep)
    import kiln
    import onnxruntime as ort
    from kiln.runtime import as_packed
    from kiln.codegen.families.registry import predict
    from kiln.codegen.ir.profiles import PROFILES
    from test_costmodel import spec_of
    model = kiln.load(kiln.models()[0])
    x = np.random.default_rng(0).standard_normal([int(d) for d in sys.argv[3].split("x")]).astype(np.float32)
    want = ort.InferenceSession(sys.argv[2]).run(None, {"x": x})
    got = model.run(x)
    got = got if isinstance(got, list) else [got]
    out = {"errors": [[float(np.max(np.abs(g - w))), float(np.max(np.abs(w)))] for g, w in zip(got, want)],
           "kernels": {}}
    plans = {s["kernel"]: (tuple(s["l2_hits"]), tuple(s["l2_reads"]) if s.get("l2_reads") else None)
             for s in model.record["steps"] if s["kind"] == "kernel" and s.get("l2_hits") is not None}
    for name, (hits, reads) in plans.items():
        k = model.kernel(name)
        ins = [as_packed(np.zeros(t["shape"]), t["dtype"]) for t in k.record["inputs"]]
        rows = []
        for l2, kw in ((None, {}), (hits, {"l2_hits": hits, "l2_reads": reads})):
            k.run_packed(*ins, **kw)
            st = k.last_stats
            p = predict(spec_of(k), k.record["family"], k.record["tiling"], PROFILES[st["profile"]], l2=l2)
            rows.append({"cycles": st["cycles"], "predicted": p.cycles,
                         "pipes_equal": all((p.pipes[n].instrs, p.pipes[n].bytes) == (v["instructions"], v["bytes"])
                                            for n, v in st["pipes"].items()),
                         "bytes_equal": (p.mem.l2_hit_bytes, p.mem.hbm_read_bytes) == (st["l2_hit_bytes"],
                                                                                        st["hbm_read_bytes"])})
        out["kernels"][name] = {"tiling": k.record["tiling"], "layouts": [t["layout"] for t in k.record["inputs"]],
                                "runs": rows}
    print(json.dumps(out))
""")


def plan_model(root: Path, onnx_file: Path):
    """The build's plan of `onnx_file` alone (a one-Relu kernel list): its ModelPlan."""
    from conftest import minimal_kernel_list

    from codegen.options import parse_options
    from codegen.pipeline import plan
    options = {"KILN_MODELS": str(onnx_file), "KILN_KERNEL_LIST": str(minimal_kernel_list(root))}
    (m,) = plan(parse_options(options), REPO, root / "plan").models
    return m


def build_and_check(root: Path, onnx_file: Path, input_shape: tuple[int, ...], *defines: str) -> dict:
    """Builds `onnx_file` (its graph input x of `input_shape`) with the given -D defines besides the model and a
    one-Relu kernel list, and returns the check's JSON: {"errors": [[max abs err, max abs ref] per output],
    "kernels": {name: {"tiling", "layouts", "runs": [alone, with the L2 plan]}}}."""
    from conftest import minimal_kernel_list
    pkg = build_package(root, f"KILN_MODELS={onnx_file}", f"KILN_KERNEL_LIST={minimal_kernel_list(root)}", *defines)
    tests_dirs = os.pathsep.join([str(REPO / "tests" / "codegen" / "cost"), str(REPO)])
    r = subprocess.run([sys.executable, "-c", CHECK, tests_dirs, str(onnx_file), "x".join(map(str, input_shape))],
                       capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(pkg)))
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def assert_replayed_exactly(kernels: dict) -> None:
    """Every kernel's runs (alone and with its step's L2 plan): the cost model equals the emulator."""
    for name, k in kernels.items():
        for run in k["runs"]:
            assert run["pipes_equal"] and run["bytes_equal"], name
            assert run["predicted"] == pytest.approx(run["cycles"], rel=1e-9), name


def one_node_model(path: Path, op: str, in_shape: tuple[int, ...], out_shape: tuple[int, ...], **attrs) -> Path:
    """An ONNX model of one `op` node (opset 17) from float input x of in_shape to y of out_shape, written to path."""
    import onnx
    from onnx import TensorProto, helper
    g = helper.make_graph([helper.make_node(op, ["x"], ["y"], name=op.lower(), **attrs)], op.lower(),
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(in_shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(out_shape))])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path
