"""The HTML report opened in a real headless Chromium: it renders, every image decodes, no console errors.

Talks the DevTools protocol over --remote-debugging-pipe (fd 3 in, fd 4 out), so no websocket library is needed.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import required

from repro.report.html import render_html
from repro.report.model import build_report

CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)

pytestmark = [
    pytest.mark.chromium,
    pytest.mark.skipif(
        CHROMIUM is None and not required("REPRO_REQUIRE_CHROMIUM"),
        reason="chromium not installed (CI sets REPRO_REQUIRE_CHROMIUM=1)",
    ),
]


class Browser:
    def __init__(self, profile: Path):
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()

        def wire() -> None:
            high_r, high_w = os.dup(to_chrome_r) + 100, os.dup(from_chrome_w) + 100
            os.dup2(to_chrome_r, high_r)
            os.dup2(from_chrome_w, high_w)
            os.dup2(high_r, 3, inheritable=True)
            os.dup2(high_w, 4, inheritable=True)

        self.proc = subprocess.Popen(
            [
                CHROMIUM or "chromium",
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--no-first-run",
                "--enable-logging=stderr",
                "--v=0",
                f"--user-data-dir={profile}",
                "--remote-debugging-pipe",
                "about:blank",
            ],
            pass_fds=(3, 4),
            preexec_fn=wire,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._buf = b""
        self._id = 0
        self.events: list[dict[str, Any]] = []

    def send(
        self, method: str, params: dict[str, Any] | None = None, session: str | None = None, timeout: float = 30
    ) -> dict[str, Any]:
        self._id += 1
        msg: dict[str, Any] = {"id": self._id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._to_chrome, json.dumps(msg).encode() + b"\0")
        while True:
            reply = self._read(timeout)
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise AssertionError(f"{method}: {reply['error']}")
                return reply["result"]

    def _read(self, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from_chrome], [], [], left)[0]:
                raise AssertionError("chromium did not answer")
            chunk = os.read(self._from_chrome, 1 << 16)
            if not chunk:
                raise AssertionError("chromium closed the pipe")
            self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        msg = json.loads(raw)
        if "method" in msg:
            self.events.append(msg)
        return msg

    def wait_event(self, method: str, timeout: float = 30) -> dict[str, Any]:
        for ev in self.events:
            if ev["method"] == method:
                return ev
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            msg = self._read(deadline - time.monotonic())
            if msg.get("method") == method:
                return msg
        raise AssertionError(f"no {method} event")

    def close(self) -> str:
        with contextlib.suppress(AssertionError):
            self.send("Browser.close", timeout=10)
        try:
            _, err = self.proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
        os.close(self._to_chrome)
        os.close(self._from_chrome)
        return err.decode(errors="replace")


def check_page(path: Path, profile: Path) -> dict[str, Any]:
    """Open a file and report images (complete, naturalWidth) and every console/log error."""
    browser = Browser(profile)
    try:
        target = browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = browser.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            browser.send(f"{domain}.enable", session=session)
        browser.send("Page.navigate", {"url": path.resolve().as_uri()}, session=session)
        browser.wait_event("Page.loadEventFired")
        images = browser.send(
            "Runtime.evaluate",
            {
                "expression": "JSON.stringify([...document.images].map(i => [i.complete, i.naturalWidth, i.alt]))",
                "returnByValue": True,
            },
            session=session,
        )["result"]["value"]
        title = browser.send(
            "Runtime.evaluate", {"expression": "document.title", "returnByValue": True}, session=session
        )["result"]["value"]
        text = browser.send(
            "Runtime.evaluate", {"expression": "document.body.innerText", "returnByValue": True}, session=session
        )["result"]["value"]
        time.sleep(0.5)
        browser.send("Runtime.evaluate", {"expression": "1"}, session=session)
    finally:
        stderr = browser.close()
    errors = [
        e["params"]["entry"]["text"]
        for e in browser.events
        if e["method"] == "Log.entryAdded" and e["params"]["entry"]["level"] == "error"
    ]
    errors += [
        str(e["params"].get("args"))
        for e in browser.events
        if e["method"] == "Runtime.consoleAPICalled" and e["params"]["type"] in ("error", "assert")
    ]
    errors += [str(e["params"]["exceptionDetails"]) for e in browser.events if e["method"] == "Runtime.exceptionThrown"]
    errors += [line for line in stderr.splitlines() if "CONSOLE" in line and ("rror" in line or "Refused" in line)]
    return {"images": json.loads(images), "title": title, "text": text, "errors": errors}


@pytest.fixture
def profile(tmp_path: Path) -> Path:
    return tmp_path / "chromium-profile"


def test_rack_report_renders_in_chromium(fixtures: Path, tmp_path: Path, profile: Path) -> None:
    page = tmp_path / "rack.html"
    page.write_text(render_html(build_report([fixtures / "azure-nd-gb300-v6-rack"])))
    result = check_page(page, profile)
    assert result["errors"] == []
    # comparison, standing among the published GB300 results, rack chart, roofline
    assert len(result["images"]) == 4
    assert all(complete and width > 0 for complete, width, _ in result["images"])
    assert "Azure ND GB300 v6" in result["title"]
    assert "ND_GB300_v6_16" in result["text"] and "57,599.1" in result["text"]


def test_checker_catches_broken_images_and_external_resources(fixtures: Path, tmp_path: Path, profile: Path) -> None:
    page = tmp_path / "broken.html"
    good = render_html(build_report([fixtures / "azure-nd-gb200-v6-v5.1"]))
    broken = good.replace("data:image/png;base64,iVBOR", "data:image/png;base64,AAAA", 1)
    broken = broken.replace("</body>", '<img alt="ext" src="https://example.invalid/x.png"></body>')
    page.write_text(broken)
    result = check_page(page, profile)
    widths = [w for _, w, _ in result["images"]]
    assert widths.count(0) == 2
    assert any("Content Security Policy" in e or "Refused" in e for e in result["errors"]), result["errors"]


def layout_at(path: Path, profile: Path, width: int, shot: Path) -> dict[str, Any]:
    """Open the page in a `width`-px window: page and table widths, one-line cells, and a PNG screenshot."""
    browser = Browser(profile)
    try:
        target = browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = browser.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        browser.send("Page.enable", session=session)
        browser.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": False},
            session=session,
        )
        browser.send("Page.navigate", {"url": path.resolve().as_uri()}, session=session)
        browser.wait_event("Page.loadEventFired")
        probe = """JSON.stringify({
            scroll: document.documentElement.scrollWidth, inner: window.innerWidth,
            tables: [...document.querySelectorAll('table')].map(t => t.getBoundingClientRect().right),
            tall: [...document.querySelectorAll('td.w, th')].filter(c => {
                const s = getComputedStyle(c); const line = parseFloat(s.lineHeight) || parseFloat(s.fontSize) * 1.4;
                return c.getBoundingClientRect().height > 2 * line + parseFloat(s.paddingTop) * 2 + 2;
            }).map(c => c.innerText)})"""
        found = json.loads(
            browser.send("Runtime.evaluate", {"expression": probe, "returnByValue": True}, session=session)["result"][
                "value"
            ]
        )
        import base64

        png = browser.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True}, session=session)
        shot.write_bytes(base64.b64decode(png["data"]))
    finally:
        browser.close()
    return found


def test_gb300_rack_report_fits_1400_px_without_a_horizontal_scrollbar(
    fixtures: Path, tmp_path: Path, profile: Path
) -> None:
    page = tmp_path / "rack.html"
    page.write_text(render_html(build_report([fixtures / "azure-nd-gb300-v6-rack"])))
    shot = tmp_path / "rack-1400.png"
    found = layout_at(page, profile, 1400, shot)
    assert found["scroll"] <= found["inner"] == 1400, found
    assert all(right <= 1400 for right in found["tables"]), found
    assert found["tall"] == [], f"cells that wrapped: {found['tall']}"
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000
    html = page.read_text()
    assert 'title="mlcommons/inference_results_v5.1' in html and "ND_GB300_v6_4" in html
    assert html.index(">ND_GB300_v6_4<") < html.index(">ND_GB300_v6_16<")  # natural order, not 1, 16, 4
