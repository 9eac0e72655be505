"""Headless Chromium on a report file: the rendered DOM, the console, a screenshot.

The report is meant to be opened in a browser, so it is checked in one (tests/test_report_browser.py)
and its README screenshot is taken by one:

    python -m packcheck.harness.report.browser reports/mutants/report.html docs/report.png [WIDTHxHEIGHT] [#anchor]

Chromium runs with a throwaway profile, no sandbox (CI containers run as root), no GPU and no
background networking; `--enable-logging=stderr` puts the page's console (uncaught errors,
Content-Security-Policy refusals) on stderr as `CONSOLE` lines.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", "--no-first-run", "--hide-scrollbars", "--enable-logging=stderr", "--v=0")


def find_chromium() -> str | None:
    return next((path for path in map(shutil.which, CANDIDATES) if path), None)


@dataclass(frozen=True, slots=True)
class Page:
    dom: str  # the DOM after scripts ran, serialised
    console: list[str]  # the page's console messages


def _chromium(url: str, *flags: str, timeout: float = 60) -> subprocess.CompletedProcess:
    binary = find_chromium()
    if binary is None:
        raise FileNotFoundError(f"no Chromium found (looked for {', '.join(CANDIDATES)}); install the Debian package 'chromium'")
    with tempfile.TemporaryDirectory(prefix="packcheck-chromium-") as profile:
        done = subprocess.run([binary, *FLAGS, f"--user-data-dir={profile}", *flags, url],
                              capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"chromium exited {done.returncode}: {done.stderr[-2000:]}")
    return done


def load(html: Path, anchor: str = "", size: str | None = None) -> Page:
    """The DOM after scripts ran; `size` ("1400,1000") sets the window the page is laid out in."""
    done = _chromium(html.resolve().as_uri() + anchor, "--dump-dom", *([f"--window-size={size}"] if size else []))
    return Page(dom=done.stdout, console=[line for line in done.stderr.splitlines() if ":CONSOLE" in line])


def screenshot(html: Path, png: Path, size: str = "1400,1000", anchor: str = "") -> Path:
    png.parent.mkdir(parents=True, exist_ok=True)
    _chromium(html.resolve().as_uri() + anchor, f"--screenshot={png.resolve()}", f"--window-size={size}")
    return png


if __name__ == "__main__":
    html_path, png_path = Path(sys.argv[1]), Path(sys.argv[2])
    window = sys.argv[3].replace("x", ",") if len(sys.argv) > 3 else "1400,1000"
    print(screenshot(html_path, png_path, window, sys.argv[4] if len(sys.argv) > 4 else ""))
