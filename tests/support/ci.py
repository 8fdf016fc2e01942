"""Under ``CI=true`` a skipped test fails unless it needs CUDA (pytest hooks, loaded by tests/conftest.py).

CI must test everything a CPU machine can: SLURM, Chromium, the data mirror and deepsig are
installed there (``.ci/run``, the test extra), so a skip for any of them means CI went green
without testing it (issue 20: a held dpkg lock skipped the SLURM test). Outside CI the skip and
its reason stay. A skip counts as needing CUDA when its reason names CUDA (``needs a CUDA
device``, ``CUDA is present here``); an expected failure (xfail) is not a skip.
"""

from __future__ import annotations

import os
import re

import pytest

CUDA = re.compile(r"\bCUDA\b")


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("true", "1")


def _reason(longrepr) -> str:
    # a skip's longrepr is (path, line, "Skipped: reason"); anything else is shown as it is
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def _fail_unless_cuda(report) -> None:
    if in_ci() and report.skipped and not hasattr(report, "wasxfail"):
        reason = _reason(report.longrepr)
        if not CUDA.search(reason):
            report.outcome = "failed"
            report.longrepr = f"skipped under CI=true, where only tests that need CUDA may skip: {reason}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    _fail_unless_cuda(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    # a module-level skip (pytest.importorskip, allow_module_level) skips at collection
    outcome = yield
    _fail_unless_cuda(outcome.get_result())
