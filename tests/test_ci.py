"""tests/support/ci.py: under CI=true only skips that need CUDA stay skips (a real pytest run)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import pytest

TESTS = Path(__file__).resolve().parent
CASES = '''
import pytest

def test_no_chromium():
    pytest.skip("no chromium binary on PATH")

@pytest.mark.skipif(True, reason="needs a CUDA device")
def test_needs_cuda():
    pass

@pytest.fixture(scope="module")
def cluster():
    pytest.skip("could not install slurmctld: apt-get update failed: E: Could not get lock")

def test_slurm(cluster):
    pass

@pytest.mark.xfail(reason="expected", strict=True)
def test_expected_failure():
    assert False

def test_passes():
    pass
'''
MODULE_SKIP = 'import pytest\npytest.importorskip("no_such_module_xyz")\n\ndef test_x():\n    pass\n'


def run(tmp_path: Path, ci: str | None) -> dict[str, str]:
    """Outcome per test name ("module" for the module skipped at collection), from pytest's JUnit XML."""
    (tmp_path / "test_cases.py").write_text(CASES)
    (tmp_path / "test_module_skip.py").write_text(MODULE_SKIP)
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci is not None:
        env["CI"] = ci
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS), env.get("PYTHONPATH", "")])
    xml = tmp_path / "junit.xml"
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "support.ci", "-p", "no:cacheprovider",
                    "--rootdir", str(tmp_path), "-c", os.devnull, "--continue-on-collection-errors",
                    f"--junitxml={xml}",
                    str(tmp_path / "test_cases.py"), str(tmp_path / "test_module_skip.py")],
                   cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    outcomes = {}
    for case in ElementTree.parse(xml).iter("testcase"):
        kinds = [child.tag for child in case if child.tag in ("skipped", "failure", "error")]
        name = case.get("name")
        outcomes["module" if name == "test_module_skip" else name] = kinds[0] if kinds else "passed"
    return outcomes


def test_outside_ci_every_skip_stays_a_skip(tmp_path):
    outcomes = run(tmp_path, None)
    assert outcomes["test_no_chromium"] == outcomes["test_slurm"] == outcomes["test_needs_cuda"] == "skipped"
    assert outcomes["module"] == "skipped"
    assert outcomes["test_expected_failure"] == "skipped" and outcomes["test_passes"] == "passed"  # xfail


@pytest.mark.parametrize("ci", ["true", "1"])
def test_under_ci_only_the_cuda_skip_stays(tmp_path, ci):
    outcomes = run(tmp_path, ci)
    assert outcomes["test_needs_cuda"] == "skipped"
    assert outcomes["test_no_chromium"] == "failure" and outcomes["test_slurm"] in ("failure", "error")
    assert outcomes["module"] in ("failure", "error")
    assert outcomes["test_expected_failure"] == "skipped" and outcomes["test_passes"] == "passed"
