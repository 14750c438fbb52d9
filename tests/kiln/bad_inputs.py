"""A corpus of bad and edge inputs to the `kiln` command line (issue 18), each with its expected outcome: the
exit status, what stderr must say (the thing at fault and what is accepted), and the files that must not
exist afterwards. test_bad_input.py runs every case and also checks that no traceback was printed and no
temporary file was left behind.

Paths in a case are relative to a fresh working directory per case; setup() writes the files a case reads.
The model is the smallest baked one, `{model}` in argv."""
from __future__ import annotations

import os
import pickle
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

THREADS = r"expected an integer 1\.\.\d+ \(threads for the emulated AI cores, 4 per CPU core\)"
SHARE = r"expected a share between 0 and 1"
PATH_IS_DIR = r"is a directory; give the name of a file"
NO_DIR = r"the directory .* does not exist"
REPO = str(Path(__file__).resolve().parents[2])  # kiln's checkout, for the verbs that rebuild (tune)


@dataclass(frozen=True)
class Case:
    id: str
    argv: tuple[str, ...]
    status: int
    stderr: tuple[str, ...] = ()  # regular expressions, each must match somewhere
    absent: tuple[str, ...] = ()  # paths that must not exist afterwards
    env: dict[str, str] = field(default_factory=dict)
    setup: Callable[[Path], None] | None = None
    stdout: tuple[str, ...] = ()
    keeps: tuple[tuple[str, str], ...] = ()  # (path, text) a failed command must leave as it was


def _files(**arrays_or_bytes) -> Callable[[Path], None]:
    """A setup writing each name=content: bytes as they are, arrays with numpy.save, ('npz', dict) archives."""
    def setup(d: Path) -> None:
        for name, content in arrays_or_bytes.items():
            name = name.replace("__", ".")
            if isinstance(content, bytes):
                (d / name).write_bytes(content)
            elif isinstance(content, dict):
                np.savez(d / name, **content)
            elif isinstance(content, str):  # "dir"
                (d / name).mkdir()
            else:
                np.save(d / name, content, allow_pickle=True)
    return setup


def _overflowing_profile(model: str, steps: list[dict], hw_profile: str, cpu_ms: float) -> Callable[[Path], None]:
    """A kiln-profile/1 file of the model whose every number is finite but whose steps add up beyond a float."""
    import json

    def setup(d: Path) -> None:
        doc = {"format": "kiln-profile/1", "model": model, "profile": hw_profile, "isa": "avx2", "threads": 1,
               "repeat": 1, "date": "2026-12-02T00:00:00Z", "total_cpu_ms": 1.0, "simulated_cycles": None,
               "steps": [{"index": i, "name": s["name"], "kernel": s.get("kernel"), "cpu_ms": cpu_ms,
                          "simulated_cycles": None} for i, s in enumerate(steps)]}
        (d / "p.json").write_text(json.dumps(doc))
        (d / "old.html").write_text("the previous report")
    return setup


def thread_cases() -> list[Case]:
    """Class 1: thread counts reach OpenMP only within 1..4 per CPU core."""
    out = [Case(f"bench-threads-{v}", ("bench", "{model}", "--threads", v), 2, ("argument --threads", THREADS))
           for v in ("100000", "0", "-1", "abc", "2.5", "²")]
    for var in ("OMP_NUM_THREADS", "KILN_NUM_THREADS"):
        out += [Case(f"env-{var}-{v}", ("run", "{model}"), 0, (f"ignoring {var}='{v}'", THREADS),
                     env={var: v}) for v in ("100000", "0", "x", "²")]
    out.append(Case("env-OMP-list-is-fine", ("info",), 0, env={"OMP_NUM_THREADS": "2,1"}))
    return out


