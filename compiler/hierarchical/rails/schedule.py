"""rails' entry point: ``rails_schedule`` plans and writes one schedule.

Input: a topology, a collective, chunks per shard, the budget, and whether
the lanes are unpaired and the file Simple.  Output: a ``Schedule`` with
deps inferred and rounds set (``Schedule.rounds``), proved by the
pipeline.  Chooses the Simple files' forms (``simple_form``: landed
partials ``_lands``, tapered crossings, staggered crossings ``_staggers``,
lead pieces ``_lead_chunks`` / ``_lead_plan``), and ``separated_rounds``
gives each (pair, lane) one transfer per round, the ordering lowered when
the paired one hangs.  Seed 004 sections 5.3 and 4.5.
"""

from __future__ import annotations

import dataclasses
from collections import Counter

from colc.compiler.hierarchical.rails.builder import _Builder, _piece_list
from colc.compiler.hierarchical.rails.gather import _allgather, _OwnSpreads, _tapered
from colc.compiler.hierarchical.rails.plan import (
    IN,
    OUT,
    SHARED_BOXES,
    SUM_STEPS,
    RailPlan,
    _carried,
    _gather_piece,
    _segments,
    plan_rails,
)
from colc.compiler.hierarchical.rails.scatter import _reduce_scatter
from colc.compiler.lowering.infer_dependencies import infer_dependencies
from colc.compiler.lowering.lower_to_program import MAX_STEPS
from colc.ir.chunks import Op, OpKind, Schedule, Slot
from colc.ir.core import Collective
from colc.ir.topology import Topology

NAME = "rails"
#: Boxes up to which a Simple reduce-scatter lands the partials its receiving
#: carriers sum (``_lands``).  On 64 DGX boxes the landed Simple file gains
#: at 1 GiB (129.0 -> 140.2 GB/s) but LL128 stays ahead there (143.7), and
#: it loses at 128 MiB (111.0 -> 110.8) while the portfolio builds one
#: schedule more (319 -> 412 s).
LANDS_BOXES = 32
#: Pieces' worth of chunks at the start of a Simple allreduce's shards and
#: segments that its reduce-scatter moves one chunk a piece (``_lead_chunks``):
#: DGX A100 x4 at 1 GiB (16 chunks per shard, pieces of 2), with the own
#: shards spread early, 105.2 GB/s without, 105.9 with 1, 107.7 with 2 (3
#: and more: the combining threadblock keeps it at 2).
LEAD_PIECES = 2
#: Steps a paired lane keeps for the lowering's nops where lead pieces add
#: transfers (``rails_schedule`` drops them past ``MAX_STEPS - LEAD_NOPS``:
#: DGX A100 x4, 16 chunks per shard, 56 transfers lowered to 60 steps).
LEAD_NOPS = 8
#: Boxes from which an allreduce spreads its own shards early (``_OwnSpreads``).
SPREAD_BOXES = 4
#: Crossings a rank sends from which an allreduce staggers them.
STAGGER_CROSSINGS = 7


def simple_form(topo: Topology, collective: Collective, chunks: int | None,
                budget: int = 32) -> bool:
    """Whether ``rails_schedule``'s form for Simple files differs here from
    the others' (an allgather that tapers its last pieces, ``_tapered``; a
    reduce-scatter whose receiving carriers land the partials, ``_lands``;
    an allreduce whose finer pieces fill a lane, ``PAIRED_LANE_TRANSFERS``,
    whose reduce-scatter starts with pieces of one chunk, ``_lead_chunks``,
    or whose crossings start one after another, ``_staggered``):
    the pipeline builds a separate schedule for its Simple files only then.

    >>> from colc.frontends.families import dgx_a100
    >>> [simple_form(dgx_a100(n), Collective.ALLGATHER, c) for n, c in ((64, 1), (16, 4), (128, 1))]
    [True, False, False]
    >>> [simple_form(dgx_a100(n), Collective.REDUCESCATTER, 2) for n in (8, 16, 32)]
    [False, True, True]
    >>> [simple_form(dgx_a100(n), Collective.ALLREDUCE, 1) for n in (32, 64, 128)]
    [False, True, False]
    """
    cf = chunks or 8
    if collective is Collective.ALLGATHER:
        return _tapered(plan_rails(topo, cf, budget), cf)
    if collective is Collective.REDUCESCATTER:
        return _lands(plan_rails(topo, cf, budget, 1, True), cf)
    if collective is not Collective.ALLREDUCE:
        return False
    fine = plan_rails(topo, cf, budget, 2, True, fine=True)
    return (fine != plan_rails(topo, cf, budget, 2, True)
            or _lead_plan(fine, cf, collective, True, budget)[1] > 0
            or _staggers(fine))


