"""ConvTranspose's forms priced by the cost model at the shapes real decoders use (DBNet's 2x2 stride-2 up-convs,
U-Net / FCN 4x4 stride-2 pad-1), from the build's plan alone (no compile: the cost model equals the emulator for
every baked kernel). Per shape: the form the build picks, each form's predicted cycles and launches (the built
ones, stride_phase, gemm_depth_to_space and gemm_col2im, exactly; zero_insert as an estimate,
codegen/select/conv_transpose.py).

    python benchmarks/bench_conv_transpose.py [--target ascend910b] [--markdown] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from codegen.options import parse_options  # noqa: E402
from codegen.pipeline import plan  # noqa: E402

# name -> (input NCHW, output channels, kernel, attributes)
SHAPES = {
    "DBNet up-conv 1 (64x160x160 -> 64, 2x2/2)": ([1, 64, 160, 160], 64, 2, {"strides": [2, 2]}),
    "DBNet up-conv 2 (64x320x320 -> 1, 2x2/2)": ([1, 64, 320, 320], 1, 2, {"strides": [2, 2]}),
    "U-Net decoder (256x64x64 -> 128, 4x4/2 p1)": ([1, 256, 64, 64], 128, 4, {"strides": [2, 2], "pads": [1] * 4}),
    "FCN upscore (21x32x32 -> 21, 4x4/2 p1)": ([1, 21, 32, 32], 21, 4, {"strides": [2, 2], "pads": [1] * 4}),
    "PyTorch decoder (128x40x40 -> 64, 3x3/2 p1 op1)": ([1, 128, 40, 40], 64, 3,
                                                        {"strides": [2, 2], "pads": [1] * 4, "output_padding": [1, 1]}),
}
FORMS = ("stride_phase", "gemm_depth_to_space", "gemm_col2im", "zero_insert")


def one_node(path: Path, x: list[int], cout: int, k: int, attrs: dict) -> None:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    w = numpy_helper.from_array(np.full((x[1], cout, k, k), 0.01, np.float32), "w")
    node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], name="up", **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(onnx.shape_inference.infer_shapes(m), path)


def price(target: str) -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="kiln-bench-convt-") as tmp:
        for i, (name, (x, cout, k, attrs)) in enumerate(SHAPES.items()):
            path = Path(tmp) / f"convt{i}.onnx"
            one_node(path, x, cout, k, attrs)
            options = replace(parse_options({"KILN_TARGET": target, "KILN_MODELS": str(path)}))
            planned = plan(options, REPO / "codegen", Path(tmp) / f"work{i}", kernel_list=False)
            (line,) = [ln for ln in planned.log.lines if "conv_transpose=" in ln]
            fields = dict(f.split("=", 1) for f in line.split()[3:] if "=" in f)
            row = {"shape": name, "chosen": fields["conv_transpose"]}
            for f in FORMS:
                if f"{f}_cycles" in fields:
                    row[f] = (int(fields[f"{f}_cycles"]), int(fields[f"{f}_launches"]))
            rows.append(row)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", default="ascend910b")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--json", help="write the rows here")
    args = ap.parse_args()
    rows = price(args.target)
    cell = {True: lambda r, f: f"{r[f][0]:,} ({r[f][1]})" if f in r else "-",
            False: lambda r, f: f"{r[f][0]}/{r[f][1]}" if f in r else "-"}[args.markdown]
    if args.markdown:
        print(f"| shape ({args.target}, predicted cycles (launches)) | chosen | " + " | ".join(FORMS) + " |")
        print("| --- " * (len(FORMS) + 2) + "|")
    for r in rows:
        cells = [r["shape"], r["chosen"]] + [cell(r, f) for f in FORMS]
        print("| " + " | ".join(cells) + " |" if args.markdown else "  ".join(cells))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
