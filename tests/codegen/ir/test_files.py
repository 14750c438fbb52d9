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
    with pytest.raises(OSError, match="No space"):
        write_atomic(out, "new")
    assert out.read_text() == "old" and not leftovers(tmp_path)
