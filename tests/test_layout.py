"""The shape of the source tree: the import graph of codegen/ and python/kiln/ (no cycle, imports follow the
stage order) and the size limits (function, parameter list, file). Reads the sources with ast only: nothing
is imported, so these run without a build."""
from __future__ import annotations

import ast
import itertools
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
ROOTS = {"codegen": REPO / "codegen", "kiln": REPO / "python" / "kiln"}

# codegen's stages, lowest first: a module may import its own layer and the ones below, never one above.
# options.py and codegen/__init__.py sit beside ir/ in layer 0; analyze and __main__ are the entry points.
LAYERS = [("ir", "options", ""), ("frontend",), ("passes",), ("cost",), ("families",), ("select",), ("emit",),
          ("shapes",), ("pipeline",), ("analyze", "__main__")]
LAYER_OF = {part: i for i, parts in enumerate(LAYERS) for part in parts}

MAX_FUNCTION_LINES = 80
MAX_PARAMETERS = 7
MAX_FILE_LINES = 800


def _module_name(package: str, root: Path, path: Path) -> str:
    parts = [package, *path.relative_to(root).with_suffix("").parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _sources() -> dict[str, Path]:
    """Module name -> file, for every module of codegen/ and python/kiln/ (kiln's own names: kiln.x)."""
    mods = {}
    for package, root in ROOTS.items():
        for path in sorted(root.rglob("*.py")):
            if "__pycache__" not in path.parts:
                mods[_module_name(package, root, path)] = path
    return mods


SOURCES = _sources()
# Compiled submodules: import targets with no source here (kiln._core is the pybind11 extension).
EXTENSIONS = {"kiln._core"}


def _canonical(name: str) -> str:
    """The installed package ships codegen/ as kiln.codegen: both spellings are one module."""
    return "codegen" + name[len("kiln.codegen"):] if name == "kiln.codegen" or name.startswith("kiln.codegen.") \
        else name


def _known(name: str) -> str | None:
    """The most specific module of ours that `name` (a dotted import target) is or lies in, else None."""
    name = _canonical(name)
    while name:
        if name in SOURCES or name in EXTENSIONS:
            return name
        name = name.rpartition(".")[0]
    return None


def _is_type_checking(test: ast.expr) -> bool:
    """`if TYPE_CHECKING:` (or typing.TYPE_CHECKING): imports under it never run. They name the type of an
    annotation from a later stage (a plan type naming the shape buckets that build on it); not a dependency."""
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(module: str, path: Path) -> list[tuple[str, int]]:
    """(imported module of ours, line) for every import in the file, at any depth (function-level imports
    included), relative imports resolved against the module's package."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    skipped = {id(n) for block in ast.walk(tree) if isinstance(block, ast.If) and _is_type_checking(block.test)
               for stmt in block.body for n in ast.walk(stmt)}
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found += [(_known(a.name), node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)] if node.level > 1 else base
                origin = ".".join(base + ([node.module] if node.module else []))
            else:
                origin = node.module or ""
            for a in node.names:  # `from pkg import sub` imports the submodule pkg.sub when there is one
                sub = _known(f"{origin}.{a.name}")
                found.append((sub if sub == _canonical(f"{origin}.{a.name}") else _known(origin), node.lineno))
    return [(m, line) for m, line in found if m is not None and m != module]


GRAPH = {m: sorted(set(_imports(m, p)), key=lambda e: (e[1], e[0])) for m, p in SOURCES.items()}
GRAPH.update({m: [] for m in EXTENSIONS})


def _where(module: str, line: int) -> str:
    return f"{SOURCES[module].relative_to(REPO)}:{line}"


def _layer(module: str) -> int | None:
    parts = module.split(".")
    return LAYER_OF.get(parts[1] if len(parts) > 1 else "")


def test_the_graph_is_read():
    """Guards the tests below against passing on an empty graph: the sources are found and relative imports
    (also those inside functions) resolve to modules."""
    assert {"codegen.pipeline", "codegen.ir", "kiln"} <= set(SOURCES)
    assert any(target.startswith("codegen.ir") for target, _ in GRAPH["codegen.pipeline"])
    assert sum(len(v) for v in GRAPH.values()) > 50


def _cycles() -> list[tuple[list[str], list[str]]]:
    """The strongly connected components with more than one module (Tarjan), each with one shortest cycle
    through its first module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    sccs: list[list[str]] = []
    edges = {m: sorted({t for t, _ in v}) for m, v in GRAPH.items()}

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                scc.append(w)
                if w == v:
                    break
            if len(scc) > 1:
                sccs.append(sorted(scc))

    for m in sorted(edges):
        if m not in index:
            visit(m)
    cycles = []
    for scc in sccs:  # one shortest cycle through the component's first module (BFS inside the component)
        start, members = scc[0], set(scc)
        prev: dict[str, str] = {}
        frontier = [start]
        while frontier and start not in prev:
            nxt = []
            for v in frontier:
                for w in edges[v]:
                    if w in members and w not in prev:
                        prev[w] = v
                        nxt.append(w)
            frontier = nxt
        path = [start]
        while len(path) == 1 or path[-1] != start:
            path.append(prev[path[-1]])
        cycles.append((scc, path[::-1]))
    return cycles


def _edge_line(a: str, b: str) -> int:
    return min(line for t, line in GRAPH[a] if t == b)


def test_no_import_cycle():
    cycles = _cycles()
    text = [f"{len(scc)} modules import each other: {', '.join(scc)}\n  e.g. " + " -> ".join(c) + "\n    "
            + "\n    ".join(f"{a} -> {b} at {_where(a, _edge_line(a, b))}" for a, b in itertools.pairwise(c))
            for scc, c in cycles]
    print("\n".join(text))
    assert not cycles, f"{len(cycles)} import cycle(s):\n" + "\n".join(text)


def test_imports_follow_the_layer_order():
    order = " < ".join("(" + ", ".join(p or "__init__" for p in parts) + ")" if len(parts) > 1 else parts[0]
                       for parts in LAYERS)
    bad = []
    for m, targets in sorted(GRAPH.items()):
        if not m.startswith("codegen"):
            continue
        if _layer(m) is None:
            bad.append(f"{_where(m, 1)}: {m} is in no layer of {order}")
            continue
        for t, line in targets:
            if t.startswith("codegen") and _layer(t) is not None and _layer(t) > _layer(m):
                bad.append(f"{_where(m, line)}: {m} (layer {_layer(m)}) imports {t} (layer {_layer(t)})")
    print("\n".join(bad))
    assert not bad, f"{len(bad)} import(s) against {order}:\n" + "\n".join(bad)


def _absolute_roots(path: Path) -> list[tuple[str, int]]:
    """(first name, line) of every absolute import in the file."""
    roots = []
    for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(n, ast.Import):
            roots += [(a.name.split(".")[0], n.lineno) for a in n.names]
        elif isinstance(n, ast.ImportFrom) and not n.level and n.module:
            roots.append((n.module.split(".")[0], n.lineno))
    return roots


def test_codegen_never_imports_kiln():
    """codegen/ runs at build time from the source tree, before any kiln package exists."""
    bad = [f"{_where(m, line)}: {m} imports {root}" for m, path in sorted(SOURCES.items()) if m.startswith("codegen")
           for root, line in _absolute_roots(path) if root == "kiln"]
    assert not bad, "\n".join(bad)


def _functions():
    for m, path in sorted(SOURCES.items()):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                yield m, path, node


def _parameters(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    """Named parameters (positional-only, ordinary, keyword-only), without a method's self/cls; *args and
    **kwargs are not counted."""
    names = [a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs]
    return names[1:] if names and names[0] in ("self", "cls") else names


def _report(kind: str, rows: list[tuple[int, str]], limit: int) -> None:
    rows.sort(reverse=True)
    text = "\n".join(f"{n:5d}  {where}" for n, where in rows)
    print(f"{kind} over {limit}:\n{text}")
    assert not rows, f"{len(rows)} {kind} over {limit}:\n{text}"


@pytest.mark.parametrize("package", sorted(ROOTS))
def test_no_function_over_the_line_limit(package):
    rows = [(fn.end_lineno - fn.lineno + 1, f"{path.relative_to(REPO)}:{fn.lineno} {fn.name}")
            for m, path, fn in _functions() if m.split(".")[0] == package
            and fn.end_lineno - fn.lineno + 1 > MAX_FUNCTION_LINES]
    _report("function(s) with lines", rows, MAX_FUNCTION_LINES)


@pytest.mark.parametrize("package", sorted(ROOTS))
def test_no_parameter_list_over_the_limit(package):
    rows = [(len(_parameters(fn)), f"{path.relative_to(REPO)}:{fn.lineno} {fn.name}")
            for m, path, fn in _functions() if m.split(".")[0] == package
            and len(_parameters(fn)) > MAX_PARAMETERS]
    _report("function(s) with parameters", rows, MAX_PARAMETERS)


@pytest.mark.parametrize("package", sorted(ROOTS))
def test_no_file_over_the_line_limit(package):
    rows = [(n, str(path.relative_to(REPO))) for m, path in sorted(SOURCES.items()) if m.split(".")[0] == package
            and (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_FILE_LINES]
    _report("file(s) with lines", rows, MAX_FILE_LINES)


def _family_names() -> set[str]:
    """The registered kernel families: the first argument of every Family(...) in codegen/families/."""
    names = set()
    for path in (REPO / "codegen" / "families").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and getattr(node.func, "id", "") == "Family" and node.args
                    and isinstance(node.args[0], ast.Constant)):
                names.add(node.args[0].value)
    return names


def test_no_family_is_named_outside_its_module():
    """What a family is lives in its module (codegen/families/<name>.py); the other stages ask the registry, so
    no string naming a family appears in code outside codegen/families/ (docstrings and comments may)."""
    families = _family_names()
    assert len(families) >= 14, families
    found = []
    for module, path in SOURCES.items():
        if module.startswith("codegen.families"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                      if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef)) and n.body
                      and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value in families and id(node) not in docstrings:
                found.append(f"{_where(module, node.lineno)}: {node.value!r}")
    assert not found, "family names outside codegen/families/:\n" + "\n".join(found)
