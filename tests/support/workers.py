"""Which tests must share a pytest-xdist worker (a pytest hook, loaded by tests/conftest.py).

CI runs the suite on two workers (``pytest -n 2 --dist loadgroup``, README's test command). A
worker is a process with its own fixtures, so a test that shares an expensive fixture with
others must run where they do, or the fixture is built twice (a module's Snakemake study, or the
session's smoke study, is minutes of training):

- every test of a module that asks for a shared session study (``SHARED``: the smoke study of
  tests/test_pipeline.py and tests/test_slurm.py, the outside-parts study) goes to that study's
  group, so one worker builds it once;
- every other module with a module- or class-scoped fixture of its own goes to a group of its
  own (the module's path): its fixture is built once, on one worker.

Everything else is load-balanced one test at a time. On a worker the collection is put in the
order the scheduler should hand it out (``--no-loadscope-reorder`` keeps it): the groups and
tests marked ``slow`` (the end-to-end studies, minutes each) first, so that the two workers start
on the long ones and end on the short ones together, not one worker alone on a study at the end.
Without ``-n`` neither the marks nor the order change anything.
"""

from __future__ import annotations

import pytest

# session fixtures (tests/conftest.py) that build a whole study: their tests keep one worker
SHARED = {"smoke_study": "smoke-study", "outside_study": "outside-study"}
WIDE = {"module", "class", "package"}


def _wide_fixture(item) -> bool:
    """True when ``item`` asks for a module-, class- or package-scoped fixture."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:  # a doctest or a non-Python item: nothing to share
        return False
    return any(defs and str(defs[-1].scope) in WIDE for defs in info.name2fixturedefs.values())


def groups(items) -> dict[str, str]:
    """{nodeid: group} for the items that must share a worker; the rest are free to move.

    A module goes wholly to the group of the first shared study any of its tests asks for, else
    to a group named by its path when any of its tests asks for a module-wide fixture.
    """
    by_module: dict[str, list] = {}
    for item in items:
        by_module.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
    out: dict[str, str] = {}
    for path, members in by_module.items():
        shared = [SHARED[name] for item in members for name in item.fixturenames if name in SHARED]
        group = shared[0] if shared else (path if any(_wide_fixture(i) for i in members) else None)
        if group is not None:
            out.update({item.nodeid: group for item in members})
    return out


def slow_first(items, group_of: dict[str, str]) -> list:
    """``items`` with every slow test, and every test of a group that holds one, moved to the front
    (a stable sort: otherwise in collection order)."""
    slow_groups = {group_of.get(i.nodeid) for i in items if i.get_closest_marker("slow")}
    def late(item) -> bool:
        return not (item.get_closest_marker("slow") or group_of.get(item.nodeid) in slow_groups - {None})
    return sorted(items, key=late)


# tryfirst: pytest-xdist's worker reads the marks in a hook of its own, registered after this file
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    group_of = groups(items)
    for item in items:
        if item.nodeid in group_of:
            item.add_marker(pytest.mark.xdist_group(group_of[item.nodeid]))
    if hasattr(config, "workerinput"):  # a pytest-xdist worker: its order is the schedule's
        items[:] = slow_first(items, group_of)
