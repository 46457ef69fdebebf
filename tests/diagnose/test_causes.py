"""Each cause, generated with known ground truth and written in every supported format,
is diagnosed as that cause, with the right suspects and window."""

from __future__ import annotations

from pathlib import Path

import pytest

from svcdoctor.diagnose import diagnose
from svcdoctor.evidence import read_evidence
from svcdoctor.model import Cause, Diagnosis, Verdict
from svcdoctor.model.diagnosis import BackendDetails, RaceDetails, ReuseDetails
from tests.factory import Scenario, generate, write_bundle

ALL_FORMATS = ["csv", "jsonl", "parquet", "nginx", "nginx-retries", "envoy", "istio", "envoy-json"]
WITH_CONNECTIONS = ["csv", "jsonl", "parquet", "istio", "envoy-json"]


def run(tmp_path: Path, scenario: Scenario, fmt: str = "csv", api: str = "v1") -> Diagnosis:
    folder = write_bundle(generate(scenario), tmp_path / "bundle", fmt, api)
    return diagnose(read_evidence([str(folder)]))


def scores(d: Diagnosis) -> dict[Cause, float]:
    return {a.cause: a.score for a in d.causes}


@pytest.mark.parametrize("fmt", ALL_FORMATS)
@pytest.mark.parametrize("api", ["v1", "events.k8s.io/v1"])
def test_race_is_diagnosed_with_its_window(tmp_path: Path, fmt: str, api: str) -> None:
    d = run(tmp_path, Scenario("race", window=3.0), fmt, api)
    assert d.primary is not None
    assert d.primary.cause is Cause.RACE
    assert d.primary.verdict is Verdict.LIKELY
    details = d.primary.details
    assert isinstance(details, RaceDetails)
    assert details.window is not None
    assert details.recommended_prestop_seconds is not None
    assert details.recommended_grace_seconds is not None
    resolution = 1.0 if api == "v1" else 0.0  # kubectl core/v1 events: 1 s timestamps
    resolution += 1.0 if fmt.startswith("nginx") else 0.0  # nginx $time_local: 1 s
    assert 3.0 <= details.window.seconds <= 3.0 + resolution + 0.5
    # the plan covers the bootstrap's upper bound centred within the clocks' resolution
    # (coarse clocks widen the interval, not the preStop: issue 29)
    low, high = details.window.ci95
    assert low <= 3.0 <= high
    assert details.window.plan_seconds is not None
    assert details.recommended_prestop_seconds >= details.window.plan_seconds + 2
    assert details.recommended_grace_seconds > details.recommended_prestop_seconds
    assert all(a.score < 0.3 for a in d.causes if a.cause is not Cause.RACE)


def test_retries_mask_the_race_from_clients_but_not_from_us(tmp_path: Path) -> None:
    d = run(tmp_path, Scenario("race"), "nginx-retries")
    assert d.summary.errors == 0
    assert d.summary.masked_by_retries > 300
    assert d.primary is not None
    assert d.primary.cause is Cause.RACE


@pytest.mark.parametrize("fmt", ALL_FORMATS)
def test_bad_backend_is_named_by_pod_and_ip(tmp_path: Path, fmt: str) -> None:
    scenario = Scenario("backend", bad_pod=3)
    truth = generate(scenario).truth
    d = run(tmp_path, scenario, fmt)
    assert d.primary is not None
    assert d.primary.cause is Cause.BACKEND
    assert isinstance(d.primary.details, BackendDetails)
    (suspect,) = d.primary.details.suspects
    assert suspect.ip == truth["bad_ip"]
    assert suspect.pod == truth["bad_pod"]
    assert suspect.ready is True
    if fmt != "nginx-retries":  # 1 bad of 8: 12.5 %, a round fraction
        fraction = d.summary.nearest_fraction
        assert fraction is not None
        assert fraction.text == "1/8"
        assert fraction.consistent


@pytest.mark.parametrize("fmt", WITH_CONNECTIONS)
def test_connection_reuse(tmp_path: Path, fmt: str) -> None:
    d = run(tmp_path, Scenario("reuse"), fmt)
    assert d.primary is not None
    assert d.primary.cause is Cause.REUSE
    assert isinstance(d.primary.details, ReuseDetails)
    assert d.primary.details.reused_failure_share > 0.9
    assert scores(d)[Cause.RACE] < 0.3


