"""Shared pytest configuration: the ``--update-golden`` switch and paths."""

from __future__ import annotations

import os

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-golden", action="store_true",
                     help="rewrite golden/ files instead of comparing with them")


@pytest.fixture
def update_golden(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-golden"))


def pytest_terminal_summary(terminalreporter) -> None:
    """Name the dependencies' versions on the last lines (issue 21: drift shows)."""
    from colc.versions import describe

    terminalreporter.write_line(f"colc tested with: {describe()}")