def output_path_cases() -> list[Case]:
    """Class 5: an output path kiln cannot write stops the command before the work, naming the path."""
    mkdir = _files(d="dir")
    return [
        Case("visualize-o-dir", ("visualize", "{model}", "-o", "d"), 2, ("argument -o/--output", PATH_IS_DIR),
             absent=("d/{model}_report.html", "{model}_report.html"), setup=mkdir),
        Case("visualize-o-missing-dir", ("visualize", "{model}", "-o", "no/r.html"), 2, (NO_DIR,), absent=("no",)),
        Case("visualize-o-device", ("visualize", "{model}", "-o", "/dev/null"), 2, ("not a regular file",)),
        Case("trace-chrome-dir", ("trace", "{model}", "--kernel", "{kernel}", "--chrome", "d"), 2,
             ("argument --chrome", PATH_IS_DIR), setup=mkdir),
        Case("trace-chrome-missing-dir", ("trace", "{model}", "--kernel", "{kernel}", "--chrome", "no/t.json"), 2,
             (NO_DIR,), absent=("no",)),
        Case("run-output-missing-dir", ("run", "{model}", "--output", "missing/dir/y.npy"), 2,
             ("argument --output", NO_DIR), absent=("missing",)),
        Case("run-output-dir", ("run", "{model}", "--output", "d"), 2, (PATH_IS_DIR,), absent=("d.npy",),
             setup=mkdir),
        Case("run-output-exact-name", ("run", "{model}", "--output", "y"), 0, absent=("y.npy",),
             stdout=("wrote y",)),
        Case("bench-profile-dir", ("bench", "{model}", "--profile", "d"), 2, ("argument --profile", PATH_IS_DIR),
             setup=mkdir),
        Case("bench-profile-missing-dir", ("bench", "{model}", "--profile", "no/p.json"), 2, (NO_DIR,)),
        Case("tune-o-dir", ("tune", "{model}", "-o", "d"), 2, (PATH_IS_DIR,), setup=mkdir),
        Case("optimize-o-missing-dir", ("optimize", "{model}", "-o", "no/t.json"), 2, (NO_DIR,)),
        Case("output-empty-name", ("run", "{model}", "--output", ""), 2, ("the output path is empty",)),
    ]


def range_cases() -> list[Case]:
    """Class 6: numbers out of range, each naming the option and the accepted range."""
    cases = [("optimize", "--threshold", v, SHARE) for v in ("2", "-0.1", "nan", "x")]
    cases += [("visualize", "--threshold", "1.5", SHARE), ("visualize", "--serve", "70000", r"0\.\.65535")]
    cases += [("analyze", "--max-seq-len", v, r"expected an integer 1\.\.65536 \(as MAX_SEQ_LEN\)")
              for v in ("-5", "0", "65537")]
    cases += [("analyze", "--max-fusion-depth", "9", r"1\.\.8 \(as MAX_FUSION_DEPTH\)"),
              ("analyze", "--batch", "0", r"1\.\.4096")]
    cases += [("trace", "--limit", "-3", r"expected an integer >= 0"), ("trace", "--core", "-1", r">= 0"),
              ("trace", "--limit", "²", r"expected an integer >= 0")]
    cases += [("validate", "--seeds", v, r"1\.\.100") for v in ("0", "101")]
    cases += [("bench", "--repeat", "0", ">= 1"), ("bench", "--warmup", "-1", ">= 0"),
              ("bench", "--rounds", "0", ">= 1"), ("bench", "--batch", "-2", r"1\.\.4096"), ("tune", "-k", "0", ">= 1")]
    out = []
    for verb, option, value, accepted in cases:
        extra = ("--kernel", "{kernel}") if verb == "trace" else ()
        out.append(Case(f"{verb}{option}={value}", (verb, "{model}", *extra, option, value), 2,
                        (f"argument {option}", accepted, f"got '{value}'")))
    return out


