"""The live commands' pages say what the code does: the synopsis shows each option's real
default, and every RBAC file the docs name is one the repository holds (deploy/rbac/)."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest

from svcdoctor.cli import cli

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LIVE = ("probe", "rollout-test", "collect", "cleanup", "scan", "investigate")
# `[--name value]` in a synopsis: a lower-case value is the default shown (METAVARS are not)
SHOWN_DEFAULT = re.compile(r"\[(--[a-z-]+) ([^]\sA-Z|…]+)\]")
RBAC_FILE = re.compile(r"(?<![\w/.-])([\w./-]*rbac/[\w.-]+\.yaml)")


def synopsis(command: str) -> str:
    text = (ROOT / "docs" / "commands" / f"{command}.md").read_text()
    start = text.index("```\nsvcdoctor")
    return text[start : text.index("```", start + 3)]


@pytest.mark.parametrize("command", LIVE)
def test_the_synopsis_shows_the_real_defaults(command: str) -> None:
    params = {name: p for p in cli.commands[command].params for name in getattr(p, "opts", ())}
    for name, shown in SHOWN_DEFAULT.findall(synopsis(command)):
        param = params[name]
        assert isinstance(param, click.Option)
        assert str(param.default) == shown, f"{command} {name}: shown {shown}, is {param.default}"


def test_every_rbac_file_named_exists() -> None:
    for page in PAGES:
        for path in RBAC_FILE.findall(page.read_text()):
            local = path.split("/main/", 1)[-1]  # a GitHub link to the repository's file
            assert local.startswith("deploy/rbac/"), f"{page.name}: {path}"
            assert (ROOT / local).exists(), f"{page.name}: {path} does not exist"
