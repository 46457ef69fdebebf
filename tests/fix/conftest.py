"""Fixtures of the ``svcdoctor fix`` tests."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: takes more than a minute (the whole corpus)")
