"""The garbage collector's thresholds for a job (``colc.collector``)."""

from __future__ import annotations

import gc

import pytest

import colc
from colc.collector import GC_MIDDLE_THRESHOLD, GC_YOUNG_THRESHOLD

RING = "family: ring\nranks: 4\nbandwidth: 10\n"


@pytest.mark.parametrize("entry,module,name", [
    ("compile", "colc.compiler.pipeline", "compile_topology"),
    ("portfolio", "colc.compiler.portfolio", "build_portfolio"),
])
def test_the_api_runs_at_the_commands_thresholds_and_gives_the_callers_back(
        monkeypatch, entry, module, name) -> None:
    """``colc.compile`` and ``colc.portfolio`` build under the command's
    thresholds and restore the caller's after, even CPython's defaults."""
    import importlib

    target = importlib.import_module(module)
    real, seen = getattr(target, name), []

    def spy(*args, **kwargs):
        seen.append(gc.get_threshold())
        return real(*args, **kwargs)

    monkeypatch.setattr(target, name, spy)
    kwargs = {"sizes": (1 << 20,)} if entry == "portfolio" else {}
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    try:
        made = getattr(colc, entry)(colc.load_topology(RING), collective="allgather",
                                    algorithm="ring", **kwargs)
        after = gc.get_threshold()
    finally:
        gc.set_threshold(*before)
    assert seen == [(GC_YOUNG_THRESHOLD, GC_MIDDLE_THRESHOLD, 10)]
    assert after == (700, 10, 10)
    assert made.verify().ok if entry == "compile" else made.windows
