"""The offline route to a GPU node (docs/gpus.md), rehearsed on this machine.

``bash scripts/bootstrap --wheelhouse DIR`` collects, where an index is reachable, the wheels the
tool and its tests need besides what the node provides; ``bash scripts/bootstrap --offline DIR``
installs them on the node into a venv that uses the node's own torch. Here the "node" is a venv of
this machine's python3 holding only torch and the scientific stack (the versions of the test's own
environment, so pip takes them from its cache or local wheels); the offline install then runs with
every pip configuration and index cut off, so that anything not in the wheelhouse fails it.
"""

import json
import os
import re
import shutil
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
NODE_PACKAGES = ("torch", "numpy", "pandas", "scipy", "statsmodels", "matplotlib")  # wheelhouse.NODE_PROVIDED
BUDGET_MIB = 60  # wheelhouse + the smoke study's data, carried to the node
# what the repository copy needs: the editable install (pyproject.toml, README.md its readme, audit/)
# and the workflow (tests/test_pipeline.py copy_workflow)
COPIED = ("pyproject.toml", "README.md", "audit", "scripts", "Snakefile", "rules", "configs", "profiles", "captions")


def clean_env(keep_pip: bool = False, **extra: str) -> dict:
    """The test's environment without its Python settings (PYTHONPATH would import the checkout's
    audit) and its venv on PATH; without the PIP_* settings too unless ``keep_pip`` (this
    machine's pip, which reaches its index, builds the node and the wheelhouse)."""
    drop = ("PYTHON", "VIRTUAL_ENV", "CONDA") + (() if keep_pip else ("PIP_",))
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    ours = os.path.dirname(sys.executable)
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p and p != ours)
    return {**env, **extra}


def offline_env(**extra: str) -> dict:
    """No pip configuration file, no index, no find-links: only the wheelhouse given on the command line."""
    return clean_env(PIP_CONFIG_FILE=os.devnull, PIP_NO_INDEX="1", PIP_INDEX_URL="http://127.0.0.1:9/simple",
                     **extra)


def run(args: list[str], cwd: Path, env: dict, timeout: int = 900) -> subprocess.CompletedProcess:
    proc = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{' '.join(map(str, args))}:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    return proc


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    """(python, site-packages) of a venv of python3 with only the node's packages; removed after the
    module's tests (about 1.4 GB with the CPU torch, and pytest keeps its last three temp folders)."""
    python3 = shutil.which("python3", path=clean_env()["PATH"])
    assert python3, "python3 not on PATH"
    folder = tmp_path_factory.mktemp("node") / "venv"
    run([python3, "-m", "venv", str(folder)], REPO, clean_env())
    python = folder / "bin" / "python"
    pins = [f"{name}=={version(name)}" for name in NODE_PACKAGES]
    run([str(python), "-m", "pip", "install", "--quiet", "--no-compile", *pins], REPO, clean_env(keep_pip=True))
    site = run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], REPO,
               clean_env()).stdout.strip()
    yield python, Path(site)
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def wheelhouse(node, tmp_path_factory):
    """The wheelhouse for the node's Python (python3's, the default platform), built by the bootstrap
    script with this machine's python3 and index."""
    python, _ = node
    minor = run([str(python), "-c", "import sys; print(f'{sys.version_info[0]}.{sys.version_info[1]}')"], REPO,
                clean_env()).stdout.strip()
    folder = tmp_path_factory.mktemp("wheelhouse")
    run(["bash", "scripts/bootstrap", "--wheelhouse", str(folder), "--python-version", minor], REPO,
        clean_env(keep_pip=True))
    return folder


