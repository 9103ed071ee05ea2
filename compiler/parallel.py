"""Lower and simulate variants on several processes (issue 11).

Input: a ``Compiler`` whose schedules are built (``Compiler.estimate`` ran for
the variants), a list of (variant, sizes) tasks and a number of jobs.
Output: the same ``Compiler`` with the programs and the simulations of the
tasks in its caches, so the sequential ranking that follows only reads them.

Workers are forked from the compiling process, so they share its schedules
without copying or rebuilding them; each lowers its variant and simulates it
at the task's sizes and sends back the program and the results.  A variant no
lowering fits brings back its refusal, which the compiler keeps (it is the
same in every process); a task that fails otherwise (a stall) brings
nothing back: the sequential code meets the same error again and reports
it as before.  The result does not depend on the
number of jobs: the caches hold what the sequential code would compute, and
ranking stays sequential and deterministic (byte-identical files).

``jobs`` defaults to the CPUs this process may use (``COLC_JOBS`` or
``--jobs`` override it; 1 runs everything in this process).

Distributed (``--executor dask``, the optional ``dask`` extra): the same
tasks go to the workers of a dask.distributed cluster (the scheduler at
``--scheduler`` / ``COLC_DASK_SCHEDULER``, else a local cluster of one
process per CPU).  Workers cannot share memory with this process, so each
task carries the topology, the options and its (scattered) schedule and
rebuilds a ``Compiler`` around them; the results come back into the same
caches and the ranking stays sequential, so the bytes written are the same
as with the local executor.  ``jobs`` is then the cluster's worker threads.

Complexity: the tasks' work divided over ``jobs`` processes, plus pickling
each program once.
"""

from __future__ import annotations

import atexit
import dataclasses
import logging
import multiprocessing
import os
from collections.abc import Sequence

from colc.errors import ColcError, InfeasibleError
from colc.forked import default_jobs, fork_map

#: Executors of ``--executor``.
EXECUTORS = ("local", "dask")

def jobs_for(opts) -> int:
    """Parallel tasks the executor of ``opts`` runs at once.

    Local: ``opts.jobs`` or ``default_jobs()``; dask: the cluster's threads.
    """
    if opts.jobs < 0:  # the CLI refuses it; the Python API passes it through
        raise ColcError(f"jobs must be 0 (every CPU) or more, got {opts.jobs}")
    if opts.executor == "dask":
        client = dask_client(opts.scheduler)
        return max(1, sum(client.nthreads().values()))
    return opts.jobs or default_jobs()


_CLIENTS: dict[str, object] = {}


def dask_client(address: str = ""):
    """A dask.distributed client of the scheduler at ``address`` (cached per process).

    An empty address: ``COLC_DASK_SCHEDULER``, else a local cluster with one
    single-threaded worker process per CPU.

    Raises
    ------
    ColcError
        dask is not installed, the address is malformed, or the scheduler
        cannot be reached.
    """
    address = address or os.environ.get("COLC_DASK_SCHEDULER", "").strip()
    if address in _CLIENTS:
        return _CLIENTS[address]
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError:
        raise ColcError("--executor dask needs dask.distributed: "
                        "pip install 'colc[dask]'") from None
    try:
        if address:
            client = Client(address, timeout=10)
        else:
            cluster = LocalCluster(n_workers=default_jobs(), threads_per_worker=1,
                                   processes=True, dashboard_address=None,
                                   silence_logs=logging.ERROR)
            client = Client(cluster)
    except ValueError as err:  # a malformed address ("garbage", "tcp://host:port-less")
        if not address:
            raise
        raise ColcError(f"bad dask scheduler address {address!r}: {err}") from None
    except (OSError, TimeoutError) as err:
        raise ColcError(f"cannot reach the dask scheduler at {address or 'a local cluster'}: "
                        f"{err}") from None
    _CLIENTS[address] = client
    atexit.register(_close, client)
    return client


def _close(client) -> None:
    cluster = getattr(client, "cluster", None)
    client.close()
    if cluster is not None:
        cluster.close()


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
            for v, sizes in tasks if v not in compiler._programs and v not in compiler._refused]
    if compiler.opts.executor == "dask":
        return _store(compiler, todo, _run_dask(compiler, todo)) if todo else 0
    if jobs <= 1 or "fork" not in multiprocessing.get_all_start_methods():
        return 0
    if len(todo) == 1:  # one variant: lower it here, simulate its sizes at once
        return _sizes_at_once(compiler, *todo[0], jobs)
    if not todo:
        return 0
    from colc.progress import report

    report(f"lowering and simulating {len(todo)} variants on {min(jobs, len(todo))} "
           f"processes", compiler._work, 0)
    todo = _longest_first(compiler, todo)
    results = fork_map(lambda task: _lower_and_simulate(compiler, *task), todo, jobs)
    return _store(compiler, todo, results)


def _longest_first(compiler, todo: list) -> list:
    """``todo`` by the largest size each task simulates, its lowering's hang
    check included (``Compiler.hang_size``), largest first; ties keep their
    order.  A worker takes the next task when it is free, so the longest
    should start first: at 1024 ranks a simulation at 1 GiB takes minutes,
    and DGX A100 x128 allreduce's rails LL128 simulates 1 GiB in its hang
    check (its own sizes stop at 4 MiB), so listed after rails LL it ran
    alone on one worker for minutes after the other had finished.  (A
    proving compiler's hang check simulates nothing since the thirty-ninth
    session: there a task costs its own sizes.)  Only the order changes, not
    what is computed: the files are the same."""
    def largest(task) -> int:
        variant, sizes = task
        sched = compiler._schedules.get(compiler.schedule_key(variant))  # built ones only
        simulates = sched is not None and not compiler.opts.prove
        hang = compiler.hang_size(variant, sched.nchunks) if simulates else None
        return max((*sizes, hang or 0))

    return sorted(todo, key=largest, reverse=True)


