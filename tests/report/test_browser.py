"""The audit page in a real browser: headless Chromium driven over the DevTools protocol.

A fabricated small study (``support.demo``) goes through the real ``python -m audit stats``
and ``python -m audit report`` commands; the page is opened from disk in headless Chromium and
checked for console errors and uncaught exceptions, for requests that leave the file (the page
must be self-contained), and for the verdicts, the comparisons table and the figures being
rendered with a visible size. The published record's page (``configs/published.yaml`` through the real
commands) is laid out at 1,024 and 1,440 px and its layout checked from the DOM. Full-page
screenshots are saved (to $AUDIT_ARTIFACTS when set, else the test's tmp folder). Skipped only when no Chromium binary exists.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import socket
import struct
import subprocess
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from support.demo import build_report, fabricate_study

CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")
                 if shutil.which(n)), None)
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary on PATH "
                                "(Debian: apt-get install -y chromium)")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", "--window-size=1400,1000", "--remote-debugging-port=0"]


class DevTools:
    """A minimal client of the Chrome DevTools protocol over one websocket (RFC 6455, stdlib only)."""

    def __init__(self, ws_url: str, timeout: float = 60.0):
        host_port, _, path = ws_url.removeprefix("ws://").partition("/")
        host, _, port = host_port.partition(":")
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET /{path} HTTP/1.1\r\nHost: {host_port}\r\nUpgrade: websocket\r\n"
                           f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                           "Sec-WebSocket-Version: 13\r\n\r\n").encode())
        response = b""
        while b"\r\n\r\n" not in response:
            response += self.sock.recv(4096)
        if b" 101 " not in response.split(b"\r\n", 1)[0]:
            raise RuntimeError(f"websocket handshake failed: {response[:200]!r}")
        self.buffer = response.split(b"\r\n\r\n", 1)[1]
        self.next_id = 0
        self.events: list[dict] = []

    def _read(self, n: int) -> bytes:
        while len(self.buffer) < n:
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise RuntimeError("DevTools websocket closed")
            self.buffer += chunk
        out, self.buffer = self.buffer[:n], self.buffer[n:]
        return out

    def _receive(self) -> dict:
        message = b""
        while True:
            b0, b1 = self._read(2)
            length = b1 & 0x7F
            if length == 126:
                length = struct.unpack(">H", self._read(2))[0]
            elif length == 127:
                length = struct.unpack(">Q", self._read(8))[0]
            payload = self._read(length)  # server frames are not masked
            if b0 & 0x0F in (0x1, 0x0):
                message += payload
                if b0 & 0x80:
                    return json.loads(message)

    def call(self, method: str, **params) -> dict:
        """Send one command and return its result; events met meanwhile are kept in ``events``."""
        self.next_id += 1
        data = json.dumps({"id": self.next_id, "method": method, "params": params}).encode()
        mask = os.urandom(4)
        n = len(data)
        header = bytes([0x81]) + (bytes([0x80 | n]) if n < 126 else
                                  bytes([0x80 | 126]) + struct.pack(">H", n) if n < 65536 else
                                  bytes([0x80 | 127]) + struct.pack(">Q", n))
        self.sock.sendall(header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))
        while True:
            message = self._receive()
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            self.events.append(message)

    def wait_for(self, method: str, timeout: float = 30.0) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for event in self.events:
                if event.get("method") == method:
                    return event
            self.events.append(self._receive())
        raise TimeoutError(f"no {method} within {timeout} s")


@contextlib.contextmanager
def browser(html: Path, profile: Path):
    """A DevTools client of a fresh headless Chromium with ``html`` loaded."""
    proc = subprocess.Popen([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not (port_file.is_file() and port_file.read_text().strip()):
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"chromium did not start (exit code {proc.poll()})")
            time.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        targets = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10).read())
        target = next(t for t in targets if t["type"] == "page")
        tools = DevTools(target["webSocketDebuggerUrl"])
        for domain in ("Page", "Runtime", "Log", "Network"):
            tools.call(f"{domain}.enable")
        tools.call("Page.navigate", url=html.as_uri())
        tools.wait_for("Page.loadEventFired")
        yield tools
        tools.sock.close()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def artefacts(folder: Path) -> Path:
    """Where screenshots go: $AUDIT_ARTIFACTS (CI keeps it), else the test's tmp folder."""
    return Path(os.environ.get("AUDIT_ARTIFACTS") or os.environ.get("AUDIT_BROWSER_ARTIFACTS") or folder)


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    """(DevTools client, audit.html path, folder for artefacts) with the audit page loaded."""
    folder = tmp_path_factory.mktemp("browser")
    study = fabricate_study(folder, np.random.default_rng(20240611),
                            description="Fabricated study for the browser test <b>not bold</b>.")
    html = build_report(study, folder)
    with browser(html, folder / "profile") as tools:  # a new, empty profile: no extensions, no state
        yield tools, html, artefacts(folder)


