"""Garbage-collector thresholds for a compile job.

Schedules, programs and simulations create millions of small objects that
live for the whole job; at CPython's default thresholds the cyclic collector
keeps walking them.  ``fewer_collections`` raises the young and middle
thresholds for a job and gives the caller's back after it: the command
(``colc.cli``), the Python API (``colc.api``) and the test session
(``tests/conftest.py``) run under them.  Garbage is still collected, only
less often; nothing the job computes depends on when.

Example
-------
>>> import gc
>>> before = gc.get_threshold()
>>> with fewer_collections():
...     gc.get_threshold()[:2] == (GC_YOUNG_THRESHOLD, GC_MIDDLE_THRESHOLD)
True
>>> gc.get_threshold() == before
True
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

#: Allocations between young-generation garbage collections while colc runs
#: (CPython's default is 700).  At the default the collector keeps walking
#: the job's live objects: ``colc analyze`` on MI250 x2 spends a quarter of
#: its CPU there (17.1 s -> 13.2 s on 2 cores with this value; peak memory
#: within 15%); DGX A100 x16's rings2d reduce-scatter (8 chunks per shard)
#: is lowered and simulated at 1 GiB in 17.1 s instead of 22.8 (peak 409 MB
#: against 403).
GC_YOUNG_THRESHOLD = 20_000
#: Young collections between middle-generation ones (CPython's default is
#: 10).  The survivors of young collections are mostly the job's live
#: schedules and programs; walking them every 10 young collections cost
#: another 12-15% of ``colc analyze``'s CPU on MI250 x2 (20.5 s -> 17.6 s of
#: rows, peak memory unchanged at 210 MB).
GC_MIDDLE_THRESHOLD = 100


def raise_thresholds() -> tuple[int, ...]:
    """Set the job's thresholds (the oldest generation's is kept); return the
    previous ones."""
    old = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_THRESHOLD, GC_MIDDLE_THRESHOLD, *old[2:])
    return old


@contextlib.contextmanager
def fewer_collections() -> Iterator[None]:
    """``GC_YOUNG_THRESHOLD`` and ``GC_MIDDLE_THRESHOLD`` for the job, the
    caller's thresholds after it."""
    old = raise_thresholds()
    try:
        yield
    finally:
        gc.set_threshold(*old)
