"""codegen/ir/files.py: the up-front check of an output path and the atomic write every kiln output uses."""
import os
import stat

import pytest

from codegen.ir.files import OutputPathError, check_output_path, write_atomic


def leftovers(d):
    """Temporary files of an interrupted write (the helper's .NAME.PID.HEX.tmp names)."""
    return [p.name for p in d.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize("case, reason", [
    ("dir", "is a directory"),
    ("missing_dir", "does not exist"),
    ("empty", "the output path is empty"),
    ("device", "not a regular file"),
])
def test_unwritable_paths_are_refused_naming_the_option_and_path(tmp_path, case, reason):
    path = {"dir": str(tmp_path), "missing_dir": str(tmp_path / "missing" / "y.npy"), "empty": "",
            "device": "/dev/null"}[case]
    with pytest.raises(OutputPathError, match=reason) as e:
        check_output_path(path, "kiln run --output")
    assert str(e.value).startswith("kiln run --output")
    assert case == "empty" or path in str(e.value)
    assert not (tmp_path / "missing").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through any permission")
def test_read_only_directory_and_file_are_refused(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    (ro / "old.json").write_text("{}")
    (tmp_path / "locked.json").write_text("{}")
    (tmp_path / "locked.json").chmod(stat.S_IRUSR)
    ro.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        with pytest.raises(OutputPathError, match="is not writable"):
            check_output_path(ro / "new.json", "kiln trace --chrome")
        with pytest.raises(OutputPathError, match="read-only"):
            check_output_path(tmp_path / "locked.json", "kiln tune -o")
    finally:
        ro.chmod(stat.S_IRWXU)


def test_write_is_whole_and_keeps_the_usual_mode(tmp_path):
    out = tmp_path / "report.html"
    check_output_path(out, "kiln visualize -o")
    write_atomic(out, "é" * 1000)
    assert out.read_text(encoding="utf-8") == "é" * 1000
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(out.stat().st_mode) == 0o666 & ~umask  # not mkstemp's 0600
    write_atomic(out, b"\x00\x01")
    assert out.read_bytes() == b"\x00\x01" and not leftovers(tmp_path)


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    out = tmp_path / "kiln_tuning.json"
    out.write_text("old")

    def broken_replace(src, dst):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OutputPathError, match=r"kiln_tuning.json: cannot write it \(No space left on device\)"):
        write_atomic(out, "new")
    assert out.read_text() == "old" and not leftovers(tmp_path)


def test_a_file_size_limit_mid_write_is_named_and_leaves_the_old_file(tmp_path):
    """A real write failure, not a patched one: RLIMIT_FSIZE (a quota-like limit; Python ignores SIGXFSZ, so the
    write fails with EFBIG) in a child process, on a payload beyond it."""
    import subprocess
    import sys
    out = tmp_path / "y.npy"
    out.write_text("old")
    script = ("import resource, sys; resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096)); "
              "from codegen.ir.files import write_atomic, OutputPathError\n"
              "try:\n    write_atomic(sys.argv[1], b'x' * 100000)\nexcept OutputPathError as e:\n    print(e)")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    r = subprocess.run([sys.executable, "-c", script, str(out)], capture_output=True, text=True, cwd=root)
    assert r.returncode == 0 and "y.npy: cannot write it (File too large)" in r.stdout, r.stdout + r.stderr
    assert out.read_text() == "old" and not leftovers(tmp_path)


@pytest.mark.parametrize("case, reason", [
    ("loop", "is a loop of symbolic links"),
    ("under_loop", "is a loop of symbolic links"),
    ("under_file", "not a directory"),
    ("trailing_slash", "ends with '/'"),
    ("long_name", "the name is too long for the file system"),
    ("fifo", "not a regular file"),
])
def test_paths_that_would_fail_after_the_work_are_refused_before_it(tmp_path, case, reason):
    (tmp_path / "loop").symlink_to("loop")
    (tmp_path / "f").write_text("a file")
    os.mkfifo(tmp_path / "fifo")
    path = {"loop": "loop", "under_loop": "loop/y.npy", "under_file": "f/y.npy", "trailing_slash": "y.npy/",
            "long_name": "y" * 300, "fifo": "fifo"}[case]
    with pytest.raises(OutputPathError, match=reason):
        check_output_path(tmp_path / path if case != "trailing_slash" else f"{tmp_path}/{path}", "kiln run --output")


def test_a_symbolic_link_is_followed_and_kept(tmp_path):
    (tmp_path / "link.json").symlink_to("real.json")
    check_output_path(tmp_path / "link.json")
    write_atomic(tmp_path / "link.json", "{}")
    assert (tmp_path / "link.json").is_symlink() and (tmp_path / "real.json").read_text() == "{}"
    assert not leftovers(tmp_path)


def test_a_long_name_leaves_room_for_the_temporary_suffix(tmp_path):
    name = "r" * 250 + ".html"  # 255 bytes: the limit; the temporary name must not be longer
    write_atomic(tmp_path / name, "x")
    assert (tmp_path / name).read_text() == "x" and not leftovers(tmp_path)


@pytest.mark.parametrize("case, reason", [
    ("missing", "No such file"), ("dir", "is a directory"), ("fifo", "not a regular file"),
    ("loop", "loop of symbolic links"), ("under_file", "not a directory"), ("device", "not a regular file"),
])
def test_input_files_that_would_block_or_fail_are_named(tmp_path, case, reason):
    from codegen.ir.files import InputPathError, check_input_file
    (tmp_path / "loop").symlink_to("loop")
    (tmp_path / "f").write_text("a file")
    os.mkfifo(tmp_path / "fifo")
    path = {"missing": tmp_path / "none.json", "dir": tmp_path, "fifo": tmp_path / "fifo", "loop": tmp_path / "loop",
            "under_file": tmp_path / "f" / "x.json", "device": "/dev/zero"}[case]
    with pytest.raises(InputPathError, match=reason) as e:
        check_input_file(path, "--profile")
    assert str(e.value).startswith(f"--profile {path}: cannot read it")