def test_without_connection_ids_the_report_asks_for_them(tmp_path: Path) -> None:
    d = run(tmp_path, Scenario("reuse"), "nginx")
    assert any("conn column" in step for step in d.next_steps)


def test_sigkill_names_the_grace_period(tmp_path: Path) -> None:
    d = run(tmp_path, Scenario("sigkill"))
    assert d.primary is not None
    assert d.primary.cause is Cause.RACE
    assert isinstance(d.primary.details, RaceDetails)
    assert d.primary.details.shutdown.sigkilled
    assert any("grace period" in e for e in d.primary.evidence)
    assert "terminationGracePeriodSeconds" in d.primary.fixes[0].text


def test_sigkill_states_one_grace_period_and_exit_times_with_their_resolution(
    tmp_path: Path,
) -> None:
    import re

    from svcdoctor.diagnose.race import _exit_estimate

    d = run(tmp_path, Scenario("sigkill"))
    assert d.primary is not None
    assert isinstance(d.primary.details, RaceDetails)
    grace = d.primary.details.recommended_grace_seconds
    text = " ".join([*d.primary.evidence, *(f.text for f in d.primary.fixes)])
    stated = {
        int(n)
        for n in re.findall(r"(?:set|at least) (?:terminationGracePeriodSeconds )?(\d+)", text)
    }
    assert stated == {grace}, text  # one number, the one in the JSON
    assert "±" in next(e for e in d.primary.evidence if "exited 137" in e)
    # a whole-second finishedAt stands for that second: its middle, not its start
    assert _exit_estimate(100.0) == 100.5
    assert _exit_estimate(100.25) == 100.25


@pytest.mark.parametrize("style", ["dmesg-T", "journal"])
def test_conntrack_drops_aligned_with_failures(tmp_path: Path, style: str) -> None:
    from tests.factory import kernel_lines

    bundle = generate(Scenario("infra"))
    folder = write_bundle(bundle, tmp_path / "bundle")
    (folder / "dmesg.txt").write_text("\n".join(kernel_lines(bundle, style)) + "\n")
    d = diagnose(read_evidence([str(folder)]))
    assert d.primary is not None
    assert d.primary.cause is Cause.INFRA
    assert d.primary.verdict is Verdict.LIKELY


def test_dmesg_since_boot_needs_and_takes_a_clock_offset(tmp_path: Path) -> None:
    from tests.factory import T0, kernel_lines

    bundle = generate(Scenario("infra"))
    folder = write_bundle(bundle, tmp_path / "bundle")
    (folder / "dmesg.txt").write_text("\n".join(kernel_lines(bundle, "dmesg")) + "\n")
    unaligned = diagnose(read_evidence([str(folder)]))
    infra = next(a for a in unaligned.causes if a.cause is Cause.INFRA)
    assert infra.verdict is Verdict.POSSIBLE
    assert any("seconds since boot" in e for e in infra.evidence)
    aligned = diagnose(read_evidence([str(folder)], {"dmesg.txt": T0 - 1000}))
    assert aligned.primary is not None
    assert aligned.primary.cause is Cause.INFRA
    assert aligned.primary.verdict is Verdict.LIKELY


def test_mixed_race_and_bad_backend_finds_both(tmp_path: Path) -> None:
    d = run(tmp_path, Scenario("race+backend"))
    likely = {a.cause for a in d.causes if a.verdict is Verdict.LIKELY}
    assert likely == {Cause.RACE, Cause.BACKEND}


@pytest.mark.parametrize("fmt", ALL_FORMATS)
@pytest.mark.parametrize("seed", [1, 2])
def test_healthy_traffic_with_random_errors_has_no_cause(
    tmp_path: Path, fmt: str, seed: int
) -> None:
    d = run(tmp_path, Scenario("healthy", seed=seed), fmt)
    assert d.primary is None, [(a.cause, a.score, a.evidence) for a in d.causes]
    assert d.next_steps[0].startswith("no cause")
