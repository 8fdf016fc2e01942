"""Collect the wheels bottleneck-audit and its tests need on an offline GPU node, without torch.

    python3 scripts/wheelhouse.py DIR [--python-version 3.12] [--platform manylinux_2_28_x86_64]
                                      [--provided "torch numpy pandas ..."] [--with pretrained]

(``bash scripts/bootstrap --wheelhouse DIR ...`` runs this.) Run it where pip reaches a package
index. The project's requirements (pyproject.toml, with the ``test`` extra but not the
``pretrained`` source's packages unless ``--with pretrained``) are resolved with this machine's pip; the packages the node already has (``--provided``: torch and the scientific
stack of the GPU node of docs/gpus.md), and whatever only they need, are left out; every other package is
downloaded as a wheel for the node's Python and platform, or, where its index has only a source
archive, built here into a wheel, which must then be pure Python (any platform). ``DIR`` gets the
wheels and ``requirements.txt`` with their pins; ``bash scripts/bootstrap --offline DIR`` installs
those pins and the project (``-e .``) with pip's index turned off.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

try:
    from packaging.markers import Marker
    from packaging.requirements import Requirement
except ImportError:  # a python3 without packaging (Debian's): the copy pip, which this script needs anyway, vendors
    from pip._vendor.packaging.markers import Marker
    from pip._vendor.packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[1]
# the GPU node of docs/gpus.md (issue 34): torch 2.11 + CUDA and the scientific stack preinstalled
NODE_PROVIDED = "torch numpy pandas scipy statsmodels matplotlib"
NODE_PYTHON = "3.12"
NODE_PLATFORM = "manylinux_2_28_x86_64"
EXTRA_ROOTS = ["setuptools>=68"]   # pyproject's build backend: `pip install -e .` with no index needs it
# left out unless asked for (--with pretrained): transformers and the hub client are about 18 MiB of
# wheels, which with the rest (about 37 MiB) and the smoke study's data would not fit the 64 MiB a
# device run carries; gpu-check and the trained studies never import them
LEFT_OUT = ("pretrained",)


def canon(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirements(skip: set[str] = frozenset(LEFT_OUT)) -> list[str]:
    """The dependencies and the test extra. An extra that the test extra names through the project
    itself (``bottleneck-audit[pretrained]``) is replaced by its requirements, or left out when in
    ``skip``: the project is on no index, so pip could not resolve it by name."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras, own = project["optional-dependencies"], canon(project["name"])
    out, todo, seen = list(project["dependencies"]), ["test"], set()
    while todo:
        extra = todo.pop(0)
        if extra in seen:
            continue
        seen.add(extra)
        for req in extras[extra]:
            parsed = Requirement(req)
            if canon(parsed.name) == own:
                todo.extend(sorted(set(parsed.extras) - set(skip)))
            else:
                out.append(req)
    return out + EXTRA_ROOTS


def resolve(reqs: list[str], tmp: Path) -> dict:
    """{canonical name: (name, version, [Requirement])} of this pip's resolution of ``reqs``."""
    report = tmp / "report.json"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--dry-run", "--ignore-installed",
                    "--report", str(report), *reqs], check=True)
    out = {}
    for item in json.loads(report.read_text())["install"]:
        meta = item["metadata"]
        out[canon(meta["name"])] = (meta["name"], meta["version"],
                                    [Requirement(r) for r in meta.get("requires_dist", [])])
    return out


def kept(resolved: dict, roots: list[str], provided: set[str], python: str) -> list[str]:
    """Canonical names reached from ``roots`` without passing through a provided package, with
    environment markers evaluated for the node's Python (no extras)."""
    env = {"python_version": python, "python_full_version": f"{python}.0", "sys_platform": "linux",
           "platform_system": "Linux", "platform_machine": "x86_64", "os_name": "posix",
           "implementation_name": "cpython", "platform_python_implementation": "CPython", "extra": ""}
    todo = [canon(Requirement(r).name) for r in roots]
    seen = set()
    while todo:
        name = todo.pop()
        if name in seen or name in provided or name not in resolved:
            continue
        seen.add(name)
        for req in resolved[name][2]:
            if req.marker is None or Marker(str(req.marker)).evaluate(env):
                todo.append(canon(req.name))
    return sorted(seen)