def simulate_pairs(compiler, pairs: Sequence[tuple[object, int]], jobs: int) -> int:
    """Simulate lowered variants at sizes, ``(variant, size)`` pairs, on forked
    processes into ``compiler``'s cache (what ``compiler.simulate`` would store).

    Returns
    -------
    int
        Simulations brought back (0 with one job or one pair: the sequential
        code computes them).
    """
    todo = [(v, s) for v, s in pairs if (v, s) not in compiler._sims
            and v in compiler._programs]
    if jobs <= 1 or len(todo) <= 1 or "fork" not in multiprocessing.get_all_start_methods():
        return 0
    from colc.progress import report

    report(f"simulating {len(todo)} large sizes on {min(jobs, len(todo))} processes",
           compiler._work, 0)

    def one(pair):
        _quiet()
        try:
            return compiler.simulate(*pair)
        except ColcError:
            return None

    done = 0
    for pair, sim in zip(todo, fork_map(one, todo, jobs), strict=True):
        if sim is not None:
            compiler._sims[pair] = sim
            done += 1
    return done


def _sizes_at_once(compiler, variant, sizes: tuple[int, ...], jobs: int) -> int:
    """Lower ``variant`` in this process, then simulate it at ``sizes`` on forked processes."""
    try:
        compiler.program(variant)
    except ColcError:  # the sequential code meets it again and reports it
        return 0
    sizes = tuple(s for s in sizes if (variant, s) not in compiler._sims)
    if len(sizes) <= 1:
        return 1
    from colc.progress import report

    report(f"simulating {variant.label} at {len(sizes)} sizes on {min(jobs, len(sizes))} "
           f"processes", compiler._work, 0)

    def one(size: int):
        _quiet()
        try:
            return compiler.simulate(variant, size)
        except ColcError:
            return None

    for size, sim in zip(sizes, fork_map(one, sizes, jobs), strict=True):
        if sim is not None:
            compiler._sims[(variant, size)] = sim
    return 1


def _store(compiler, todo: list, results: list) -> int:
    """Put the workers' programs and simulations into the compiler's caches."""
    done = 0
    for (variant, _), result in zip(todo, results, strict=True):
        if result is None:
            continue
        if isinstance(result, InfeasibleError):  # refused once, as in one process
            compiler._refused[variant] = result
            continue
        program, strategy, sims, rebalanced = result
        compiler._programs[variant] = program
        compiler._strategy[variant] = strategy
        if rebalanced:  # the worker's plain lowering did not fit (pipeline.plain_first)
            compiler._rebalanced.add(variant)
        for size, sim in sims.items():
            compiler._sims[(variant, size)] = sim
        done += 1
    return done


def _run_dask(compiler, todo: list) -> list:
    """Run ``todo`` on the dask cluster; one result (or None) per task."""
    from colc.progress import report

    client = dask_client(compiler.opts.scheduler)
    report(f"lowering and simulating {len(todo)} variants on dask", compiler._work, 0)
    opts = dataclasses.replace(compiler.opts, executor="local", jobs=1)
    topo = client.scatter(compiler.topo, broadcast=True, hash=False)
    shared: dict = {}
    futures = []
    for variant, sizes in todo:
        key = compiler.schedule_key(variant)
        if key not in shared:
            shared[key] = client.scatter(compiler.schedule(*key), hash=False)
        futures.append(client.submit(_remote, topo, opts, key, shared[key], variant, sizes,
                                     pure=False))
    return client.gather(futures)


def _remote(topo, opts, key, sched, variant, sizes):
    """On a dask worker: lower one variant of a rebuilt compiler and simulate it."""
    from colc.compiler.pipeline import Compiler

    compiler = Compiler(topo, opts)
    compiler._schedules[key] = sched
    return _lower_and_simulate(compiler, variant, sizes)


def _quiet() -> None:
    """In a worker: only the parent draws the progress line."""
    from colc import progress

    progress._ACTIVE.clear()


def _lower_and_simulate(compiler, variant, sizes):
    """In a worker: ``(program, strategy, simulations by size, rebalanced)``
    (``rebalanced``: the program is the balanced one of a ``plain_first``
    variant, so the parent lowers its next strategy balanced too), the simulations
    being every one the worker ran of ``variant`` (the lowering's hang check
    simulates a size too: at 1024 ranks, minutes not to repeat); the
    ``InfeasibleError`` of a variant no lowering fits (the same in every
    process); None when the lowering fails otherwise.  A simulation that
    fails ends the worker's simulations, and those before it are kept (the
    parent meets the failure again at that size)."""
    _quiet()
    try:
        program = compiler.program(variant)
    except InfeasibleError as err:
        return InfeasibleError(str(err))
    except ColcError:
        return None
    for s in sizes:
        try:
            compiler.simulate(variant, s)
        except ColcError:
            break
    sims = {s: sim for (v, s), sim in compiler._sims.items() if v == variant}
    return (program, compiler._strategy.get(variant, 0), sims,
            variant in compiler._rebalanced)


__all__ = ["EXECUTORS", "dask_client", "default_jobs", "jobs_for", "prefetch"]