def evaluate(tools: DevTools, expression: str):
    result = tools.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
    if "exceptionDetails" in result:
        raise AssertionError(f"page script failed: {result['exceptionDetails']}")
    return result["result"].get("value")


VISIBLE = """(sel) => Array.from(document.querySelectorAll(sel)).filter(e => {
  const r = e.getBoundingClientRect(), s = getComputedStyle(e);
  return r.width > 20 && r.height > 20 && s.visibility !== 'hidden' && s.display !== 'none';
}).length"""


def test_no_console_errors_and_no_network(page):
    """The page logs no error, throws nothing, and requests nothing beyond its own file."""
    tools, html, _ = page
    evaluate(tools, "new Promise(r => setTimeout(r, 300))")  # let late console messages arrive
    errors = [e for e in tools.events if e.get("method") == "Runtime.exceptionThrown"
              or (e.get("method") == "Runtime.consoleAPICalled" and e["params"]["type"] in ("error", "assert"))
              or (e.get("method") == "Log.entryAdded" and e["params"]["entry"]["level"] == "error")]
    assert errors == []
    urls = [e["params"]["request"]["url"] for e in tools.events if e.get("method") == "Network.requestWillBeSent"]
    assert urls and all(u == html.as_uri() or u.startswith("data:") for u in urls), urls


def test_verdicts_comparisons_and_figures_are_visible(page):
    """The verdict cards, the comparisons table rows and the SVG figures have a visible size."""
    tools, _, _ = page
    counts = evaluate(tools, f"""(() => {{ const vis = {VISIBLE};
        return {{cards: vis('#verdicts article.claim'), comparisons: vis('#comparisons-table tbody tr:not(.group)'),
                 figures: vis('figure svg'), supported: document.querySelectorAll('#verdicts .badge.v-supported').length,
                 sections: Array.from(document.querySelectorAll('section')).map(s => s.id),
                 evidence: Array.from(document.querySelectorAll('.claim .evidence a')).map(a => a.getAttribute('href')),
                 broken: Array.from(document.querySelectorAll('a[href^="#"]')).filter(
                     a => !document.getElementById(a.getAttribute('href').slice(1))).length}}; }})()""")
    assert counts["cards"] >= 2 and counts["supported"] >= 1
    # 2 heads against softmax x 2 metrics (test_ppl, press_rank) in the fabricated config
    assert counts["comparisons"] == 4
    assert counts["figures"] == 4
    assert counts["sections"] == ["verdicts", "results", "comparisons", "ranks", "spread", "wordsim",
                                  "provenance", "warnings"]  # no top-k/Jacobian inputs: left out
    assert counts["broken"] == 0 and any(h.startswith("#cmp-") for h in counts["evidence"])


def test_markup_from_config_is_text(page):
    """The description's markup is shown as characters, not parsed into an element."""
    tools, _, _ = page
    lead = evaluate(tools, "document.querySelector('.lead').textContent")
    assert "<b>not bold</b>" in lead
    assert evaluate(tools, "document.querySelectorAll('.lead b').length") == 0


def test_sorting_a_column_reorders_rows(page):
    """Clicking 'Welch p' sorts each family's rows by that p-value (ascending, then descending)."""
    tools, _, _ = page
    values = evaluate(tools, """(() => {
        const th = Array.from(document.querySelectorAll('#comparisons-table thead th')).find(t => t.textContent === 'Welch p');
        const col = Array.from(th.parentNode.children).indexOf(th);
        const read = () => Array.from(document.querySelectorAll('#comparisons-table tbody tr:not(.group)'))
            .map(r => r.cells[col].getAttribute('data-v')).filter(v => v).map(parseFloat);
        th.click(); const up = read(); th.click(); const down = read();
        return {up, down, sort: th.getAttribute('aria-sort')}; })()""")
    assert values["up"] == sorted(values["up"]) and len(values["up"]) >= 2
    assert values["down"] == sorted(values["down"], reverse=True)
    assert values["sort"] == "descending"


def test_full_page_screenshot(page):
    """A PNG of the whole page, for a person to look at."""
    tools, _, out = page
    size = tools.call("Page.getLayoutMetrics")["cssContentSize"]
    shot = tools.call("Page.captureScreenshot", format="png", captureBeyondViewport=True,
                      clip={"x": 0, "y": 0, "width": 1400, "height": size["height"], "scale": 1})
    path = Path(out) / "audit-screenshot.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(base64.b64decode(shot["data"]))
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert width == 1400 and height > 2000  # every section rendered below the fold


