"""Analysis report: bounds and schedule figures of a topology (``colc analyze``).

Input: a validated ``Topology``.  Output: a JSON-ready dict
``{"topology", "ranks", "machine", "sizes", "bounds": {coll: {"algbw": GB/s,
"method": ..., "latency_us": ..., "by_size": [...]}}, "schedules":
[{"algorithm", "collective", "steps", "algbw", "simulated": [...], ...}]}``;
with budgets, ``"budgets": {coll: [rows of budget_rows]}`` and, where 0
(the GPU's limit) was asked for, ``"gpu_limit"``, the budget it stands for.

``algbw`` of a schedule is the bandwidth-only figure (nccl-tests convention:
collective size over the bandwidth-only time); ``simulated`` lists, for
each size of ``sizes``, the calibrated simulator's time (us), algbw and busbw
of the best file colc writes with that algorithm (``colc.compiler.pipeline``
tries its chunkings and keeps the best over the sizes), its variant, and
whether it fits the runtime's limits (``"emittable": false`` with the reason
otherwise).  Bounds: the exact cut bound and the allreduce LP bound when the
tree analysis is available (``colc.compiler.exact_bounds``); otherwise the
per-rank ingress/egress bound; ``latency_us`` is the hop bound (the fastest
protocol's base latency plus its per-hop latency along the longest shortest
path between two ranks, network hops at the network's), and ``by_size`` the
resulting lower bound on time and upper bound on algbw at each size.

In-network multicast (seed 001 section 4.5.6): when the topology has a
multicast switch, the ``trees`` entries of allgather and reducescatter get
``"multicast": {"switches", "traffic_before", "traffic_after",
"gpu_sends_before", "gpu_sends_after", "gpu_recvs_before",
"gpu_recvs_after", "runtime"}`` from ``compiler/trees/apply_multicast.py`` on the
same packing ``tree_schedule`` makes.  Figures are GB moved per GB of
collective size (summed over links, over hops leaving a rank, over hops
entering a rank); algbw is unchanged by multicast.  Allgather saves GPU
sends (switches replicate), reduce-scatter saves GPU receives/reductions
(switches aggregate).  ``runtime`` says that the written XML files do not
use it: MSCCL XML has no switch multicast primitive, so they send unicast.
"""

from __future__ import annotations

import dataclasses
from fractions import Fraction

from colc.compiler.algorithms import THREAD_ALGORITHMS, load_optional_algorithms, own_chunks
from colc.compiler.estimate_bandwidth import schedule_algbw, schedule_steps
from colc.compiler.pipeline import (
    ALGORITHMS,
    DEFAULT_THREADBLOCKS,
    CompileOptions,
    rank_limit_problem,
)
from colc.errors import ColcError, InfeasibleError
from colc.forked import fork_map
from colc.progress import report as progress_report
from colc.ir.chunks import Schedule
from colc.ir.core import Collective, Protocol
from colc.ir.runtime_model import model_for, model_named
from colc.ir.topology import Topology
from colc.ir.trees import TreePacking

#: ``runtime`` note of the ``multicast`` entry.
MULTICAST_RUNTIME = ("analysis only: MSCCL XML has no switch multicast/aggregation "
                     "primitive, compiled files send unicast")

COLLECTIVES = (Collective.ALLGATHER, Collective.REDUCESCATTER, Collective.ALLREDUCE,
               Collective.ALLTOALL)
#: Collectives whose schedule rows ``colc analyze`` builds unless
#: ``--collective`` says otherwise (the all-to-all bound is always given; its
#: rows on request, keeping the default within seconds).
DEFAULT_COLLECTIVES = COLLECTIVES[:3]


def per_rank_bounds(topo: Topology) -> dict[str, Fraction]:
    """Simple bounds: every rank must receive (send) (N-1)/N of the data.

    Examples
    --------
    A 4-rank bidirectional ring at 10 GB/s: each rank has 20 GB/s in, so
    allgather algbw <= 20 * 4/3.
    """
    n = topo.num_ranks
    if n < 2:
        return {c.value: Fraction(0) for c in COLLECTIVES}
    factor = Fraction(n, n - 1)
    ingress = min(topo.ingress(r) for r in topo.ranks)
    egress = min(topo.egress(r) for r in topo.ranks)
    return {"allgather": ingress * factor, "reducescatter": egress * factor,
            "allreduce": min(ingress, egress) * factor / 2,
            "alltoall": min(ingress, egress) * factor}


def _bounds(topo: Topology) -> dict[str, dict]:
    """Exact bounds (ForestColl cut bound, B.7 LP) when they apply, else per-rank."""
    simple = per_rank_bounds(topo)
    out = {c: {"algbw": _num(v), "method": "per-rank ingress/egress"} for c, v in simple.items()}
    if topo.num_ranks < 2:
        return out
    from colc.compiler.alltoall.mcf import alltoall_bound

    try:
        a2a = alltoall_bound(topo)
    except ColcError as err:
        a2a = {"algbw": 0.0, "method": f"not computed: {err}"}
    out["alltoall"] = {k: (_fig(v) if k == "algbw" else v) for k, v in a2a.items()}
    if topo.num_ranks > EXACT_BOUND_UP_TO:
        for b in out.values():
            b["method"] += f" (exact cut bound not computed above {EXACT_BOUND_UP_TO} ranks)"
        return out
    try:
        from colc.compiler.trees.generate_trees import exact_bounds

        exact = exact_bounds(topo)
    except (ImportError, ColcError):
        return out
    for coll in ("allgather", "reducescatter"):
        out[coll] = {"algbw": _num(exact[coll]), "method": "exact cut bound"}
    lp = exact.get("allreduce_lp")
    out["allreduce"] = {"algbw": _num(lp if lp is not None else exact["allreduce_trees"]),
                        "method": "allreduce LP bound" if lp is not None
                        else "reducescatter + allgather cut bounds",
                        "trees": _num(exact["allreduce_trees"])}
    return out