def small_cases(model: str, steps: list[dict], hw_profile: str, shape: tuple[int, ...]) -> list[Case]:
    """Class 7 and the fp16 boundary (class 2) at the command line."""
    inp = ("run", "{model}", "--input")
    good = np.zeros(shape, np.float32)
    return [
        Case("input-text", (*inp, "t.txt"), 2, ("--input t.txt", "not an .npy file"), setup=_files(t__txt=b"1 2 3\n")),
        Case("input-empty", (*inp, "e.npy"), 2, ("--input e.npy", "not an .npy file"), setup=_files(e__npy=b"")),
        Case("input-npz", (*inp, "a.npz"), 2, ("--input a.npz", r"\.npz archive \(arrays: x, y\)"),
             setup=_files(a__npz={"x": good, "y": good})),
        Case("input-pickle", (*inp, "p.npy"), 2, ("--input p.npy", "not a readable .npy file"),
             setup=_files(p__npy=np.array([{"a": 1}], dtype=object))),
        Case("input-raw-pickle", (*inp, "r.pkl"), 2, ("--input r.pkl", "not an .npy file"),
             setup=_files(r__pkl=pickle.dumps([1.0, 2.0]))),
        Case("input-strings", (*inp, "s.npy"), 2, ("--input s.npy", "expected real numbers"),
             setup=_files(s__npy=np.array(["a", "b"]))),
        Case("input-wrong-shape", (*inp, "w.npy"), 2, ("--input w.npy", "must have shape"),
             setup=_files(w__npy=np.zeros((1, 2, 3), np.float32))),
        Case("input-truncated", (*inp, "c.npy"), 2, ("--input c.npy", "not a readable .npy file"),
             setup=lambda d: (np.save(d / "full.npy", good),
                              (d / "c.npy").write_bytes((d / "full.npy").read_bytes()[:200]))),
        Case("input-missing", (*inp, "nothere.npy"), 2, ("--input nothere.npy", "No such file")),
        Case("input-directory", (*inp, "d"), 2, ("--input d", "cannot read it"), setup=_files(d="dir")),
        Case("input-beyond-fp16-warns", (*inp, "big.npy"), 0, ("NumericsWarning", r"beyond fp16's range"),
             setup=_files(big__npy=np.full(shape, 1e5, np.float32))),
        Case("input-nan-strict", (*inp, "nan.npy", "--output", "y.npy"), 2,
             ("--input nan.npy: model {model}, input", r"1 non-finite value\(s\) \(1 NaN, 0 inf\)", "strict"),
             absent=("y.npy",), env={"KILN_STRICT": "1"},
             setup=_files(nan__npy=np.where(np.arange(good.size).reshape(shape) == 0, np.nan, good))),
        Case("visualize-profile-overflow", ("visualize", "{model}", "-o", "old.html", "--profile", "p.json"), 2,
             ("--profile p.json", "add up to more than a float"), keeps=(("old.html", "the previous report"),),
             setup=_overflowing_profile(model, steps, hw_profile, 1e308)),
        Case("analyze-zoo-leaves-nothing", ("analyze", "{model}", "--json"), 0),  # TMPDIR is the case's directory
    ]


def _with_infs(shape: tuple[int, ...]) -> np.ndarray:
    x = np.zeros(shape, np.float32)
    x.flat[0], x.flat[-1] = np.inf, -np.inf
    return x


def other_cases(shape: tuple[int, ...]) -> list[Case]:
    """More of the same kind: unknown names, unreadable files, values no range check could catch."""
    text = _files(t__txt=b"not json\n", g__onnx=b"\x00garbage")
    return [
        Case("run-unknown-model", ("run", "nosuch"), 2, ("no baked model 'nosuch'", "this build has")),
        Case("visualize-profile-missing", ("visualize", "{model}", "-o", "r.html", "--profile", "none.json"), 2,
             ("--profile none.json", "cannot read the profile"), absent=("r.html",)),
        Case("visualize-profile-not-json", ("visualize", "{model}", "-o", "r.html", "--profile", "t.txt"), 2,
             ("--profile t.txt", "the JSON does not parse"), absent=("r.html",), setup=text),
        Case("trace-unknown-kernel", ("trace", "{model}", "--kernel", "nosuch", "--chrome", "t.json"), 2,
             ("nosuch",), absent=("t.json",)),
        Case("analyze-missing-file", ("analyze", "missing.onnx"), 2, ("missing.onnx", "no such file")),
        Case("analyze-garbage-file", ("analyze", "g.onnx"), 2, ("g.onnx", "not a readable ONNX model"), setup=text),
        Case("validate-input-size-zero", ("validate", "{model}", "--input-size", "0x5"), 2, ("--input-size '0x5'",)),
        Case("bench-unknown-peer", ("bench", "{model}", "--peers", "foo"), 2, ("unknown peer 'foo'", "accepted")),
        Case("input-inf-warns", ("run", "{model}", "--input", "inf.npy"), 0, ("NumericsWarning", r"\(0 NaN, 2 inf\)"),
             setup=_files(inf__npy=_with_infs(shape))),
    ]


def _fifo(name: str) -> Callable[[Path], None]:
    def setup(d: Path) -> None:
        (d / name).parent.mkdir(exist_ok=True)
        os.mkfifo(d / name)
    return setup


def _npy_claiming(shape: tuple[int, ...]) -> bytes:
    """An .npy file whose header says `shape` of float32 and which holds four values."""
    import io
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": "<f4", "fortran_order": False, "shape": shape})
    return buf.getvalue() + np.zeros(4, np.float32).tobytes()


