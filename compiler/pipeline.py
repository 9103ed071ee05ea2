"""The one written-down pipeline: topology -> schedule -> program -> text.

Steps, in order, for one *variant* (algorithm, chunking, protocol):

1. generate a chunk schedule with the algorithm (``ALGORITHMS``), with the
   variant's chunking (chunks per shard: powers of two keep the file
   selectable at power-of-two message sizes);
2. ``check_schedule`` proves it (postcondition, races, physics) under each
   aliasing mode; modes that fail are dropped unless the user asked for them;
3. ``replicate-instances`` (when ``instances > 1``), checked again with
   ``verify_each``;
4. ``balance-lanes``: lanes per rank pair from the machine's cost model and
   a list-scheduled program order;
5. ``lower-to-program``: threadblocks, channels, fusion, ordering, nops;
6. the timing simulator (``colc.ir.simulate``) predicts the time of a call;
7. the backend prints the program; its verifier re-reads the printed text
   and interprets it on the runtime's terms; any finding is an error.

``compile_topology`` (one file) builds the variants that apply, best
bandwidth-model estimate first, skips those whose estimate cannot beat the
best simulated one the runtime selects at as many sizes, ranks the rest by
those sizes and then by simulated algbw at the sizes the file is for
(``CompileOptions.rank_sizes``; default 128 MiB and 1 GiB) and returns the
best one that verifies; the others are reported in ``notes``.
``colc.compiler.portfolio`` builds one file per message-size window with
the same ``Compiler``.

What it draws on: the generators (``algorithms``), the variants ``auto``
tries at this scale (``choose_variants``), the options and results
(``options``; re-exported here) and the limits refused before building
(``runtime_limits``).
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable
from fractions import Fraction

from colc.compiler.algorithms import (
    ALGORITHMS,
    ALLTOALL_ALGORITHMS,
    CHUNKINGS,
    THREAD_ALGORITHMS,
    Generator,
    available_algorithms,
    builds,
    load_optional_algorithms,
    meshed_boxes,
)
from colc.compiler.choose_variants import (CHUNK_SCALE_RANKS, SPREAD_TREES, direct_unpaired,
                                          scale_chunks, variants)
from colc.compiler.estimate_bandwidth import schedule_algbw
from colc.compiler.lowering.balance_lanes import balance_lanes, plan_lanes
from colc.compiler.lowering.lower_to_program import (
    LoweringOptions,
    LoweringStalled,
    lower_to_program,
)
from colc.compiler.lowering.replicate_instances import replicate_instances
from colc.compiler.options import CompileOptions, CompileResult, Variant
from colc.compiler.parallel import jobs_for, prefetch
from colc.compiler.runtime_limits import (
    DEFAULT_THREADBLOCKS,
    MSCCL_MAX_RANKS,
    rank_limit_problem,
    threadblock_budget,
)
from colc.ir.check_chunks import check_schedule
from colc.ir.chunks import Schedule
from colc.ir.core import Collective, Protocol
from colc.ir.interpret import deadlocks
from colc.ir.load_checks import load_program
from colc.ir.program import Program
from colc.ir.runtime_model import RuntimeModel, model_for, model_named
from colc.ir.simulate import (
    MAX_ITERATIONS,
    SimResult,
    SimulationError,
    nccl_tests_bytes,
    selectable_sizes,
    selection,
    simulate,
    window_selection,
)
from colc.ir.topology import Topology, boxes

from colc.errors import (
    ColcError,
    InfeasibleError,
    InternalError,
    UnsupportedError,
    VerificationError,
)
from colc.progress import report as progress_report

#: Message sizes a single file is ranked at (bytes) when no window is given.
LARGE_SIZES = (128 << 20, 1 << 30)

#: Lowering strategies: (fuse, pair_connections); the first that lowers and
#: verifies is used.  Relay-heavy schedules (rings, BFB) fuse receive+send;
#: tree schedules keep receives and sends on separate threadblocks.
FUSED = ({"fuse": True, "pair_connections": True}, {"fuse": True, "pair_connections": False},
         {"fuse": False, "pair_connections": False})
DECOUPLED = ({"fuse": False, "pair_connections": False},
             {"fuse": True, "pair_connections": False},
             # when separate send and receive threadblocks exceed the GPU (many
             # boxes: many network peers), one threadblock serves one of each
             {"fuse": False, "pair_connections": True},
             {"fuse": True, "pair_connections": True})
#: rails on boxes behind a switch: when the paired lowering hangs, the same
#: pairing again with every (pair, lane) given one transfer per round
#: (``separated_rounds``: DGX A100 x16 Simple allreduce), before the unpaired
#: lowerings (which take up to twice the threadblocks).
RAILS = (FUSED[0], {**FUSED[0], "rounds": "separated"}, *FUSED[1:])
#: Unpaired variants (``Variant.unpaired``: rails, direct): the unpaired lowerings only.
UNPAIRED = FUSED[1:]
#: rings2d's crossing form (``rings2d.crossing_once``): its
#: network sends and landing receives on threadblocks of their own, so a send
#: never waits behind a receive (paired, DGX A100 x2 at 1 GiB: 117.4 GB/s
#: against 247.2).
CROSSING_RINGS = (*FUSED[1:], FUSED[0])
#: rings2d's crossing reduce-scatter: the same, unpaired but for a relay's
#: way back, which shares its threadblock (``pair_mirrors``: the grid's fused
#: last stage, ``rings2d.placement._fuses_last``, DGX A100 x64 and x128 take 30
#: threadblocks, not 31, and the plain unpaired lowering is not tried for
#: them).  The other forms have no mirror and lower exactly as with
#: ``CROSSING_RINGS``; the plain unpaired lowering is not listed again, as
#: it would repeat the first where that one hangs.
CROSSING_SCATTER = ({**CROSSING_RINGS[0], "pair_mirrors": True}, *CROSSING_RINGS[1:])
#: Strategies without the balance pass (the pre-cost-model lowering).
STRATEGIES = FUSED
#: Algorithms lowered decoupled first, balanced or not, in their Simple and
#: LL128 files, and in LL ones above ``DECOUPLED_FIRST_RANKS`` ranks.  There
#: their fused lowerings hang at one call per chunk (dimrings on 2-D tori
#: from 8x8; BFB on hypercubes of dimension 8 and 9), and each one tried
#: costs a lowering and a token game (most of the lowering time at 512
#: ranks).  Below, a fused receive-and-forward holds its threadblock's next
#: receive behind its send: where a fused Simple file runs, the unfused one
#: simulates up to twice as fast on more threadblocks (1 GiB; torus 4x4
#: allgather, bfb, 1 chunk: 22.0 GB/s on 5 threadblocks fused, 31.8 on 9;
#: torus 3x5 reduce-scatter, dimrings, 2 chunks: 14.4 on 5, 29.1 on 9),
#: while LL files, ranked at small sizes, are as fast or up to 10% faster
#: fused on fewer threadblocks (4-rank ring allreduce at 1 KiB).  Under a
#: budget the unfused files do not fit, the fused ones come next.
DECOUPLED_FIRST = frozenset({"dimrings", "bfb"})
DECOUPLED_FIRST_RANKS = 256


def register_algorithm(name: str, generator: Generator) -> None:
    """Make ``generator`` available as ``--algorithm name``."""
    ALGORITHMS[name] = generator
    clear_shared_schedules()


#: Algorithms lowered without lane balancing: their channels are already
#: spread (rings2d: one ring per channel over links packed by width), and
#: balancing reorders ring steps across lanes so the fused ring steps no
#: longer pipeline (MI250 x2 reduce-scatter, 1 GiB: 139 GB/s balanced,
#: 190 GB/s plain).
UNBALANCED = frozenset({"rings2d", "rails", "nccl-rings"})


def plain_first(variant: Variant) -> bool:
    """Whether ``variant`` is lowered without lane balancing first, balanced
    only where the plain lowering is refused (it does not fit the budget, or
    stalls or hangs) or fails verification: ``ring``'s copies (2 or more
    chunks), each already on channels of its own.  Balancing merges the
    copies onto fewer lanes by their estimated rates and reorders their
    steps, so the rings no longer pipeline.  Simulated, one DGX A100 box
    (128 MiB / 1 GiB, threadblocks per GPU): allgather with 8 copies 139.7
    / 170.4 (9) balanced, 166.4 / 174.6 (16) plain; allreduce with 16
    copies 77.7 / 81.5 (12) against 130.5 / 134.3 (16); one MI250 box's
    allreduce with 4 copies 38.2 / 42.7 (12) against 45.4 / 45.6 (8).  A
    single ring gains from balancing's second lane (MI250 allgather 67.3
    against 50.0 at 1 GiB) and keeps it.

    Parameters
    ----------
    variant : Variant

    Returns
    -------
    bool

    Examples
    --------
    >>> plain_first(Variant("ring", 4)), plain_first(Variant("ring", None))
    (True, False)
    """
    return variant.algorithm == "ring" and (variant.chunks or 1) > 1


#: Generators that plan their own lanes and take the threadblock budget
#: (``budget=``): the schedule itself depends on it.
BUDGETED = frozenset({"rails", "nccl-rings"})


#: Schedules of at most this many ops are kept for the process's later
#: compilers (``_SharedSchedules``); larger ones are built again, as before.
SHARED_SCHEDULE_OPS = 50_000
#: Ops the kept schedules may hold together (least recently used out): a
#: few hundred bytes an op, so about 150 MB at most.
SHARED_OPS = 500_000


class _TopologyKey:
    """A topology as a dictionary key whose hash is computed once (a frozen
    dataclass hashes every node and link at each lookup); equal when the
    topologies are (name, nodes, links) and their hardware are."""

    __slots__ = ("_hash", "topo")

    def __init__(self, topo: Topology) -> None:
        self.topo = topo
        self._hash = hash((topo, topo.hardware))

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _TopologyKey) and self._hash == other._hash and (
            self.topo is other.topo
            or (self.topo == other.topo and self.topo.hardware == other.topo.hardware))


class _SharedSchedules:
    """Proved schedules shared by the compilers of one process.

    ``colc analyze --budgets`` compiles once per budget, and most algorithms'
    schedules do not depend on the budget (``Compiler.schedule_key`` says
    when they do); without this each budget would build and prove them
    again.  A schedule is immutable and its build deterministic, so a kept
    one is the one a new build would give.  Keyed by the topology, the
    options the build and its proofs read, the generator function and
    ``Compiler.schedule_key``; only schedules of at most
    ``SHARED_SCHEDULE_OPS`` ops, ``SHARED_OPS`` together, so that large
    builds do not outlive their compiler in memory.
    """

    def __init__(self) -> None:
        self._kept: dict[tuple, Schedule] = {}
        self._ops = 0  # held by the kept schedules together

    def get(self, key: tuple) -> Schedule | None:
        sched = self._kept.pop(key, None)
        if sched is not None:
            self._kept[key] = sched  # most recently used last
        return sched

    def put(self, key: tuple, sched: Schedule) -> None:
        """Keep ``sched`` under ``key`` (asked only after ``get`` missed it)."""
        if len(sched.ops) > SHARED_SCHEDULE_OPS:
            return
        self._kept[key] = sched
        self._ops += len(sched.ops)
        while self._ops > SHARED_OPS:
            self._ops -= len(self._kept.pop(next(iter(self._kept))).ops)

    def clear(self) -> None:
        self._kept.clear()
        self._ops = 0


_SHARED = _SharedSchedules()


def clear_shared_schedules() -> None:
    """Forget the schedules the process's compilers share (``_SharedSchedules``).

    For code that changes what a generator builds between two compiles of one
    process (a module constant set by hand, a generator replaced): else the
    second compile gets the first one's schedules.  ``register_algorithm``
    calls it.
    """
    _SHARED.clear()


#: Ops above which ``_modes`` proves the fabric and the two aliasing modes on
#: forked processes (DGX A100 x128 allreduce rails: minutes each).
PARALLEL_PROOF_OPS = 200_000


def _modes(sched: Schedule, topo: Topology, opts: CompileOptions) -> Schedule:
    """Keep the aliasing modes the schedule is proved correct for.

    Three proofs: the transfers against the fabric, then the collective in
    place and out of place; on large schedules they run on forked processes
    (``PARALLEL_PROOF_OPS``), with the same results.
    """
    from colc.forked import default_jobs, fork_map

    trials = [dataclasses.replace(sched, inplace=mode == "inplace",
                                  outofplace=mode == "outofplace")
              for mode in ("physical", "inplace", "outofplace")]
    jobs = (opts.jobs or default_jobs()) if len(sched.ops) > PARALLEL_PROOF_OPS else 1
    found = fork_map(lambda k: check_schedule(trials[k], topo if k == 0 else None),
                     range(3), jobs)
    physical = [p for p in found[0] if "claims neither" not in p]
    if physical:
        raise InternalError(f"{sched.algorithm} produced an invalid schedule: {physical[0]}")
    ok = {}
    for mode, problems in zip(("inplace", "outofplace"), found[1:], strict=True):
        wanted = getattr(opts, mode)
        if wanted and problems:
            raise VerificationError(problems, header=f"the schedule is not correct {mode}: ")
        ok[mode] = not problems and wanted is not False
    if not (ok["inplace"] or ok["outofplace"]):
        for mode, other, problems in (("inplace", "outofplace", found[1]),
                                      ("outofplace", "inplace", found[2])):
            if getattr(opts, other) is False and problems:  # the only mode asked for
                raise VerificationError(problems, header=f"the schedule is not correct {mode} "
                                        f"(and {other} calls were excluded): ")
        raise InternalError(f"{sched.algorithm} schedule is correct in no aliasing mode")
    return dataclasses.replace(sched, inplace=ok["inplace"], outofplace=ok["outofplace"])


class Compiler:
    """Builds, simulates and verifies variants of one collective on one topology.

    Schedules are cached per (algorithm, chunks), programs per variant,
    simulations per (variant, size), so a portfolio search reuses work.
    """

    def __init__(self, topo: Topology, opts: CompileOptions) -> None:
        load_optional_algorithms()
        self.topo = topo
        self.opts = opts
        self.model: RuntimeModel = model_named(opts.machine) if opts.machine else model_for(topo)
        #: Threadblocks per rank every file of this compiler may take.
        self.budget = threadblock_budget(opts.max_threadblocks, self.model)
        self._schedules: dict[tuple[str, int | None, int, bool, bool], Schedule] = {}
        self._simple: dict[tuple[str, int | None, int], bool] = {}  # by algorithm, chunks, budget
        self._narrowed: dict[tuple[int | None, int], int] = {}  # rings2d's keys, by chunks, budget
        self._bounds: dict[tuple[str, int | None, int, bool, bool], float] = {}  # by schedule key
        self._programs: dict[Variant, Program] = {}
        self._sims: dict[tuple[Variant, int], SimResult] = {}
        self._loaded: dict[Variant, object] = {}
        self._strategy: dict[Variant, int] = {}  # index of the lowering strategy in use
        self._refused: dict[Variant, InfeasibleError] = {}  # variants no lowering fits
        self._rebalanced: set[Variant] = set()  # plain_first variants plain does not fit
        self._unbuildable: dict[tuple, ColcError] = {}  # schedule refusals
        # what the builds and their proofs read besides the schedule key (``_SHARED``)
        self._shared_key: tuple | None = None
        self._work = 0  # stages done, for the progress line

    def _progress(self, stage: str) -> None:
        self._work += 1
        progress_report(stage, self._work, 0)

    # -- schedules -----------------------------------------------------------
    def schedule_key(self, variant: Variant) -> tuple[str, int | None, int, bool, bool]:
        """``(algorithm, chunks, budget, unpaired, simple)``: where ``schedule``
        caches ``variant``'s schedule (the budget counts only for the
        algorithms that plan lanes, ``BUDGETED``, and for rings2d where it
        narrows the schedule, ``_narrowing``; else 0); ``schedule(*key)``
        builds it."""
        if variant.algorithm in BUDGETED:
            budget = self.plan_budget(variant)
        else:
            budget = self._narrowing(variant.algorithm, variant.chunks,
                                     variant.budget or self.budget)
        # only rails builds another schedule for an unpaired lowering
        return (variant.algorithm, variant.chunks, budget,
                variant.unpaired and variant.algorithm in BUDGETED, self._simple_form(variant))

    def _narrowing(self, algorithm: str, chunks: int | None, budget: int) -> int:
        """The budget a schedule of ``algorithm`` outside ``BUDGETED`` is
        keyed and built with, 0 where ``budget`` does not change it: rings2d's
        grid allgather without its second last-stage connection (the budget
        itself: DGX A100 x128 at 31) and its crossing reduce-scatter with
        fewer second connections (``rings2d.second_connections``; keyed as
        the least budget with as many, 1 for none: MI250 x4 reduce-scatter
        below 24, allreduce below 28) (``rings2d.narrowing_budget``)."""
        if algorithm != "rings2d" or not budget or self.opts.collective is Collective.ALLTOALL:
            return 0
        key = (chunks, budget)
        if key not in self._narrowed:  # asked for every variant of every size
            from colc.compiler.rings.rings2d import DEFAULT_CHUNKS, narrowing_budget

            groups = boxes(self.topo)
            self._narrowed[key] = narrowing_budget(
                self.topo, groups, self.opts.collective, chunks or DEFAULT_CHUNKS, budget
            ) if len({len(g) for g in groups}) == 1 else 0
        return self._narrowed[key]

    def fewer_split_budgets(self, chunks: int | None) -> tuple[int, ...]:
        """The smaller budgets at which rings2d's Simple file with ``chunks``
        splits fewer chunks of its first pass (``rings2d.fewer_split_budgets``),
        ranked beside this budget's file so a larger budget never predicts
        slower."""
        if self.opts.collective is Collective.ALLTOALL:
            return ()
        from colc.compiler.rings.rings2d import DEFAULT_CHUNKS, fewer_split_budgets

        groups = boxes(self.topo)
        if len({len(g) for g in groups}) != 1:
            return ()
        return fewer_split_budgets(self.topo, groups, self.opts.collective,
                                   chunks or DEFAULT_CHUNKS, self.budget)

    def _simple_form(self, variant: Variant) -> bool:
        """Whether ``variant`` takes rails' or rings2d's own form for Simple
        files (``rails.simple_form``, ``rings2d.simple_form``): Simple files
        only.  DGX A100 x64 allgather,
        simulated: the tapered Simple 1 GiB 128.6 -> 135.5 GB/s, but LL 1 MiB
        10.4 -> 9.8 (a round more of latency) and LL128 16 MiB 51.8 -> 50.1;
        x64 allreduce with the finer pieces: Simple 1 GiB 66.5 (LL128 55.4
        before), but LL 1 MiB 7.5 -> 5.6 and LL128 16 MiB 33.6 -> 27.5; x16
        reduce-scatter with the partials landed: Simple 1 GiB 156.1 -> 162.0,
        LL128 128 MiB 124.8 -> 123.9.  rings2d on MI250 boxes: see
        ``rings2d.simple_form``."""
        if variant.algorithm == "rings2d" and variant.protocol is Protocol.SIMPLE:
            key = ("rings2d", variant.chunks, 0)
            if key not in self._simple:
                from colc.compiler.rings.rings2d import simple_form as rings2d_form

                self._simple[key] = rings2d_form(self.topo, self.opts.collective,
                                                 variant.chunks)
            return self._simple[key]
        if (variant.algorithm != "rails" or variant.protocol is not Protocol.SIMPLE
                or variant.unpaired or meshed_boxes(self.topo)):  # simple_form says the rest
            return False
        key = ("rails", variant.chunks, self.plan_budget(variant))
        if key not in self._simple:
            from colc.compiler.hierarchical.rails import simple_form

            try:
                self._simple[key] = simple_form(self.topo, self.opts.collective,
                                                variant.chunks, key[2])
            except ColcError:  # the schedule's own build says why
                self._simple[key] = False
        return self._simple[key]

    def variant_schedule(self, variant: Variant) -> Schedule:
        """The schedule ``variant`` lowers (``schedule`` of its key)."""
        return self.schedule(*self.schedule_key(variant))

    def plan_budget(self, variant: Variant) -> int:
        """Threadblocks ``variant``'s schedule plans its lanes for: its lowering's
        budget, or about half of it when the lowering is unpaired (a lane then
        takes a send and a receive threadblock: DGX A100 x2 reduce-scatter plans
        17 and lowers to 32)."""
        budget = variant.budget or self.budget
        return budget // 2 + 1 if variant.unpaired else budget

    def schedule(self, algorithm: str, chunks: int | None, budget: int = 0,
                 unpaired: bool = False, simple: bool = False) -> Schedule:
        """The proved (and replicated) chunk schedule of one algorithm and chunking
        (for the algorithms that plan their own lanes, of a budget: 0 = the
        compiler's; rails also for an unpaired lowering, ``Variant.unpaired``,
        and in its form for Simple files, ``_simple_form``; rings2d where the
        budget narrows it, ``_narrowing``'s key, 0 = not)."""
        if algorithm in BUDGETED:
            budget = budget or self.budget
        else:  # rings2d's key carries a budget only where it narrows the schedule
            budget = self._narrowing(algorithm, chunks, budget)
        key = (algorithm, chunks, budget, unpaired, simple)
        if key in self._unbuildable:  # asked again at every size of a portfolio
            raise self._unbuildable[key]
        if key not in self._schedules:
            shared = (*self._sharing(), ALGORITHMS.get(algorithm), *key)
            sched = _SHARED.get(shared)
            if sched is None:
                try:
                    sched = self._build(algorithm, chunks, budget, unpaired, simple)
                except ColcError as err:
                    self._unbuildable[key] = err
                    raise
                _SHARED.put(shared, sched)
            self._schedules[key] = sched
        return self._schedules[key]

    def _sharing(self) -> tuple:
        """The part of a ``_SHARED`` key that is the same for all this
        compiler's schedules: the topology and the options ``_build`` reads."""
        if self._shared_key is None:
            o = self.opts
            self._shared_key = (_TopologyKey(self.topo), o.collective, o.backend, o.prove,
                                o.inplace, o.outofplace, o.instances, o.verify_each)
        return self._shared_key

    def _build(self, algorithm: str, chunks: int | None, budget: int,
               unpaired: bool = False, simple: bool = False) -> Schedule:
        """``schedule``'s work: generate, prove the modes, replicate."""
        self._progress(f"building {algorithm}" + (f"/c{chunks}" if chunks else ""))
        if algorithm not in ALGORITHMS:
            raise UnsupportedError(f"unknown algorithm '{algorithm}'; choose from "
                                   f"{', '.join(available_algorithms())}")
        coll = self.opts.collective
        if not builds(algorithm, coll):
            which = (ALLTOALL_ALGORITHMS if coll is Collective.ALLTOALL
                     else set(ALGORITHMS) - (ALLTOALL_ALGORITHMS - {"rails"}))
            raise UnsupportedError(f"{algorithm} does not build {coll.value}; "
                                   f"use one of {', '.join(sorted(which))}")
        problem = rank_limit_problem(self.topo.num_ranks, self.opts.backend)
        if problem is not None:
            raise InfeasibleError(problem)
        generate = ALGORITHMS[algorithm]
        if unpaired and algorithm != "rails":
            raise UnsupportedError(f"{algorithm} has no unpaired variant (only rails plans "
                                   "its lanes for an unpaired lowering)")
        if unpaired:
            try:
                sched = generate(self.topo, self.opts.collective, chunks, budget=budget,
                                 unpaired=True)
            except InfeasibleError as err:  # its message names the plan's budget
                raise InfeasibleError(
                    f"{algorithm} unpaired plans its lanes for about half the budget "
                    f"({budget} threadblock{'s' * (budget != 1)}), too few here "
                    f"({str(err).split(';')[0]})"
                ) from None
        elif algorithm == "rings2d":
            sched = generate(self.topo, self.opts.collective, chunks, simple=simple,
                             budget=budget)
        elif simple and algorithm not in BUDGETED:
            sched = generate(self.topo, self.opts.collective, chunks, simple=True)
        elif simple:
            sched = generate(self.topo, self.opts.collective, chunks, budget=budget,
                             simple=True)
        elif algorithm in BUDGETED:
            sched = generate(self.topo, self.opts.collective, chunks, budget=budget)
        else:
            sched = generate(self.topo, self.opts.collective, chunks)
        if self.opts.prove:
            sched = _modes(sched, self.topo, self.opts)
        if self.opts.instances != 1:
            sched = replicate_instances(sched, self.opts.instances)
            if self.opts.verify_each:
                _check_or_raise(sched, self.topo, "replicate-instances")
        return sched

    def estimate(self, variant: Variant) -> float:
        """Upper bound on the algbw the simulator can give (bandwidth model x efficiency).

        The larger of the two efficiencies: every link runs at most at its
        own, so this bounds the simulation.  (The smaller one, used before,
        is not a bound: NCCL's rings on MI250 x2 reduce-scatter were estimated
        at 119 GB/s, simulate 147, and were pruned from the portfolio.)
        """
        key = self.schedule_key(variant)
        if key not in self._bounds:  # asked at every size a portfolio ranks it at
            eff = max(self.model.p2p_efficiency, self.model.net_efficiency)
            self._bounds[key] = float(schedule_algbw(self.schedule(*key), self.topo)) * eff
        return self._bounds[key]

    # -- programs --------------------------------------------------------------
    def program(self, variant: Variant) -> Program:
        """The lowered program of ``variant`` (balanced unless disabled)."""
        if variant in self._refused:
            raise self._refused[variant]
        if variant not in self._programs:
            self._progress(f"lowering {variant.label}")
            try:
                self._programs[variant] = self._lower(variant, self._strategy.get(variant, 0))
            except InfeasibleError as err:  # asked again at every size of a portfolio
                if not self._falls_back(variant):
                    self._refused[variant] = err
                    raise
                self._rebalanced.add(variant)  # plain is refused: balanced may fit
                self._strategy.pop(variant, None)
                try:
                    return self.program(variant)
                except InfeasibleError as again:  # keep the refusal that names a count
                    if _NEEDS.search(str(err)) and not _NEEDS.search(str(again)):
                        self._refused[variant] = err
                        raise err from None
                    raise
        return self._programs[variant]

    def _next_strategy(self, variant: Variant) -> bool:
        """Drop ``variant``'s program for the next lowering strategy; False if none is left."""
        nxt = self._strategy.get(variant, 0) + 1
        if nxt >= len(self._strategies(variant)):
            if not self._falls_back(variant):
                return False
            self._rebalanced.add(variant)  # the plain strategies are spent: balanced ones
            nxt = 0
        self._strategy[variant] = nxt
        self._programs.pop(variant, None)
        self._loaded.pop(variant, None)
        for key in [k for k in self._sims if k[0] == variant]:
            del self._sims[key]
        return True

    def _strategies(self, variant: Variant) -> tuple[dict, ...]:
        if variant.unpaired:
            return UNPAIRED
        if variant.algorithm in DECOUPLED_FIRST and (
                variant.protocol is not Protocol.LL
                or self.topo.num_ranks > DECOUPLED_FIRST_RANKS):
            return DECOUPLED
        if variant.algorithm == "rings2d" and self._crossing_once(variant):
            return (CROSSING_SCATTER if self.opts.collective is Collective.REDUCESCATTER
                    else CROSSING_RINGS)
        if variant.algorithm == "rails" and meshed_boxes(self.topo):
            return DECOUPLED  # relays along box trees: paired lanes alternate and wait
        if (variant.algorithm == "rails" and self.opts.instances == 1
                and self.opts.collective is not Collective.ALLTOALL):
            return RAILS
        return (DECOUPLED if variant.algorithm in SPREAD_TREES and self._balances(variant)
                else FUSED)

    def _crossing_once(self, variant: Variant) -> bool:
        from colc.compiler.rings.rings2d import DEFAULT_CHUNKS, crossing_once

        return crossing_once(boxes(self.topo), self.opts.collective,
                             variant.chunks or DEFAULT_CHUNKS)

    def _falls_back(self, variant: Variant) -> bool:
        """Whether ``variant``'s plain lowering, refused or spent, is followed
        by the balanced one (``plain_first``)."""
        return self.opts.balance and plain_first(variant) and variant not in self._rebalanced

    def _balances(self, variant: Variant) -> bool:
        return (self.opts.balance and variant.algorithm not in UNBALANCED
                and (not plain_first(variant) or variant in self._rebalanced))

    def _lower(self, variant: Variant, first: int = 0) -> Program:
        if (variant.algorithm == "rails" and not variant.unpaired
                and self.opts.collective is not Collective.ALLTOALL):
            from colc.compiler.hierarchical.rails import fifo_problem

            # before the schedule: DGX A100 x128's Simple forms would be built for nothing
            problem = fifo_problem(self.topo, self.opts.collective, variant.chunks,
                                   variant.budget or self.budget, variant.protocol.fifo_depth,
                                   self._simple_form(variant))
            if problem is not None:
                raise InfeasibleError(problem)
        sched = self.variant_schedule(variant)
        opts = self.opts
        strategies = self._strategies(variant)
        lowering = LoweringOptions(
            protocol=variant.protocol, inplace=sched.inplace, outofplace=sched.outofplace,
            min_bytes=opts.min_bytes, max_bytes=opts.max_bytes,
            max_threadblocks=variant.budget or self.budget,
            name=f"{self.topo.name}-{opts.collective.value}-{variant.algorithm}")
        balanced: dict[bool, Schedule | Exception] = {}
        last: Exception | None = None
        for k, strategy in enumerate(strategies):
            if k < first:
                continue
            self._strategy[variant] = k
            lowered = sched
            if "rounds" in strategy:
                strategy = {key: on for key, on in strategy.items() if key != "rounds"}
                lowered = self._separated(sched, variant)
            if self._balances(variant):
                paired = strategy["pair_connections"]
                if paired not in balanced:
                    balanced[paired] = self._balanced(sched, variant, paired)
                if isinstance(balanced[paired], Exception):
                    last = balanced[paired]
                    continue
                lowered = balanced[paired]
            try:
                program = self._lower_within(sched, variant, lowered, balanced,
                                             dataclasses.replace(lowering, **strategy))
            except LoweringStalled as err:
                last = err
                continue
            except InfeasibleError as err:  # a limit: only pairing connections can help
                if strategy["pair_connections"] or not any(
                        s["pair_connections"] for s in strategies[k + 1:]):
                    raise
                last = err
                continue
            hang = self._hangs(variant, program)
            if hang is not None:  # hangs at the protocol's FIFO depth
                last = hang
                continue
            return program
        if isinstance(last, InfeasibleError):
            raise last
        raise InfeasibleError(f"no lowering runs ({last})")  # the refusal names the variant

    def _separated(self, sched: Schedule, variant: Variant) -> Schedule:
        """rails' ``sched`` with the rounds of ``separated_rounds`` (same ops)."""
        from colc.compiler.hierarchical.rails import separated_rounds

        rounds = separated_rounds(self.topo, self.opts.collective, variant.chunks,
                                  self.plan_budget(variant), self._simple_form(variant))
        if len(rounds) != len(sched.ops):
            raise InternalError("rails: separated rounds do not match the schedule's ops")
        return dataclasses.replace(sched, rounds=rounds)

    def _hangs(self, variant: Variant, program: Program) -> Exception | None:
        """Why ``program`` hangs at the protocol's FIFO depth with one primitive
        call per chunk (``maxAllowedCount`` 1: a step puts the most calls in a
        FIFO, as ``colc verify`` assumes), or None.

        A compiler that proves (every compile that writes a file) plays the
        interpreter's token game (``deadlocks``: messages and flags only, a
        fraction of a simulation), which settles it; the ranking simulates
        what it needs later.  One that does not (``colc analyze``) simulates
        the least ranked size with one call per chunk where there is one
        (needed anyway for its figures), and plays the token game where
        there is none.  (Until the thirty-ninth session a proving compiler
        simulated that size too: DGX A100 x128 allreduce's rails LL128 at 1
        GiB, 358 s of one core, for a ranking that no longer asks for it.)
        """
        loaded = self._loaded[variant] = load_program(program)
        size = self.hang_size(variant, program.nchunks)
        if self.opts.prove or size is None or loaded.diagnostics:
            found = deadlocks(program, program.protocol.fifo_depth, loaded=loaded)
            if found:
                return SimulationError(f"hangs with one call per chunk: {found[0]}")
            if self.opts.prove:
                return None
        if size is not None:
            try:
                self.simulate(variant, size, program)
            except SimulationError as err:
                return err
        return None

    def hang_size(self, variant: Variant, nchunks: int) -> int | None:
        """The least size ``variant`` is ranked at where its program of
        ``nchunks`` chunks makes one primitive call per chunk, which the
        lowering's hang check simulates (``_hangs``); None if there is none.

        Parameters
        ----------
        variant : Variant
        nchunks : int
            The program's chunks per loop (its schedule's).

        Returns
        -------
        int or None
            Bytes.
        """
        least = nchunks * self.model.geometry[variant.protocol].call_bytes
        return min((s for s in self.sizes(variant.protocol) if s >= least), default=None)

    def _lower_within(self, sched: Schedule, variant: Variant, lowered: Schedule,
                      balanced: dict[bool, Schedule | Exception],
                      lowering: LoweringOptions) -> Program:
        """``lower_to_program(lowered, lowering)``; where a balanced schedule's
        lanes come out over the budget, its lanes planned again for as many
        threadblocks fewer, up to ``REPLAN_TRIES`` times (``balanced`` keeps
        the plan that fits).  The lane plan counts each connection's
        threadblocks, not the copies and relays the lowering adds on some
        ranks: MI250 x1 reduce-scatter's bfb with one chunk, LL, planned for
        8 came out at 9 on rank 5 and was refused, though planned for 7 it
        fits and ran 0.14 GB/s at 1 KiB, where within 8 the portfolio's file
        ran 0.12."""
        budget = lowering.max_threadblocks
        paired = lowering.pair_connections
        plan = budget
        for _ in range(REPLAN_TRIES):
            try:
                return lower_to_program(lowered, lowering)
            except InfeasibleError as err:
                over = _NEEDS.search(str(err))
                if (lowered is not balanced.get(paired) or over is None
                        or int(over.group(1)) <= budget):
                    raise
                plan -= int(over.group(1)) - budget
                again = self._balanced(sched, variant, paired, plan) if plan >= 1 else err
                if isinstance(again, Exception):
                    raise err from None
                balanced[paired] = lowered = again
        return lower_to_program(lowered, lowering)

    def _balanced(self, sched: Schedule, variant: Variant, paired: bool,
                  plan: int | None = None) -> Schedule | InfeasibleError:
        """``sched`` after lane balancing for a lowering with or without paired
        connections (the threadblock budget differs), or why it does not fit;
        lanes planned for ``plan`` threadblocks (default the budget)."""
        try:
            plan = plan_lanes(sched, self.topo, self.model, variant.protocol, paired=paired,
                              max_threadblocks=plan or variant.budget or self.budget)
        except InfeasibleError as err:
            return err
        # reductions: start the work that feeds the last (network) hop first
        urgency = 1.0 if self.opts.collective.reduces else 0.0
        out = balance_lanes(sched, plan, size=max(self.sizes()), urgency=urgency)
        if self.opts.verify_each:
            _check_or_raise(out, self.topo, "balance-lanes")
        return out

    # -- simulation --------------------------------------------------------------
    def sizes(self, protocol: Protocol | None = None) -> tuple[int, ...]:
        """The message sizes files are ranked at (of ``protocol``, when the
        options give it a range: ``CompileOptions.protocol_ranges``)."""
        opts = self.opts
        if opts.rank_sizes:
            ranges = {p: (lo, hi) for p, lo, hi in opts.protocol_ranges}
            if protocol in ranges:
                lo, hi = ranges[protocol]
                return tuple(s for s in opts.rank_sizes if lo <= s <= hi)
            return opts.rank_sizes
        if opts.max_bytes:  # the window's ends, from 1K unless the window ends below it
            lo = max(opts.min_bytes, min(1024, opts.max_bytes))
            return tuple(sorted({lo, opts.max_bytes}))
        return tuple(s for s in LARGE_SIZES if s >= opts.min_bytes) or (opts.min_bytes,)

    def simulate(self, variant: Variant, size: int, program: Program | None = None) -> SimResult:
        """Simulated call of ``variant`` at ``size`` bytes (cached)."""
        key = (variant, size)
        if key not in self._sims:
            program = program or self.program(variant)
            self._progress(f"simulating {variant.label} at {_size_text(size)}")
            self._sims[key] = simulate(program, self.topo, self.model, size,
                                       self.opts.dtype_bytes,
                                       loaded=self._load(variant, program))
        return self._sims[key]

    def _load(self, variant: Variant, program: Program):
        """``load_program(program)``, kept per variant while its program stays."""
        loaded = self._loaded.get(variant)
        if loaded is None or getattr(loaded, "program", None) is not program:
            loaded = self._loaded[variant] = load_program(program)
        return loaded

    def simulate_as(self, variant: Variant, protocol: Protocol, size: int) -> SimResult:
        """``variant``'s program run under ``protocol`` instead of its own at
        ``size`` bytes (``colc analyze``'s representative file: one lowering,
        the protocol a closed form ranks fastest at each size).  Loading the
        program does not depend on the protocol, so the load is shared.

        Raises
        ------
        SimulationError
            When the program hangs at ``protocol``'s FIFO depth.
        """
        if protocol is variant.protocol:
            return self.simulate(variant, size)
        program = self.program(variant)
        loaded = self._load(variant, program)
        other = dataclasses.replace(program, protocol=protocol)
        self._progress(f"simulating {variant.label} as {protocol.value} at {_size_text(size)}")
        return simulate(other, self.topo, self.model, size, self.opts.dtype_bytes,
                        loaded=dataclasses.replace(loaded, program=other))

    def score(self, variant: Variant, sizes: tuple[int, ...]) -> float:
        """Harmonic mean of the simulated algbw at ``sizes`` (total time, normalised)."""
        inv = [1.0 / max(self.simulate(variant, s).algbw, 1e-12) for s in sizes]
        return len(inv) / sum(inv)

    # -- output ------------------------------------------------------------------
    def finish(self, variant: Variant, comment: str | Callable[[], str] = "",
               window: tuple[int, int] | None = None) -> tuple[Program, str]:
        """Print ``variant``'s program (in ``window``) and verify it on the runtime's terms.

        The verifier runs every aliasing mode the file declares at the protocol's
        FIFO depth with one chunk per call (what large messages do); a file that
        fails is lowered again with the next, more decoupled strategy (its
        simulated figures are recomputed).
        """
        while True:
            program, text = self.emit(variant, comment, window)
            progress_report(f"verifying {variant.label}", self._work, 0)
            report = _verify_text(text, self.opts.backend)
            if report.ok:
                return program, text
            if not self._next_strategy(variant):
                raise VerificationFailed(f"{variant.label}: generated file failed "
                                         "verification: " + "; ".join(report.errors[:3]))


    def window_end(self, variant: Variant, hi: int) -> int:
        """The last size (``hi``, 0 = unlimited) ``variant``'s file may serve:
        ``hi``, or earlier its loop-iteration limit (``_iterations_capped``)."""
        capped = _iterations_capped(dataclasses.replace(self.program(variant), min_bytes=0,
                                                        max_bytes=hi), self.opts.backend)
        return capped.max_bytes

    def emit(self, variant: Variant, comment: str | Callable[[], str] = "",
             window: tuple[int, int] | None = None) -> tuple[Program, str]:
        """``variant``'s program with its comment and window, and its text
        (not verified: ``finish`` verifies)."""
        if not self.opts.prove:
            raise InternalError("a file was asked of a compiler whose schedules are not proved")
        program = self.program(variant)
        changes: dict[str, object] = {"comment": comment() if callable(comment) else comment}
        if window is not None:
            changes.update(min_bytes=window[0], max_bytes=window[1])
        program = _iterations_capped(dataclasses.replace(program, **changes), self.opts.backend)
        return program, _emit(program, self.opts.backend)

    def verify_all(self, texts: list[str]) -> list[bool]:
        """Whether each text passes ``colc verify``, on ``--jobs`` processes (a
        portfolio's files at 1024 ranks: about a minute each).

        Texts that differ only in their ``<algo>`` tag and comment (one
        schedule's LL and LL128 windows) go to one worker, whose ``Verifier``
        runs the program once for both (``runs_alike`` decides, on the parsed
        programs).  The largest groups first, so the last one to start is a
        short one; the workers are forks of this process and get indices, not
        texts (DGX A100 x128 allreduce: 116 to 157 MB each).
        """
        from colc.backends.verify import Verifier
        from colc.forked import default_jobs, fork_map

        jobs = (self.opts.jobs or default_jobs()) if self.opts.executor == "local" else 1
        backend = self.opts.backend

        def verify(group: list[int]) -> list[bool]:
            verifier = Verifier()
            return [verifier.text(texts[i], f"<generated {backend} file>", backend).ok
                    for i in group]

        groups = sorted(_twin_groups(texts), key=lambda g: -sum(len(texts[i]) for i in g))
        passed = [False] * len(texts)
        for group, found in zip(groups, fork_map(verify, groups, jobs), strict=True):
            for i, ok in zip(group, found, strict=True):
                passed[i] = ok
        return passed


def _twin_groups(texts: list[str]) -> list[list[int]]:
    """Indices of ``texts`` grouped by what follows the ``<algo>`` tag and by
    whether the tag names Simple (the FIFO depth): likely ``runs_alike``
    programs.  Only a grouping for the workers; the verifier decides."""
    groups: dict[tuple[bool, int], list[int]] = {}
    for i, text in enumerate(texts):
        at = text.find("<algo")
        end = text.find(">", at)
        if at < 0 or end < 0:
            groups[(False, -1 - i)] = [i]
            continue
        key = ('proto="Simple"' in text[at:end], hash(text[end:]))
        groups.setdefault(key, []).append(i)
    return list(groups.values())


class VerificationFailed(InternalError):
    """A generated file failed ``colc verify`` (a compiler bug; the caller may try another)."""


def compile_topology(topo: Topology, opts: CompileOptions) -> CompileResult:
    """Compile ``topo`` to one verified runtime file (see module docstring).

    When nothing fits the threadblock budget, the error names the smallest
    budget with which a file is written (``smallest_budget``).

    Parameters
    ----------
    topo : Topology
    opts : CompileOptions

    Returns
    -------
    CompileResult

    Raises
    ------
    ColcError
        For requests that cannot be met; nothing has been written.
    """
    from colc.compiler.option_refusal import mode_problem, option_problem, protocol_problem

    if (why := mode_problem(opts)) is not None:
        raise UnsupportedError(why)
    problem = rank_limit_problem(topo.num_ranks, opts.backend) or protocol_problem(topo, opts)
    if problem is not None:  # before anything is built
        raise InfeasibleError(problem)
    if _thread_lowered(topo, opts):
        return _compile_threads(topo, opts)
    try:
        return _compile_once(topo, opts)
    except InfeasibleError as err:
        better = (option_problem(topo, opts, err, _compile_once)
                  or smallest_budget(topo, opts, err, _compile_once))
        if better is None:
            raise
        raise InfeasibleError(better) from None


def _thread_lowered(topo: Topology, opts: CompileOptions) -> bool:
    """Whether the file is written by ``hop-relay``: asked for by name, or, for
    ``auto``, a oneCCL all-to-all on a fabric of ranks whose routed blocks need
    more steps than MSCCL's threadblocks hold (what ``mcf`` refuses)."""
    if opts.algorithm in THREAD_ALGORITHMS:
        return True
    if (opts.algorithm != "auto" or opts.collective is not Collective.ALLTOALL
            or opts.backend != "oneccl" or len(topo.node) != topo.num_ranks):
        return False
    from colc.compiler.alltoall.routed import routed_steps_problem

    return routed_steps_problem(topo) is not None


def _compile_threads(topo: Topology, opts: CompileOptions) -> CompileResult:
    """``hop-relay``: balanced routing trees, one oneCCL message per link and
    hop, verified by colc's interpreter of the format before it is printed.

    Raises
    ------
    UnsupportedError
        Another collective, the MSCCL backend, switches, in-place aliasing or
        several instances were asked for.
    """
    from colc import __version__
    from colc.backends.oneccl_reader import read_oneccl_xml
    from colc.backends.oneccl_xml import print_oneccl_xml
    from colc.compiler.alltoall.balanced_trees import balanced_trees
    from colc.compiler.alltoall.hop_relay import hop_relay_threads
    from colc.ir.interpret_oneccl import verify_thread_schedule
    from colc.sizes import format_gbs

    name = opts.algorithm if opts.algorithm in THREAD_ALGORITHMS else "hop-relay"
    why = _threads_problem(opts, name)
    if why is not None:
        raise UnsupportedError(why)
    cf = opts.chunks or 1
    if cf < 1:
        raise UnsupportedError(f"{name}: chunks per block must be at least 1, got {cf}")
    trees = balanced_trees(topo)
    sched = hop_relay_threads(trees, cf, name=f"colc-{name}")
    sched = dataclasses.replace(sched, min_bytes=opts.min_bytes, max_bytes=opts.max_bytes)
    problems = [d for d in verify_thread_schedule(sched) if d.is_error]
    if problems:
        raise InternalError(f"{name}: generated file failed verification: {problems[0]}")
    algbw = Fraction(topo.num_ranks / trees.time_per_block() / 1e9).limit_denominator(1 << 20)
    bound = format_gbs(float(algbw))
    text = print_oneccl_xml(sched, opts.comment or (
        f"generated by colc {__version__}: {name}, c{cf}, bound {bound} GB/s (the routes' "
        f"busiest link; not simulated)"))
    # the text must be what was proved: read back (schema, ids, peers, syncs) and compared
    if read_oneccl_xml(text, f"<generated {name} file>") != sched:
        raise InternalError(f"{name}: the printed file does not read back as the verified one")
    unused = [flag for flag, default in (("--protocol", opts.protocol is Protocol.SIMPLE),
                                         ("--max-threadblocks", opts.max_threadblocks
                                          == DEFAULT_THREADBLOCKS)) if not default]
    verb = "does" if len(unused) == 1 else "do"
    notes = ((f"{name} writes oneCCL threads: {' and '.join(unused)} {verb} not apply",)
             if unused else ())
    return CompileResult(None, None, text, name, algbw, notes, threads=sched)


def _threads_problem(opts: CompileOptions, name: str) -> str | None:
    if opts.collective is not Collective.ALLTOALL:
        return f"{name} builds alltoall only; use --collective alltoall"
    if opts.backend != "oneccl":
        return (f"{name} writes the oneCCL format only (one message per link and hop, "
                f"any number of steps per thread); use -o FILE.oneccl.xml")
    if opts.inplace:
        return f"{name} files are correct out of place only; drop --inplace"
    if opts.instances != 1:
        return f"{name} writes one instance; drop --instances"
    return None


#: Budget errors name what they need: "needs 64 threadblocks", "needs at least 17".
_NEEDS = re.compile(r"needs (?:at least )?(\d+) threadblocks")
#: Lane plans tried again, each for as many threadblocks fewer as the last
#: lowering took over the budget (``Compiler._lower_within``).
REPLAN_TRIES = 2


def smallest_budget(topo: Topology, opts: CompileOptions, err: InfeasibleError,
                    build: Callable[[Topology, CompileOptions], object]) -> str | None:
    """The refusal to give when nothing fit ``opts.max_threadblocks``, or None when
    the budget was not what stopped every candidate.

    The refusals say how many threadblocks each candidate needed; the least of
    them is tried with ``build`` (and the next one it names, a few times), so
    the budget the message names really writes a file.  Where none names a
    count (every lowering stalled or hung) and the budget is below
    ``DEFAULT_THREADBLOCKS``, twice the budget is tried, then larger ones up
    to that default, no further (each trial is a whole build).

    Returns
    -------
    str or None
        ``no schedule fits within --max-threadblocks B: the smallest budget that
        works here is N (variant); ...``.
    """
    model = model_named(opts.machine) if opts.machine else model_for(topo)
    budget = threadblock_budget(opts.max_threadblocks, model)
    needs = [int(n) for n in _NEEDS.findall(str(err))]
    named = bool(needs)
    if not needs and budget < DEFAULT_THREADBLOCKS:
        # the lowerings stalled or hung rather than naming a count (bfb's
        # allreduce on a 4x4 torus within 4 to 7: too few threadblocks to
        # keep apart the steps that wait on each other); below the default
        # budget a larger one is tried as well
        needs = [min(2 * budget, DEFAULT_THREADBLOCKS)]
    if not needs or budget >= model.max_threadblocks:
        return None
    limit = model.max_threadblocks if named else DEFAULT_THREADBLOCKS
    trial = max(budget + 1, min(needs))
    for _ in range(6):
        if trial > limit:
            break
        try:
            result = build(topo, dataclasses.replace(opts, max_threadblocks=trial))
        except InfeasibleError as again:
            more = [int(n) for n in _NEEDS.findall(str(again)) if int(n) > trial]
            trial = min(more) if more else trial + max(1, trial // 4)
            continue
        trial, result = _lower_budget(topo, opts, build, budget, trial, result)
        label = getattr(result, "algorithm", "") or "a portfolio"
        return (f"no schedule fits within --max-threadblocks {budget}: the smallest budget "
                f"that works here is {trial} ({label}); use --max-threadblocks {trial} or "
                f"more")
    if not named:
        return None
    if min(needs) > model.max_threadblocks:  # only the candidates past the GPU say how many
        return f"no schedule fits within --max-threadblocks {budget}: {err}"
    return (f"no schedule fits within --max-threadblocks {budget} (the candidates need "
            f"{min(needs)} or more threadblocks per GPU): {err}")


def _lower_budget(topo: Topology, opts: CompileOptions, build, budget: int, works: int,
                  result: object) -> tuple[int, object]:
    """The least budget above ``budget`` that builds, by bisection between
    ``budget`` (which does not) and one that ``works`` (the needs the
    refusals name are per candidate, not per lowering strategy: one DGX A100
    box's all-to-all named 14, direct unpaired, and writes a file within 7);
    the budget it names always builds."""
    fails = budget
    while works - fails > 1:
        mid = (works + fails) // 2
        try:
            found = build(topo, dataclasses.replace(opts, max_threadblocks=mid))
        except InfeasibleError:
            fails = mid
        else:
            works, result = mid, found
    return works, result


def _compile_once(topo: Topology, opts: CompileOptions) -> CompileResult:
    """``compile_topology`` at ``opts.max_threadblocks``, without the budget search."""
    compiler = Compiler(topo, opts)
    sizes = compiler.sizes()
    refusals: list[str] = []
    ranked = []
    limits = False  # some algorithm applies but cannot fit the runtime's limits
    why: dict[str, list[str]] = {}  # reason -> algorithms
    for variant in variants(compiler):
        try:
            ranked.append((-compiler.estimate(variant), variant.label, variant))
        except ColcError as err:
            refusals.append(f"{variant.algorithm}: {err}")
            limits = limits or isinstance(err, InfeasibleError)
            names = why.setdefault(str(err), [])
            if variant.algorithm not in names:
                names.append(variant.algorithm)
    if not ranked:
        reasons = "; ".join(f"{', '.join(names)}: {err}" for err, names in why.items())
        if limits:
            raise InfeasibleError("no schedule fits the runtime's limits: " + reasons)
        raise UnsupportedError("no algorithm applies: " + reasons)
    ranked.sort(key=lambda r: (r[0], r[1]))
    scored = []
    # the best score of the files the runtime does not select at k ranked sizes:
    # a file is ranked after every file selected at more sizes (on 15 ranks a
    # file of 240 chunks per loop is never selected at a power of two, one of
    # 15 is), so only those and its peers can prune it
    best: dict[int, float] = {}
    jobs = jobs_for(opts)
    pending = list(ranked)
    while pending:
        # A batch of up to ``jobs`` variants that can still win, lowered and
        # simulated in parallel, then ranked in order as one process would.
        # Variants pruned while the batch is drawn keep their place: their
        # notes come in ranked order, with the bar one process would name.
        batch, drawn = [], []
        while pending and len(batch) < jobs:
            neg_est, _, variant = pending.pop(0)
            drawn.append((neg_est, variant))
            if -neg_est >= _bar(best, _unselected(compiler, variant, sizes)):
                batch.append((neg_est, variant))
        prefetch(compiler, [(v, sizes) for _, v in batch], jobs)
        for neg_est, variant in drawn:
            bar = _bar(best, _unselected(compiler, variant, sizes))
            if -neg_est < bar:  # as one process would: pruned by an earlier one
                _skip(refusals, variant, -neg_est, bar)
                continue
            try:
                score = compiler.score(variant, sizes)
            except ColcError as err:
                refusals.append(f"{variant.label}: {err}")
                continue
            scored.append((-score, variant.label, variant))
            k = _unselected(compiler, variant, sizes)
            best[k] = max(best.get(k, 0.0), score)
    scored.sort(key=_ranking(compiler, sizes))
    scored = _smaller_budgets(compiler, scored, sizes)
    for neg, _, variant in scored:
        try:
            program, text = compiler.finish(
                variant, opts.comment or (lambda v=variant: _comment(v, compiler.score(v, sizes),
                                                                     sizes)))
        except VerificationFailed as err:  # names the variant
            refusals.append(str(err))
            continue
        except InfeasibleError as err:  # lowered again after a failed verification
            refusals.append(f"{variant.label}: {err}")
            continue
        notes = tuple(dict.fromkeys(f"not used: {r}" for r in refusals))
        if program.max_bytes != opts.max_bytes:  # _iterations_capped
            notes += (f"maxBytes {program.max_bytes}: a larger call runs more than "
                      f"{MAX_ITERATIONS} loop iterations of this file, past the runtime's "
                      f"dependency flags (MSCCL_MAX_ITER); NCCL's own algorithm runs there",)
        sched = compiler.variant_schedule(variant)
        predicted = tuple((s, _as_written(compiler.simulate(variant, s), program, opts))
                          for s in sizes)
        return CompileResult(sched, program, text, variant.label,
                             schedule_algbw(sched, topo), notes, predicted, variant)
    if refusals and all("failed verification" in r for r in refusals):
        raise InternalError("every candidate failed verification: " + "; ".join(refusals[:3]))
    raise InfeasibleError("no schedule fits the runtime's limits: "
                          + "; ".join(list(dict.fromkeys(refusals))[-3:]))


def _as_written(result: SimResult, program: Program, opts: CompileOptions) -> SimResult:
    """``result`` with the written file's window: a size past the maxBytes
    the loop-iteration limit set is not selected."""
    moved = nccl_tests_bytes(program.collective, program.ngpus, result.nbytes, opts.dtype_bytes)
    why = selection(program, moved, opts.dtype_bytes) if moved > 0 else result.why_not
    if not result.selected or not why:
        return result
    return dataclasses.replace(result, selected=False, why_not=why)


def _unselected(compiler: Compiler, variant: Variant, sizes: tuple[int, ...]) -> int:
    """How many of ``sizes`` the runtime would not select ``variant``'s file at:
    what nccl-tests moves there (``nccl_tests_bytes``) against its chunks per
    loop and the window asked for, as ``simulate`` judges, known before
    lowering (the schedule is the one ``estimate`` built)."""
    opts = compiler.opts
    nchunks = compiler.variant_schedule(variant).nchunks
    return sum(bool(window_selection(
        nchunks, opts.min_bytes, opts.max_bytes,
        nccl_tests_bytes(opts.collective, compiler.topo.num_ranks, size, opts.dtype_bytes),
        opts.dtype_bytes)) for size in sizes)


def _bar(best: dict[int, float], unselected: int) -> float:
    """The score a file unselected at ``unselected`` ranked sizes must reach:
    the best of the files selected at as many sizes or more."""
    return max((v for k, v in best.items() if k <= unselected), default=0.0)


#: Budgets a winner is also lowered for (with one less and half its own): a file
#: that fits a smaller budget fits a larger one, so a larger budget never
#: predicts slower than these (fewer lanes sometimes pipeline better).
BUDGET_LADDER = (8, 16, 24, 32, 48, 64)
#: Above this many ranks the winner is not lowered again for smaller budgets
#: (each lowering and its simulations cost minutes there).
LADDER_RANKS = 256
#: Up to this many ranks the winner is also lowered for one less than every
#: ladder budget below its own, what those budgets try themselves besides
#: their halves (on the ladder but for 24's 12 and 8's 4), so a ladder budget
#: does not predict slower than a smaller one (torus 3x4 allgather at 1 GiB:
#: bfb lowered for 15 threadblocks, 61.96 GB/s, is what budget 16 writes;
#: budget 32 tried 31, 24, 16 and 8 and wrote 61.17).  Above it each extra
#: lowering costs seconds to minutes; below it the test suite's compiles
#: take 15% longer with the halves as well.
FULL_LADDER_RANKS = 64


def _iterations_capped(program: Program, backend: str) -> Program:
    """``program`` with its MSCCL window ending where a call would run more
    loop iterations than the executor's flags count (``iteration_limit``:
    an LL file of nchunksperloop 8 past 8 GiB); the runtime falls back to
    NCCL's own algorithm above it."""
    from colc.ir.simulate import iteration_limit

    limit = iteration_limit(program) if backend == "msccl" else None
    if limit is None or (program.max_bytes and program.max_bytes <= limit):
        return program
    if program.min_bytes > limit:
        raise InfeasibleError(
            f"minBytes {program.min_bytes}: a call of that size runs more than {MAX_ITERATIONS} "
            f"loop iterations of {program.protocol.value} with nchunksperloop {program.nchunks}, "
            f"where the runtime's dependency flags overflow; the file serves at most {limit} "
            f"bytes (lower --min-bytes, or use another protocol)")
    return dataclasses.replace(program, max_bytes=limit)


#: Off the ladder (a budget the user chose, such as 11), the best this many
#: variants are also lowered for every budget from the rung below up: a
#: variant lowered for more threadblocks than it needs can be slower (torus
#: 4x4 reduce-scatter, bfb, at 128 MiB and 1 GiB: 71.3 GB/s within 9, 63.9
#: within 10, 64.5 within 11), and the best within 9 was another variant
#: than the winner within 11, whose file predicted 66.8.
OFF_LADDER_VARIANTS = 3
#: ... and for at most this many budgets below the user's (a budget of 100
#: would otherwise add 36 lowerings of each).
OFF_LADDER_SPAN = 8


def _smaller_budgets(compiler: Compiler, scored: list, sizes: tuple[int, ...]) -> list:
    """``scored`` with the winner also lowered for the ladder's smaller
    budgets, and off the ladder the best ``OFF_LADDER_VARIANTS`` for every
    budget from the rung below (``below_rung``)."""
    if not scored or compiler.topo.num_ranks > LADDER_RANKS:
        return scored
    out = list(scored)
    tried: set[Variant] = {row[2] for row in scored}
    off = off_ladder(compiler)
    extra = below_rung(compiler) if off else ()
    leaders = [scored[0][2]]
    for _, _, variant in scored[1:] if off else ():
        if len(leaders) < OFF_LADDER_VARIANTS and variant.budget == 0 and variant not in leaders:
            leaders.append(variant)
    for leader in leaders:
        for variant in ladder_variants(compiler, leader, extra=extra):
            if variant in tried:
                continue
            tried.add(variant)
            try:
                out.append((-compiler.score(variant, sizes), variant.label, variant))
            except ColcError:  # a smaller budget it does not fit: no note (its advice
                continue       # would name a budget the user never gave)
    out.sort(key=_ranking(compiler, sizes))
    return out


def off_ladder(compiler: Compiler) -> bool:
    """Whether the user gave a budget off ``BUDGET_LADDER`` (0, the GPU's
    own limit, counts as on it: 108 would add dozens of lowerings)."""
    return compiler.opts.max_threadblocks != 0 and compiler.budget not in BUDGET_LADDER


def below_rung(compiler: Compiler) -> tuple[int, ...]:
    """Budgets from the ladder's rung below the compiler's budget (at most
    ``OFF_LADDER_SPAN`` below it) up to one less than it, which
    ``_smaller_budgets`` tries off the ladder.

    Parameters
    ----------
    compiler : Compiler

    Returns
    -------
    tuple of int

    >>> from colc.frontends.families import ring
    >>> below_rung(Compiler(ring(4, 1), CompileOptions(max_threadblocks=11)))
    (8, 9, 10)
    """
    rung = max((b for b in BUDGET_LADDER if b < compiler.budget), default=1)
    return tuple(range(max(rung, compiler.budget - OFF_LADDER_SPAN), compiler.budget))


def ladder_variants(compiler: Compiler, winner: Variant, full: bool = True,
                    extra: tuple[int, ...] = ()) -> list[Variant]:
    """``winner`` lowered for the ladder's budgets below the compiler's
    (``BUDGET_LADDER``, one less, half; with ``full``, up to
    ``FULL_LADDER_RANKS``, one less than each of those too; and ``extra``,
    ``below_rung``'s off the ladder), smallest first:
    what a smaller budget would write of it, which also fits this one.  Only
    budgets below the threadblocks ``winner`` takes: lowered within one it
    already fits, it comes out as it is (56 of 56 lowerings of the examples'
    portfolios)."""
    takes = compiler.program(winner).max_threadblocks
    budgets = {compiler.budget - 1, compiler.budget // 2, *extra}
    below = [b for b in BUDGET_LADDER if b < compiler.budget]
    budgets |= set(below)
    if full and compiler.topo.num_ranks <= FULL_LADDER_RANKS:
        budgets |= {b - 1 for b in below}
    out = []
    for b in sorted(x for x in budgets if 1 <= x < takes):
        # an unpaired winner's lanes, planned for half of a smaller budget, do
        # not fit (rails needs 17 on two DGX boxes): the paired file does
        out.append(dataclasses.replace(winner, budget=b, unpaired=False))
        if (winner.unpaired and winner.algorithm not in BUDGETED
                and direct_unpaired(compiler.topo, b)):
            out.append(dataclasses.replace(winner, budget=b))  # direct: the same lanes, fewer
    return out


def _ranking(compiler: Compiler, sizes: tuple[int, ...]):
    """Sort key of scored ``(-score, label, variant)`` rows: files the runtime
    selects at more ranked sizes first, then the faster, then, of equal
    figures, the one holding fewer threadblocks (SMs the user's kernels
    keep), then by label."""
    def key(row: tuple) -> tuple:
        neg_score, label, variant = row
        return (_unselected(compiler, variant, sizes), neg_score,
                compiler.program(variant).max_threadblocks, label)

    return key


def _skip(refusals: list[str], variant: Variant, bound: float, best: float) -> None:
    """Note a variant that cannot beat the best simulated one (of the files
    the runtime selects at as many ranked sizes)."""
    refusals.append(f"{variant.label}: skipped (bandwidth bound {bound:.1f} GB/s below "
                    f"the best simulated {best:.1f})")


def _size_text(n: int) -> str:
    from colc.sizes import format_size

    return format_size(n)


def _comment(variant: Variant, algbw: float, sizes: tuple[int, ...]) -> str:
    """The file's provenance line: the figure is the ranking's score, the
    harmonic mean of the simulated algbw at the ranked sizes."""
    from colc import __version__
    from colc.sizes import format_gbs, format_size

    over = (f"at {format_size(sizes[0])}" if len(sizes) == 1 else
            f"harmonic mean at {', '.join(format_size(s) for s in sizes)}")
    return (f"generated by colc {__version__}: {variant.label}, predicted algbw "
            f"{format_gbs(algbw)} GB/s (simulated, {over})")


def _check_or_raise(sched: Schedule, topo: Topology, after: str) -> None:
    problems = check_schedule(sched, topo)
    if problems:
        raise InternalError(f"schedule invalid after {after}: {problems[0]}")


def _emit(program: Program, backend: str) -> str:
    if backend == "msccl":
        from colc.backends.msccl_xml import emit_msccl_xml
        return emit_msccl_xml(program)
    if backend == "oneccl":
        from colc.backends.oneccl_xml import emit_oneccl_xml
        return emit_oneccl_xml(program)
    raise UnsupportedError(f"unknown backend '{backend}'; choose msccl or oneccl")


def _verify_text(text: str, backend: str):
    from colc.backends.verify import verify_text

    return verify_text(text, f"<generated {backend} file>", backend=backend)


__all__ = [
    "ALGORITHMS",
    "CHUNKINGS",
    "CHUNK_SCALE_RANKS",
    "DEFAULT_THREADBLOCKS",
    "MSCCL_MAX_RANKS",
    "UNBALANCED",
    "CompileOptions",
    "CompileResult",
    "Compiler",
    "Variant",
    "available_algorithms",
    "compile_topology",
    "rank_limit_problem",
    "register_algorithm",
    "scale_chunks",
    "selectable_sizes",
    "smallest_budget",
    "threadblock_budget",
    "variants",
]
_ = math
