"""The HTML page builder on the data: what the page holds, in which order, and that it
needs nothing from the network. (How a browser shows it: test_html_browser.py.)"""

from __future__ import annotations

import base64
import re
from dataclasses import replace
from html.parser import HTMLParser
from importlib.resources import files
from pathlib import Path

import pytest
import yaml

from svcdoctor.diagnose import diagnose
from svcdoctor.errors import SvcdoctorError
from svcdoctor.evidence import read_evidence
from svcdoctor.model import Diagnosis, Evidence
from svcdoctor.report.html import (
    Fix,
    ImageType,
    Page,
    Picture,
    PlotTypeError,
    Section,
    Tone,
    diagnosis_page,
    diagnosis_pictures,
    image_type,
    render_html,
    render_page,
    split_fix,
)
from tests.factory import Scenario, generate, write_bundle

EXAMPLE = Path(str(files("svcdoctor.examples") / "rollout-race"))
PNG_1x1 = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


class Outline(HTMLParser):
    """The page's tags in order, the images' attributes, the text of the <pre> blocks and
    every URL an attribute points at."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.images: list[dict[str, str]] = []
        self.pres: list[str] = []
        self.urls: list[str] = []
        self.h1 = ""
        self._in: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {k: v or "" for k, v in attrs}
        self.tags.append(tag)
        if tag == "img":
            self.images.append(values)
        for name in ("src", "href"):
            if name in values:
                self.urls.append(values[name])
        if tag in ("pre", "h1"):
            self._in = tag
            if tag == "pre":
                self.pres.append("")

    def handle_endtag(self, tag: str) -> None:
        if tag == self._in:
            self._in = None

    def handle_data(self, data: str) -> None:
        if self._in == "pre":
            self.pres[-1] += data
        elif self._in == "h1":
            self.h1 += data


def outline(page: str) -> Outline:
    parser = Outline()
    parser.feed(page)
    return parser


@pytest.fixture(scope="module")
def example() -> tuple[Evidence, Diagnosis]:
    evidence = read_evidence([str(EXAMPLE)])
    return evidence, diagnose(evidence)


def _page(**changes: object) -> Page:
    base = Page(
        title="svcdoctor test",
        verdict="Verdict: race (likely)",
        tone=Tone.BAD,
        headline="82 of 6000 requests failed",
        pictures=(Picture(PNG_1x1, "82 failures on 8 deleted pods", ImageType.PNG),),
        findings=(
            Section(
                "race: likely",
                Tone.BAD,
                "the race",
                ("82 more failures after deletions",),
                (Fix("apply:", "spec:\n  x: 1\n"), Fix("graceful shutdown")),
            ),
        ),
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def test_the_verdict_comes_first_then_the_pictures_then_the_evidence() -> None:
    page = outline(render_page(_page()))
    body = page.tags[page.tags.index("main") :]
    assert body.index("h1") < body.index("img") < body.index("section")
    assert page.h1 == "Verdict: race (likely)"


def test_pictures_are_inline_with_the_finding_as_alt_text() -> None:
    page = outline(render_page(_page()))
    (img,) = page.images
    assert img["alt"] == "82 failures on 8 deleted pods"
    kind, data = img["src"].split(",", 1)
    assert kind == "data:image/png;base64"
    assert base64.b64decode(data) == PNG_1x1


def test_nothing_is_fetched_from_the_network() -> None:
    text = render_page(_page())
    assert all(url.startswith("data:") for url in outline(text).urls)
    assert "@import" not in text
    assert not re.search(r"url\(", text)
    assert "<script src" not in text
    assert "<link" not in text


def test_prints_and_reads_in_the_dark() -> None:
    text = render_page(_page())
    assert "@media print" in text
    assert "prefers-color-scheme:dark" in text
    assert "figure img{" in text
    assert "background:#fff" in text  # the pictures keep a white card in dark mode


def test_the_fix_is_copyable_yaml_and_degrades_to_a_pre() -> None:
    text = render_page(_page())
    page = outline(text)
    assert page.pres == ["spec:\n  x: 1"]
    # the button is hidden until the script shows it: without scripts the <pre> remains
    assert "<button type='button' class='copy' hidden>" in text
    assert text.count("<script>") == 1
    assert "navigator.clipboard" in text


def test_no_script_when_there_is_nothing_to_copy() -> None:
    text = render_page(_page(findings=()))
    assert "<script" not in text
    assert "<button" not in text


def test_text_is_escaped() -> None:
    text = render_page(_page(verdict="<script>alert(1)</script>", headline="a & b"))
    assert "<script>alert" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert "a &amp; b" in text


def test_split_fix_gives_the_patch_as_yaml(example: tuple[Evidence, Diagnosis]) -> None:
    _, d = example
    (patch, sentence) = d.causes[0].fixes
    fix = split_fix(patch)
    assert fix.title.startswith("SVD101: preStop sleep")
    assert fix.yaml is not None
    spec = yaml.safe_load(fix.yaml)["spec"]["template"]["spec"]
    assert spec["containers"][0]["lifecycle"]["preStop"]["sleep"]["seconds"] >= 1
    assert split_fix(sentence) == Fix(sentence.text)


def test_a_diagnosis_page_holds_each_cause_its_fix_and_every_source(
    example: tuple[Evidence, Diagnosis],
) -> None:
    _, d = example
    page = diagnosis_page(d, diagnosis_pictures(d))
    assert page.verdict == "Verdict: race (likely)"
    assert page.tone is Tone.BAD
    assert [f.title.split(":")[0] for f in page.findings] == [a.cause.value for a in d.causes]
    race = page.findings[0]
    assert race.evidence == d.causes[0].evidence
    assert any(f.yaml and "preStop" in f.yaml for f in race.fixes)
    assert all(not f.fixes for f in page.findings[1:])  # no fix for an unlikely cause
    assert [i.path for i in page.inputs] == [s.path for s in d.summary.sources]
    requests = next(i for i in page.inputs if i.path.endswith("requests.csv"))
    assert requests.rows == 6000
    assert requests.span.startswith("2026-12-02T10:00:00.008Z → 2026-12-02T10:03:19.898Z")
    text = render_page(page)
    assert [p.strip() for p in outline(text).pres if "preStop" in p]  # the YAML is shown


def test_a_race_shows_the_lanes_only(example: tuple[Evidence, Diagnosis]) -> None:
    _, d = example
    (lanes,) = diagnosis_pictures(d)
    assert lanes.kind is ImageType.SVG
    assert lanes.data.lstrip().startswith(b"<?xml")
    assert "82 failed requests" in lanes.alt
    assert "race window" in lanes.alt


def test_a_bad_backend_shows_its_rates_first(tmp_path: Path) -> None:
    bundle = write_bundle(generate(Scenario("backend", bad_pod=5)), tmp_path / "b", "nginx")
    evidence = read_evidence([str(bundle)])
    d = diagnose(evidence)
    assert d.primary is not None
    assert d.primary.cause.value == "backend"
    backends, lanes = diagnosis_pictures(d)
    assert "singled out" in backends.alt or "backend" in backends.alt.lower()
    assert "failed requests" in lanes.alt


def test_without_request_rows_the_timeline_is_drawn(example: tuple[Evidence, Diagnosis]) -> None:
    _, d = example
    (timeline,) = diagnosis_pictures(replace(d, lanes=None, breakdown=None))
    assert "pod deletions" in timeline.alt
    assert timeline.data.lstrip().startswith(b"<?xml")


def test_render_html_keeps_diagnose_html_working(example: tuple[Evidence, Diagnosis]) -> None:
    _, d = example
    text = render_html(d)
    assert text.startswith("<!doctype html>")
    assert "Verdict: race (likely)" in text
    assert "data:image/svg+xml;base64," in text


@pytest.mark.parametrize(
    ("name", "kind"),
    [("a.png", ImageType.PNG), ("a.SVG", ImageType.SVG), ("dir.x/b.Png", ImageType.PNG)],
)
def test_the_picture_type_follows_the_extension(name: str, kind: ImageType) -> None:
    assert image_type(Path(name)) is kind


@pytest.mark.parametrize("name", ["a.jpg", "a.pdf", "a", "a.svgz", "png"])
def test_other_extensions_are_refused(name: str) -> None:
    with pytest.raises(PlotTypeError, match="PNG or SVG") as info:
        image_type(Path(name))
    assert isinstance(info.value, SvcdoctorError)
    assert info.value.exit_code == 2
