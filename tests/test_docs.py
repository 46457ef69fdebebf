"""The front door and the manual stay true: the README is short and its links resolve, the
outputs it and the command pages show are the real ones (lines of the golden outputs, which
tests/test_golden.py holds equal to the commands' output), and the site's menu lists every
rule page. ``mkdocs build --strict`` (make lint) checks the site's own links and anchors."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from svcdoctor.checks import RULES
from svcdoctor.cli import cli

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
GOLDEN = ROOT / "tests" / "golden"
EXAMPLES = "src/svcdoctor/examples/"  # the golden outputs ran inside that folder
MAX_README_LINES = 200
LINK = re.compile(r"\]\(([^)\s]+)\)")

# (page, text that introduces or opens a code block) → the golden output it shows
SHOWN = {
    ("README.md", "$ svcdoctor lint --example"): "lint.txt",
    ("README.md", "$ svcdoctor diagnose --example"): "diagnose.txt",
    ("README.md", "$ svcdoctor fix shop.yaml"): "fix_shop.diff",
    ("docs/commands/lint.md", "Real output (`svcdoctor lint --example`"): "lint.txt",
    ("docs/commands/diagnose.md", "Real output (`svcdoctor diagnose --example`"): "diagnose.txt",
    ("docs/commands/fix.md", "Real output (`svcdoctor fix shop.yaml`"): "fix_shop.diff",
}
# the same for `svcdoctor rules`, compared with the command itself (it is fast)
RULES_SHOWN = (
    ("README.md", "$ svcdoctor rules"),
    ("docs/commands/rules.md", "Real output (`svcdoctor rules`"),
)


def block_at(text: str, marker: str) -> list[str]:
    """The lines of the code block that ``marker`` opens (inside it) or introduces (before)."""
    at = text.index(marker)
    start = text.rindex("```", 0, at) if text[:at].count("```") % 2 else text.index("```", at)
    body = text.index("\n", start) + 1
    return text[body : text.index("```", body)].splitlines()


def assert_shown(shown: list[str], real: str, where: str) -> None:
    """Every line shown is a line of the real output; ``…`` elides lines, or a line's end."""
    lines = [line.rstrip() for line in real.splitlines()]
    for raw in shown:
        line = raw.replace(EXAMPLES, "").rstrip()
        if line.startswith("$ ") or line.strip() in ("", "…"):
            continue
        if "…" in line:
            head = line.split("…", 1)[0]
            assert any(real_line.startswith(head) for real_line in lines), f"{where}: {line!r}"
        else:
            assert line in lines, f"{where}: {line!r} is not in the real output"


def test_the_readme_is_a_front_door() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= MAX_README_LINES
    for command in ("lint", "diagnose", "fix", "lab", "simulate", "scan", "collect", "probe"):
        assert f"(docs/commands/{command}.md)" in text, f"no example of {command}"
    assert "(docs/commands/rollout-test.md)" in text
    assert "(docs/commands/rules.md)" in text
    assert "make demo" in text
    assert "make test" in text


@pytest.mark.parametrize(
    "page",
    ["README.md", *(p.relative_to(ROOT).as_posix() for p in sorted((ROOT / "docs").rglob("*.md")))],
)
def test_relative_links_resolve(page: str) -> None:
    """README's links point into the repository; the pages' too (mkdocs checks them again)."""
    path = ROOT / page
    for target in LINK.findall(path.read_text()):
        if target.startswith(("http://", "https://", "mailto:", "#")):
            continue
        file = target.split("#", 1)[0]
        assert (path.parent / file).exists(), f"{page}: broken link {target}"


@pytest.mark.parametrize(("page", "marker"), sorted(SHOWN))
def test_the_outputs_shown_are_real(page: str, marker: str) -> None:
    shown = block_at((ROOT / page).read_text(), marker)
    assert len(shown) > 3
    assert_shown(shown, (GOLDEN / SHOWN[page, marker]).read_text(), f"{page} ({marker})")


@pytest.mark.parametrize(("page", "marker"), RULES_SHOWN)
def test_the_rules_listing_shown_is_real(page: str, marker: str) -> None:
    result = CliRunner().invoke(cli, ["rules"], terminal_width=200)
    assert result.exit_code == 0
    shown = block_at((ROOT / page).read_text(), marker)
    assert_shown(shown, result.output, f"{page} ({marker})")


def test_the_site_menu_lists_every_rule_page() -> None:
    """mkdocs.yml names each rule page (mkdocs --strict refuses a page left out of the menu)."""
    menu = dict(
        re.findall(
            r"^\s+- (SVD\d{3} [a-z0-9-]+): rules/(SVD\d{3})\.md$",
            (ROOT / "mkdocs.yml").read_text(),
            re.M,
        )
    )
    listed = {page: title for title, page in menu.items()}
    expected = {r.id: f"{r.id} {r.name}" for r in RULES.values()}
    assert listed == expected, "add `- SVDnnn name: rules/SVDnnn.md` to mkdocs.yml's Rules menu"