def rails_schedule(topo: Topology, collective: Collective, chunks: int | None = None,
                   budget: int = 32, separate: bool = False, unpaired: bool = False,
                   simple: bool = True) -> Schedule:
    """Rail-aligned hierarchical schedule of ``collective`` (see module docstring).

    Parameters
    ----------
    topo : Topology
    collective : Collective
    chunks : int or None
        Chunks per shard (default 8).
    budget : int
        Threadblocks per rank the file may take.
    separate : bool
        Give a (pair, lane) at most one transfer per round (``separated_rounds``);
        boxes without a switch always do.
    unpaired : bool
        Plan for an unpaired lowering (``RailPlan.unpaired``); ``budget`` is
        then what the plan counts, about half what the lowering takes.
    simple : bool
        The form for Simple files (the pipeline asks it for those only): the
        allgather cuts each crossing's last piece in halves where that
        applies (``_tapered``), the reduce-scatter's receiving carriers land
        the partials they sum (``_lands``), an allreduce takes the pieces
        that fill a paired lane (``plan_rails``' ``fine``).

    Returns
    -------
    Schedule

    Raises
    ------
    UnsupportedError
        Not boxes behind switches joined by rails.
    InfeasibleError
        The budget is too small, or the chunking too fine for 64 steps.
    """
    cf = chunks or 8
    plan = plan_rails(topo, cf, budget, 2 if collective is Collective.ALLREDUCE else 1,
                      collective is not Collective.ALLGATHER, unpaired, simple)
    led, lead = _lead_plan(plan, cf, collective, simple, budget)
    out = _build(led, cf, topo.num_ranks, collective, separate, simple, lead)
    if lead and _paired_steps(out.ops) > MAX_STEPS - LEAD_NOPS:
        out = _build(plan, cf, topo.num_ranks, collective, separate, simple, 0)
    gates = tuple(out.gates.get(i, -1) for i in range(len(out.ops))) if out.gates else ()
    sched = Schedule(collective, out.n, out.n * cf, max(out.scratch), tuple(out.ops),
                     algorithm=NAME, rounds=tuple(out.rounds), gates=gates)
    return infer_dependencies(sched)


def _build(plan: RailPlan, cf: int, n: int, collective: Collective, separate: bool,
           simple: bool, lead: int) -> _Builder:
    """The ops of ``rails_schedule`` (see there) with a reduce-scatter whose
    shards and segments start with ``lead`` pieces of one chunk."""
    out = _Builder(plan, cf, n, separate)
    out.land = simple and collective is Collective.REDUCESCATTER
    out.lead = lead
    if collective is Collective.ALLGATHER:
        for r in range(n):
            for c, k in out.pieces(0, cf):
                out.add(OpKind.COPY, Slot(r, IN, c), Slot(r, OUT, r * cf + c), k)
    elif collective is Collective.ALLREDUCE:
        gather = dataclasses.replace(plan, piece=_gather_piece(plan, cf))
        early = len(plan.groups) >= SPREAD_BOXES
        _reduce_scatter(out, collective, _OwnSpreads(out, gather.piece) if early else None)
        out.plan = gather
        _allgather(out, OUT, False, spreads=not early,
                   stagger=simple and _staggers(plan))
    else:
        _reduce_scatter(out, collective)
    if collective is Collective.ALLGATHER:
        _allgather(out, IN, simple)
    return out


def _lead_chunks(plan: RailPlan, cf: int, collective: Collective, simple: bool) -> int:
    """Chunks at the start of each shard and segment that a Simple allreduce's
    reduce-scatter moves one a piece (``LEAD_PIECES`` pieces' worth), or 0.

    The network waits for the first piece to pass the carriers' sum chains
    over the box (a few box transfers, each at one threadblock's speed):
    finer first pieces reach it sooner.  DGX A100 x4 allreduce at 1 GiB (16
    chunks per shard, pieces of 2): the NIC started at 704 us, 357 with the
    first 4 chunks one a piece; 102.8 -> 105.0 GB/s (the own shards'
    spreads still after the reduce-scatter, ``_OwnSpreads``).  Only with a
    segment per place and shared lanes (3 to ``SHARED_BOXES`` boxes), where
    every phase has the same pieces per shard, and pieces of 2 chunks or
    more; fewer where the combining threadblock of the carriers' split sums
    would pass ``SUM_STEPS`` (x4: 6 chunks, 66 steps), and
    ``rails_schedule`` drops it where a paired lane would pass
    ``MAX_STEPS - LEAD_NOPS`` transfers.
    """
    if (collective is not Collective.ALLREDUCE or not simple or plan.trees or plan.unpaired
            or plan.segments < plan.size or plan.lanes[0] or plan.piece < 2):
        return 0
    carried = max(map(len, _carried(len(plan.groups), plan.size, plan.segments, plan.spread)))
    for lead in range(min(cf, LEAD_PIECES * plan.piece), 0, -plan.piece):
        sums = carried * len(_piece_list(0, cf, plan.piece, False, lead))
        if plan.sum_chains == 1 or plan.sum_chains * sums <= SUM_STEPS * plan.sum_tbs:
            return lead
    return 0


