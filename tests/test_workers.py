"""tests/support/workers.py: under ``pytest -n 2`` a shared fixture is built once, on one worker (a real
pytest-xdist run of a small suite)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent

CONFTEST = '''
import json, os, pytest
from support.workers import pytest_collection_modifyitems  # noqa: F401

def record(kind, name):
    with open(os.environ["RECORD"], "a") as f:
        f.write(json.dumps({"kind": kind, "name": name,
                            "worker": os.environ.get("PYTEST_XDIST_WORKER", "main")}) + "\\n")

@pytest.fixture(scope="session")
def smoke_study():
    record("built", "smoke_study")
    return "study"
'''
# two modules share the session's study; one has a module fixture; one has none and a slow test
SHARED_A = '''
import pytest
from conftest import record

@pytest.mark.parametrize("i", range(4))
def test_reads_the_study(smoke_study, i):
    record("ran", "a")

@pytest.mark.parametrize("i", range(2))
def test_needs_nothing(i):  # same module: goes with it
    record("ran", "a")
'''
SHARED_B = '''
import pytest
from conftest import record

@pytest.mark.parametrize("i", range(4))
def test_reads_the_study_too(smoke_study, i):
    record("ran", "b")
'''
MODULE_WIDE = '''
import pytest
from conftest import record

@pytest.fixture(scope="module")
def study():
    record("built", "module")
    return 1

@pytest.mark.parametrize("i", range(6))
def test_uses_it(study, i):
    record("ran", "module")
'''
FREE = '''
import pytest
from conftest import record

@pytest.mark.parametrize("i", range(8))
def test_free(i):
    record("ran", "free")

@pytest.mark.slow
def test_long():
    record("ran", "slow")
'''


def run_suite(tmp_path: Path) -> list[dict]:
    for name, text in {"conftest.py": CONFTEST, "test_a.py": SHARED_A, "test_b.py": SHARED_B,
                       "test_module.py": MODULE_WIDE, "test_free.py": FREE}.items():
        (tmp_path / name).write_text(text)
    record = tmp_path / "record.jsonl"
    env = dict(os.environ, RECORD=str(record), PYTHONPATH=os.pathsep.join([str(TESTS), str(tmp_path)]))
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "2", "--dist", "loadgroup",
                           "--no-loadscope-reorder", "-p", "no:cacheprovider", "--rootdir", str(tmp_path),
                           "-c", os.devnull, "-o", "markers=slow", str(tmp_path)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return [json.loads(line) for line in record.read_text().splitlines()]


def test_shared_fixtures_are_built_once_on_one_worker_and_slow_tests_go_first(tmp_path):
    rows = run_suite(tmp_path)
    built = [r for r in rows if r["kind"] == "built"]
    # without the groups, tests of one fixture are spread over both workers and it is built twice
    assert sorted(r["name"] for r in built) == ["module", "smoke_study"]
    workers = {name: {r["worker"] for r in rows if r["kind"] == "ran" and r["name"] == name}
               for name in ("a", "b", "module", "free")}
    assert len(workers["a"] | workers["b"]) == 1           # both modules of the shared study: one worker
    assert len(workers["module"]) == 1                      # a module fixture's tests: one worker
    # the slow test is handed out first: the first test its worker ran
    slow = next(r for r in rows if r["name"] == "slow")
    assert next(r for r in rows if r["kind"] == "ran" and r["worker"] == slow["worker"])["name"] == "slow"
