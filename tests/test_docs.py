"""The README is a front door and the documentation site builds with warnings as errors (issue 35).

The README stays at most 12 KiB with no line over 300 characters, every relative link in it
reaches a file (and heading) of the repository, and it keeps the test command that ``.ci/run``
runs. ``mkdocs build --strict`` builds ``docs/`` with ``mkdocs.yml``, whose ``validation:``
settings turn a broken link, a missing anchor and a page left out of ``nav`` into warnings, so
into errors; a copy of the site with each fault planted shows that the build does fail on them.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
MAX_BYTES = 12 * 1024
MAX_LINE = 300

FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)


def prose(text: str) -> str:
    """``text`` without its fenced code blocks (a ``# comment`` there is no heading)."""
    return FENCE.sub("", text)


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading: lower case, punctuation dropped, spaces -> '-'."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading anchor of a Markdown file, repeated headings numbered as GitHub does."""
    seen: dict[str, int] = {}
    out = set()
    for heading in HEADING.findall(prose(path.read_text(encoding="utf-8"))):
        slug = github_slug(heading)
        out.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
        seen[slug] = seen.get(slug, 0) + 1
    return out


def broken_links(path: Path) -> list[str]:
    """The relative links of a Markdown file whose file or heading anchor does not exist."""
    broken = []
    shown = lambda p: p.relative_to(REPO) if p.is_relative_to(REPO) else p  # noqa: E731
    for target in LINK.findall(prose(path.read_text(encoding="utf-8"))):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...: not checked here
            continue
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        if not dest.exists():
            broken.append(f"{target}: no file {shown(dest)}")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading '#{anchor}' in {shown(dest)}")
    return broken


def test_readme_is_a_front_door():
    data = README.read_bytes()
    assert len(data) <= MAX_BYTES, f"README.md is {len(data):,} bytes, the front door allows {MAX_BYTES:,}"
    long = [(n, len(line)) for n, line in enumerate(data.decode("utf-8").splitlines(), 1) if len(line) > MAX_LINE]
    assert not long, f"README.md lines over {MAX_LINE} characters (line, length): {long}"


def test_readme_links_resolve():
    links = LINK.findall(prose(README.read_text(encoding="utf-8")))
    assert any(t.startswith("docs/") for t in links), "README.md links into no docs/ page"
    assert broken_links(README) == []


def test_link_check_finds_a_broken_link(tmp_path):
    # the checker above must see a missing file and a missing heading, or the test above says nothing
    (tmp_path / "page.md").write_text("# A page\n\n## Its part\n", encoding="utf-8")
    doc = tmp_path / "doc.md"
    doc.write_text("[ok](page.md#its-part) [gone](nope.md) [no anchor](page.md#other)\n"
                   "```\n[in code](ignored.md)\n```\n", encoding="utf-8")
    assert [b.split(":")[0] for b in broken_links(doc)] == ["nope.md", "page.md#other"]


def test_readme_keeps_the_ci_test_command():
    # .ci/run runs "the test command that README.md gives": its last line must be in the README
    command = (REPO / ".ci" / "run").read_text(encoding="utf-8").strip().splitlines()[-1]
    assert command.startswith("bash scripts/bootstrap test")
    assert command in README.read_text(encoding="utf-8").splitlines()


def mkdocs_build(config: Path, site: Path) -> subprocess.CompletedProcess:
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None:
        pytest.skip("mkdocs or mkdocs-material is not installed (the docs extra: pip install -e '.[docs]')")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # Material's banner is not a warning of ours
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config),
                           "--site-dir", str(site)], cwd=config.parent, capture_output=True, text=True,
                          env=env, timeout=300)


def test_docs_site_builds_strict(tmp_path):
    proc = mkdocs_build(REPO / "mkdocs.yml", tmp_path / "site")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "site" / "index.html").is_file()
    assert (tmp_path / "site" / "studies" / "index.html").is_file()


@pytest.mark.parametrize("fault, message", [
    ("orphan", 'not included in the "nav"'),
    ("link", "is not found among documentation files"),
    ("anchor", "does not contain an anchor '#no-such-heading'"),
])
def test_docs_build_fails_on_each_fault(tmp_path, fault, message):
    # the same site with one fault planted: the strict build must stop, naming it
    shutil.copy(REPO / "mkdocs.yml", tmp_path / "mkdocs.yml")
    shutil.copytree(REPO / "docs", tmp_path / "docs")
    index = tmp_path / "docs" / "index.md"
    if fault == "orphan":
        (tmp_path / "docs" / "orphan.md").write_text("# Left out of nav\n", encoding="utf-8")
    elif fault == "link":
        index.write_text(index.read_text(encoding="utf-8") + "\n[gone](no-such-page.md)\n", encoding="utf-8")
    else:
        index.write_text(index.read_text(encoding="utf-8") + "\n[part](studies.md#no-such-heading)\n",
                         encoding="utf-8")
    proc = mkdocs_build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert proc.returncode != 0, f"the strict build passed with a planted {fault}"
    assert message in proc.stdout + proc.stderr
