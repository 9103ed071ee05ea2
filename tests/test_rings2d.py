"""Two-level rings (``--algorithm rings2d``): correctness, network traffic, errors."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from colc.backends.msccl_xml import emit_msccl_xml
from colc.backends.verify import verify_text
from colc.compiler.pipeline import CompileOptions, compile_topology
from colc.compiler.rings.rings2d import rings2d_schedule
from colc.errors import UnsupportedError
from colc.frontends.families import dgx_a100, mi250, ring
from colc.ir.chunks import Op, OpKind, Slot
from colc.ir.core import Buffer, Collective, Protocol
from colc.ir.topology import Link, Node, Topology, boxes
from helpers import validate_schedule

COLLS = (Collective.ALLGATHER, Collective.REDUCESCATTER, Collective.ALLREDUCE)


@pytest.mark.parametrize("coll", COLLS)
@pytest.mark.parametrize("family,nboxes,chunks", [(dgx_a100, 2, 2), (dgx_a100, 3, 1),
                                                  (mi250, 2, 2)])
def test_schedules_verify(family, nboxes, chunks, coll) -> None:
    """Proved by the chunk checker and the runtime interpreter (fused lowering)."""
    topo = family(nboxes)
    validate_schedule(topo, rings2d_schedule(topo, coll, chunks))


@pytest.mark.parametrize("coll", COLLS)
def test_network_traffic_is_the_minimum(coll) -> None:
    """Per phase every rank sends (B-1)/B of its rail's shards over the network,
    once: (B-1) * cf chunks, and nothing else crosses a box."""
    topo, cf = dgx_a100(3), 2
    sched = rings2d_schedule(topo, coll, cf)
    box_of = {r: i for i, g in enumerate(boxes(topo)) for r in g}
    sent = [0] * topo.num_ranks
    for op in sched.ops:
        if op.is_transfer and box_of[op.src.rank] != box_of[op.dst.rank]:
            assert op.src.rank % 8 == op.dst.rank % 8  # rail peers only
            sent[op.src.rank] += op.count
    phases = 2 if coll is Collective.ALLREDUCE else 1
    assert sent == [phases * 2 * cf] * topo.num_ranks


def test_errors() -> None:
    with pytest.raises(UnsupportedError, match="at least two boxes"):
        rings2d_schedule(ring(4, 10), Collective.ALLGATHER)
    nodes = (Node("a", "gpu"), Node("b", "gpu"), Node("c", "gpu"), Node("n", "switch", net=True))
    links = tuple(Link(x, y, Fraction(10)) for x, y in
                  (("a", "b"), ("b", "a"), ("a", "n"), ("n", "a"), ("c", "n"), ("n", "c")))
    with pytest.raises(UnsupportedError, match="equal size"):
        rings2d_schedule(Topology("uneven", nodes, links), Collective.ALLGATHER)


def test_compiled_file_is_verified() -> None:
    """``--algorithm rings2d`` goes through the whole pipeline (balanced, simulated,
    verified before it is written)."""
    topo = dgx_a100(2)
    result = compile_topology(topo, CompileOptions(algorithm="rings2d", jobs=1,
                                                   collective=Collective.ALLGATHER,
                                                   protocol=Protocol.SIMPLE, chunks=2))
    assert result.algorithm.startswith("rings2d")
    assert 'coll="allgather"' in result.text


def test_two_boxes_cross_once_and_land() -> None:
    """Two-box reduce-scatter: every rank sends ``cf`` chunks over the network,
    to its rail peer only, and each lands in scratch, reduced with the
    receiver's input (never with what its own rings make: a landing receive
    never waits for them)."""
    topo, cf = dgx_a100(2), 2
    sched = rings2d_schedule(topo, Collective.REDUCESCATTER, cf)
    box_of = {r: i for i, g in enumerate(boxes(topo)) for r in g}
    crossing = [op for op in sched.ops
                if op.is_transfer and box_of[op.src.rank] != box_of[op.dst.rank]]
    assert all(op.kind is OpKind.REDUCE and op.dst.buffer is Buffer.SCRATCH
               and op.operand == Slot(op.dst.rank, Buffer.INPUT, op.dst.index % (16 * cf))
               and op.src.rank % 8 == op.dst.rank % 8 for op in crossing)
    sent = [0] * topo.num_ranks
    for op in crossing:
        sent[op.src.rank] += op.count
    assert sent == [cf] * topo.num_ranks


def _chain_starts(groups: list[list[int]], sched, cf: int) -> dict[int, set[int]]:
    """Channel -> the chunks (mod ``cf``) whose box chains start there: the
    chains' first sends, from the input, to a rank of the same box."""
    box_of = {r: i for i, g in enumerate(groups) for r in g}
    starts: dict[int, set[int]] = {}
    for op in sched.ops:
        if op.src.buffer is Buffer.INPUT and box_of[op.src.rank] == box_of[op.dst.rank]:
            starts.setdefault(op.channel, set()).add(op.src.index % cf)
    return starts


def test_two_boxes_within_forestcolls_count() -> None:
    """At ForestColl's own 25 threadblocks (seed 004, DGX A100 x2
    reduce-scatter: 185 / 247 GB/s measured at 128M / 1G) the two-box
    rings take 24 (20 without the first pass's four split chunks,
    ``split_chunks``, which only the Simple file takes) and pass both
    (LL128 at 128M, Simple at 1G); ``rails`` there is held to 17 (its
    reduce-scatter splits lanes evenly: 167.9 / 213.5)."""
    from colc.compiler.pipeline import Compiler, Variant

    comp = Compiler(dgx_a100(2), CompileOptions(algorithm="rings2d", max_threadblocks=25,
                                                collective=Collective.REDUCESCATTER, jobs=1))
    at_128m = Variant("rings2d", 32, Protocol.LL128)
    at_1g = Variant("rings2d", 32, Protocol.SIMPLE)
    assert [comp.program(v).max_threadblocks for v in (at_128m, at_1g)] == [20, 24]
    assert comp.simulate(at_128m, 128 << 20).algbw >= 185
    assert comp.simulate(at_1g, 1 << 30).algbw >= 247


def test_two_box_allreduce_beats_rccl_within_the_default_budget() -> None:
    """MI250 x2 allreduce at 1 GiB: RCCL's tree measured 86.5 GB/s (seed 004
    Table 2); the two-box rings, reduce-scatter then allgather on the same
    22 threadblocks (2 for the split chunks, ``split_chunks``), beat it
    within the default budget of 32."""
    from colc.compiler.pipeline import Compiler, Variant

    comp = Compiler(mi250(2), CompileOptions(algorithm="rings2d", jobs=1, rank_sizes=(1 << 30,),
                                             collective=Collective.ALLREDUCE))
    v = Variant("rings2d", 16, Protocol.SIMPLE)
    assert comp.program(v).max_threadblocks <= 22
    assert comp.simulate(v, 1 << 30).algbw >= 86.5


