"""Run independent pieces of one job on forked processes (issue 11).

``fork_map(fn, items, jobs)`` is ``[fn(x) for x in items]`` computed by up to
``jobs`` processes forked from this one, so ``fn`` and its closure are shared
without pickling (only the results travel back).  The results come back in
the order of ``items``, so callers stay deterministic whatever the job count.
With one job, one item, no ``fork`` start method, or inside a pool's worker
(which may not start processes), everything runs here.

``default_jobs()`` is the process count colc uses unless told otherwise:
``COLC_JOBS``, else the CPUs this process may run on.

Example
-------
>>> fork_map(lambda x: x * x, [1, 2, 3], jobs=2)
[1, 4, 9]
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")

#: The function the forked workers call (set just before the pool forks).
_FN: list = []


def default_jobs() -> int:
    """Worker processes to use: ``COLC_JOBS``, else the CPUs available to this process."""
    env = os.environ.get("COLC_JOBS", "").strip()
    if env.isascii() and env.isdecimal() and int(env) >= 1:
        return int(env)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def fork_map(fn: Callable[[T], R], items: Sequence[T], jobs: int | None = None,
             done: Callable[[int], None] | None = None) -> list[R]:
    """``[fn(x) for x in items]`` on up to ``jobs`` forked processes, in order.

    Parameters
    ----------
    fn : callable
        Any callable (closures included: the workers are forks of this process).
        Its results must pickle.
    items : sequence
        The inputs (they must pickle); each runs in one worker.
    jobs : int, optional
        Processes (default ``default_jobs()``).
    done : callable, optional
        Called with the count of results in hand as they come back in order
        (for a progress line; the workers draw none).

    Returns
    -------
    list
        One result per item, in the order of ``items``.
    """
    jobs = default_jobs() if jobs is None else jobs
    tell = done or (lambda _count: None)
    out: list[R] = []
    if (jobs <= 1 or len(items) <= 1 or "fork" not in multiprocessing.get_all_start_methods()
            or multiprocessing.current_process().daemon):  # a pool's worker cannot fork one
        for x in items:
            out.append(fn(x))
            tell(len(out))
        return out
    _FN[:] = [fn]
    try:
        with multiprocessing.get_context("fork").Pool(min(jobs, len(items)),
                                                      initializer=_quiet) as pool:
            for result in pool.imap(_call, list(items), chunksize=1):
                out.append(result)
                tell(len(out))
            return out
    finally:
        _FN.clear()


def _call(item):
    return _FN[0](item)


def _quiet() -> None:
    """In a worker: only the parent draws the progress line, and only the
    parent answers Ctrl-C (the terminal sends it to every process of the
    group; the parent's pool then ends the workers, which would otherwise
    each print a traceback)."""
    import signal

    from colc import progress

    progress._ACTIVE.clear()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
