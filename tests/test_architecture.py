"""The shape of the package: its import graph runs one way, and the plug-in promise holds for the
house too (no built-in head or body named outside the heads' and bodies' own folders).

Both read the source with ``ast`` (every import counts, those inside functions too), so a lazy
import that runs back up is caught as surely as one at the top of a module.
"""

import ast
from pathlib import Path

import pytest

from audit.model.bodies import BODIES
from audit.model.heads import HEADS

PACKAGE = Path(__file__).resolve().parent.parent / "audit"

# The rooms of audit/, lowest first: a room imports only rooms of a lower layer (never its own
# layer's other rooms, never a higher one), so the graph between rooms has no circle by
# construction. __main__ dispatches by module name (importlib), above everything.
LAYERS = [
    {"errors"},                                         # the one-line error every room raises
    {"files", "device", "schema", "plots", "yamlfile"}, # leaves: no study, no model
    {"data"},                                           # corpora and word-similarity files
    {"model"},                                          # heads, bodies, the language model, their traits
    {"config"},                                         # a study: validated, its run settings
    {"train", "evaluate", "plan"},                      # one run trained / measured; a study's cost
    {"stats", "synthetic"},                             # the runs table and the statistics on it
    {"report", "pretrained"},                           # the audit page; a pretrained suite as evidence
    {"bench"},                                          # benchmarks that print figures
    {"gpucheck"},                                       # the GPU acceptance run (uses the benches)
    {"__main__"},
]
LAYER = {room: i for i, rooms in enumerate(LAYERS) for room in rooms}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> list[tuple[str, int]]:
    """(imported audit module, line) of every import in the file; ``from audit.x import y`` counts
    as an import of ``audit.x.y`` when that is a module, else of ``audit.x``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(a.name, node.lineno) for a in node.names if a.name.split(".")[0] == "audit"]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and node.module.split(".")[0] == "audit":
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                is_module = (PACKAGE.parent / Path(*sub.split("."))).with_suffix(".py").is_file() \
                    or (PACKAGE.parent / Path(*sub.split(".")) / "__init__.py").is_file()
                found.append((sub if is_module else node.module, node.lineno))
    return found


def room(module: str) -> str:
    return module.split(".")[1] if "." in module else module


def graph() -> dict[str, set[str]]:
    return {module_name(p): {m for m, _ in imports(p)} for p in PACKAGE.rglob("*.py")}


def test_every_room_has_a_layer():
    rooms = {room(m) for m in graph()} - {"audit"}
    assert rooms <= set(LAYER), f"rooms without a layer: {sorted(rooms - set(LAYER))}"


def test_no_import_runs_up_or_sideways():
    bad = []
    for path in sorted(PACKAGE.rglob("*.py")):
        src = room(module_name(path))
        if src == "audit":
            continue
        for target, line in imports(path):
            dst = room(target)
            if dst != src and dst != "audit" and LAYER[dst] >= LAYER[src]:
                bad.append(f"{path.relative_to(PACKAGE.parent)}:{line} {src} -> {dst}")
    assert not bad, "imports against the layers:\n" + "\n".join(bad)


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan), each sorted."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_imports_itself_around_a_circle():
    """Within a room too (the layers only order rooms): no two modules import each other, however
    indirectly, a package's ``__init__`` re-exporting its own modules aside (one direction)."""
    found = cycles(graph())
    assert not found, f"import circles: {found}"


def quoted_names(path: Path, names: set[str]) -> list[tuple[int, str]]:
    """(line, name) of every string constant equal to a built-in name, docstrings excluded."""
    tree = ast.parse(path.read_text())
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names
            and id(node) not in docstrings]


def test_quoted_names_are_found(tmp_path):
    source = tmp_path / "m.py"
    source.write_text('"""softmax: a docstring is prose."""\nHEAD = "softmax"\nOTHER = "softmaxes"\n')
    assert quoted_names(source, {"softmax"}) == [(2, "softmax")]


@pytest.mark.parametrize("kind,names", [("head", set(HEADS)), ("body", set(BODIES))])
def test_no_built_in_name_outside_its_own_folder(kind, names):
    """A head or body from outside is planned, trained, evaluated and audited like a built-in one
    only if no code outside the heads' and bodies' folders asks for a built-in by name."""
    own = (PACKAGE / "model" / "heads", PACKAGE / "model" / "bodies")
    bad = [f"{path.relative_to(PACKAGE.parent)}:{line} {name!r}"
           for path in sorted(PACKAGE.rglob("*.py")) if not path.is_relative_to(own[0]) and not path.is_relative_to(own[1])
           for line, name in quoted_names(path, names)]
    assert not bad, f"built-in {kind} names outside audit/model/heads and audit/model/bodies:\n" + "\n".join(bad)
