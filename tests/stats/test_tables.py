"""The statistics tables' registry (audit/stats/tables.py; issue 53): one list, each entry naming its
guard or why it is exempt, read by the stats verb, rules/stats.smk and the report registry."""

import pandas as pd
import pytest

from audit.errors import AuditError
from audit.report import registry as report_registry
from audit.stats import cli, guard, tables


def test_an_entry_that_names_neither_a_guard_nor_an_exemption_cannot_be_made():
    with pytest.raises(AuditError, match="name its guard, or an exemption"):
        tables.Table("new", lambda i: pd.DataFrame(), None, lambda i: "")
    with pytest.raises(AuditError, match="not both"):
        tables.Table("new", lambda i: pd.DataFrame(), lambda t, i: t, lambda i: "", exempt="why")


def test_every_table_is_guarded_or_says_why_not():
    for entry in tables.TABLES:
        assert (entry.guard is None) == bool(entry.exempt), entry.name
    # the published record's tables and the evidence table (guarded on its own runs while built)
    assert {t.name for t in tables.TABLES if t.exempt} == {"published_comparisons", "published_claims",
                                                           "published_untestable", "evidence_claims"}


def test_the_verb_the_workflow_and_the_page_read_one_list():
    assert cli.TABLES + cli.EVIDENCE_TABLES + cli.PUBLISHED_TABLES == tuple(tables.names())
    # the report registry's stats entries are the tables the stats rules make from runs
    assert [e.name for e in report_registry.entries("table", "stats")] == tables.names("runs") + tables.names("evidence")
    assert [e.name for e in report_registry.entries("table", "published")] == tables.names("published")
    with pytest.raises(AuditError, match="unknown table 'nope'"):
        tables.table("nope")


def test_guard_table_applies_the_registered_guard_by_name():
    from tests.stats.test_guard import BASE, CONFIG, runs_table
    runs = runs_table({"softmax": 899.5, "mos": 100.0})
    table = pd.DataFrame([dict(corpus="ptb", head_a="mos", head_b="softmax", verdict="a_better", reason="welch")])
    out = tables.guard_table("comparisons", table, runs, BASE, CONFIG)
    assert out.loc[0, "verdict"] == "not_informative" and out.loc[0, "guard"].startswith("not informative: softmax")
    assert tables.guard_table("published_comparisons", table, runs, BASE, CONFIG) is table   # exempt
    with pytest.raises(AuditError, match="unknown table"):
        tables.guard_table("new_table", table, runs, BASE, CONFIG)
