"""No module of audit/bench or audit/gpucheck quotes a built-in head or body name (issue 35):
what they run is picked from the registries by trait (audit.bench.picks) or read from data."""

import ast
from pathlib import Path

from audit.model.bodies import BODIES
from audit.model.heads import HEADS

REPO = Path(__file__).resolve().parents[2]
SCANNED = ("audit/bench", "audit/gpucheck")
# the built-in names when issue 35 was filed, and a retired arm name; the registries add any new one
KNOWN = {"softmax", "sigsoftmax", "gss", "plif", "plif_frozen", "mos", "moc", "mos_uniform", "mixtape",
         "softmax_matched", "gss_unbounded", "awd_lstm", "transformer"}


def names() -> set[str]:
    return KNOWN | set(HEADS) | set(BODIES)


def quoted_names(source: str) -> list[tuple[int, str]]:
    """(line, name) of every string constant equal to a built-in name, docstrings excluded."""
    tree = ast.parse(source)
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant)}
    found = names()
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in found
            and id(node) not in docstrings]


def test_the_scan_sees_a_quoted_name_and_skips_docstrings():
    source = 'def f():\n    """softmax"""\n    return {"mos": 1}, "x softmax", f"{1} transformer"\n'
    assert quoted_names(source) == [(3, "mos")]
    assert set(HEADS) <= names() and set(BODIES) <= names()


def test_no_quoted_built_in_name_in_bench_or_gpucheck():
    hits = [f"{path.relative_to(REPO)}:{line}: {name!r}"
            for folder in SCANNED for path in sorted((REPO / folder).rglob("*.py"))
            for line, name in quoted_names(path.read_text(encoding="utf-8"))]
    assert not hits, "quoted built-in names:\n" + "\n".join(hits)