def _num(x: Fraction) -> float:
    return _fig(float(x))


def _gbs(v: float) -> str:
    """A figure for the text tables (``format_gbs``, 2 decimals)."""
    from colc.sizes import format_gbs

    return format_gbs(v, 2)


def _fig(v: float) -> float:
    """A GB/s figure for the tables and JSON: 3 decimals, or 3 significant
    digits below 0.1 (a link of 1e-4 GB/s rounded its bound to 0, which
    then read as no bandwidth limit at all).

    >>> _fig(213.33333), _fig(0.034812), _fig(0.00013333)
    (213.333, 0.0348, 0.000133)
    """
    from colc.sizes import format_gbs

    return float(format_gbs(v, 3))


#: Chunks per root past which a row without simulation shows the representative
#: file's schedule, not the generator's own: rated trees on MI250 x2 pack at
#: 69,041 chunks per root, millions of ops (``--no-simulate`` ran past 3
#: minutes and 17 GB; the default row, at 16 chunks per root, takes seconds).
OWN_CHUNKS_UP_TO = 256
#: Sizes the report simulates by default (bytes).
SIZES = (1 << 20, 16 << 20, 128 << 20, 1 << 30)
#: Above this many ranks the report skips simulation unless asked.
SIMULATE_UP_TO = 64
#: Above this many ranks, without ``--algorithm``, schedules are estimated
#: from their plans (rings, BFB linear programs, the cut bound), not built.
BUILD_UP_TO = 128
#: Above this many ranks the exact cut bound is not computed (per-rank bound).
EXACT_BOUND_UP_TO = 1024
#: Above this many ranks the hop bound takes its longest path from a sample
#: of sources (still a lower bound; exact on vertex-transitive fabrics).
HOP_SOURCES = 64


class _Estimator:
    """Figures of a schedule from its plan, without building it (large topologies).

    ring: the planned rings' bandwidth-only algbw (``plan_rings``), hops
    (N-1) times the longest relay per ring step (twice for allreduce);
    bfb: ``bfb_report`` (the linear programs only); trees: the exact cut
    bound, which an optimal packing reaches (seed 001 ch. 4), hops not
    known without packing; dimrings: ``dimrings_estimate`` (its plan's link
    loads, exact); hier: not estimated.
    """

    def __init__(self, topo: Topology, bounds: dict) -> None:
        self.topo = topo
        self.bounds = bounds
        self._rings = None

    def row(self, name: str, coll: Collective) -> dict:
        entry = {"algorithm": name, "collective": coll.value, "estimated": True}
        try:
            steps, algbw = getattr(self, f"_{name}", self._other)(coll)
        except ColcError as err:
            return {**entry, "error": str(err)}
        return {**entry, "steps": steps, "algbw": _num(algbw)}

    def _ring(self, coll: Collective) -> tuple[int, Fraction]:
        from colc.compiler.rings.ring import _ring_algbw, plan_rings
        from colc.ir.routing import Router

        n = self.topo.num_ranks
        if self._rings is None:
            router = Router(self.topo)
            rings = plan_rings(self.topo, router)
            self._rings = (rings, _ring_algbw(rings, router, n))
        rings, algbw = self._rings
        if coll is Collective.REDUCESCATTER and not _symmetric(self.topo):
            raise ColcError(f"not estimated above {BUILD_UP_TO} ranks on an asymmetric "
                            f"fabric; use --algorithm ring")
        relay = max(len(h) - 1 for r in rings for h in r.hops)
        if coll is Collective.ALLREDUCE:
            return 2 * (n - 1) * relay, algbw / 2
        return (n - 1) * relay, algbw

    def _bfb(self, coll: Collective) -> tuple[int, Fraction]:
        from colc.compiler.bfb.schedule import bfb_report

        return bfb_report(self.topo, coll)

    def _trees(self, coll: Collective) -> tuple[int | None, Fraction]:
        b = self.bounds[coll.value]
        if not self.bounds["allgather"]["method"].startswith("exact"):
            raise ColcError(f"not estimated above {EXACT_BOUND_UP_TO} ranks (no exact cut "
                            f"bound); use --algorithm trees")
        return None, Fraction(b.get("trees", b["algbw"]))

    def _dimrings(self, coll: Collective) -> tuple[int, Fraction]:
        from colc.compiler.rings.dimrings import dimrings_estimate

        return dimrings_estimate(self.topo, coll)

    def _mcf(self, coll: Collective) -> tuple[int | None, Fraction]:
        b = self.bounds["alltoall"]
        if not b["method"].startswith("all-to-all LP"):
            raise ColcError(f"not estimated: {b['method']}")
        return None, Fraction(b["algbw"]).limit_denominator(1000)

    def _hier(self, coll: Collective) -> tuple[int, Fraction]:
        from colc.ir.topology import boxes

        if len(boxes(self.topo)) < 2:
            raise ColcError("hierarchical trees need at least two boxes; use trees")
        return self._other(coll)

    def _other(self, coll: Collective) -> tuple[int, Fraction]:
        raise ColcError(f"not estimated above {BUILD_UP_TO} ranks; use --algorithm")


