"""Renderers of lint results: text (rich), JSON, SARIF 2.1.0, GitHub annotations."""

from svcdoctor.report.github import render_github
from svcdoctor.report.jsonout import lint_to_dict, render_json
from svcdoctor.report.sarif import render_sarif, to_sarif
from svcdoctor.report.text import render_text

__all__ = [
    "lint_to_dict",
    "render_github",
    "render_json",
    "render_sarif",
    "render_text",
    "to_sarif",
]
