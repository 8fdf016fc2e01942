"""Issue 53: verdict states are enums (``audit.stats.decision.Verdict`` and ``Gate``), never text.

A reason written as ``"not run: ..."`` and read back by ``reason.startswith("not run")`` in another
module is the join by text the issue removes: a reworded reason silently changes what a table
counts. Every module of the package writes a gate through ``Gate.X.because`` and reads it through
``Gate.of``, and compares verdicts with ``Verdict`` members; this test reads the source (code, not
docstrings or comments) of every module and template and fails on a state spelt as text.
"""

import io
import re
import tokenize
from pathlib import Path

import pytest

from audit.stats.decision import Gate, Verdict

PACKAGE = Path(__file__).resolve().parents[2] / "audit"
HOME = PACKAGE / "stats" / "decision.py"   # where the states are defined
GATES = tuple(str(g) for g in Gate if g is not Gate.TESTED)
VERDICTS = tuple(str(v) for v in Verdict)


def code_strings(path: Path) -> list[tuple[int, str, str, str, bool]]:
    """(line, value, the code before, the token after, inside a ``startswith``/``endswith`` call)
    of every string literal of ``path`` but its docstrings."""
    toks = [t for t in tokenize.generate_tokens(io.StringIO(path.read_text()).readline)
            if t.type not in (tokenize.NL, tokenize.COMMENT)]
    out, opened = [], []   # per open bracket: whether it belongs to a prefix test
    for k, tok in enumerate(toks):
        if tok.string in "([{" and tok.type == tokenize.OP:
            by_name = k > 0 and toks[k - 1].string in ("startswith", "endswith")
            opened.append(by_name or (bool(opened) and opened[-1] and tok.string == "("))
        elif tok.string in ")]}" and tok.type == tokenize.OP and opened:
            opened.pop()
        if tok.type != tokenize.STRING:
            continue
        text = tok.string.lstrip("rbfRBF")
        quote = text[:3] if text[:3] in ('"""', "'''") else text[0]
        before = toks[k - 1] if k else None
        if len(quote) == 3 and (before is None or before.type in (tokenize.INDENT, tokenize.NEWLINE, tokenize.DEDENT)):
            continue   # a docstring
        code = "".join(t.string for t in toks[max(k - 3, 0):k])
        after = toks[k + 1].string if k + 1 < len(toks) else ""
        out.append((tok.start[0], text[len(quote):-len(quote)], code, after, bool(opened and opened[-1])))
    return out


def spelt_states(value: str, before: str = "", after: str = "", prefix_test: bool = False) -> str:
    """The state a literal spells: a reason written with a gate's head, a verdict or gate read by
    its prefix, or a verdict's value as a value (not a column or config key: ``row["undefined"]``,
    ``"untestable" in claim``, ``expect == "equivalent"``)."""
    head = next((g for g in GATES if value.startswith(f"{g}:")), "")
    if head:
        return head
    if prefix_test and value.startswith(GATES + VERDICTS + ("control_",)):
        return value
    key = before.endswith(("[", "get(", "pop(")) or after in ("]", "in", ":") or before.endswith("expect==")
    return value if value in VERDICTS and not key else ""


def test_the_scan_finds_a_state_spelt_as_text(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text('"""A docstring: not run: mentioned, inconclusive."""\n'
                       'def f(row):\n    """not run: still a docstring."""\n'
                       '    if row["reason"].startswith(("not run", "untestable")):\n'
                       '        return "inconclusive", f"too few seeds: {row}"\n'
                       '    return Gate.NOT_RUN.because("x")  # "supported" in a comment\n')
    found = [(line, spelt_states(*rest)) for line, *rest in code_strings(planted) if spelt_states(*rest)]
    assert found == [(4, "not run"), (4, "untestable"), (5, "inconclusive"), (5, "too few seeds")]


@pytest.mark.parametrize("path", sorted(p for p in PACKAGE.rglob("*.py") if p != HOME),
                         ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_spells_a_verdict_or_gate_as_text(path):
    found = [f"{path.relative_to(PACKAGE.parent)}:{line}: {value!r}"
             for line, value, *where in code_strings(path) if spelt_states(value, *where)]
    assert not found, "states spelt as text (use Verdict / Gate.X.because / Gate.of): " + "; ".join(found)


def test_no_template_matches_a_state_by_its_text():
    pattern = re.compile(r"startswith\(\s*['\"](" + "|".join(map(re.escape, GATES + VERDICTS)) + r"|control_)")
    found = [f"{path.name}: {m.group(0)}" for path in sorted((PACKAGE / "report" / "templates").rglob("*.j2"))
             for m in pattern.finditer(path.read_text())]
    assert not found, found


def test_a_gate_written_is_the_gate_read():
    for gate in Gate:
        if gate is not Gate.TESTED:
            assert Gate.of(gate.because("why: with a colon")) is gate
            assert gate.untested == (gate in (Gate.NOT_RUN, Gate.UNTESTABLE))
    assert Gate.of("no decision: not significant") is Gate.TESTED and Gate.of(float("nan")) is Gate.TESTED
    assert Verdict.of("control_passed").control and Verdict.of(float("nan")) is None and Verdict.of("") is None