def _symmetric(topo: Topology) -> bool:
    cap = topo.capacity()
    return all(cap.get((v, u)) == c for (u, v), c in cap.items())


def analyze_topology(topo: Topology, *, algorithms: tuple[str, ...] = (),
                     collectives: tuple[Collective, ...] = (), sizes: tuple[int, ...] = SIZES,
                     simulate: bool | None = None, machine: str | None = None,
                     max_threadblocks: int = DEFAULT_THREADBLOCKS,
                     budgets: tuple[int, ...] = (), search: bool = False,
                     jobs: int | None = None) -> dict:
    """Build the analysis report (see module docstring).

    Parameters
    ----------
    topo : Topology
    algorithms, collectives : tuple
        Restrict the rows (empty: all).
    sizes : tuple of int
        Message sizes of the simulated columns.
    simulate : bool or None
        None: simulate when the topology has at most ``SIMULATE_UP_TO`` ranks.
    machine : str or None
        Cost-model preset (None: from the topology).
    max_threadblocks : int
        Threadblocks per GPU the simulated files may take (0: the GPU's limit).
    budgets : tuple of int
        Threadblock budgets (0: the GPU's limit) at which to report, per
        size, the file the portfolio within the budget serves it with, for
        each collective (``budget_rows``): the trade-off between SMs held
        and speed.
    search : bool
        Simulate every chunking and protocol the portfolio tries, per
        algorithm (minutes); default: one representative lowering each.
    jobs : int or None
        Processes the rows are built on (None: ``default_jobs()``).
    """
    load_optional_algorithms()
    for name in algorithms:
        if name in THREAD_ALGORITHMS:
            raise ColcError(f"--algorithm {name}: writes oneCCL threads, which colc analyze "
                            f"does not simulate; `colc TOPO --collective alltoall --algorithm "
                            f"{name} -o FILE.oneccl.xml` prints its bound (the routes' busiest "
                            f"link)")
        if name not in ALGORITHMS:
            raise ColcError(f"--algorithm: unknown algorithm '{name}'; choose from "
                            f"{', '.join(sorted(ALGORITHMS))}")
    names = algorithms or tuple(sorted(ALGORITHMS))
    colls = collectives or DEFAULT_COLLECTIVES
    shown = {c.value for c in colls} | {Collective.ALLTOALL.value}
    estimate = not algorithms and topo.num_ranks > BUILD_UP_TO
    if simulate is None:
        simulate = topo.num_ranks <= SIMULATE_UP_TO
    simulate = simulate and not estimate
    model = model_named(machine) if machine else model_for(topo)
    problem = rank_limit_problem(topo.num_ranks)
    from colc.compiler.algorithms import builds
    from colc.compiler.choose_variants import scale_skip
    from colc.compiler.runtime_limits import threadblock_budget

    budget = threadblock_budget(max_threadblocks, model)

    tasks = [(name, coll) for name in names for coll in colls
             if algorithms or builds(name, coll)]
    if estimate or problem is not None:  # not built: an estimate, or no file anyway
        bounds = _timed_bounds(topo, model, sizes, shown)
        estimator = _Estimator(topo, bounds)
        schedules = []
        for name, coll in tasks:
            row = estimator.row(name, coll)
            if problem is not None and "error" not in row:
                row.update(emittable=False, why=problem)
            schedules.append(row)
    else:
        def one(task: tuple[str, Collective] | None) -> dict:
            if task is None:
                return _timed_bounds(topo, model, sizes, shown)
            skip = None if algorithms else scale_skip(topo, task[0], budget, task[1])
            if skip is not None:  # what auto leaves out (--algorithm NAME builds it)
                return {"algorithm": task[0], "collective": task[1].value, "error": skip}
            return _row(topo, *task, sizes=sizes, machine=machine,
                        max_threadblocks=max_threadblocks, simulate=simulate, search=search)

        units = _units(tasks, bundle=not search)
        def unit_rows(unit: tuple[int, ...] | None):
            return one(None) if unit is None else [one(tasks[i]) for i in unit]

        def row_done(count: int) -> None:
            what = "searching" if search else "analysing"
            progress_report(f"{what}: the bounds and {len(tasks)} rows", count, len(units) + 1)

        done = fork_map(unit_rows, [None, *units], jobs, row_done)
        bounds = done[0]
        schedules = [None] * len(tasks)
        for unit, rows in zip(units, done[1:], strict=True):
            for i, row in zip(unit, rows, strict=True):
                schedules[i] = row
    report = {"topology": topo.name, "ranks": topo.num_ranks, "machine": model.name,
              "sizes": list(sizes), "simulated": simulate, "search": bool(simulate and search),
              "estimated": estimate,
              "bounds": {c: b for c, b in bounds.items() if c in shown},
              "schedules": schedules}
    if budgets:
        report["budgets"] = {c.value: budget_rows(topo, c, sizes, budgets, machine,
                                                  algorithms, jobs or 0) for c in colls}
        if 0 in budgets:  # the row of the GPU's limit, which --budgets 0 asked for
            report["gpu_limit"] = threadblock_budget(0, model)
    return report


