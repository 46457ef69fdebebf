"""What a diagnosis carries for its renderers: the lanes and the per-backend breakdown,
computed on the analyses' one context, equal to building them again from the evidence; and
the manifest notes follow the rules' settings it is given (the user's, as lint reads them)."""

from __future__ import annotations

from dataclasses import replace
from importlib.resources import files
from pathlib import Path

from svcdoctor.checks import Settings as CheckSettings
from svcdoctor.diagnose import Settings, diagnose
from svcdoctor.diagnose.breakdown import build_breakdown
from svcdoctor.diagnose.lanes import build_lanes
from svcdoctor.evidence import read_evidence
from svcdoctor.model import Cause, Verdict
from tests.factory import Scenario, generate, write_bundle

EXAMPLE = Path(str(files("svcdoctor.examples") / "rollout-race"))


def _notes(d_evidence: tuple[str, ...], rule: str) -> list[str]:
    return [line for line in d_evidence if line.startswith(f"manifest {rule} ")]


def test_a_race_carries_its_lanes_and_no_breakdown() -> None:
    evidence = read_evidence([str(EXAMPLE)])
    d = diagnose(evidence)
    assert d.primary is not None
    assert d.primary.cause is Cause.RACE
    assert d.lanes is not None
    assert d.lanes == build_lanes(evidence, d)
    assert d.breakdown is None  # neither a bad backend nor reuse is suspected


def test_a_bad_backend_carries_its_breakdown(tmp_path: Path) -> None:
    bundle = write_bundle(generate(Scenario("backend", bad_pod=5)), tmp_path / "b", "nginx")
    evidence = read_evidence([str(bundle)])
    d = diagnose(evidence)
    assert d.cause(Cause.BACKEND).verdict is not Verdict.UNLIKELY
    assert d.breakdown is not None
    assert d.breakdown == build_breakdown(evidence, d)
    assert d.lanes == build_lanes(evidence, d)


def test_a_report_without_pictures_is_spared_them() -> None:
    d = diagnose(read_evidence([str(EXAMPLE)]), Settings(pictures=False))
    assert (d.lanes, d.breakdown) == (None, None)


def test_without_request_rows_there_is_nothing_to_draw() -> None:
    evidence = read_evidence([str(EXAMPLE / "events.json"), str(EXAMPLE / "pods.json")])
    d = diagnose(evidence)
    assert (d.lanes, d.breakdown) == (None, None)


def test_manifest_notes_follow_the_rules_settings() -> None:
    evidence = read_evidence([str(EXAMPLE)])
    default = diagnose(evidence).cause(Cause.RACE).evidence
    assert _notes(default, "SVD101")
    settings = Settings(checks=CheckSettings(disabled=frozenset({"SVD101"})))
    quiet = diagnose(evidence, settings).cause(Cause.RACE).evidence
    assert not _notes(quiet, "SVD101")
    assert [x for x in default if not x.startswith("manifest SVD101 ")] == list(quiet)
    assert replace(settings, checks=CheckSettings()) == Settings()