@pytest.fixture(scope="module")
def installed(node, wheelhouse, tmp_path_factory):
    """(repository copy, venv python, bootstrap output) after the offline install."""
    repo = tmp_path_factory.mktemp("repo")
    for name in COPIED:
        (shutil.copytree if (REPO / name).is_dir() else shutil.copy)(
            REPO / name, repo / name, **({"ignore": shutil.ignore_patterns("__pycache__")}
                                        if (REPO / name).is_dir() else {}))
    venv = tmp_path_factory.mktemp("offline") / "venv"
    proc = run(["bash", "scripts/bootstrap", "--offline", str(wheelhouse)], repo,
               offline_env(AUDIT_PYTHON=str(node[0]), AUDIT_VENV=str(venv)))
    return repo, venv / "bin" / "python", proc.stdout


def isolated_dry_run(node, wheels: Path, repo: Path, tmp: Path) -> subprocess.CompletedProcess:
    """pip's resolution of the wheelhouse's pins and ``-e .`` (what ``bootstrap --offline`` installs) with
    only the node's packages and ``wheels``: a venv without
    the base interpreter's site-packages (which --system-site-packages would expose, and which on a
    machine like this one holds many of the tool's dependencies), the node's site added by a .pth."""
    python, node_site = node
    iso = tmp / "iso"
    run([str(python), "-m", "venv", "--without-pip", str(iso)], tmp, clean_env())
    site = run([str(iso / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
               tmp, clean_env()).stdout.strip()
    Path(site, "node.pth").write_text(f"{node_site}\n")
    return subprocess.run([str(python), "-m", "pip", "--python", str(iso / "bin" / "python"), "install", "--dry-run",
                           "--quiet", "--report", str(tmp / "report.json"), "--find-links", str(wheels),
                           "-r", str(wheels / "requirements.txt"), "-e", "."],
                          cwd=repo, env=offline_env(), capture_output=True, text=True, timeout=300)


def where(python: Path, module: str) -> Path:
    return Path(run([str(python), "-c", f"import {module}; print({module}.__file__)"], python.parent,
                    clean_env()).stdout.strip())


@pytest.mark.slow
def test_offline_venv_takes_torch_from_the_node_and_snakemake_from_the_wheelhouse(node, installed):
    repo, python, out = installed
    _, node_site = node
    assert re.search(rf"installed into .* \(offline\): audit 0\.1\.0 \| torch {re.escape(version('torch'))} "
                     r"\| snakemake \S+", out), out
    for module in ("torch", "numpy"):
        assert where(python, module).is_relative_to(node_site), module
    venv_site = python.parent.parent / "lib"
    assert where(python, "snakemake").is_relative_to(venv_site)
    assert where(python, "audit") == repo / "audit" / "__init__.py"  # the editable install of the copy


@pytest.mark.slow
def test_wheelhouse_alone_completes_the_node(node, wheelhouse, installed, tmp_path):
    proc = isolated_dry_run(node, wheelhouse, installed[0], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads((tmp_path / "report.json").read_text())["install"]
    names = {item["metadata"]["name"].lower() for item in report}
    assert "snakemake" in names and not names & set(NODE_PACKAGES)  # the node's own are used, not replaced
    for item in report:
        if item["metadata"]["name"] != "bottleneck-audit":
            assert Path(item["download_info"]["url"].removeprefix("file://")).parent == wheelhouse, item["download_info"]


@pytest.mark.slow
def test_a_wheel_missing_from_the_wheelhouse_fails_the_isolated_install(node, wheelhouse, installed, tmp_path):
    """The check above can fail: no index or pip configuration supplies what the wheelhouse lacks."""
    partial = tmp_path / "partial"
    shutil.copytree(wheelhouse, partial, ignore=shutil.ignore_patterns("jsonschema-[0-9]*.whl"))
    proc = isolated_dry_run(node, partial, installed[0], tmp_path)
    assert proc.returncode != 0 and "No matching distribution found for jsonschema" in proc.stderr, proc.stderr


@pytest.mark.slow
def test_offline_venv_plans_the_smoke_study_and_trains_one_run(installed, mirror):
    repo, python, _ = installed
    env = clean_env(AUDIT_DATA_MIRROR=str(mirror))
    dry = run([str(python), "-m", "snakemake", "-n", "--configfile", "configs/smoke.yaml"], repo, env)
    assert re.search(r"^train\s+6$", dry.stdout, re.M), dry.stdout[-2000:]
    target = "results/smoke/runs/ptb/softmax/1/metrics.json"  # fetch x 3, prepare, train
    run([str(python), "-m", "snakemake", target, "--cores", "1", "--configfile", "configs/smoke.yaml"], repo, env)
    metrics = json.loads((repo / target).read_text())
    assert metrics["status"] == "ok" and metrics["epochs_run"] == 2
    assert 1 < metrics["valid_ppl"] < metrics["vocab_size"]  # learned something: below the uniform model's


@pytest.mark.slow
def test_wheelhouse_and_smoke_data_fit_the_budget(installed, wheelhouse, mirror):
    repo, python, _ = installed
    wheels = sum(f.stat().st_size for f in wheelhouse.iterdir())
    proc = run([str(python), "-m", "audit", "data-files", "configs/smoke.yaml", "--mirror", str(mirror)], repo,
               clean_env())
    data = int(re.fullmatch(r"16 files, (\d+) bytes .*, sha256 ok", proc.stderr.strip()).group(1))
    assert data == sum((mirror / name).stat().st_size for name in proc.stdout.split())
    assert not any(f.name.startswith("torch-") for f in wheelhouse.iterdir())
    assert wheels + data < BUDGET_MIB * 2 ** 20, f"wheelhouse {wheels / 2 ** 20:.1f} MiB + data {data / 2 ** 20:.1f} MiB"


def test_wheelhouse_script_runs_on_a_python3_without_packaging():
    """Debian's python3 has pip but not packaging: the script falls back to pip's vendored copy.
    kept() must still follow requirements by their markers: b only for Python 2, c always."""
    code = f"""
import runpy, sys
sys.modules["packaging"] = None  # import packaging -> ImportError, as on a python3 without it
wheelhouse = runpy.run_path({str(REPO / "scripts" / "wheelhouse.py")!r})
Requirement = wheelhouse["Requirement"]
assert Requirement.__module__.startswith("pip._vendor."), Requirement.__module__
resolved = {{"a": ("a", "1", [Requirement('b; python_version < "3"'), Requirement("c>=1"), Requirement("torch")]),
             "b": ("b", "1", []), "c": ("c", "1", [Requirement("d")]), "d": ("d", "1", []),
             "torch": ("torch", "2", [Requirement("e")]), "e": ("e", "1", [])}}
print(wheelhouse["kept"](resolved, ["a"], {{"torch"}}, "3.12"))
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=clean_env())
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "['a', 'c', 'd']"  # not b (marker), not torch nor e (only the node's torch needs it)


def test_the_test_extras_project_self_reference_is_expanded_or_left_out():
    """pyproject's test extra names ``bottleneck-audit[pretrained]``; the project is on no index, so the
    wheelhouse resolves that extra's own requirements, and by default leaves them out (the carry budget)."""
    import runpy
    import tomllib

    wheelhouse = runpy.run_path(str(REPO / "scripts" / "wheelhouse.py"))
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert "bottleneck-audit[pretrained]" in extras["test"]           # the case this test is about
    names = lambda reqs: {wheelhouse["canon"](wheelhouse["Requirement"](r).name) for r in reqs}  # noqa: E731
    default, full = names(wheelhouse["requirements"]()), names(wheelhouse["requirements"](set()))
    pretrained = names(extras["pretrained"])
    assert "bottleneck-audit" not in default | full
    assert {"pytest", "snakemake", "deepsig"} <= default and not default & pretrained
    assert full - default == pretrained
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "wheelhouse.py"), "/nonexistent/wh", "--with", "docs"],
                          capture_output=True, text=True, env=clean_env())
    assert proc.returncode != 0 and proc.stderr.strip().splitlines()[-1] == (
        "error: --with docs: not an extra left out of the wheelhouse (those are: pretrained)")