#: Rough relative cost of one row per algorithm (lowering and simulating its
#: representative file on two to four boxes; rails is skipped on MI250 x2
#: and takes 1-2 s a row on DGX A100 x4); rows run costliest first so that the
#: processes end together (the cheap ring rows fill the gaps at the end).
_ROW_COST = {"trees": 6, "trees-rated": 6, "nccl-rings": 4, "rings2d": 3, "rails": 3, "hier": 2, "ring": 1}


#: Algorithms whose rows share a per-topology stage their generator caches
#: in its process (the tree packings of ``trees`` and ``hier``, NCCL's ring
#: search): their rows run one after another in one process.  MI250 x2: the
#: three trees rows take 5.2 s together against 6.1 s apart, hier 1.2 against 1.6,
#: nccl-rings 5.7 against 6.1.
SHARED_STAGE = frozenset({"trees", "trees-rated", "hier", "nccl-rings"})


def _row_weight(name: str, coll: Collective) -> float:
    """Rough cost of one row (an allreduce costs more than its halves)."""
    return _ROW_COST.get(name, 0) * (1.5 if coll is Collective.ALLREDUCE else 1.0)


def _units(tasks: list[tuple[str, Collective]], bundle: bool = True) -> list[tuple[int, ...]]:
    """Task indices grouped into the units the processes take: with
    ``bundle``, the rows of an algorithm in ``SHARED_STAGE`` together (the
    default analysis; a search's rows are minutes each and balance better
    apart), every other row alone; costliest unit first (the LPT rule, so
    that the processes end together and the cheap ring rows fill the gaps
    at the end)."""
    groups: dict[object, list[int]] = {}
    for i, (name, coll) in enumerate(tasks):
        key = name if bundle and name in SHARED_STAGE else (name, coll)
        groups.setdefault(key, []).append(i)
    units = [tuple(g) for g in groups.values()]

    def rank(unit: tuple[int, ...]) -> tuple[float, str, str]:
        name, coll = tasks[unit[0]]
        return (-sum(_row_weight(*tasks[i]) for i in unit), name, coll.value)

    return sorted(units, key=rank)


def _row(topo: Topology, name: str, coll: Collective, *, sizes: tuple[int, ...],
         machine: str | None, max_threadblocks: int, simulate: bool, search: bool) -> dict:
    """One schedules row: a schedule's figures and, when ``simulate``, its file's
    (``_simulated``).  The schedule is the representative file's by default,
    the generator's own (its own chunking) with ``search`` or without
    ``simulate``, but the representative file's where the own chunking needs
    more than ``OWN_CHUNKS_UP_TO`` chunks per root."""
    try:
        own = own_chunks(name, topo, coll)
        if simulate and not search:
            figures = _simulated(topo, name, coll, sizes, machine, max_threadblocks)
            sched = figures.pop("schedule")
        elif own is not None and own > OWN_CHUNKS_UP_TO:
            sched = _representative_schedule(topo, name, coll, machine, max_threadblocks)
            figures = (_simulated(topo, name, coll, sizes, machine, max_threadblocks, True)
                       if simulate else {})
        else:
            sched = ALGORITHMS[name](topo, coll, None)
            figures = (_simulated(topo, name, coll, sizes, machine, max_threadblocks, True)
                       if simulate else {})
    except ColcError as err:
        return {"algorithm": name, "collective": coll.value, "error": str(err)}
    entry = {"algorithm": name, "collective": coll.value,
             "steps": _steps(name, topo, coll, sched),
             "algbw": _num(schedule_algbw(sched, topo))}
    if name in ("trees", "trees-rated"):
        entry["k"] = sched.chunks_per_rank
    if name == "trees":
        multicast = _multicast(topo, coll, {})
        if multicast is not None:
            entry["multicast"] = multicast
    return {**entry, **figures}


def budget_rows(topo: Topology, coll: Collective, sizes: tuple[int, ...],
                budgets: tuple[int, ...], machine: str | None = None,
                algorithms: tuple[str, ...] = (), jobs: int = 0) -> list[dict]:
    """The file the portfolio within each budget serves each of ``sizes`` with.

    Budgets are taken in increasing order (0, the GPU's limit, last).  Each
    builds the portfolio ``colc TOPO --max-threadblocks B -o DIR/`` would
    write, ranked at ``sizes`` (``algorithms``, from ``--algorithm``, limits
    it to those algorithms', one portfolio each; none: ``auto``), and a
    size's figure is the file the runtime would select there, simulated.  A
    file within a smaller budget also fits a larger one, so a figure is at
    least the smaller budgets' at that size (their file, where faster).

    Returns
    -------
    list of dict
        ``{"budget", "variant", "threadblocks", "algbw": [per size],
        "files": [per size], "file_threadblocks": [per size]}``: ``files``
        and ``file_threadblocks`` the file each size's figure comes from
        (None, and the figure None, where no file serves the size: past the
        last window's end NCCL runs), ``variant`` the one at the largest
        size and ``threadblocks`` the most the row's files take; or
        ``{"budget", "error"}`` where nothing fits.
    """
    from colc.compiler.pipeline import threadblock_budget

    model = model_named(machine) if machine else model_for(topo)
    limits = sorted({threadblock_budget(b, model, "--budgets") for b in budgets})
    rows: list[dict] = []
    best: dict | None = None
    for limit in limits:
        found, errors = _budget_files(topo, sizes, CompileOptions(
            collective=coll, machine=machine, max_threadblocks=limit, jobs=jobs), algorithms,
            model)
        if not found:
            rows.append({"budget": limit, "error": "; ".join(dict.fromkeys(errors))})
            continue
        row = {"budget": limit, "algbw": [], "files": [], "file_threadblocks": []}
        for i in range(len(sizes)):
            label, tbs, figure = _best_at(found, i)
            if best is not None and (best["algbw"][i] or 0) > (figure or 0):
                # a smaller budget's file is faster at this size, and fits this one
                label, tbs, figure = best["files"][i], best["file_threadblocks"][i], \
                    best["algbw"][i]
            row["algbw"].append(figure)
            row["files"].append(label)
            row["file_threadblocks"].append(tbs)
        largest = max(range(len(sizes)), key=lambda i: sizes[i])
        row["variant"] = row["files"][largest]
        row["threadblocks"] = max((t for t in row["file_threadblocks"] if t is not None),
                                  default=None)
        rows.append(row)
        best = row
    return rows


