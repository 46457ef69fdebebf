"""A headless Chromium (the Debian ``chromium`` and ``chromium-driver`` packages) that opens
an HTML report as a person would, at 1280x800, and reports what they would see.

Selenium drives the system's chromedriver (never selenium-manager downloads); tests skip
with the reason when chromium, chromedriver or selenium is missing.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

WIDTH, HEIGHT = 1280, 800
CHROMEDRIVER = "/usr/bin/chromedriver"
BROWSERS = ("chromium", "chromium-browser", "google-chrome")


def missing() -> str | None:
    """Why no browser can run here (None: it can)."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install 'selenium>=4.20')"
    if not Path(CHROMEDRIVER).is_file():
        return f"{CHROMEDRIVER} is missing (apt-get install chromium-driver)"
    if not any(shutil.which(b) for b in BROWSERS):
        return "chromium is missing (apt-get install chromium)"
    return None


@dataclass(frozen=True, slots=True)
class Box:
    top: float
    left: float
    width: float
    height: float


@dataclass(frozen=True, slots=True)
class Image:
    alt: str
    complete: bool
    natural_width: int
    natural_height: int
    box: Box


@dataclass(frozen=True, slots=True)
class Seen:
    """What the page showed: console errors, images, the verdict's place, the screenshot."""

    errors: tuple[str, ...]
    images: tuple[Image, ...]
    inline_svgs: tuple[Box, ...]
    verdict_text: str
    verdict: Box
    title: str
    screenshot: Path
    copy_buttons_shown: int


_IMAGES = """
return Array.from(document.images).map(i => {
  const r = i.getBoundingClientRect();
  return [i.alt, i.complete, i.naturalWidth, i.naturalHeight, r.top, r.left, r.width, r.height];
});
"""
_SVGS = """
return Array.from(document.querySelectorAll('svg')).filter(s => !s.closest('svg svg'))
  .map(s => { const r = s.getBoundingClientRect(); return [r.top, r.left, r.width, r.height]; });
"""
_VERDICT = """
const v = document.getElementById('verdict').querySelector('h1');
const r = v.getBoundingClientRect();
return [v.innerText, r.top, r.left, r.width, r.height];
"""
_BUTTONS = (
    "return Array.from(document.querySelectorAll('button.copy')).filter(b => !b.hidden).length;"
)


class Browser:
    """One headless Chromium for many pages (starting one takes about a second)."""

    def __init__(self) -> None:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        options = webdriver.ChromeOptions()
        binary = next(shutil.which(b) for b in BROWSERS if shutil.which(b))
        options.binary_location = str(binary)
        for arg in (
            "--headless=new",
            "--no-sandbox",
            "--disable-dev-shm-usage",
            "--disable-gpu",
            f"--window-size={WIDTH},{HEIGHT}",
            "--hide-scrollbars",
            # offline: a page that reaches for the network fails loudly in the console
            "--host-resolver-rules=MAP * ~NOTFOUND",
        ):
            options.add_argument(arg)
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        self.driver: Any = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
        self.driver.set_page_load_timeout(60)
        # the viewport, not the window, is 1280x800
        width, height = self.viewport()
        if (width, height) != (WIDTH, HEIGHT):
            outer = self.driver.get_window_size()
            self.driver.set_window_size(
                outer["width"] + WIDTH - width, outer["height"] + HEIGHT - height
            )

    def open(self, page: Path, screenshot: Path) -> Seen:
        """Load ``page`` (a file) and look at it; the screenshot is written to ``screenshot``."""
        d = self.driver
        d.get_log("browser")  # drop what earlier pages logged
        d.get(page.absolute().as_uri())
        d.execute_script("return document.fonts ? document.fonts.ready : null;")
        d.execute_script("window.scrollTo(0, 0);")
        images = tuple(
            Image(alt, complete, nw, nh, Box(top, left, w, h))
            for alt, complete, nw, nh, top, left, w, h in d.execute_script(_IMAGES)
        )
        svgs = tuple(Box(*row) for row in d.execute_script(_SVGS))
        text, top, left, width, height = d.execute_script(_VERDICT)
        d.save_screenshot(str(screenshot))
        errors = tuple(
            str(entry.get("message"))
            for entry in d.get_log("browser")
            if entry.get("level") == "SEVERE"
        )
        return Seen(
            errors,
            images,
            svgs,
            text,
            Box(top, left, width, height),
            d.title,
            screenshot,
            int(d.execute_script(_BUTTONS)),
        )

    def viewport(self) -> tuple[int, int]:
        width, height = self.driver.execute_script(
            "return [window.innerWidth, window.innerHeight];"
        )
        return int(width), int(height)

    def close(self) -> None:
        self.driver.quit()


def browser_fixture() -> Iterator[Browser]:
    """Body of a module-scoped fixture: one browser, skipped with the reason when missing."""
    reason = missing()
    if reason:
        pytest.skip(f"no headless browser: {reason}")
    browser = Browser()
    try:
        yield browser
    finally:
        browser.close()


def assert_seen_well(seen: Seen, images: int = 1) -> None:
    """What every report must show: no console error, every picture decoded with a size,
    the verdict inside the first screen, a screenshot written."""
    assert seen.errors == (), seen.errors
    assert len(seen.images) >= images, seen.images
    for image in seen.images:
        assert image.complete, image.alt
        assert image.natural_width > 0, image.alt
        assert image.natural_height > 0, image.alt
        assert image.box.width > 0, image.alt
        assert image.alt.strip(), "an image without alt text"
    for svg in seen.inline_svgs:
        assert svg.width > 0, svg
        assert svg.height > 0, svg
    assert seen.verdict_text.strip()
    assert seen.verdict.top >= 0
    assert seen.verdict.top + seen.verdict.height <= HEIGHT, seen.verdict
    assert seen.screenshot.stat().st_size > 0
