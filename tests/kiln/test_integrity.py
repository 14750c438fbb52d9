"""Installed files checked against the manifest (issue 18, class 4): a weights blob or .opspec file that is
damaged, truncated or swapped is named with a clean error and a non-zero exit, never used. One small build of a
two-kernel model; each case damages its own copy of the package."""
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
from conftest import build_package, minimal_kernel_list

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def _model(path):
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((24, 8, 3, 3)).astype(np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Softmax", ["f"], ["y"], name="softmax", axis=-1),
             helper.make_node("Flatten", ["c"], ["f"], name="flatten")]
    graph = helper.make_graph([nodes[0], nodes[2], nodes[1]], "integrity",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 6, 6])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)


@pytest.fixture(scope="module")
def package(tmp_path_factory):
    root = tmp_path_factory.mktemp("integrity")
    _model(root / "tiny_integrity.onnx")
    return build_package(root, f"KILN_MODELS={root / 'tiny_integrity.onnx'}",
                         f"KILN_KERNEL_LIST={minimal_kernel_list(root)}")


def kiln_in(pkg, tmp_path, *argv):
    env = dict(os.environ, PYTHONPATH=str(pkg))
    return subprocess.run([sys.executable, "-m", "kiln.cli", *argv], capture_output=True, text=True, env=env,
                          cwd=tmp_path)


def copy_of(package, tmp_path):
    dst = tmp_path / "site"
    shutil.copytree(package, dst)
    return dst


def test_an_intact_install_runs(package, tmp_path):
    r = kiln_in(package, tmp_path, "run", "tiny_integrity")
    assert r.returncode == 0, r.stderr
    r = kiln_in(package, tmp_path, "opspec", "tiny_integrity")
    assert r.returncode == 0, r.stderr


def test_flipped_bytes_in_the_weights_blob_are_named(package, tmp_path):
    site = copy_of(package, tmp_path)
    blob = site / "kiln" / "models" / "tiny_integrity.weights.bin"
    data = bytearray(blob.read_bytes())
    data[len(data) // 2] ^= 0x40  # one bit: same size, so only the checksum can tell
    blob.write_bytes(bytes(data))
    r = kiln_in(site, tmp_path, "run", "tiny_integrity")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "tiny_integrity.weights.bin" in r.stderr and "damaged or was replaced" in r.stderr
    assert "reinstall kiln" in r.stderr


def test_a_truncated_weights_blob_is_named(package, tmp_path):
    site = copy_of(package, tmp_path)
    blob = site / "kiln" / "models" / "tiny_integrity.weights.bin"
    blob.write_bytes(blob.read_bytes()[:100])
    r = kiln_in(site, tmp_path, "validate", "tiny_integrity")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "has 100 bytes, expected" in r.stderr and "tiny_integrity.weights.bin" in r.stderr


def test_a_missing_weights_blob_is_named(package, tmp_path):
    site = copy_of(package, tmp_path)
    (site / "kiln" / "models" / "tiny_integrity.weights.bin").unlink()
    r = kiln_in(site, tmp_path, "run", "tiny_integrity")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "cannot read its weights file" in r.stderr and "tiny_integrity.weights.bin" in r.stderr


def _model_opspecs(package) -> list[str]:
    """The opspec file names of the model's kernels (the kernel list's own kernel is not the model's: damaging it
    is not `kiln opspec MODEL`'s business), from the installed manifest."""
    import json
    man = json.loads(subprocess.run([sys.executable, "-c", "import json, kiln; print(json.dumps(kiln.manifest()))"],
                                    capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(package)),
                                    check=True).stdout)
    return sorted(f"{k['opspec']}.opspec" for k in man["kernels"]
                  if any(i.startswith("tiny_integrity:") for i in k["instances"]))


def test_an_opspec_copied_from_another_kernel_is_named(package, tmp_path):
    site = copy_of(package, tmp_path)
    names = _model_opspecs(package)
    assert len(names) >= 2, names
    specs = [site / "kiln" / "opspecs" / n for n in names]
    shutil.copy(specs[1], specs[0])
    r = kiln_in(site, tmp_path, "opspec", "tiny_integrity")
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert specs[0].name in r.stderr and "damaged or was replaced" in r.stderr


def test_the_manifest_lists_every_installed_blob_and_opspec(package):
    import json
    man = json.loads(subprocess.run([sys.executable, "-c", "import json, kiln; print(json.dumps(kiln.manifest()))"],
                                    capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(package)),
                                    check=True).stdout)
    root = package / "kiln"
    installed = {str(p.relative_to(root)) for p in [*root.glob("models/*.weights.bin"), *root.glob("opspecs/*.opspec")]}
    assert installed and set(man["checksums"]) == installed