def _best_at(found: list[tuple[str, int, list[float | None]]], i: int
             ) -> tuple[str | None, int | None, float | None]:
    """The fastest of ``found``'s files at the ``i``-th size (the first of
    equals), or Nones where none serves it (past the last window's end: NCCL
    runs there)."""
    serving = [f for f in found if f[2][i] is not None]
    if not serving:
        return None, None, None
    label, tbs, figures = max(serving, key=lambda f: f[2][i])
    return label, tbs, figures[i]


def _budget_files(topo: Topology, sizes: tuple[int, ...], opts: CompileOptions,
                  algorithms: tuple[str, ...], model
                  ) -> tuple[list[tuple[str, int, list[float | None]]], list[str]]:
    """The files of the portfolio within ``opts`` ranked at ``sizes`` (one
    per algorithm of ``algorithms``; none: ``auto``), each as ``(label,
    threadblocks, algbw per size)``, None at the sizes it does not serve;
    and why there is none."""
    from colc.compiler.portfolio import build_portfolio
    from colc.ir.simulate import simulate

    found: list[tuple[str, int, list[float | None]]] = []
    errors: list[str] = []
    for name in algorithms or ("auto",):
        try:
            built = build_portfolio(topo, dataclasses.replace(opts, algorithm=name), sizes)
        except ColcError as err:
            errors.append(" ".join(str(err).split()))
            continue
        for w in built.windows:
            at = {r.nbytes: r.algbw for r in w.results}
            figures = [_fig(at[x] if x in at else simulate(w.program, topo, model, x).algbw)
                       if w.lo <= x and (w.hi == 0 or x <= w.hi) else None for x in sizes]
            found.append((w.variant.label, w.program.max_threadblocks, figures))
    return found, errors


def _harmonic(figures: list[float]) -> float:
    return len(figures) / sum(1 / max(x, 1e-12) for x in figures) if figures else 0.0


def _representative_schedule(topo: Topology, name: str, coll: Collective,
                             machine: str | None, max_threadblocks: int) -> Schedule:
    """The schedule of ``name``'s first variant (the representative file's),
    built without lowering or proofs."""
    from colc.compiler.pipeline import CompileOptions, Compiler, variants

    compiler = Compiler(topo, CompileOptions(algorithm=name, collective=coll, machine=machine,
                                             max_threadblocks=max_threadblocks, prove=False))
    found = variants(compiler)
    if not found:
        raise ColcError("no variant applies")
    return compiler.variant_schedule(found[0])


def _simulated(topo: Topology, name: str, coll: Collective, sizes: tuple[int, ...],
               machine: str | None, max_threadblocks: int, search: bool = False) -> dict:
    """Simulated figures of one algorithm at ``sizes`` (or why it has no file).

    Default (``search`` False): one representative lowering, the first of the
    algorithm's variants (``variants``: Simple, its first chunking), simulated at each size under the protocol ``estimate_time``
    ranks fastest there.  With ``search``: every chunking and protocol the
    portfolio tries (``portfolio.CHUNKINGS``), each ranked at the sizes its
    protocol serves (``PROTOCOL_SIZES``), and at each size the fastest.
    """
    from colc.compiler.pipeline import CompileOptions, Compiler

    compiler = Compiler(topo, CompileOptions(algorithm=name, collective=coll,
                                             rank_sizes=sizes, machine=machine,
                                             max_threadblocks=max_threadblocks,
                                             prove=False))
    return (_searched if search else _representative)(compiler, sizes)


def _representative(compiler, sizes: tuple[int, ...]) -> dict:
    """The default of ``_simulated``: one lowering (the first variant whose
    lowering fits, of the first variant's protocol), a protocol per size
    (the result's ``schedule`` is the lowered ``Schedule``, for the caller)."""
    from colc.compiler.estimate_time import estimate_time
    from colc.compiler.pipeline import variants

    found = variants(compiler)
    if not found:
        raise ColcError("no variant applies")
    program, first = None, None
    for v in _candidates(compiler, found):  # the first that fits
        compiler.variant_schedule(v)  # a generator that does not apply says so to the caller
        try:
            program = compiler.program(v)
            break
        except ColcError as err:
            first = first or (err, v)
            if not isinstance(err, InfeasibleError):  # the others do not apply either
                break  # (InfeasibleError: rails all-to-all's first chunking, 31 at 16)
    if program is None:
        err, v = first
        return {"emittable": False, "schedule": compiler.variant_schedule(v),
                "why": f"{err} ({v.label} and its protocol's other chunkings; --search tries "
                       f"the others)"}
    sched = compiler.variant_schedule(v)
    est = estimate_time(sched, compiler.topo, compiler.model, program.max_threadblocks)
    rows, used = [], []
    for size in sizes:
        proto = est.fastest(size)
        r = _simulate_as(compiler, v, proto, size)
        if r is None:  # hangs at that protocol's FIFO depth: the lowered protocol
            proto, r = v.protocol, compiler.simulate(v, size)
        used.append(proto.value)
        rows.append(_sim_row(size, r, dataclasses.replace(v, protocol=proto).label))
    label = v.label.rsplit("/", 1)[0] + "/" + "+".join(dict.fromkeys(used))
    return {"emittable": True, "variant": label, "nchunks": program.nchunks,
            "threadblocks": program.max_threadblocks, "search": False, "simulated": rows,
            "schedule": sched}


