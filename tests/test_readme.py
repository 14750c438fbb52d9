"""The README is true: every `kiln` command it shows runs against the installed package (as written where it
is quick and needs no extra build or ONNX Runtime, else `kiln COMMAND --help` with the flags it uses), its
Python example runs, its options table is `codegen.options.OPTIONS` (names, defaults, values), its links
stay inside the repository, and it stays short. Also: no absolute path of a machine in the repository."""
import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

sys.path.insert(0, str(REPO))  # codegen from the source tree, not the installed kiln.codegen
from codegen.options import OPTIONS

README = (REPO / "README.md").read_text()
# Run as written: quick, and they need nothing but the default build. The others (a build, ONNX Runtime, a
# long run, a browser) are checked through --help.
RUN_AS_WRITTEN = {"analyze", "kernels", "plan", "opspec", "run", "info"}


def kiln_exe() -> str:
    beside = Path(sys.executable).with_name("kiln")  # the venv's script, also when the venv is not activated
    exe = shutil.which("kiln") or (str(beside) if beside.is_file() else None)
    if exe is None:
        pytest.fail("the kiln console script is not installed (pip install .)")
    return exe


def code_blocks(lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```", README, re.M | re.S)


def shell_commands() -> list[str]:
    """Every command of the README's sh blocks: comments dropped, `a && b` split."""
    out = []
    for block in code_blocks("sh"):
        for line in block.splitlines():
            line = re.sub(r"\s+#\s.*$", "", line).strip()
            out += [part.strip() for part in line.split("&&") if part.strip()]
    return out


KILN_COMMANDS = [c for c in shell_commands() if c.startswith("kiln ")]


def test_readme_shows_kiln_commands():
    assert len(KILN_COMMANDS) >= 10, KILN_COMMANDS
    assert "pip install .[validate] && kiln validate resnet50" in README
    assert "pip install .[test] && python -m pytest tests" in README


def test_readme_shows_every_cli_command():
    r = subprocess.run([kiln_exe(), "--help"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    subcommands = set(re.search(r"\{([a-z_,]+)\}", r.stdout).group(1).split(","))
    shown = {shlex.split(c)[1] for c in KILN_COMMANDS}
    assert subcommands <= shown, f"kiln commands the README does not show: {sorted(subcommands - shown)}"


@pytest.mark.parametrize("command", KILN_COMMANDS)
def test_readme_kiln_command(command, tmp_path):
    argv = shlex.split(command)
    sub = argv[1]
    if sub in RUN_AS_WRITTEN:
        r = subprocess.run([kiln_exe(), *argv[1:]], capture_output=True, text=True, cwd=tmp_path, timeout=300)
        assert r.returncode == 0, f"{command}: exit {r.returncode}\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}"
        assert r.stdout.strip(), command
        if "--json" in argv:
            json.loads(r.stdout)
        if "--output" in argv:
            assert (tmp_path / argv[argv.index("--output") + 1]).is_file()
        return
    r = subprocess.run([kiln_exe(), sub, "--help"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"kiln {sub} --help: exit {r.returncode}\n{r.stderr[-2000:]}"
    for flag in (a for a in argv[2:] if a.startswith("-")):
        assert re.search(rf"(^|[\s,\[]){re.escape(flag)}\b", r.stdout), f"{command}: kiln {sub} has no {flag}"


def test_readme_python_example_runs(tmp_path):
    (block,) = code_blocks("python")
    r = subprocess.run([sys.executable, "-c", block], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]


def test_readme_build_options_are_options():
    names = {o.name for o in OPTIONS}
    used = set(re.findall(r"-Ccmake\.define\.([A-Z0-9_]+)", README)) | set(re.findall(r"\s-D([A-Z0-9_]+)=", README))
    assert used and used <= names, f"not options: {sorted(used - names)}"


def options_table() -> dict[str, list[str]]:
    section = README.split("## Build options", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| ---")]
    head, *body = rows
    assert [c.strip() for c in head.strip("|").split("|")] == ["option", "values", "default", "effect"], head
    table = {}
    for line in body:
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        assert cells[0] not in table, f"{cells[0]} twice in the README's options table"
        table[cells[0]] = cells
    return table


def test_readme_options_table_is_the_option_table():
    table = options_table()
    names = {o.name for o in OPTIONS}
    assert set(table) == names, (f"README's table has {sorted(set(table) - names)} extra, "
                                 f"misses {sorted(names - set(table))}")
    for o in OPTIONS:
        _, values, default, _effect = table[o.name]
        if o.default == "":
            assert default.startswith("empty"), f"{o.name}: default is empty, README says {default!r}"
            assert ("level" in default) == o.by_level, f"{o.name}: follows KILN_OPT_LEVEL: {o.by_level}"
        else:
            assert default == f"`{o.default}`", f"{o.name}: default {o.default!r}, README says {default!r}"
        if o.kind == "bool":
            assert values == "ON, OFF", (o.name, values)
        elif o.kind == "enum":
            assert [v.strip() for v in values.split(",")] == list(o.allowed), (o.name, values, o.allowed)
        elif o.kind in ("int", "list_int"):
            assert f"{o.lo}..{o.hi}" in values, (o.name, values, o.lo, o.hi)


def test_readme_is_short():
    size = len(README.encode())
    assert size < 12 * 1024, f"README.md is {size} bytes; keep it the user's document (details go to docs/)"


def test_docs_link_inside_the_repository():
    pages = [REPO / "README.md", REPO / "CHANGELOG.md", REPO / "benchmarks" / "RESULTS.md",
             *sorted((REPO / "docs").glob("*.md"))]
    for page in pages:
        for target in re.findall(r"\]\(([^)#\s]+)", page.read_text()):
            if re.match(r"[a-z]+:", target):
                continue
            path = (page.parent / target).resolve()
            assert path.is_relative_to(REPO) and path.exists(), f"{page.name} links to {target}"


def test_docs_name_files_that_exist():
    """Every file of this repository the README and docs name exists (docs/ascend-model.md also names files of
    its sources' repositories, so it is left out)."""
    pages = [REPO / "README.md", REPO / "CHANGELOG.md", REPO / "benchmarks" / "RESULTS.md",
             *sorted(p for p in (REPO / "docs").glob("*.md") if p.name != "ascend-model.md")]
    pattern = re.compile(r"(?<![\w/.])((?:codegen|python/kiln|kernels|templates|benchmarks|tests|cmake|docs)/"
                         r"[\w/.-]*\w\.(?:py|j2|cpp|hpp|toml|cmake|md|json))")
    missing = [f"{page.relative_to(REPO)}: {name}" for page in pages
               for name in sorted(set(pattern.findall(page.read_text()))) if not (REPO / name).exists()]
    assert not missing, "named but not in the repository:\n" + "\n".join(missing)


def test_no_absolute_machine_paths():
    """No file of the repository names a path of some machine (test data is found by conftest.model_file)."""
    try:
        files = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    pattern = re.compile(r"(^|[^\w.~$])/(work|home|root|Users|tmp|mnt|srv)/")
    hits = []
    for name in files.splitlines():
        path = REPO / name
        try:
            text = path.read_text()
        except (UnicodeDecodeError, OSError):
            continue
        hits += [f"{name}:{i}: {line.strip()}" for i, line in enumerate(text.splitlines(), 1) if pattern.search(line)]
    assert not hits, "absolute machine paths:\n" + "\n".join(hits[:20])