def fetch(name: str, version: str, folder: Path, python: str, platform: str) -> str:
    """Download the wheel for the node, or build a pure-Python one; the file name."""
    before = set(folder.iterdir())
    abi = "cp" + python.replace(".", "")
    platforms = [f"--platform={platform}", "--platform=manylinux2014_x86_64", "--platform=manylinux_2_17_x86_64",
                 "--platform=manylinux1_x86_64", "--platform=any"]
    done = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
                           f"--python-version={python}", "--implementation=cp", f"--abi={abi}", "--abi=abi3",
                           "--abi=none", *platforms, "-d", str(folder), f"{name}=={version}"],
                          capture_output=True, text=True)
    if done.returncode != 0:  # only a source archive: build it here
        done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(folder),
                               f"{name}=={version}"], capture_output=True, text=True)
        new = sorted(set(folder.iterdir()) - before)
        if done.returncode != 0 or not new:
            raise SystemExit(f"error: no wheel of {name}=={version} for Python {python} on {platform}: "
                             f"{done.stderr.strip()[-300:]}")
        if not new[0].name.endswith("-none-any.whl"):
            new[0].unlink()
            raise SystemExit(f"error: {name}=={version} has no wheel for Python {python} on {platform}, and the one "
                             "built here is not pure Python")
    new = sorted(set(folder.iterdir()) - before)
    return new[0].name if new else "(already there)"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="bash scripts/bootstrap --wheelhouse", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder")
    parser.add_argument("--python-version", default=NODE_PYTHON, help=f"the node's Python (default {NODE_PYTHON})")
    parser.add_argument("--platform", default=NODE_PLATFORM, help=f"the node's wheel platform (default {NODE_PLATFORM})")
    parser.add_argument("--with", dest="extras", default="", metavar="EXTRAS",
                        help=f"extras of the test extra to carry too, space-separated (left out by default: {' '.join(LEFT_OUT)})")
    parser.add_argument("--provided", default=NODE_PROVIDED,
                        help=f"packages the node has, space-separated (default: {NODE_PROVIDED!r})")
    args = parser.parse_args(argv)
    unknown = set(args.extras.split()) - set(LEFT_OUT)
    if unknown:
        raise SystemExit(f"error: --with {' '.join(sorted(unknown))}: not an extra left out of the wheelhouse "
                         f"(those are: {' '.join(LEFT_OUT)})")
    folder = Path(args.folder)
    folder.mkdir(parents=True, exist_ok=True)
    provided = {canon(n) for n in args.provided.split()} | {"torch"}   # never torch: the node's own
    skip = set(LEFT_OUT) - set(args.extras.split())
    roots = [r for r in requirements(skip) if canon(Requirement(r).name) not in provided]
    with tempfile.TemporaryDirectory() as tmp:
        resolved = resolve(roots, Path(tmp))
    names = kept(resolved, roots, provided, args.python_version)
    pins = []
    for name in names:
        real, version, _ = resolved[name]
        print(f"{real}=={version}: {fetch(real, version, folder, args.python_version, args.platform)}", flush=True)
        pins.append(f"{real}=={version}")
    (folder / "requirements.txt").write_text("\n".join(pins) + "\n")
    size = sum(f.stat().st_size for f in folder.glob("*.whl"))
    print(f"wheelhouse {folder}: {len(pins)} packages, {size / 2 ** 20:.1f} MiB, for Python {args.python_version} "
          f"on {args.platform}; left to the node: {' '.join(sorted(provided))}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
