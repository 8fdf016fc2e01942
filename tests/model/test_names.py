"""audit/model outside heads/ and bodies/ names no built-in head or body: what differs between
them is a trait their classes declare (issue 35's acceptance, for the model package; the
rest of audit/ follows as its name tables go)."""

import ast
from pathlib import Path

from audit.model.bodies.traits import BODY_TRAITS
from audit.model.heads.traits import HEAD_TRAITS

MODEL = Path(__file__).resolve().parents[2] / "audit" / "model"
OWN_HOMES = (MODEL / "heads", MODEL / "bodies")


def quoted_names(source: str) -> list[tuple[int, str]]:
    """(line, name) of every string constant equal to a built-in head or body name, docstrings
    aside (they may say which built-in they mean)."""
    tree = ast.parse(source)
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant)}
    names = set(HEAD_TRAITS) | set(BODY_TRAITS)
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and node.value in names and id(node) not in docstrings]


def test_the_scan_finds_a_quoted_name():
    assert quoted_names('x = 1\nif head == "softmax_matched":\n    pass\n') == [(2, "softmax_matched")]
    assert quoted_names('"""the softmax"""\ny = "softmaxes"\n') == []


def test_no_built_in_name_is_quoted_in_audit_model_outside_heads_and_bodies():
    found = {str(path.relative_to(MODEL)): hits for path in sorted(MODEL.rglob("*.py"))
             if not any(home in path.parents for home in OWN_HOMES)
             and (hits := quoted_names(path.read_text()))}
    assert found == {}
