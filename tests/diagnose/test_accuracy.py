"""Accuracy of ``diagnose`` on bundles in the shapes real tools write (issue 15, "Measure").

Two bundles per class and format (``tests/realshapes.py``, a generator independent of
``tests/factory.py`` and of the readers; ``SVCDOCTOR_ACCURACY_SEEDS`` sets how many), up to
20,000 requests each, about 30 s; the larger set is ``benchmarks/diagnose_accuracy.py``.
On failure the confusion matrix and every misdiagnosis are printed.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.realshapes import Result, confusion, per_class, plan, run_one

SEEDS = int(os.environ.get("SVCDOCTOR_ACCURACY_SEEDS", "2"))


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> list[Result]:
    root: Path = tmp_path_factory.mktemp("realshapes")
    return [
        run_one(spec, root / f"{i:03d}-{spec.cls}-{spec.fmt}")
        for i, spec in enumerate(plan(SEEDS, max_requests=20_000))
    ]


def _report(results: list[Result], wrong: list[Result]) -> str:
    return (
        "\n"
        + confusion(results)
        + "\n\nper class:\n"
        + per_class(results)
        + "\n\nmisdiagnoses:\n"
        + "\n".join(r.describe() for r in wrong)
    )


def test_never_crashes(results: list[Result]) -> None:
    crashed = [r for r in results if r.error]
    assert not crashed, _report(results, crashed)


def test_right_primary_cause_overall(results: list[Result]) -> None:
    wrong = [r for r in results if not r.right]
    share = 1 - len(wrong) / len(results)
    assert share >= 0.95, f"{100 * share:.1f} % right" + _report(results, wrong)


def test_no_cause_on_healthy_traffic(results: list[Result]) -> None:
    named = [r for r in results if not r.truth.causes and r.primary is not None]
    assert not named, _report(results, named)


def test_both_causes_found_in_mixed_bundles(results: list[Result]) -> None:
    mixed = [r for r in results if r.truth.spec.cls == "mixed"]
    missed = [r for r in mixed if not {"race", "backend"} <= r.found]
    assert not missed, _report(results, missed)


def test_right_upstream_in_multi_service_logs(results: list[Result]) -> None:
    multi = [r for r in results if r.truth.spec.cls == "multi"]
    wrong = [r for r in multi if not r.right]
    assert not wrong, _report(results, wrong)


@pytest.mark.parametrize(
    "cls", ["race", "backend", "backend-small", "reuse", "infra", "trap-aborts"]
)
def test_each_class_mostly_right(results: list[Result], cls: str) -> None:
    rows = [r for r in results if r.truth.spec.cls == cls]
    wrong = [r for r in rows if not r.right]
    assert len(wrong) <= len(rows) // 10, _report(results, wrong)