def _lead_plan(plan: RailPlan, cf: int, collective: Collective, simple: bool,
               budget: int) -> tuple[RailPlan, int]:
    """``plan`` and its lead chunks (``_lead_chunks``); where the combining
    threadblock leaves no room for them and the budget has a threadblock
    spare, the plan with a second combining threadblock, if that makes room.

    DGX A100 x8 (8 chunks per shard, pieces of 2, two chains of seven pieces
    a carrier's sums, 56 steps): no lead pieces fit one combining
    threadblock; with two (31 threadblocks) the first 4 chunks go one a
    piece: 1 GiB 90.6 -> 93.1 GB/s, 256 / 512 MiB 82.7 / 84.0 -> 86.0 /
    86.1, 128 MiB 82.0 -> 81.2 (three chains and two threadblocks, room for
    2 lead chunks: 92.3; four chains and no lead: 90.4)."""
    lead = _lead_chunks(plan, cf, collective, simple)
    if lead or plan.sum_chains == 1 or plan.threadblocks >= budget:
        return plan, lead
    wider = dataclasses.replace(plan, sum_tbs=plan.sum_tbs + 1,
                                threadblocks=plan.threadblocks + 1)
    lead = _lead_chunks(wider, cf, collective, simple)
    return (wider, lead) if lead else (plan, 0)


def _paired_steps(ops: list[Op]) -> int:
    """Most transfers on one pair of ranks and one channel (both directions: the
    steps of a threadblock the paired lowering gives that pair and channel)."""
    count = Counter((min(o.src.rank, o.dst.rank), max(o.src.rank, o.dst.rank), o.channel)
                    for o in ops if o.src.rank != o.dst.rank)
    return max(count.values(), default=0)


def separated_rounds(topo: Topology, collective: Collective, chunks: int | None = None,
                     budget: int = 32, simple: bool = True) -> tuple[int, ...]:
    """``Schedule.rounds`` of ``rails_schedule`` where a (pair, lane)'s second
    transfer in a round starts the next round; the ops are the same.

    A paired lane of an allreduce carries its own and relayed partial sums in
    one round, so both sides send twice in a row: with Simple's FIFO of 2
    calls the lowering that follows the plain rounds deadlocks (DGX A100 x16:
    a cycle through the box lanes), and unpaired it needs 59 threadblocks.
    Separated, the lowering alternates them (x16 allreduce, chunking 4: 52.8
    and 65.2 GB/s at 128 MiB and 1 GiB, simulated).  Not the default: where
    the plain rounds run, they run faster (LL128 allreduce on DGX A100 x32:
    50.8 GB/s against 42.6; Simple reduce-scatter on x16 at 1 GiB: 138.7
    against 130.7), so the pipeline tries this ordering only
    when the plain one hangs.

    Complexity: that of ``rails_schedule`` (it is built again).
    """
    return rails_schedule(topo, collective, chunks, budget, separate=True, simple=simple).rounds


def _staggers(plan: RailPlan) -> bool:
    """Whether a Simple allreduce staggers its crossings (``_staggered``): from
    ``STAGGER_CROSSINGS`` crossings a rank, up to ``SHARED_BOXES`` boxes (DGX
    A100 x8; beyond, its Simple files are not the portfolio's at 1 GiB, and
    an extra Simple schedule would cost the builds of 1024 GPUs their time),
    in pieces of 2 chunks or more (x8 with 4 chunks per shard, pieces of
    one: 256 MiB / 512 MiB / 1 GiB 84.0 / 85.6 / 85.5 -> 82.7 / 84.0 /
    83.7 GB/s staggered)."""
    if len(plan.groups) > SHARED_BOXES or plan.piece < 2:
        return False
    sent = _carried(len(plan.groups), plan.size, plan.segments, plan.spread)
    return max(map(len, sent)) >= STAGGER_CROSSINGS


def _lands(plan: RailPlan, cf: int) -> bool:
    """Whether some receiving carrier of the reduce-scatter sums several
    partials of one chunk (a segment it carries crosses to it from two
    boxes or more, for owners other than itself): the form for Simple files
    then lands each in scratch and sums them on a local threadblock.

    Reduced as they arrive, the partials form one chain across the rail
    threadblocks, and each of those sends its next piece only after its
    link of the chain: the last round's crossings waited for the chain
    while the NIC idled (DGX A100 x16 at 1 GiB, c2 Simple, 156.1 -> 162.0
    GB/s; x32 c1 141.9 -> 144.7).  Not at LL128 (x16 128 MiB 124.8 ->
    123.9), nor for an allreduce (x16 Simple 1 GiB 76.5 -> 74.4).  From 16
    DGX boxes (on fewer a carrier sums one partial per chunk) to
    ``LANDS_BOXES``.  The landings take scratch: x16 c2 82 -> 92 chunks per
    rank, x32 c1 44 -> 65 (against 256 input chunks).

    ``cf``: chunks per shard.
    """
    if plan.trees or len(plan.groups) > LANDS_BOXES:
        return False
    crossing = Counter(  # (receiving rank, first chunk) of every crossing not for it alone
        (u, start) for b, _, _, _, g, start, width in _segments(plan, cf)
        if not (u := plan.groups[b][g]) * cf <= start < start + width <= (u + 1) * cf)
    return any(n > 1 for n in crossing.values())