REPO = Path(__file__).resolve().parents[2]
WIDTHS = (1024, 1440)
LAYOUT = """(() => {
  const doc = document.scrollingElement, right = e => e.getBoundingClientRect().right;
  const box = e => { const s = e.closest('.scroll'); return s ? s.getBoundingClientRect().right : innerWidth; };
  const cells = Array.from(document.querySelectorAll('#verdict-matrix td.verdict-cell, #published-claims td.verdict-cell'));
  const tables = ['#verdict-matrix', '#published-claims'].map(s => document.querySelector(s)).filter(t => t);
  const wide = Array.from(document.querySelectorAll('body *')).filter(e => right(e) > innerWidth + 0.5 && !e.closest('.scroll'));
  return {scrollWidth: doc.scrollWidth, innerWidth: innerWidth, cells: cells.length,
          offenders: wide.slice(0, 5).map(e => e.tagName + '.' + e.className + '#' + e.id),
          cellsOut: cells.filter(c => right(c) > innerWidth + 0.5 || right(c) > box(c) + 0.5).length,
          tablesScroll: tables.filter(t => t.parentElement.scrollWidth > t.parentElement.clientWidth + 1).length,
          tables: tables.length,
          unboxed: Array.from(document.querySelectorAll('main table')).filter(t => !t.parentElement.classList.contains('scroll')).length,
          badgeLinks: Array.from(document.querySelectorAll('#verdict-matrix a .badge')).length,
          brokenLinks: Array.from(document.querySelectorAll('#verdict-matrix a')).filter(
              a => !document.getElementById(a.getAttribute('href').slice(1))).length,
          numbersTables: document.querySelectorAll('.untestable table.numbers').length,
          meta: document.querySelector('.meta').textContent,
          forest: Array.from(document.querySelectorAll('#fig-published-forest svg')).filter(
              e => e.getBoundingClientRect().width > 300).length};
})()"""


@pytest.fixture(scope="module")
def published_page(tmp_path_factory):
    """(DevTools client, artefacts folder) with the published record's audit page loaded: its
    tables, verdict matrix and forest plot made by the real commands from ``configs/published.yaml``."""
    from support.demo import _audit

    folder = tmp_path_factory.mktemp("published")
    config, tables, figures = REPO / "configs" / "published.yaml", folder / "tables", folder / "figures"
    _audit("stats", "--config", config, "--summaries", REPO / "audit" / "data" / "published.csv", "--out", tables,
           "--table", "published_comparisons", "--table", "published_claims", "--table", "published_untestable")
    _audit("report", "table", "--name", "cross_scale", "--config", config, "--published-claims",
           tables / "published_claims.csv", "--out", tables / "cross_scale.csv")
    _audit("report", "figure", "--name", "published_forest", "--published-comparisons",
           tables / "published_comparisons.csv", "--out", figures / "published_forest.svg")
    html = folder / "audit.html"
    _audit("report", "html", "--config", config, "--tables", *sorted(map(str, tables.glob("*.csv"))),
           "--figures", str(figures / "published_forest.svg"), "--out", html)
    with browser(html, folder / "profile") as tools:
        yield tools, artefacts(folder)


@pytest.mark.parametrize("width", WIDTHS)
def test_published_layout_fits_the_viewport(published_page, width):
    """At 1,024 and 1,440 px: no horizontal page scroll, the verdict matrix and the claims table
    fit without scrolling their box, every verdict cell lies inside the viewport, every table
    sits in its own scroll box; badges link to rows that exist; untestable numbers are tables;
    the page says what a study without runs is; the forest plot is drawn. A screenshot is kept."""
    tools, out = published_page
    tools.call("Emulation.setDeviceMetricsOverride", width=width, height=900, deviceScaleFactor=1, mobile=False)
    facts = evaluate(tools, "new Promise(r => requestAnimationFrame(() => r(" + LAYOUT + ")))")
    assert facts["innerWidth"] == width
    assert facts["scrollWidth"] <= facts["innerWidth"], facts
    assert facts["tables"] == 2 and facts["tablesScroll"] == 0, facts
    assert facts["cells"] >= 2 * 19 and facts["cellsOut"] == 0, facts  # 19 published claims, 2 tables
    assert facts["unboxed"] == 0 and facts["badgeLinks"] == 19 and facts["brokenLinks"] == 0
    assert facts["numbersTables"] >= 10
    assert "0 runs" not in facts["meta"] and "published record" in facts["meta"]
    assert facts["forest"] == 1
    height = tools.call("Page.getLayoutMetrics")["cssContentSize"]["height"]
    shot = tools.call("Page.captureScreenshot", format="png", captureBeyondViewport=True,
                      clip={"x": 0, "y": 0, "width": width, "height": height, "scale": 1})
    path = out / f"audit-published-{width}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(base64.b64decode(shot["data"]))
    assert struct.unpack(">II", path.read_bytes()[16:24])[0] == width
