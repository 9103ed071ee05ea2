"""Lower and simulate variants on several processes (issue 11).

Input: a ``Compiler`` whose schedules are built (``Compiler.estimate`` ran for
the variants), a list of (variant, sizes) tasks and a number of jobs.
Output: the same ``Compiler`` with the programs and the simulations of the
tasks in its caches, so the sequential ranking that follows only reads them.

Workers are forked from the compiling process, so they share its schedules
without copying or rebuilding them; each lowers its variant and simulates it
at the task's sizes and sends back the program and the results.  A task that
fails (a limit, a stall) brings nothing back: the sequential code meets the
same error again and reports it as before.  The result does not depend on the
number of jobs: the caches hold what the sequential code would compute, and
ranking stays sequential and deterministic (byte-identical files).

``jobs`` defaults to the CPUs this process may use (``COLC_JOBS`` or
``--jobs`` override it; 1 runs everything in this process).

Complexity: the tasks' work divided over ``jobs`` processes, plus pickling
each program once.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Sequence

from colc.errors import ColcError

#: The compiler the forked workers read (set just before the pool forks).
_SHARED: list = []


def default_jobs() -> int:
    """Worker processes to use: ``COLC_JOBS``, else the CPUs available to this process."""
    env = os.environ.get("COLC_JOBS", "").strip()
    if env.isdigit() and int(env) >= 1:
        return int(env)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def prefetch(compiler, tasks: Sequence[tuple[object, tuple[int, ...]]], jobs: int) -> int:
    """Compute the programs and simulations of ``tasks`` in parallel into ``compiler``.

    Parameters
    ----------
    compiler : colc.compiler.pipeline.Compiler
    tasks : sequence of (Variant, tuple of int)
        Variants and the sizes to simulate each at.
    jobs : int
        Processes to use; with 1 (or one task) nothing is done here.

    Returns
    -------
    int
        Tasks whose results were brought back.
    """
    todo = [(v, tuple(s for s in sizes if (v, s) not in compiler._sims))
            for v, sizes in tasks if v not in compiler._programs]
    if jobs <= 1 or len(todo) <= 1 or "fork" not in multiprocessing.get_all_start_methods():
        return 0
    from colc.progress import report

    ctx = multiprocessing.get_context("fork")
    report(f"lowering and simulating {len(todo)} variants on {min(jobs, len(todo))} "
           f"processes", compiler._work, 0)
    _SHARED[:] = [compiler]
    try:
        with ctx.Pool(min(jobs, len(todo))) as pool:
            results = pool.map(_work, todo, chunksize=1)
    finally:
        _SHARED.clear()
    done = 0
    for (variant, sizes), result in zip(todo, results, strict=True):
        if result is None:
            continue
        program, strategy, sims = result
        compiler._programs[variant] = program
        compiler._strategy[variant] = strategy
        for size, sim in zip(sizes, sims, strict=True):
            compiler._sims[(variant, size)] = sim
        done += 1
    return done


def _work(task):
    """In a worker: lower one variant and simulate it (None when it fails)."""
    from colc import progress

    progress._ACTIVE.clear()  # only the parent draws the progress line
    variant, sizes = task
    compiler = _SHARED[0]
    try:
        program = compiler.program(variant)
        sims = [compiler.simulate(variant, s) for s in sizes]
    except ColcError:
        return None
    return program, compiler._strategy.get(variant, 0), sims


__all__ = ["default_jobs", "prefetch"]
