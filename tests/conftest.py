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


def pytest_configure(config: pytest.Config) -> None:
    """Most tests drive the compiler's passes directly, not through the
    command or the API: run them at the collector thresholds those set
    (``colc.collector``), as users' jobs run."""
    from colc.collector import raise_thresholds

    raise_thresholds()


def pytest_terminal_summary(terminalreporter) -> None:
    """Name the dependencies' versions on the last lines (issue 21: drift shows)."""
    from colc.versions import describe

    terminalreporter.write_line(f"colc tested with: {describe()}")


@pytest.fixture(autouse=True)
def _schedules_built_under_patches_are_not_kept(request: pytest.FixtureRequest):
    """The compilers of one process share proved schedules (``pipeline._SHARED``).
    A test that patches a generator's constants (``monkeypatch.setattr`` or ``setitem``)
    must build afresh, and what it built must not reach later tests: the
    shared schedules are dropped at each patch and after such a test."""
    from colc.compiler import pipeline

    if "monkeypatch" not in request.fixturenames:
        yield
        return
    patcher = request.getfixturevalue("monkeypatch")
    for name in ("setattr", "setitem"):
        real = getattr(patcher, name)

        def patch_and_forget(*args, _real=real, **kwargs):
            pipeline.clear_shared_schedules()
            return _real(*args, **kwargs)

        setattr(patcher, name, patch_and_forget)
    yield
    pipeline.clear_shared_schedules()