def file_cases(input_name: str, shape: tuple[int, ...]) -> list[Case]:
    """Files kiln reads that would block or that lie about their size, outputs the disk cannot hold, settings
    with a typo: each named, before any work where it can be."""
    inputs_dir = ("validate", "{model}", "--inputs", "d")
    big = _files(big__npy=np.full(shape, 1e5, np.float32))
    return [
        Case("input-fifo", ("run", "{model}", "--input", "f"), 2, ("--input f", "not a regular file"),
             setup=_fifo("f")),
        Case("input-header-claims-more", ("run", "{model}", "--input", "h.npy"), 2,
             ("--input h.npy", r"truncated: its header says shape \(1000000000000,\)", "the file holds 16"),
             setup=_files(h__npy=_npy_claiming((10 ** 12,)))),
        Case("inputs-dir-fifo", inputs_dir, 2, (f"--inputs d: d/{input_name}.npy", "not a regular file"),
             setup=_fifo(f"d/{input_name}.npy")),
        Case("inputs-dir-npz-as-npy", inputs_dir, 2, (f"d/{input_name}.npy", r"is an \.npz archive"),
             setup=lambda d: (d.joinpath("d").mkdir(), np.savez(d / "d" / "x.npz", x=np.zeros(shape, np.float32)),
                              (d / "d" / "x.npz").rename(d / "d" / f"{input_name}.npy"))),
        Case("run-output-dev-full", ("run", "{model}", "--output", "/dev/full"), 2,
             ("argument --output", "/dev/full: exists and is not a regular file")),
        Case("visualize-profile-fifo", ("visualize", "{model}", "-o", "r.html", "--profile", "f"), 2,
             ("--profile f", "not a regular file"), absent=("r.html",), setup=_fifo("f")),
        Case("env-KILN_STRICT-typo-is-strict", ("run", "{model}", "--input", "big.npy", "--output", "y.npy"), 2,
             ("KILN_STRICT='maybe' is not one of", "taken as strict", "beyond fp16's range"), absent=("y.npy",),
             env={"KILN_STRICT": "maybe"}, setup=big),
        Case("env-KILN_LOG-typo", ("run", "{model}"), 0, ("KILN_LOG='verbose' is not one of", r"\[kiln\] dispatch"),
             env={"KILN_LOG": "verbose"}),
        Case("warnings-as-errors", ("run", "{model}", "--input", "big.npy", "--output", "y.npy"), 2,
             (r"NumericsWarning \(an error under PYTHONWARNINGS=error\)", "input"), absent=("y.npy",),
             env={"PYTHONWARNINGS": "error"}, setup=big),
        Case("tune-source-dir-not-a-checkout", ("tune", "{model}", "-o", "t.json"), 1,
             ("KILN_SOURCE_DIR=", "is not kiln's source tree"), absent=("t.json",), env={"KILN_SOURCE_DIR": "/"}),
        Case("tune-build-dir-is-a-file", ("tune", "{model}", "-o", "t.json", "--build-dir", "b"), 1,
             ("--build-dir b: exists and is not a directory",), absent=("t.json",), env={"KILN_SOURCE_DIR": REPO},
             setup=_files(b=b"a file")),
        Case("validate-input-size-superscript", ("validate", "{model}", "--input-size", "²"), 2,
             ("--input-size '²'", "positive integers")),
    ]


def corpus(model: str, record: dict, hw_profile: str) -> list[Case]:
    """Every case, with {model} and {kernel} still to fill in (test_bad_input.py does)."""
    shape = tuple(record["inputs"][0]["shape"])
    return (thread_cases() + output_path_cases() + range_cases()
            + small_cases(model, record["steps"], hw_profile, shape) + other_cases(shape)
            + file_cases(record["inputs"][0]["name"], shape))


def fill(text: str, **names: str) -> str:
    for k, v in names.items():
        text = text.replace("{" + k + "}", v)
    return text


def leftovers(d: Path) -> list[str]:
    """Temporary files a write left behind (codegen/ir/files.py names them .NAME.PID.HEX.tmp), and the
    temporary ONNX directories of `kiln analyze ZOO_NAME`."""
    return [str(p.relative_to(d)) for p in d.rglob("*") if p.name.endswith(".tmp")
            or p.name.startswith("kiln-analyze-")]
