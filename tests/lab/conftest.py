"""The lab tests assert that runs leave nothing behind; what earlier runs on this machine
left (a killed run's namespaces, lock files) is removed first, as ``lab clean`` would."""

from __future__ import annotations

import pytest

from svcdoctor.lab.cleanup import leftovers, remove


@pytest.fixture(scope="session", autouse=True)
def clean_machine() -> None:
    remove(leftovers())
