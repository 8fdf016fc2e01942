"""Per-size claims in the verdict matrix: each under the claim it is a reading of.

A pretrained suite's claims are written once per size (``audit.pretrained.claims``): the id
``<claim id>.<model>`` with ``one_sample.head`` the model, because a 14M and a 410M model are
different models, never pooled. In the matrix they belong to one claim: the row of
``softmax-rarely-unargmaxable`` states this study's verdict and, in the suite's column, the
verdict of every size. ``size_groups`` finds them from the study's claims themselves (the id is
the base id, a dot and the claim's own head), so a claim id that merely contains a dot is never
taken for one. ``arrange`` puts each group's base row (the study's own claim of that id, or a row
made for it when the study judges only the sizes) before its members, and says whether the
sources disagree over the group.

The table keeps one row per (claim, corpus) with its own verdicts (``group``: the base id,
``member``: the size, '' on the base row), so its CSV stays one decision per cell; the page
(``audit.report.scales.page_matrix``) draws the members inside their base row's cells.
"""

from __future__ import annotations

import re
from audit.stats.decision import Verdict

DECISIVE = (Verdict.SUPPORTED, Verdict.CONTRADICTED, Verdict.EQUIVALENT)


def size_groups(claims: list[dict]) -> dict[str, tuple[str, str]]:
    """{claim id: (base id, size)} of every claim whose id is ``<base>.<head>`` for its own
    one-sample head (``audit.pretrained.claims`` writes them so)."""
    out = {}
    for claim in claims or []:
        head = str((claim.get("one_sample") or {}).get("head") or "")
        cid = str(claim.get("id", ""))
        if head and cid.endswith("." + head) and len(cid) > len(head) + 1:
            out[cid] = (cid[: -len(head) - 1], head)
    return out


def base_statement(statements: list[str], sizes: list[str]) -> str:
    """The statement of a base claim the study does not state itself: its members' statements
    without their size (' (pythia-14m: d = 128, V = 50,304)'), each once, joined by ' / ' (the
    saturation claim expects a rise below d = 1,000 and a fall above: both are said)."""
    out = []
    for text, size in zip(statements, sizes):
        text = re.sub(r"\s*\(" + re.escape(size) + r":[^()]*\)\s*$", "", str(text))
        if text not in out:
            out.append(text)
    return " / ".join(out)


def arrange(rows: dict[tuple[str, str], dict], groups: dict[str, tuple[str, str]],
            statements: dict[str, str]) -> list[dict]:
    """The matrix rows in order: first-seen, each group's base row at its first member's place
    with the members after it. ``statements``: the study's own statement of a base id, when it
    has one; otherwise the members' (``base_statement``)."""
    members: dict[tuple[str, str], list[dict]] = {}
    for (cid, corpus), row in rows.items():
        base, size = groups.get(cid, ("", ""))
        row.update(group=base or (cid if any(b == cid for b, _ in groups.values()) else ""), member=size)
        if base:
            members.setdefault((base, corpus), []).append(row)
    out, placed = [], set()
    for (cid, corpus), row in rows.items():
        key = (row["group"], corpus) if row["group"] else None
        if key is None:
            out.append(row)
        elif key not in placed:
            placed.add(key)
            own = members.get(key, [])
            head = rows.get(key) or dict(claim_id=key[0], corpus=corpus, group=key[0], member="",
                                         statement=statements.get(key[0]) or base_statement(
                                             [m["statement"] for m in own], [m["member"] for m in own]))
            out += [head] + own
    return out


def _conflict(found: list[tuple[str, str, str]]) -> bool:
    """Two sources' decisive verdicts differ on the same reading: the same size, or the base claim
    against a size. Sizes of one source are never compared with each other (the saturation claim
    expects opposite signs below and above d = 1,000), nor two different sizes."""
    return any(s1 != s2 and v1 != v2 and (m1 == m2 or not m1 or not m2)
               for i, (s1, m1, v1) in enumerate(found) for s2, m2, v2 in found[i + 1:])


def group_agreement(rows: list[dict], sources: list[str]) -> None:
    """Set each base row's ``agreement`` over its group (``_conflict``): 'disagree: ...' naming
    every decisive verdict ('example tiny-16 supported'), 'agree' when at least two sources gave
    decisive verdicts and none conflict, '' otherwise."""
    for head in (r for r in rows if r.get("group") and not r.get("member")):
        found = [(name, row["member"], row.get(f"verdict__{name}"))
                 for row in rows if row.get("group") == head["claim_id"] and row["corpus"] == head["corpus"]
                 for name in sources if row.get(f"verdict__{name}") in DECISIVE]
        if _conflict(found):
            head["agreement"] = "disagree: " + ", ".join(" ".join(filter(None, f)) for f in found)
        else:
            head["agreement"] = "agree" if len({name for name, _, _ in found}) > 1 else ""