def test_crossing_form_on_four_boxes() -> None:
    """From three boxes the crossing form sends every partial straight to its
    box, nearest box first, each landing in its own scratch region (on boxes
    without a switch: ``switched_form`` is for the others); MI250 x4
    reduce-scatter at 1 GiB (16 chunks: one group per pass, 64 steps per
    ring threadblock) is at least 1.1x RCCL's rings written as a file
    (148.4 GB/s, simulated) within 32 threadblocks (162.9 with its partials
    sent in the order of their rings' pace, 163.6 with the next box's on
    two connections)."""
    from colc.compiler.pipeline import Compiler, Variant

    topo, cf = mi250(4), 2
    sched = rings2d_schedule(topo, Collective.REDUCESCATTER, cf)
    box_of = {r: i for i, g in enumerate(boxes(topo)) for r in g}
    crossing = [op for op in sched.ops
                if op.is_transfer and box_of[op.src.rank] != box_of[op.dst.rank]]
    regions = {op.dst.index // (topo.num_ranks * cf) for op in crossing}
    assert regions == {1, 2, 3} and sched.scratch_chunks == 4 * topo.num_ranks * cf
    assert not sched.gates
    validate_schedule(topo, sched)
    comp = Compiler(topo, CompileOptions(algorithm="rings2d", jobs=1, rank_sizes=(1 << 30,),
                                             collective=Collective.REDUCESCATTER))
    v = Variant("rings2d", 16, Protocol.SIMPLE)
    assert comp.program(v).max_threadblocks <= 32
    assert comp.simulate(v, 1 << 30).algbw >= 1.1 * 148.4


def test_switched_reduce_scatter_starts_the_network_sooner_and_ends_in_the_landing() -> None:
    """Behind box switches (DGX A100 x4) the crossing reduce-scatter holds
    part of the first pass's rings back until the rest have nearly passed
    (``Schedule.gates``, honoured by the lowering as a wait), and its last
    crossing lands in the owner's output, adding the own box's sum: 190.7
    GB/s at 1 GiB within 24 threadblocks, against 180.4 for the crossing
    form before."""
    from colc.compiler.pipeline import Compiler, Variant

    topo, cf = dgx_a100(4), 16
    sched = rings2d_schedule(topo, Collective.REDUCESCATTER, cf)
    gated = [(op, sched.ops[g]) for op, g in zip(sched.ops, sched.gates, strict=True) if g >= 0]
    assert gated and all(op.src.buffer is Buffer.INPUT and gate.dst.rank == op.src.rank
                         and gate.op_id < op.op_id for op, gate in gated)
    box_of = {r: i for i, g in enumerate(boxes(topo)) for r in g}
    last = [op for op in sched.ops if op.is_transfer and op.dst.buffer is Buffer.OUTPUT
            and box_of[op.src.rank] != box_of[op.dst.rank]]
    assert len(last) == topo.num_ranks * cf  # every chunk's result lands from the box 3 on
    assert all(op.operand == Slot(op.dst.rank, Buffer.SCRATCH, op.dst.rank * cf + op.dst.index)
               for op in last)
    validate_schedule(topo, sched)
    comp = Compiler(topo, CompileOptions(algorithm="rings2d", jobs=1, rank_sizes=(1 << 30,),
                                         collective=Collective.REDUCESCATTER))
    v = Variant("rings2d", cf, Protocol.SIMPLE)
    prog = comp.program(v)
    assert prog.max_threadblocks <= 24
    ring_tbs = [tb for tb in prog.ranks[0].threadblocks if tb.channel < 16]
    assert sum(tb.steps[0].dep is not None for tb in ring_tbs) == cf - cf * 11 // 16  # FIRST_PART
    assert comp.simulate(v, 1 << 30).algbw >= 188


def test_switched_reduce_scatter_in_two_groups_a_pass() -> None:
    """With 32 chunks per shard (two per ring, the ring threadblocks' 64
    steps on four boxes) each pass of DGX A100 x4's switched reduce-scatter
    goes in two groups of one chunk per ring, the first part held back from
    the first group only; a chain's step moves half as much, so the first
    crossings start sooner, and every distance crosses on two connections;
    each rank's last-distance crossings wait until it has sent three
    quarters of the distance before's (``LAST_HELD``): at 1 GiB faster than
    with 16 chunks and than rails' best file (201.7 GB/s, simulated; 209.2
    before the last distance waited), within 28 threadblocks (where no
    chains split, ``split_chunks``)."""
    from colc.compiler.pipeline import Compiler, Variant

    topo, cf = dgx_a100(4), 32
    sched = rings2d_schedule(topo, Collective.REDUCESCATTER, cf, budget=28)
    gated = [(op, sched.ops[g]) for op, g in zip(sched.ops, sched.gates, strict=True) if g >= 0]
    held = {op.src.index % cf for op, _ in gated if op.src.buffer is Buffer.INPUT}
    assert held == set(range(16 * 11 // 16, 16))  # FIRST_PART of the first group
    box_of = {r: i for i, g in enumerate(boxes(topo)) for r in g}

    def distance(op: Op) -> int:
        return (box_of[op.dst.rank] - box_of[op.src.rank]) % 4

    last = [(op, gate) for op, gate in gated if op.src.buffer is Buffer.SCRATCH]
    assert {(op.src.rank, op.channel) for op, _ in last} == {
        (op.src.rank, op.channel) for op in sched.ops if op.is_transfer and distance(op) == 3}
    assert len(last) == 2 * 2 * topo.num_ranks  # each group's first on each of two channels
    for op, gate in last:
        sent = [o for o in sched.ops if o.is_transfer and o.src.rank == op.src.rank
                and distance(o) == 2]
        assert distance(op) == 3 and sent.index(gate) == len(sent) * 3 // 4
    channels: dict[int, set[int]] = {}
    for op in sched.ops:
        if op.is_transfer and box_of[op.src.rank] == 0 and box_of[op.dst.rank] != 0:
            channels.setdefault(box_of[op.dst.rank], set()).add(op.channel)
    assert sorted(len(c) for c in channels.values()) == [2, 2, 2]
    assert len(set().union(*channels.values())) == 6
    validate_schedule(topo, sched)
    comp = Compiler(topo, CompileOptions(algorithm="rings2d", jobs=1, rank_sizes=(1 << 30,),
                                         collective=Collective.REDUCESCATTER,
                                         max_threadblocks=28))
    two, one = Variant("rings2d", cf, Protocol.SIMPLE), Variant("rings2d", 16, Protocol.SIMPLE)
    prog = comp.program(two)
    assert prog.max_threadblocks <= 28
    assert max(len(tb.steps) for r in prog.ranks for tb in r.threadblocks) <= 64
    fast = comp.simulate(two, 1 << 30).algbw
    assert fast > comp.simulate(one, 1 << 30).algbw and fast > 210


@pytest.mark.scale
def test_switched_reduce_scatter_splits_its_first_chains_within_the_budget() -> None:
    """DGX A100 x4, 32 chunks per shard: the first pass's first
    ``split_chunks`` chunks run each chain in two halves meeting at its end
    (the second backwards, on a channel of its own), a quarter of the
    group's chunks start whole beside them and the rest of the first group waits for the
    halves (``Schedule.gates``).  Four within 32 threadblocks, three within
    31, two within 30, none below; the files of 30 and 32 fit them, and at
    32 the 1 GiB file reaches 80% of the cut bound (213.4 GB/s,
    simulated)."""
    from colc.compiler.pipeline import Compiler, Variant
    from colc.compiler.rings.rings2d import split_chunks
    from colc.compiler.rings.rings2d.split import SPLIT_FREE_PART

    topo, cf = dgx_a100(4), 32
    groups = boxes(topo)
    assert [split_chunks(topo, groups, Collective.REDUCESCATTER, cf, b)
            for b in (28, 29, 30, 31, 32, 0)] == [0, 0, 2, 3, 4, 4]
    sched = rings2d_schedule(topo, Collective.REDUCESCATTER, cf, simple=True)
    starts = _chain_starts(groups, sched, cf)
    extra = [ch for ch in starts if ch >= 16]
    assert sorted(extra) == [22, 23, 24, 25]  # after the six rail channels
    assert [starts[ch] for ch in sorted(extra)] == [{0}, {1}, {2}, {3}]
    gated = {sched.ops[i].src.index % cf for i, g in enumerate(sched.gates)
             if g >= 0 and sched.ops[i].src.buffer is Buffer.INPUT}
    assert gated == set(range(4 + 16 // SPLIT_FREE_PART, 16))
    validate_schedule(topo, sched)
    v = Variant("rings2d", cf, Protocol.SIMPLE)
    for budget in (30, 32):
        comp = Compiler(topo, CompileOptions(algorithm="rings2d", jobs=1, max_threadblocks=budget,
                                             collective=Collective.REDUCESCATTER))
        assert comp.program(v).max_threadblocks == budget
    # 80% of the cut bound, which the form without split chunks (28
    # threadblocks, ``test_switched_reduce_scatter_in_two_groups_a_pass``)
    # does not reach (211.2 GB/s)
    assert comp.simulate(v, 1 << 30).algbw >= 0.8 * 266.7


@pytest.mark.scale
def test_grid_splits_its_first_chains_within_the_budget() -> None:
    """DGX A100 x16 allreduce (a 4 x 4 grid, 4 chunks per shard): the grid's
    first pass splits two chunks' chains where the budget holds their two
    threadblocks beside the form's 30 (budgets 30 and 31 share the unsplit
    schedule, which the portfolio also ranks at 32); the split chunks' backward
    halves run on the two channels after the first pass's second
    connection, the pass's last chunk waits for them, and at 1 GiB the split
    file is faster (simulated)."""
    from colc.compiler.pipeline import Compiler, Variant
    from colc.compiler.rings.rings2d import fewer_split_budgets, split_chunks

    topo, coll, cf = dgx_a100(16), Collective.ALLREDUCE, 4
    groups = boxes(topo)
    assert [split_chunks(topo, groups, coll, cf, b) for b in (30, 31, 32)] == [0, 0, 2]
    assert split_chunks(topo, groups, coll, 2) == 0  # both chunks of a pass: none
    assert fewer_split_budgets(topo, groups, coll, cf, 32) == (30,)
    comps = {b: Compiler(topo, CompileOptions(algorithm="rings2d", jobs=1, max_threadblocks=b,
                                              collective=coll)) for b in (30, 31, 32)}
    v = Variant("rings2d", cf, Protocol.SIMPLE)
    assert comps[30].schedule_key(v) == comps[31].schedule_key(v) != comps[32].schedule_key(v)
    assert comps[32].fewer_split_budgets(cf) == (30,)
    sched = comps[32].variant_schedule(v)
    back = {op.channel: op.src.index % cf for op in sched.ops
            if op.channel >= 16 + 6 + 1 and op.src.buffer is Buffer.INPUT}
    assert back == {23: 0, 24: 1}
    # the split chains come first; the pass's last chunk waits for them, the
    # held passes for its whole chunk
    whole = min(op.op_id for op in sched.ops if op.src.buffer is Buffer.INPUT
                and op.src.index % cf == 2)
    on_split = {sched.ops[i].src.index % cf for i, g in enumerate(sched.gates) if 0 <= g < whole}
    assert on_split == {cf - 1}
    assert [comps[b].program(v).max_threadblocks for b in (31, 32)] == [30, 32]
    assert comps[32].simulate(v, 1 << 30).algbw > comps[31].simulate(v, 1 << 30).algbw


@pytest.mark.parametrize("nboxes,cf", [(3, 1), (3, 3), (8, 2), (3, 32)])
def test_switched_reduce_scatter_verifies(nboxes, cf) -> None:
    """The switched form on three boxes (one chunk: no second part, no
    gates; three: an uneven split; 32: two groups a pass) and on eight,
    where the last two distances land at the owner, the first of them
    adding the own box's sum and the second that landing."""
    topo = dgx_a100(nboxes)
    sched = rings2d_schedule(topo, Collective.REDUCESCATTER, cf)
    assert bool(sched.gates) is (cf > 1)
    box_of = {r: i for i, g in enumerate(boxes(topo)) for r in g}
    crossing = [op for op in sched.ops
                if op.is_transfer and box_of[op.src.rank] != box_of[op.dst.rank]]
    onto_own = [op for op in crossing if op.operand == Slot(op.dst.rank, Buffer.SCRATCH,
                                                             op.src.index)]
    into_out = [op for op in crossing if op.dst.buffer is Buffer.OUTPUT]
    assert len(onto_own) == len(into_out) == topo.num_ranks * cf  # once per chunk
    assert (onto_own == into_out) is (nboxes < 8)
    validate_schedule(topo, sched)


def test_crossing_sends_the_partials_of_the_least_shared_rings_first() -> None:
    """MI250 boxes have links that three of 16 rings share: the crossing
    reduce-scatter sends each pass's partials in the order of their rings'
    share of their most shared link (``ring_shares``), so the network starts
    with the partial of the one ring that shares no link three ways."""
    from colc.compiler.rings.rings2d import RINGS, ring_shares
    from colc.compiler.rings.rings2d.placement import _scatter_ring

    topo, cf = mi250(4), 16
    sched = rings2d_schedule(topo, Collective.REDUCESCATTER, cf)
    members = boxes(topo)[0]
    place = {r: i for i, r in enumerate(members)}
    succ: dict[int, dict[int, int]] = {q: {} for q in range(RINGS)}
    for op in sched.ops:
        if op.is_transfer and op.channel < RINGS and op.src.rank in place:
            succ[op.channel][place[op.src.rank]] = place[op.dst.rank]
    orders = []
    for q in range(RINGS):
        order = [0]
        while len(order) < len(members):
            order.append(succ[q][order[-1]])
        orders.append(order)
    shares = ring_shares(topo, members, orders)
    assert shares[0] < max(shares)  # chunk order alone would not send the fastest first
    sent = [op.dst.index % cf for op in sched.ops
            if op.is_transfer and op.src.rank == 0 and op.dst.rank not in place]
    assert len(sent) == 3 * cf
    for k in range(3):  # each pass's crossings, largest share first
        got = [shares[_scatter_ring(q, k + 1, cf, RINGS, 4)] for q in sent[k * cf:(k + 1) * cf]]
        assert got[0] == max(shares) and got == sorted(got, reverse=True)


@pytest.mark.scale
def test_crossing_reduce_scatter_sends_to_the_next_box_twice_within_the_budget() -> None:
    """MI250 x4 reduce-scatter: the partials for the next box cross on two
    connections where the budget holds them (``next_box_twice``; 24
    threadblocks), on one within 23 (every budget below 24 shares that
    schedule; from 26 the first pass splits two chunks' chains,
    ``split_chunks``)."""
    from colc.compiler.pipeline import Compiler, Variant

    topo = mi250(4)
    box_of = {r: i for i, g in enumerate(boxes(topo)) for r in g}
    v = Variant("rings2d", 16, Protocol.SIMPLE)
    programs = {}
    for budget in (23, 25):
        comp = Compiler(topo, CompileOptions(algorithm="rings2d", jobs=1, max_threadblocks=budget,
                                             collective=Collective.REDUCESCATTER))
        programs[budget] = comp.program(v)
        sched = comp.variant_schedule(v)
        channels: dict[int, set[int]] = {}  # distance -> channels of rank 0's crossings
        for op in sched.ops:
            if op.is_transfer and op.src.rank == 0 and box_of[op.dst.rank]:
                channels.setdefault(box_of[op.dst.rank], set()).add(op.channel)
        assert sorted(len(c) for c in channels.values()) == (
            [1, 1, 1] if budget == 23 else [1, 1, 2])
        assert len(channels[1]) == (1 if budget == 23 else 2)
    assert programs[23].max_threadblocks == 22 and programs[25].max_threadblocks == 24
    keys = {b: Compiler(topo, CompileOptions(collective=Collective.REDUCESCATTER,
                                             max_threadblocks=b)).schedule_key(v)[2]
            for b in (16, 23, 24, 25, 26, 32)}
    # one narrowed schedule for every budget below 24, one for 24 and 25
    assert keys == {16: 1, 23: 1, 24: 24, 25: 24, 26: 0, 32: 0}


@pytest.mark.parametrize("nboxes,spare",
                         [(2, 22), pytest.param(4, 26, marks=pytest.mark.scale)])
def test_crossing_reduce_scatter_splits_its_first_chains_within_the_budget(nboxes, spare) -> None:
    """MI250 x2 and x4 reduce-scatter, 16 chunks per shard: the crossing
    form's first pass splits the chains of its first two chunks in halves
    meeting at their ends (``split_chunks``, ``CROSSING_SPLIT_CHUNKS``),
    each backward half on a channel of its own after the rail channels,
    where the budget holds two threadblocks more.  Two boxes: proved, and
    faster at 128 MiB and 1 GiB than without (simulated); four: within the
    budget, and at 1 GiB at least 1.1x RCCL's rings written as a file
    (148.4 GB/s, simulated)."""
    from colc.compiler.pipeline import Compiler, Variant
    from colc.compiler.rings.nccl_baseline import nccl_ring_program
    from colc.compiler.rings.rings2d import split_chunks
    from colc.ir.runtime_model import model_for
    from colc.ir.simulate import simulate

    topo, cf = mi250(nboxes), 16
    groups = boxes(topo)
    assert [split_chunks(topo, groups, Collective.REDUCESCATTER, cf, b)
            for b in (spare - 1, spare, 0)] == [0, 2, 2]
    sched = rings2d_schedule(topo, Collective.REDUCESCATTER, cf, simple=True)
    starts = _chain_starts(groups, sched, cf)
    assert [starts[ch] for ch in sorted(starts) if ch >= 16] == [{0}, {1}]
    v = Variant("rings2d", cf, Protocol.SIMPLE)
    figures = {}
    for budget in (spare - 1, spare) if nboxes == 2 else (spare,):
        comp = Compiler(topo, CompileOptions(algorithm="rings2d", jobs=1, max_threadblocks=budget,
                                             collective=Collective.REDUCESCATTER))
        assert comp.program(v).max_threadblocks == spare - 2 * (budget < spare)
        sizes = (128 << 20, 1 << 30) if nboxes == 2 else (1 << 30,)
        figures[budget] = [comp.simulate(v, s).algbw for s in sizes]
    if nboxes == 2:
        validate_schedule(topo, sched)
        assert all(a > b for a, b in zip(figures[spare], figures[spare - 1], strict=True)), figures
    else:
        ring = nccl_ring_program(topo, Collective.REDUCESCATTER, channels=16)
        assert figures[spare][0] >= 1.1 * simulate(ring, topo, model_for(topo), 1 << 30).algbw


def test_crossing_form_splits_up_to_four_chains_where_they_pay() -> None:
    """The crossing reduce-scatter splits up to four of its first pass's
    chains (``CROSSING_WIDE_SPLIT_CHUNKS``), one threadblock each, as many
    as the budget holds, on two boxes behind box switches and in an
    allreduce from three boxes of direct links; elsewhere two.  Each count
    is keyed by its least budget, so the portfolio ranks every count.
    MI250 x3 allreduce (8 chunks): four split channels, one chunk each;
    DGX A100 x2 allreduce (16 chunks): the file with four is faster at
    1 GiB than the file with two (simulated)."""
    from colc.compiler.pipeline import Compiler, Variant
    from colc.compiler.rings.rings2d import fewer_split_budgets, split_chunks
    from colc.frontends.families import dgx_a100

    topo, cf, coll = mi250(3), 8, Collective.ALLREDUCE
    groups = boxes(topo)
    assert [split_chunks(topo, groups, coll, cf, b) for b in (25, 26, 27, 28, 32, 0)] == \
        [0, 2, 3, 4, 4, 4]
    assert fewer_split_budgets(topo, groups, coll, cf, 32) == (24, 26, 27)
    sched = rings2d_schedule(topo, coll, cf, simple=True)
    starts = _chain_starts(groups, sched, cf)
    assert [starts[ch] for ch in sorted(starts) if ch >= 16] == [{0}, {1}, {2}, {3}]
    m2, m4, d4 = mi250(2), mi250(4), dgx_a100(4)  # two elsewhere
    assert split_chunks(m2, boxes(m2), coll, 16) == 2
    assert split_chunks(m4, boxes(m4), Collective.REDUCESCATTER, 16) == 2
    assert split_chunks(d4, boxes(d4), coll, 16) == 2
    dgx, cf = dgx_a100(2), 16
    for c in (coll, Collective.REDUCESCATTER):
        assert split_chunks(dgx, boxes(dgx), c, cf, 32) == 4
    v = Variant("rings2d", cf, Protocol.SIMPLE)
    figures = {}
    for budget in (22, 24):
        comp = Compiler(dgx, CompileOptions(algorithm="rings2d", jobs=1, max_threadblocks=budget,
                                            collective=coll))
        assert comp.program(v).max_threadblocks == budget
        figures[budget] = comp.simulate(v, 1 << 30).algbw
    assert figures[24] > figures[22], figures


def _switched_boxes(nb: int, gpus: int) -> Topology:
    """``nb`` boxes of ``gpus`` GPUs behind a box switch each, on one network switch."""
    nodes, links = [Node("ib", "switch", net=True)], []
    for b in range(nb):
        nodes += [Node(f"b{b}g{i}", "gpu") for i in range(gpus)] + [Node(f"b{b}sw", "switch")]
        for i in range(gpus):
            links += [Link(f"b{b}g{i}", f"b{b}sw", Fraction(100)),
                      Link(f"b{b}sw", f"b{b}g{i}", Fraction(100)),
                      Link(f"b{b}g{i}", "ib", Fraction(10)), Link("ib", f"b{b}g{i}", Fraction(10))]
    return Topology(f"boxes-{nb}x{gpus}", tuple(nodes), tuple(links))


@pytest.mark.parametrize("nb,gpus,coll,cf", [(2, 3, Collective.ALLREDUCE, 16),
                                             (2, 5, Collective.REDUCESCATTER, 16),
                                             (3, 3, Collective.REDUCESCATTER, 32)])
def test_split_chains_on_small_boxes(nb, gpus, coll, cf) -> None:
    """Boxes of an odd number of places: the two halves of a split chain
    take as many steps, and the backward half lands before the forward
    one's last step adds onto it (the crossing form on two boxes, the
    switched one on three, with 32 chunks: two groups a pass); proved by
    the chunk checker and the interpreter."""
    from colc.compiler.rings.rings2d import split_chunks

    topo = _switched_boxes(nb, gpus)
    assert split_chunks(topo, boxes(topo), coll, cf) >= 2
    validate_schedule(topo, rings2d_schedule(topo, coll, cf, simple=True))


@pytest.mark.scale
def test_crossing_allreduce_sends_to_every_box_twice_within_the_budget() -> None:
    """MI250 x4 allreduce (8 chunks on 16 rings): its reduce-scatter half
    sends every box's partials on two connections within 28 threadblocks,
    the next box's alone within 24 to 27, none below (``second_connections``;
    one schedule per level, keyed by its least budget; the split chunks,
    ``split_chunks``, from 26 and 30); with every box's, faster at 16 MiB,
    128 MiB and 1 GiB than with the next box's alone (simulated)."""
    from colc.compiler.pipeline import Compiler, Variant

    topo = mi250(4)
    box_of = {r: i for i, g in enumerate(boxes(topo)) for r in g}
    v = Variant("rings2d", 8, Protocol.SIMPLE)
    sizes = (16 << 20, 128 << 20, 1 << 30)
    figures = {}
    for budget, twice, tbs, key in ((23, 0, 22, 1), (25, 1, 24, 24), (28, 3, 28, 28)):
        comp = Compiler(topo, CompileOptions(algorithm="rings2d", jobs=1, max_threadblocks=budget,
                                             collective=Collective.ALLREDUCE))
        assert comp.schedule_key(v)[2] == key
        assert comp.program(v).max_threadblocks == tbs
        channels: dict[int, set[int]] = {}  # distance -> channels of rank 0's partials
        for op in comp.variant_schedule(v).ops:
            crossing = op.is_transfer and box_of[op.dst.rank]
            if crossing and op.kind is OpKind.REDUCE and op.src.rank == 0:
                channels.setdefault(box_of[op.dst.rank], set()).add(op.channel)
        assert sum(len(c) == 2 for c in channels.values()) == twice
        if twice:
            figures[budget] = [comp.simulate(v, s).algbw for s in sizes]
    assert all(a > b for a, b in zip(figures[28], figures[25], strict=True)), figures


def test_crossing_allgather_sends_each_shard_once_per_box() -> None:
    """From 16 chunks an allgather takes the crossing form: every rank sends
    its shard once to its rail peer in every other box and nothing else
    crosses; proved by the chunk checker and the interpreter."""
    topo, cf = dgx_a100(3), 16
    sched = rings2d_schedule(topo, Collective.ALLGATHER, cf)
    box_of = {r: i for i, g in enumerate(boxes(topo)) for r in g}
    sent = [0] * topo.num_ranks
    for op in sched.ops:
        if op.is_transfer and box_of[op.src.rank] != box_of[op.dst.rank]:
            assert op.src.rank % 8 == op.dst.rank % 8 and op.src.buffer is Buffer.INPUT
            sent[op.src.rank] += op.count
    assert sent == [2 * cf] * topo.num_ranks
    validate_schedule(topo, sched)


def test_crossing_allgather_on_four_mi250_boxes() -> None:
    """MI250 x4 allgather at 1 GiB: at least 1.1x RCCL's rings written as a
    file (146.6 GB/s, simulated) within 32 threadblocks."""
    from colc.compiler.pipeline import Compiler, Variant

    comp = Compiler(mi250(4), CompileOptions(algorithm="rings2d", jobs=1, rank_sizes=(1 << 30,),
                                             collective=Collective.ALLGATHER))
    v = Variant("rings2d", 16, Protocol.SIMPLE)
    assert comp.program(v).max_threadblocks <= 32
    assert comp.simulate(v, 1 << 30).algbw >= 1.1 * 146.6


@pytest.mark.parametrize("coll,nboxes,cf", [(Collective.REDUCESCATTER, 9, 2),
                                            (Collective.ALLGATHER, 10, 8),
                                            (Collective.ALLREDUCE, 9, 2)])
def test_crossing_form_shares_passes_among_more_rings(coll, nboxes, cf) -> None:
    """Where ``min(16, cf)`` rings would take more than 64 steps, 16 rings
    share the passes (``crossing_rings``): no ring threadblock's share passes
    64 steps (an allreduce's two halves together); a reduce-scatter's ring
    sets repeat one set of cycles, so each chunk's partials land at one
    place in every pass.  Proved by the chunk checker and the interpreter."""
    from colc.compiler.rings.rings2d import RINGS, crossing_rings

    topo = dgx_a100(nboxes)
    groups = boxes(topo)
    assert crossing_rings(groups, coll, cf) == RINGS > cf
    sched = rings2d_schedule(topo, coll, cf)
    steps: dict[tuple[int, int], int] = {}
    for op in sched.ops:
        if op.is_transfer and op.channel < RINGS:
            steps[op.src.rank, op.channel] = steps.get((op.src.rank, op.channel), 0) + 1
    assert len({c for _, c in steps}) == RINGS and max(steps.values()) <= 64
    validate_schedule(topo, sched)


@pytest.mark.parametrize("coll,cf,before", [(Collective.ALLGATHER, 8, 83.5),
                                             (Collective.REDUCESCATTER, 8, 66.0),
                                             (Collective.ALLREDUCE, 4, 29.2)])
@pytest.mark.scale
def test_crossing_form_on_eight_mi250_boxes(coll, cf, before) -> None:
    """MI250 x8 at 1 GiB within 32 threadblocks, on 16 rings: allgather and
    reduce-scatter with 8 chunks per shard (4 passes per ring), allreduce
    with 4 (both halves on the same rings): at least 1.5x the files the
    portfolio wrote before this form (rails: 83.5, 66.0 and 29.2 GB/s;
    simulated)."""
    from colc.compiler.pipeline import Compiler, Variant

    comp = Compiler(mi250(8), CompileOptions(algorithm="rings2d", jobs=1, rank_sizes=(1 << 30,),
                                             collective=coll))
    v = Variant("rings2d", cf, Protocol.SIMPLE)
    assert comp.program(v).max_threadblocks <= 32
    assert comp.simulate(v, 1 << 30).algbw >= 1.5 * before


def test_crossings_list_each_box_send_before_its_receive() -> None:
    """On 13 boxes (no grid: 13 is prime) the crossing reduce-scatter's
    network sends and receives share threadblocks (one per distance: no
    room for one of each).  A threadblock follows the listed order, so for
    every chunk and distance each box's send is listed before its receive,
    save one box per cycle of ``b -> b + k``: no box waits for a chain of
    others' sends."""
    topo, cf = dgx_a100(13), 2
    sched = rings2d_schedule(topo, Collective.REDUCESCATTER, cf)
    box_of = {r: i for i, g in enumerate(boxes(topo)) for r in g}
    nb, n = 13, topo.num_ranks
    first_send: dict[tuple, int] = {}
    first_recv: dict[tuple, int] = {}
    for i, op in enumerate(sched.ops):
        b, b2 = box_of[op.src.rank], box_of[op.dst.rank]
        if not op.is_transfer or b == b2:
            continue
        k, q = (b2 - b) % nb, op.dst.index % (n * cf) % cf
        first_send.setdefault((b, k, q), i)
        first_recv.setdefault((b2, k, q), i)
    for k in range(1, nb):
        for q in range(cf):
            late = [b for b in range(nb) if first_send[b, k, q] > first_recv[b, k, q]]
            assert len(late) == math.gcd(nb, k)


@pytest.mark.scale
def test_crossing_form_on_sixteen_mi250_boxes() -> None:
    """MI250 x16 allgather at 1 GiB, 2 chunks per shard, within 32
    threadblocks (over a 4 x 4 grid of boxes): faster than the rails file
    the portfolio wrote before (89.8 GB/s; the one-stage crossing gave 58.6
    while its paired threadblocks waited on chains of other boxes' sends,
    113.2 at 4 chunks once they did not)."""
    from colc.compiler.pipeline import Compiler, Variant

    comp = Compiler(mi250(16), CompileOptions(algorithm="rings2d", jobs=1, rank_sizes=(1 << 30,),
                                              collective=Collective.ALLGATHER))
    v = Variant("rings2d", 2, Protocol.SIMPLE)
    assert comp.program(v).max_threadblocks <= 32
    assert comp.simulate(v, 1 << 30).algbw > 89.8


def test_auto_tries_the_crossing_form_past_128_ranks() -> None:
    """Past 128 ranks ``auto`` leaves ring-shaped schedules out, but
    rings2d's rings stay inside a box: on boxes without a switch (MI250 x16)
    it tries the crossing allgather and reduce-scatter with 2 and 4 chunks
    per shard, and the allreduce in paired halves with 4 (its grid form over
    all the boxes is slower than rails there).  Behind box
    switches it tries the allgather and reduce-scatter over a grid of boxes
    with the chunkings whose passes fit 64 steps per ring (DGX A100 x32: 1,
    2 and 4; x64: 1 and 2), and the allreduce with the most that fit, over
    all the boxes or in paired halves (x32: 4; x128: 1); at 1024
    GPUs every collective with 1 (an allreduce in paired halves), which
    the portfolio ranks
    only from 1 GiB
    (``least_size``: its build time), as Simple only, and
    ``--algorithm rings2d`` at every size."""
    from colc.compiler.pipeline import Compiler, Variant, variants
    from colc.compiler.portfolio import PROTOCOL_SIZES, _serves

    for topo, coll, want in ((mi250(16), Collective.ALLGATHER, {2, 4}),
                             (mi250(16), Collective.REDUCESCATTER, {2, 4}),
                             (mi250(16), Collective.ALLREDUCE, {4}),
                             (mi250(64), Collective.ALLREDUCE, {1}),
                             (dgx_a100(32), Collective.ALLGATHER, {1, 2, 4}),
                             (dgx_a100(64), Collective.ALLGATHER, {1, 2}),
                             (dgx_a100(64), Collective.REDUCESCATTER, {1, 2}),
                             (dgx_a100(32), Collective.ALLREDUCE, {4}),
                             (dgx_a100(64), Collective.ALLREDUCE, {2}),
                             (dgx_a100(128), Collective.ALLGATHER, {1}),
                             (dgx_a100(128), Collective.ALLREDUCE, {1}),
                             (mi250(64), Collective.ALLGATHER, {1}),
                             (mi250(64), Collective.REDUCESCATTER, {1})):
        comp = Compiler(topo, CompileOptions(collective=coll))
        assert {v.chunks for v in variants(comp) if v.algorithm == "rings2d"} == want
        if want and topo.num_ranks > 512:
            assert {v.protocol for v in variants(comp, tuple(Protocol))
                    if v.algorithm == "rings2d"} == {Protocol.SIMPLE}
    grid = Variant("rings2d", 1, Protocol.SIMPLE)
    for algorithm, least in (("auto", 1 << 30), ("rings2d", 256 << 10)):
        for topo, ranked in ((dgx_a100(128), least), (mi250(64), least),
                             (dgx_a100(64), 256 << 10)):
            comp = Compiler(topo, CompileOptions(collective=Collective.ALLGATHER,
                                                 algorithm=algorithm))
            assert [s for s in (64 << 10, 256 << 10, 64 << 20, 1 << 30)
                    if _serves(comp, grid, s, PROTOCOL_SIZES)][0] == ranked


def test_grid_ranked_from_1_gib_is_prefetched(monkeypatch) -> None:
    """Where ``auto`` ranks the grid form from 1 GiB only (past
    ``GRID_EVERY_SIZE_RANKS``, lowered here to 128 so DGX A100 x32 is such a
    machine), the portfolio's prefetch lowers and simulates it (in a forked
    worker beside the small sizes' tasks when there are any; alone here)
    when its bandwidth bound is the best at 1 GiB; a variant it would not
    simulate first stays out."""
    from colc.compiler import choose_variants
    from colc.compiler.pipeline import Compiler, Variant
    from colc.compiler.portfolio import _prefetch

    monkeypatch.setattr(choose_variants, "GRID_EVERY_SIZE_RANKS", 128)
    comp = Compiler(dgx_a100(32), CompileOptions(collective=Collective.ALLGATHER, jobs=2,
                                                 prove=False))
    grid, slow = Variant("rings2d", 1, Protocol.SIMPLE), Variant("rings2d", 2, Protocol.SIMPLE)
    assert comp.estimate(grid) == comp.estimate(slow)  # the label breaks the tie: c1 first
    _prefetch(comp, [grid, slow], (1 << 30,))
    assert (grid, 1 << 30) in comp._sims and grid in comp._programs
    assert slow not in comp._programs and (slow, 1 << 30) not in comp._sims


def _grid_crossings(topo, sched, dims):
    """The network transfers of ``sched``, each checked to join rail peers
    (places of 8-rank boxes) whose boxes differ in one grid coordinate."""
    from colc.compiler.rings.grid import coords

    box_of = {r: i for i, g in enumerate(boxes(topo)) for r in g}
    for op in sched.ops:
        b, b2 = box_of[op.src.rank], box_of[op.dst.rank]
        if op.is_transfer and b != b2:
            assert op.src.rank % 8 == op.dst.rank % 8
            assert sum(x != y for x, y in zip(coords(b, dims), coords(b2, dims))) == 1
            yield op


def test_grid_allgather_crosses_in_stages() -> None:
    """On 16 boxes the crossing allgather's 15 distances do not fit 32
    threadblocks with a send and a receive of their own each, so it crosses
    in two stages over a 4 x 4 grid of boxes (``gather_grid``): each rank
    sends only to the rail peers of its grid row and column (6 connections),
    every shard lands in every other box exactly once, and each rank sends
    ``B - 1`` shards, as in the one-stage crossing.  Proved by the chunk
    checker and the interpreter."""
    from colc.compiler.rings.rings2d import RINGS, box_grid

    topo, cf = dgx_a100(16), 2
    dims = box_grid(16, RINGS, Collective.ALLGATHER)
    assert dims == (4, 4)
    sched = rings2d_schedule(topo, Collective.ALLGATHER, cf)
    box_of = {r: i for i, g in enumerate(boxes(topo)) for r in g}
    landed: dict[tuple[int, int], int] = {}
    peers: dict[int, set[int]] = {}
    sent = [0] * topo.num_ranks
    for op in _grid_crossings(topo, sched, dims):
        b2 = box_of[op.dst.rank]
        landed[op.dst.index, b2] = landed.get((op.dst.index, b2), 0) + 1
        peers.setdefault(op.src.rank, set()).add(op.dst.rank)
        sent[op.src.rank] += op.count
    assert set(landed.values()) == {1}
    assert len(landed) == topo.num_ranks * cf * 15
    assert {len(p) for p in peers.values()} == {6}
    assert sent == [15 * cf] * topo.num_ranks
    # below 29 threadblocks a send and a receive share one (the pipeline's
    # fallback): along each line of the grid every box sends a chunk before
    # it receives it, save one per cycle of ``b -> b + s``
    first_send: dict[tuple, int] = {}
    first_recv: dict[tuple, int] = {}
    for i, op in enumerate(sched.ops):
        b, b2 = box_of[op.src.rank], box_of[op.dst.rank]
        if op.is_transfer and b != b2:
            first_send.setdefault((op.channel, op.dst.index % cf, b), i)
            first_recv.setdefault((op.channel, op.dst.index % cf, b2), i)
    for i, s in ((0, 1), (0, 2), (0, 3), (1, 1), (1, 2), (1, 3)):
        channel = RINGS + 3 * i + s - 1
        for q in range(cf):
            late = [b for b in range(16)
                    if first_send[channel, q, b] > first_recv[channel, q, b]]
            assert len(late) == 4 * math.gcd(4, s)
    validate_schedule(topo, sched)


@pytest.mark.parametrize("dims,cf,two", [((4, 4), 8, False), ((2, 4, 4), 4, False),
                                         ((2, 2, 2, 2, 4), 2, False), ((2,) * 7, 1, False),
                                         ((3, 4), 2, False), ((2,) * 7, 1, True),
                                         ((2, 2, 2), 4, True)])
def test_landing_times_keep_the_nic_busy_and_follow_the_sources(dims, cf, two) -> None:
    """``grid.landing_times``: every chunk of every other box lands once,
    after the chunk it is forwarded from has landed at the sender (the
    same offset without the stage's dimension), and the NIC, shared by the
    connections with a chunk ready, never idles: the last chunk lands
    after ``(B - 1) cf`` chunk times; also with the last stage on two
    connections (``two``)."""
    from colc.compiler.rings.grid import landing_order, landing_times, stage_of

    times = landing_times(dims, cf, two)
    nb = math.prod(dims)
    assert len(times) == nb * cf
    for off in landing_order(dims):
        s = stage_of(off)
        for q in range(cf):
            if s:
                source = off[:s - 1] + (0,) + off[s:]
                assert times[off, q] > times[source, q]
    assert max(times.values()) == (nb - 1) * cf


def test_grid_allgather_hands_chunks_round_in_landing_order() -> None:
    """On DGX A100 x32 (a 2 x 4 x 4 grid, 4 chunks per shard) the last
    stage's chunks land three at a time, one per distance (the first
    chunks of all 7 connections together).  Each box ring hands round the
    landed chunks in the order they land (``grid.landing_times``), chunks
    that land together go round on different rings, and every ring takes
    as many.  Before, chunk ``q`` of the ``(8 s + j)``-th source went on
    ring ``(q + 8 s + j) mod 16``, so distances 1 and 3 shared a ring (on
    64 boxes, sources ``16 s + j``, all three), and on 64 boxes the rings
    ended one after another 1.1 ms after the network's last byte (1 GiB:
    146.1 GB/s, now 163.4)."""
    from colc.compiler.rings.grid import coords, landing_times
    from colc.compiler.rings.rings2d import RINGS, box_grid

    topo, cf = dgx_a100(32), 4
    dims = box_grid(32, RINGS, Collective.ALLGATHER)
    assert dims == (2, 4, 4)
    times = landing_times(dims, cf)
    sched = rings2d_schedule(topo, Collective.ALLGATHER, cf)
    box_of = {r: i for i, g in enumerate(boxes(topo)) for r in g}
    rank = 3  # any rank: every box is alike
    seen: dict[int, list[float]] = {}
    ring_of: dict[tuple, int] = {}
    for op in sched.ops:
        if op.dst.rank != rank or op.channel >= RINGS or box_of[op.src.rank] != 0:
            continue
        source = box_of[op.dst.index // cf]
        off = tuple((a - b) % d for a, b, d in zip(coords(0, dims), coords(source, dims), dims))
        key = off, op.dst.index % cf
        if key not in ring_of:
            ring_of[key] = op.channel
            seen.setdefault(op.channel, []).append(times[key])
    assert len(ring_of) == 32 * cf
    assert all(t == sorted(t) for t in seen.values())
    assert {len(t) for t in seen.values()} == {32 * cf // RINGS}
    together: dict[float, list[int]] = {}
    for key, ring in ring_of.items():
        together.setdefault(times[key], []).append(ring)
    assert max(len(r) for r in together.values()) == 7  # the first of each connection
    assert all(len(set(r)) == len(r) for r in together.values())


def test_grid_of_twos_sends_its_last_stage_on_two_connections() -> None:
    """On a grid of 2s (DGX A100 x128 takes 2^7; here 2 x 2 x 2 over DGX
    A100 x8) the allgather's last stage, half of the shards on a single
    distance, alternates its chunks between two connections, the second
    on the first stage's channel: one NET connection carries 12.5 of a
    NIC's 22.2 GB/s (x128 at 1 GiB: 151.6 -> 162.4 GB/s, 128 MiB 68.3 ->
    101.3).  The second connection's first chunk is the one the first
    stage landed, so the lowering fuses that receive with the forwarding
    sends and the form takes one threadblock more, not two.  The schedule
    is proved and its lowering checked like every other."""
    from colc.compiler.lowering.lower_to_program import LoweringOptions, lower_to_program
    from colc.compiler.rings.rings2d import RINGS
    from colc.compiler.rings.rings2d.box_rings import _layout
    from colc.compiler.rings.rings2d.gather import _allgather_grid
    from colc.compiler.rings.rings2d.placement import _grid_channel, _Ops
    from colc.compiler.rings.rings2d.schedule import _schedule

    topo, cf, dims = dgx_a100(8), 2, (2, 2, 2)
    groups, orders = _layout(topo, RINGS, True)
    out = _Ops()
    _allgather_grid(out, groups, orders, cf, dims)
    sched = _schedule(out, Collective.ALLGATHER, 64, 64 * cf, 0)
    validate_schedule(topo, sched)
    box_of = {r: i for i, g in enumerate(groups) for r in g}
    first, last = _grid_channel(RINGS, dims, 1, 1), _grid_channel(RINGS, dims, 3, 1)
    rank = groups[0][5]
    peer = groups[4][5]  # the box along the last dimension
    to_peer = [op for op in sched.ops if op.src.rank == rank and op.dst.rank == peer]
    assert [op.channel for op in to_peer] == [last, first] * (len(to_peer) // 2)
    assert len(to_peer) == 4 * cf
    # the second connection's first chunk: the one the first stage landed
    landed = next(op for op in sched.ops if op.dst.rank == rank and op.channel == first)
    assert box_of[landed.src.rank] == 1 and to_peer[1].dst.index == landed.dst.index
    program = lower_to_program(sched, LoweringOptions(fuse=True, pair_connections=False))
    # rings, a send and a receive per stage, the local copies, the second connection's
    # receive (its sends share the first stage's receiving threadblock)
    assert program.max_threadblocks == RINGS + 2 * 3 + 1 + 1


def test_a_budget_one_short_takes_the_second_connection_away() -> None:
    """Where the budget holds the grid allgather's threadblocks with network
    sends and receives apart only without the second last-stage
    connection (DGX A100 x128 at 31: 151.6 GB/s at 1 GiB unpaired, against
    84.2 with it, lowered paired), the schedule leaves it out; the
    compiler keys that schedule on the budget, and on nothing at others."""
    from colc.compiler.lowering.lower_to_program import LoweringOptions, lower_to_program
    from colc.compiler.pipeline import Compiler, Variant
    from colc.compiler.rings.rings2d import RINGS
    from colc.compiler.rings.rings2d.box_rings import _layout
    from colc.compiler.rings.rings2d.gather import _allgather_grid
    from colc.compiler.rings.rings2d.placement import _grid_channel, _Ops
    from colc.compiler.rings.rings2d.schedule import _schedule

    topo, cf, dims = dgx_a100(8), 2, (2, 2, 2)
    groups, orders = _layout(topo, RINGS, True)
    out = _Ops()
    _allgather_grid(out, groups, orders, cf, dims, second=False)
    sched = _schedule(out, Collective.ALLGATHER, 64, 64 * cf, 0)
    validate_schedule(topo, sched)
    rank, peer = groups[0][5], groups[4][5]
    last = _grid_channel(RINGS, dims, 3, 1)
    assert {op.channel for op in sched.ops if op.src.rank == rank and op.dst.rank == peer} == {last}
    program = lower_to_program(sched, LoweringOptions(fuse=True, pair_connections=False))
    assert program.max_threadblocks == RINGS + 2 * 3 + 1
    variant = Variant("rings2d", 1, Protocol.SIMPLE)
    keys = {b: Compiler(dgx_a100(128), CompileOptions(collective=Collective.ALLGATHER,
                                                      max_threadblocks=b)).schedule_key(variant)
            for b in (30, 31, 32)}
    assert [keys[b][2] for b in (30, 31, 32)] == [0, 31, 0]


@pytest.mark.parametrize("coll,tbs", [(Collective.ALLGATHER, 29),
                                      (Collective.REDUCESCATTER, 32)])
@pytest.mark.scale
def test_grid_reaches_80_percent_of_the_cut_bound_on_sixteen_boxes(coll, tbs) -> None:
    """DGX A100 x16 at 1 GiB within the default budget (simulated): at least
    80% of the cut bound (640/3 GB/s), where rails gave 162.3 (allgather)
    and 162.0 (reduce-scatter) and the one-stage crossing, its network
    threadblocks paired, 132.3 and 122.9."""
    from colc.compiler.pipeline import Compiler, Variant

    comp = Compiler(dgx_a100(16), CompileOptions(algorithm="rings2d", jobs=1, rank_sizes=(1 << 30,),
                                                 collective=coll))
    v = Variant("rings2d", 8, Protocol.SIMPLE)
    assert comp.program(v).max_threadblocks <= tbs
    assert comp.simulate(v, 1 << 30).algbw >= 0.8 * 640 / 3


@pytest.mark.parametrize("coll", [Collective.REDUCESCATTER, Collective.ALLREDUCE])
def test_grid_reduce_scatter_forwards_partials_in_stages(coll) -> None:
    """On 12 boxes (a 3 x 4 grid) the crossing reduce-scatter forwards each
    box's partials along the grid's dimensions, the last first: every
    network transfer joins rail peers that differ in one coordinate, a rank
    sends ``B - 1`` partials per chunk of its shard (the allreduce as many
    again in its allgather), and every partial but the first to land at a
    place adds to the one before it there.  A reduce-scatter's partials
    for their own box land at the owners, the first onto its own box's sum
    (region 0), the last into the output.
    The first pass crosses on two
    connections (its odd chunks on the channel after the grid's), and the
    held passes' chains wait for the first's to near their ends: one gated
    chain start per rank, chunk and held pass.  Proved by the chunk checker and the
    interpreter."""
    from colc.compiler.rings.rings2d import RINGS, box_grid

    topo, cf, nb = dgx_a100(12), 2, 12
    dims = box_grid(nb, RINGS, coll)
    assert dims == (3, 4)
    sched = rings2d_schedule(topo, coll, cf)
    sent = [0] * topo.num_ranks
    outputs = []
    n = topo.num_ranks
    for op in _grid_crossings(topo, sched, dims):
        home = op.dst.rank == op.dst.index % (n * cf) // cf  # at the chunk's owner
        assert not home or coll is Collective.REDUCESCATTER
        if op.kind is OpKind.REDUCE and op.dst.buffer is Buffer.SCRATCH:
            first = op.dst.index < 2 * n * cf  # region 1
            if home:  # onto its own box's sum (region 0), then the landing before
                assert op.operand.buffer is Buffer.SCRATCH
                assert not first or op.operand.index == op.dst.index - n * cf
            else:
                assert (op.operand.buffer is Buffer.INPUT) == first
        elif op.kind is OpKind.REDUCE:  # the last landing, at the owner
            assert op.operand.buffer is Buffer.SCRATCH
            outputs.append(op.dst)
        sent[op.src.rank] += op.count
    halves = 2 if coll is Collective.ALLREDUCE else 1
    assert sent == [halves * (nb - 1) * cf] * topo.num_ranks
    # a reduce-scatter's results land at their owners (an allreduce's own
    # box pass writes them, so its allgather starts on a ring threadblock)
    assert len(set(outputs)) == len(outputs) == (
        topo.num_ranks * cf if coll is Collective.REDUCESCATTER else 0)
    spare = RINGS + 2 + 3
    assert {op.dst.index % cf for op in sched.ops if op.channel == spare} == {1}
    gated = [op for op, g in zip(sched.ops, sched.gates, strict=True) if g >= 0]
    # 8 passes run at once on 16 rings with 2 chunks: a reduce-scatter holds
    # back the last quarter (``GRID_HELD_PART``), an allreduce the last half
    # (``HALF_HELD_AT_ONCE``; with 4 at once an allreduce holds the second)
    held = 2 if coll is Collective.REDUCESCATTER else 4
    assert len(gated) == held * topo.num_ranks * cf
    assert all(op.src.buffer is Buffer.INPUT and sched.ops[g].dst.rank == op.src.rank
               for op, g in zip(sched.ops, sched.gates, strict=True) if g >= 0)
    validate_schedule(topo, sched)


def test_grid_reduce_scatter_forwards_its_last_stage_as_it_lands() -> None:
    """Where the grid's first two dimensions are 2s (DGX A100 x64 and x128;
    here 2 x 2 x 2 over DGX A100 x8) the partial a box's last stage sends
    takes one landing from the stage before: that landing goes to the
    owner's place, onto the last stage's chain, and the forwarding send
    reads it on the landing's channel, so the lowering fuses the two
    (``rrcs``) and the relay's way back, sends to the stage before's peer
    and landings from the last stage's, shares a threadblock
    (``pair_mirrors``): two threadblocks fewer than the grid's
    ``R + 2 sum(d_i - 1)``.  At most two chunks per shard (with four the
    fused threadblock and its peer's way back deadlock at Simple's FIFO
    depth).  Proved by the chunk checker and the
    interpreter; at 1 GiB (simulated) DGX A100 x128 160.3 -> 161.3 GB/s
    with 32 -> 30 threadblocks, x64 164.0 -> 164.1 with 32 -> 30."""
    from colc.compiler.lowering.lower_to_program import LoweringOptions, lower_to_program
    from colc.compiler.rings.rings2d import RINGS
    from colc.compiler.rings.rings2d.box_rings import _layout
    from colc.compiler.rings.rings2d.grid_scatter import _reduce_scatter_grid
    from colc.compiler.rings.rings2d.placement import _grid_channel, _Ops
    from colc.compiler.rings.rings2d.schedule import _schedule
    from colc.ir.program import StepKind

    topo, cf, dims = dgx_a100(8), 2, (2, 2, 2)
    groups, orders = _layout(topo, RINGS, True)
    out = _Ops()
    n = topo.num_ranks
    _reduce_scatter_grid(out, groups, orders, cf, n, dims)
    sched = _schedule(out, Collective.REDUCESCATTER, n, n * cf, len(groups) * n * cf)
    validate_schedule(topo, sched)
    rank, last, before = groups[0][3], groups[1][3], groups[2][3]
    second = _grid_channel(RINGS, dims, 2, 1)
    # the last stage sends on the stage before's channel, and no op takes its own
    assert {op.channel for op in sched.ops if op.src.rank == rank and op.dst.rank == last} == {
        second}
    assert not any(op.channel == _grid_channel(RINGS, dims, 1, 1) for op in sched.ops)
    plain = lower_to_program(sched, LoweringOptions(fuse=True, pair_connections=False))
    mirrored = lower_to_program(sched, LoweringOptions(fuse=True, pair_connections=False,
                                                       pair_mirrors=True))
    grid = RINGS + 2 * 3 + 2  # the first pass's second connection too (``_grid_spare``)
    assert plain.max_threadblocks == grid - 1
    assert mirrored.max_threadblocks == grid - 2
    tbs = {(tb.send, tb.recv): tb for tb in mirrored.ranks[rank].threadblocks}
    relay = tbs[(last, before)]
    assert [s.kind for s in relay.steps].count(StepKind.RECV_REDUCE_COPY_SEND) == cf
    assert (before, last) in tbs  # the way back
    report = verify_text(emit_msccl_xml(mirrored), "<test>", backend="msccl")
    assert report.ok, report.errors[:5]
    # with more chunks than Simple's FIFO holds (``FUSED_LAST_CHUNKS``) the
    # fused threadblock and its peer's way back would wait on each other:
    # the last stage keeps its own channel
    out = _Ops()
    _reduce_scatter_grid(out, groups, orders, 4, n, dims)
    sched = _schedule(out, Collective.REDUCESCATTER, n, n * 4, len(groups) * n * 4)
    assert {op.channel for op in sched.ops if op.src.rank == rank and op.dst.rank == last} == {
        _grid_channel(RINGS, dims, 1, 1)}
    validate_schedule(topo, sched)


@pytest.mark.scale
def test_paired_allreduce_exchanges_between_halves() -> None:
    """Where the grid allreduce over all the boxes does not fit 64 steps per
    ring (DGX A100 x16, 8 chunks per shard), each half of the boxes runs it
    on its own and every owner exchanges its half's sum with its rail peer
    in the partner box: half as many chunks, every rank's network traffic
    still ``2 (B-1) / N`` of the buffer (the least), the halves joined only
    by the exchange (``cf`` chunks per rank), within 32 threadblocks and 64
    steps per threadblock.  Proved by the chunk checker and the
    interpreter (the compiler's schedule is proved as it is built; its file
    is verified here)."""
    from colc.compiler.pipeline import Compiler, Variant
    from colc.compiler.rings.rings2d import paired_halves

    topo, cf, nb = dgx_a100(16), 8, 16
    groups = boxes(topo)
    assert paired_halves(groups, Collective.ALLREDUCE, cf)
    assert not paired_halves(groups, Collective.ALLREDUCE, 4)  # the grid over all fits
    comp = Compiler(topo, CompileOptions(algorithm="rings2d", jobs=1,
                                         collective=Collective.ALLREDUCE))
    variant = Variant("rings2d", cf, Protocol.SIMPLE)
    sched = comp.variant_schedule(variant)
    assert sched.inplace and sched.outofplace  # proved in both aliasing modes
    n = topo.num_ranks
    assert sched.nchunks == n * cf // 2
    box_of = {r: i for i, g in enumerate(groups) for r in g}
    sent, across = [0] * n, [0] * n
    for op in sched.ops:
        b, b2 = box_of[op.src.rank], box_of[op.dst.rank]
        if op.is_transfer and b != b2:
            assert op.src.rank % 8 == op.dst.rank % 8  # rail peers only
            sent[op.src.rank] += op.count
            if (b < nb // 2) != (b2 < nb // 2):
                assert abs(b - b2) == nb // 2  # the partner box only
                across[op.src.rank] += op.count
    assert sent == [(nb - 1) * cf] * n
    assert Fraction(sent[0], sched.nchunks) == Fraction(2 * (nb - 1), n)
    assert across == [cf] * n
    program = comp.program(variant)
    assert program.max_threadblocks <= 32
    assert max(len(tb.steps) for r in program.ranks for tb in r.threadblocks) <= 64
    report = verify_text(emit_msccl_xml(program), "<test>", backend="msccl")
    assert report.ok, report.errors[:5]


@pytest.mark.parametrize("coll,nboxes,cf", [(Collective.REDUCESCATTER, 12, 1),
                                             (Collective.ALLREDUCE, 12, 1),
                                             (Collective.ALLREDUCE, 4, 8)])
def test_crossing_passes_spread_over_the_box_cycles(coll, nboxes, cf) -> None:
    """On boxes of direct links (MI250 x12, a 3 x 4 grid, one chunk per
    shard; x4 in one stage, 8 chunks on 16 rings) the Simple form of the
    crossing reduce-scatter runs its passes on the box's packed cycles in
    turn, not on one cycle per chunk repeated: its partials land where the
    own box's ring for the chunk puts them, whatever ring each pass took.
    The busiest box link, per GB/s of its width, carries at most a third
    of what it would if every pass took one cycle (every ring on that
    cycle's links: MI250 x64 reduce-scatter at 1 GiB 42.3 GB/s against
    121.0).  The other protocols' form keeps one cycle per chunk (a chain
    then joins a landed sum only at its end: MI250 x32 reduce-scatter at
    1 MiB, LL, 11.9 against 10.3), and the pipeline builds the Simple form
    for Simple variants only.  Proved by the chunk checker and the
    interpreter."""
    from colc.compiler.pipeline import Compiler, Variant
    from colc.compiler.rings.rings2d.box_rings import _box_rings, _link_widths

    topo = mi250(nboxes)
    members = boxes(topo)[0]
    place = {r: i for i, r in enumerate(members)}
    comp = Compiler(topo, CompileOptions(algorithm="rings2d", collective=coll, jobs=1))
    assert comp._simple_form(Variant("rings2d", cf, Protocol.SIMPLE))
    assert not comp._simple_form(Variant("rings2d", cf, Protocol.LL))
    # budget 1 (as ``narrowing_budget`` keys it): without the split
    # chunks, whose backward halves take peers of their own
    sched = rings2d_schedule(topo, coll, cf, simple=True, budget=1)
    load: dict[tuple[int, int], int] = {}
    for op in sched.ops:
        if op.is_transfer and op.src.rank in place and op.dst.rank in place:
            e = (place[op.src.rank], place[op.dst.rank])
            load[e] = load.get(e, 0) + op.count
    width = _link_widths(topo, members)
    cycle = _box_rings(topo, members, 1)[0]
    one_cycle = max(sum(load.values()) / len(members) / width[e]
                    for e in zip(cycle, cycle[1:] + cycle[:1], strict=True))
    assert max(n / width[e] for e, n in load.items()) <= one_cycle / 3
    assert len(load) > len(members)  # more links than one cycle's
    validate_schedule(topo, sched)
    other = rings2d_schedule(topo, coll, cf)
    rings = {(op.src.rank, op.dst.rank) for op in other.ops
             if op.is_transfer and op.src.rank == members[0] and op.dst.rank in place}
    assert len(rings) < len({(op.src.rank, op.dst.rank) for op in sched.ops
                             if op.is_transfer and op.src.rank == members[0]
                             and op.dst.rank in place})