def _candidates(compiler, found: list) -> list:
    """The variants of ``found``'s first protocol in the order ``_representative``
    tries them: as listed, but ``ring``'s copies most first (its chunkings
    are copies of one ring: one ring alone, on 2 threadblocks, is not what
    ``--algorithm ring`` writes within the budget; one DGX A100 box's
    allgather at 1 GiB, 22.0 GB/s against 16 copies' 263.5)."""
    same = [x for x in found if x.protocol is found[0].protocol]
    if compiler.opts.algorithm == "ring":
        same.sort(key=lambda x: -(x.chunks or 1))
    return same


def _simulate_as(compiler, v, proto, size: int):
    """``v``'s program simulated under ``proto`` (None: it hangs there)."""
    if proto is v.protocol:
        return compiler.simulate(v, size)
    from colc.ir.simulate import SimulationError

    try:
        return compiler.simulate_as(v, proto, size)
    except SimulationError:
        return None


def _searched(compiler, sizes: tuple[int, ...]) -> dict:
    """The ``search`` of ``_simulated``: the portfolio's variants, best per size."""
    from colc.compiler.pipeline import variants
    from colc.compiler.portfolio import CHUNKINGS, PROTOCOL_SIZES

    best: dict[int, tuple] = {}
    led: dict[int, tuple] = {}  # size -> (algbw, variant) of the best LL128 file
    why = ""
    for proto in compiler.model.protocols:
        lo, hi = PROTOCOL_SIZES[proto]
        served = [s for s in sizes if lo <= s <= hi]
        if not served:
            continue
        for v in variants(compiler, (proto,), CHUNKINGS[proto]):
            try:
                program = compiler.program(v)
                results = [(s, compiler.simulate(v, s)) for s in served]
            except ColcError as err:
                why = f"{v.label}: {err}"
                continue
            for s, r in results:
                if s not in best or _beats(r, best[s][0]):
                    best[s] = (r, v, program)
                if proto is Protocol.LL128 and (s not in led or r.algbw > led[s][0]):
                    led[s] = (r.algbw, v)
    _stretched(compiler, sizes, best, led)
    if not best:
        return {"emittable": False, "why": why}
    rows = [_sim_row(s, best[s][0], best[s][1].label) for s in sizes if s in best]
    top = best[max(best)]
    return {"emittable": True, "variant": top[1].label, "nchunks": top[2].nchunks,
            "threadblocks": max(b[2].max_threadblocks for b in best.values()),
            "search": True, "simulated": rows}


def _stretched(compiler, sizes: tuple[int, ...], best: dict[int, tuple],
               led: dict[int, tuple]) -> None:
    """The portfolio's rule past LL128's range (``portfolio.falls_behind``): where no
    file serves a size or its best is slower than the best one size below,
    LL128's variants are simulated there too, else the LL128 variant that led at
    the largest size in LL128's range (``led``); kept when faster."""
    from colc.compiler.pipeline import variants
    from colc.compiler.portfolio import CHUNKINGS, PROTOCOL_SIZES, falls_behind, last_ll128_size

    def algbw(s: int) -> float | None:
        return best[s][0].algbw if s in best else None

    if Protocol.LL128 not in compiler.model.protocols:
        return
    for i, s in enumerate(sizes):
        if s <= PROTOCOL_SIZES[Protocol.LL128][1]:
            continue
        if falls_behind(algbw(s), algbw(sizes[i - 1]) if i else None):
            rivals = variants(compiler, (Protocol.LL128,), CHUNKINGS[Protocol.LL128])
        else:
            rivals = [led[top][1]] if (top := last_ll128_size(sizes, i)) in led else []
        for v in rivals:
            try:
                program = compiler.program(v)
                r = compiler.simulate(v, s)
            except ColcError:
                continue
            if s not in best or _beats(r, best[s][0]):
                best[s] = (r, v, program)


def _beats(r, other) -> bool:
    """Whether simulation ``r`` ranks before ``other`` at one size: a file the
    runtime selects there before one it does not (as the portfolio ranks),
    then the faster."""
    return (r.selected, r.algbw) > (other.selected, other.algbw)


def _sim_row(size: int, r, variant: str) -> dict:
    return {"size": size, "time_us": round(r.time_us, 2), "algbw": _fig(r.algbw),
            "busbw": _fig(r.busbw), "selected": r.selected, "variant": variant}


def _ranking_sizes(sizes: tuple[int, ...], most: int = 4) -> tuple[int, ...]:
    """At most ``most`` of ``sizes``, spread evenly, the largest included: variants
    are ranked there and only the best is simulated at every size.

    >>> _ranking_sizes(tuple(1 << k for k in range(10, 31)))
    (1024, 131072, 8388608, 1073741824)
    """
    if len(sizes) <= most:
        return sizes
    step = (len(sizes) - 1) / (most - 1)
    return tuple(sizes[round(i * step)] for i in range(most))


def _timed_bounds(topo: Topology, model, sizes: tuple[int, ...], shown: set[str]) -> dict:
    """``_bounds`` with, for each collective in ``shown``, the hop bound and the
    time/algbw bounds per size (``_latency_bound``; the hop bound is the
    same for every collective, so it is computed once)."""
    bounds = _bounds(topo)
    latency = _hop_bound(topo, model)
    for coll, b in bounds.items():
        if coll in shown:
            b.update(_latency_bound(latency, b["algbw"], sizes))
    return bounds


def _hop_bound(topo: Topology, model) -> float:
    """Least time in us for a message to cross the longest hop chain between
    two ranks (the protocol with the least latency; sampled sources above
    ``BUILD_UP_TO`` ranks)."""
    from colc.ir.routing import Router

    router = Router(topo)
    lat = min((model.latency(p) for p in model.protocols), key=lambda c: c.base + c.hop_p2p)
    worst = 0.0
    n = topo.num_ranks
    step = max(1, -(-n // HOP_SOURCES)) if n > BUILD_UP_TO else 1
    for a in range(0, n, step):
        hops = _hop_latencies(topo, router, a, lat)
        worst = max([worst, *hops.values()])
    return lat.base + worst


def _latency_bound(latency: float, bw: float, sizes: tuple[int, ...]) -> dict:
    """Hop bound ``latency`` in us, and the time/algbw bounds per size it gives
    with ``bw``."""
    by_size = [{"size": s, "time_us": round(max(latency, s / (bw * 1000) if bw else 0), 2),
                "algbw": _fig(s / max(latency, s / (bw * 1000) if bw else 1e-9) / 1000)}
               for s in sizes]
    return {"latency_us": round(latency, 2), "by_size": by_size}


def _hop_latencies(topo: Topology, router, src: int, lat) -> dict[int, float]:
    """Least total hop latency from ``src`` to every rank over switch paths (Dijkstra)."""
    import heapq

    best = {src: 0.0}
    heap = [(0.0, src)]
    while heap:
        d, u = heapq.heappop(heap)
        if d > best.get(u, float("inf")):
            continue
        for v, path in router.switch_paths(u).items():
            if v == u:
                continue
            net = any(topo.node[x].is_network for x in path)
            nd = d + (lat.hop_net if net else lat.hop_p2p)
            if nd < best.get(v, float("inf")):
                best[v] = nd
                heapq.heappush(heap, (nd, v))
    return best


def _multicast(topo: Topology, coll: Collective,
               packings: dict[bool, TreePacking]) -> dict | None:
    """The ``multicast`` entry of a trees row (None: no multicast switch or n/a).

    ``packings`` caches the packing by "made on the transpose" so that
    allgather and reduce-scatter on a symmetric topology pack once.
    """
    if coll is Collective.ALLREDUCE or not any(n.multicast for n in topo.nodes):
        return None
    try:
        from colc.compiler.trees.apply_multicast import apply_multicast
        from colc.compiler.trees.generate_trees import is_symmetric, pack_trees, transpose

        flip = coll is Collective.REDUCESCATTER and not is_symmetric(topo)
        if flip not in packings:
            packings[flip] = pack_trees(transpose(topo) if flip else topo)
        forest = apply_multicast(packings[flip], topo, coll)
    except (ImportError, ColcError):
        return None
    per = forest.per_collective_byte
    return {"switches": list(forest.multicast_switches),
            "traffic_before": _num(per(forest.traffic_before)),
            "traffic_after": _num(per(forest.traffic_after)),
            "gpu_sends_before": _num(per(forest.gpu_sends_before)),
            "gpu_sends_after": _num(per(forest.gpu_sends_after)),
            "gpu_recvs_before": _num(per(forest.gpu_recvs_before)),
            "gpu_recvs_after": _num(per(forest.gpu_recvs_after)),
            "runtime": MULTICAST_RUNTIME}


def _steps(name: str, topo: Topology, coll: Collective, sched) -> int:
    """Hop count: the algorithm's own rounds when it has them (BFB), else the
    longest chain of transfers in the schedule."""
    if name == "bfb":
        from colc.compiler.bfb.schedule import bfb_report

        return bfb_report(topo, coll)[0]
    return schedule_steps(sched)


def format_table(report: dict) -> str:
    """A readable table of the report."""
    from colc.sizes import format_size

    sizes = report.get("sizes", [])
    head = "".join(f"{format_size(x):>10}" for x in sizes)
    lines = [f"topology {report['topology']}: {report['ranks']} ranks, cost model "
             f"{report.get('machine', '?')}", "",
             "Bounds (algbw GB/s; 'bandwidth' from the cut bound / allreduce LP, the size",
             "columns also from the hop latency of the fastest protocol):",
             f"{'collective':<15}{'bandwidth':>10}{'hops us':>9}{head}  method"]
    for coll, b in report["bounds"].items():
        cols = "".join(f"{_gbs(row['algbw']):>10}" for row in b.get("by_size", []))
        lat = f"{b['latency_us']:>9.1f}" if "latency_us" in b else f"{'':>9}"
        extra = "".join(f"; {k} f = {b[k]:.4g}" for k in ("mcf", "moore_mcf")
                        if b.get(k) is not None)
        lines.append(f"{coll:<15}{_gbs(b['algbw']):>10}{lat}{cols}  {b['method']}{extra}")
    how = ("of the best file colc writes with it, every chunking and protocol searched"
           if report.get("search") else
           "of one representative file, at each size under the protocol a closed "
           "form ranks fastest; --search tries every chunking and protocol")
    lines += ["", "Schedules ('bandwidth' = bandwidth-only algbw of the schedule; size "
              f"columns = simulated algbw {how}):",
              f"{'algorithm':<12}{'collective':<15}{'hops':>5}{'bandwidth':>10}{head}  file"]
    unselected = False
    for s in report["schedules"]:
        if "error" in s:
            lines.append(f"{s['algorithm']:<12}{s['collective']:<15}  n/a: {s['error']}")
            continue
        steps = "?" if s.get("steps") is None else s["steps"]
        row = f"{s['algorithm']:<12}{s['collective']:<15}{steps:>5}{_gbs(s['algbw']):>10}"
        if s.get("estimated"):
            row += "  estimated from its plan (not built)"
        if s.get("emittable") is False:
            row += f"  not emittable within the runtime's limits: {s['why']}"
        elif "simulated" in s:
            row += "".join(f"{_gbs(r['algbw']):>9}{' ' if r['selected'] else '*'}"
                           for r in s["simulated"])
            tbs = s["threadblocks"]
            files = list(dict.fromkeys(r.get("variant") or s["variant"] for r in s["simulated"]))
            if s.get("search") and len(files) > 1:  # each size's own best file
                row += (f"  best per size: {', '.join(files)}; up to {tbs} threadblock"
                        f"{'' if tbs == 1 else 's'} per GPU")
            else:
                row += (f"  {s['variant']}, nchunksperloop {s['nchunks']}, "
                        f"{tbs} threadblock{'' if tbs == 1 else 's'} per GPU")
            unselected = unselected or not all(r["selected"] for r in s["simulated"])
        lines.append(row)
        if "multicast" in s:
            m = s["multicast"]
            gpu, what = (("sends", "multicast") if s["collective"] == "allgather"
                         else ("recvs", "aggregation"))
            lines.append(f"{'':<10}  in-network {what}: traffic {m['traffic_before']:g} -> "
                         f"{m['traffic_after']:g}, GPU {gpu} {m[f'gpu_{gpu}_before']:g} -> "
                         f"{m[f'gpu_{gpu}_after']:g} GB per GB (analysis only; "
                         f"files send unicast)")
    if unselected:
        lines.append("* the runtime would not select that file at that size (its element "
                     "count is not a multiple of the file's nchunksperloop): NCCL runs there")
    for coll, rows in report.get("budgets", {}).items():
        lines += ["", f"{coll}: the file each size selects in the portfolio within each "
                      f"threadblock budget (simulated algbw; -o DIR/ --max-threadblocks B "
                      f"writes it):",
                  f"{'budget':>7}{'tbs/GPU':>9}{head}  file"]
        for row in rows:
            if "error" in row:
                lines.append(f"{_budget_label(row['budget'], report):>7}  none: {row['error']}")
                continue
            lines.append(f"{_budget_label(row['budget'], report):>7}"
                         f"{row['threadblocks'] or '-':>9}"
                         + "".join(f"{_gbs(x):>10}" if x is not None else f"{'-':>10}"
                                   for x in row["algbw"])
                         + f"  {_files_text(row['files'], report['sizes'])}")
    if report.get("estimated"):
        lines.append(f"(above {BUILD_UP_TO} ranks the schedules are estimated, not built or "
                     f"simulated; --algorithm A builds A)")
    elif not report.get("simulated", True):
        lines.append(f"(simulation skipped above {SIMULATE_UP_TO} ranks; use --simulate)"
                     if report["ranks"] > SIMULATE_UP_TO else "(simulation off: --no-simulate)")
    lines += ["", *LEGEND]
    return "\n".join(lines)


def _budget_label(limit: int, report: dict) -> str:
    """A budget row's label: ``108 (0)`` where ``--budgets 0`` asked for the
    GPU's limit, so the row can be found by what was asked."""
    return f"{limit} (0)" if limit == report.get("gpu_limit") else str(limit)


def _files_text(files: list[str], sizes: list[int]) -> str:
    """The files a budget row's figures come from: one label, or each with
    the sizes it serves (``ring/Simple at 4K; bfb/c1/Simple at 1G``)."""
    from colc.sizes import format_size

    files = [f or "no file (NCCL runs)" for f in files]
    if len(set(files)) == 1:
        return files[0]
    at: dict[str, list[str]] = {}
    for f, s in zip(files, sizes, strict=True):
        at.setdefault(f, []).append(format_size(s))
    return "; ".join(f"{f} at {', '.join(where)}" for f, where in at.items())


#: What the table's words mean, printed under it.
LEGEND = (
    "algbw = bytes per rank / time (nccl-tests); hops = transfers one after another on the",
    "longest path (latency steps); exact cut bound = the most data that must cross any cut",
    "of the network divided by the cut's bandwidth, reached by tree packing (seed 001 ch. 4);",
    "allreduce LP bound = a linear program's lower bound on allreduce time (seed 001 B.7);",
    "hops us = the hop latency of the fastest protocol on the shortest paths;",
    "all-to-all LP (A.1) = the multi-commodity flow optimum f (seed 001 A.1.5), algbw N f;",
    "mcf f = that optimum with unit links (the seed's tables), moore_mcf f = the Moore-tree",
    "bound on it for the ranks' degree.",
)
