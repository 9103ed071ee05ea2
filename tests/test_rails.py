"""Rail-aligned hierarchical schedules (``--algorithm rails``, issue 18)."""

from __future__ import annotations

import dataclasses
from collections import Counter

import pytest

from colc.compiler.lowering.lower_to_program import LoweringOptions, lower_to_program
from colc.compiler.pipeline import CompileOptions, compile_topology
from colc.compiler.hierarchical import rails
from colc.compiler.hierarchical.rails import carrier_place, plan_rails, rail_peers, rails_schedule
from colc.errors import InfeasibleError, UnsupportedError
from colc.frontends.families import dgx_a100, mi250, torus
from colc.ir.core import Buffer, Collective, Protocol
from colc.ir.topology import boxes
from helpers import validate_schedule, validated_program

COLLS = (Collective.ALLGATHER, Collective.REDUCESCATTER, Collective.ALLREDUCE)


@pytest.mark.parametrize("coll", COLLS)
@pytest.mark.parametrize("nboxes,chunks,budget", [(2, 2, 32), (3, 1, 32), (2, 1, 17)])
def test_schedules_verify(nboxes, chunks, budget, coll) -> None:
    """Proved by the chunk checker, lowered, and run by the runtime interpreter."""
    topo = dgx_a100(nboxes)
    validate_schedule(topo, rails_schedule(topo, coll, chunks, budget=budget))


@pytest.mark.parametrize("coll", COLLS)
@pytest.mark.parametrize("nboxes,budget,segments", [(5, 18, 4), (6, 17, 2)])
def test_segments_of_several_shards_are_proved(nboxes, budget, segments, coll) -> None:
    """Small budgets force fewer segments per block: a carrier then relays shards
    it does not own, and the receiving carrier sums partials for its box peers."""
    topo = dgx_a100(nboxes)
    assert plan_rails(topo, 2, budget).segments == segments
    validate_schedule(topo, rails_schedule(topo, coll, 2, budget=budget), lower=False)


@pytest.mark.parametrize("coll", COLLS)
def test_pieces_of_several_shards_are_proved(coll, monkeypatch) -> None:
    """Where a lane would take too many steps, pieces grow past a shard (what
    1024 GPUs need): a piece that crosses a rail then holds several owners' data."""
    from colc.compiler.hierarchical import rails

    monkeypatch.setattr(rails.plan, "STEPS_PER_LANE", 2)
    monkeypatch.setattr(rails.gather, "STEPS_PER_LANE", 2)  # read there too
    topo = dgx_a100(6)
    plan = plan_rails(topo, 1, 17)
    assert plan.segments == 2 and plan.piece > 1
    validate_schedule(topo, rails_schedule(topo, coll, 1, budget=17), lower=False)


@pytest.mark.parametrize("budget", [17, 24, 32])
def test_threadblocks_stay_within_the_budget(budget) -> None:
    topo = dgx_a100(2)
    plan = plan_rails(topo, 8, budget, 2, reduces=True)
    assert plan.threadblocks <= budget
    sched = rails_schedule(topo, Collective.ALLREDUCE, 8, budget=budget)
    program = lower_to_program(sched, LoweringOptions(max_threadblocks=budget))
    assert program.max_threadblocks <= plan.threadblocks


@pytest.mark.parametrize("coll", COLLS)
def test_every_block_crosses_the_network_once_on_a_rail(coll) -> None:
    """Network traffic is the minimum: each chunk crosses from each box to each
    other box once (allreduce: once per phase), always between rail peers."""
    topo, cf = dgx_a100(3), 2
    sched = rails_schedule(topo, coll, cf)
    box_of = {r: i for i, g in enumerate(boxes(topo)) for r in g}
    crossed: Counter = Counter()
    for op in sched.ops:
        a, b = op.src.rank, op.dst.rank
        if op.is_transfer and box_of[a] != box_of[b]:
            assert a % 8 == b % 8  # rail peers only
            for d in range(op.count):
                crossed[(box_of[a], box_of[b])] += 1
    per_pair = 8 * cf * (2 if coll is Collective.ALLREDUCE else 1)
    assert set(crossed.values()) == {per_pair} and len(crossed) == 6


def test_rail_peers_balance_the_network() -> None:
    assert [rail_peers(nb, 8, 8) for nb in (2, 4, 16)] == [1, 3, 15]
    assert [rail_peers(128, 8, s) for s in (1, 2, 4)] == [16, 32, 64]


@pytest.mark.parametrize("nb", [3, 5, 16, 32, 127, 128])
@pytest.mark.parametrize("segments", [1, 2, 4, 8])
def test_a_place_sends_to_the_rail_peers_it_receives_from(nb, segments) -> None:
    """Distances d and nb - d share a carrier: the lowering pairs every network
    send with the receive from the same peer, and no cycle of boxes forms."""
    sends: dict[int, set[int]] = {}
    recvs: dict[int, set[int]] = {}
    for d in range(1, nb):
        for j in range(segments):
            g = carrier_place(nb, 8, segments, d, j)
            sends.setdefault(g, set()).add(d % nb)  # box 0 sends block 0 to box d
            recvs.setdefault(g, set()).add(-d % nb)  # and receives block -d there
    assert sends == recvs
    assert max(len(x) for x in sends.values()) == rail_peers(nb, 8, segments)


def test_a_thousand_gpus_plan_within_the_budget() -> None:
    """DGX A100 x128: one segment per block, own and relayed data on two shared
    lanes per box peer, 16 rail peers: 31 threadblocks, LL128-deep pieces
    (the file itself is built in a benchmark, not a timed test)."""
    plan = plan_rails(dgx_a100(128), 1, 32)
    assert (plan.segments, plan.lanes, plan.threadblocks) == (1, (0, 2), 31)
    assert plan.piece <= 8  # LL128's FIFO holds 8 calls


def test_fine_allreduce_pieces_past_256_ranks_fill_a_paired_lane() -> None:
    """Past ``PHASE_RANKS`` an allreduce plans both phases on one lane; for
    Simple files (``fine``) the pieces are the finest whose sends and
    receives fill 64 steps (x64: 2 chunks, 4 otherwise; x128: 8 either way),
    and Simple's FIFO of 2 calls accepts them."""
    x64 = dgx_a100(64)
    assert plan_rails(x64, 1, 32, 2, True, fine=True).piece == 2
    assert plan_rails(x64, 1, 32, 2, True).piece == 4
    assert plan_rails(x64, 1, 32).piece == 2  # one phase: as before
    assert plan_rails(dgx_a100(128), 1, 32, 2, True, fine=True).piece == 8
    assert plan_rails(dgx_a100(32), 1, 32, 2, True, fine=True).piece == 1  # as one phase
    assert rails.fifo_problem(x64, Collective.ALLREDUCE, 1, 32, 2, simple=True) is None
    assert "pieces of 4" in rails.fifo_problem(x64, Collective.ALLREDUCE, 1, 32, 2)


def test_a_large_allreduce_gathers_in_finer_pieces_where_each_crossing_is_one() -> None:
    """DGX A100 x128 allreduce: planned for both phases, a crossing is one
    piece of 8 chunks; the allgather then takes pieces of 4, and with the
    reduce-scatter's a lane still carries at most ``PAIRED_LANE_TRANSFERS``
    transfers per peer and direction.  Where crossings already have several
    pieces (x64) the allgather keeps the plan's."""
    plan = plan_rails(dgx_a100(128), 1, 32, 2, True)
    assert (plan.piece, rails._gather_piece(plan, 1)) == (8, 4)
    x64 = plan_rails(dgx_a100(64), 1, 32, 2, True)
    assert rails._gather_piece(x64, 1) == x64.piece == 4
    sched = rails_schedule(dgx_a100(128), Collective.ALLREDUCE, 1, 32, simple=False)
    crossing = {}
    for op in sched.ops:
        if op.src.rank // 8 != op.dst.rank // 8:
            crossing.setdefault(op.dst.buffer, set()).add(op.count)
    assert crossing == {Buffer.SCRATCH: {8}, Buffer.OUTPUT: {4}}  # reduce-scatter, allgather
    lane = Counter((op.src.rank, op.dst.rank, op.channel) for op in sched.ops
                   if op.src.rank != op.dst.rank)
    assert max(lane.values()) <= rails.PAIRED_LANE_TRANSFERS


@pytest.mark.parametrize("coll", COLLS)
def test_shared_lanes_and_one_segment_verify_at_ll128(coll) -> None:
    """The x128 layout at 10 boxes (a budget of 17 forces it): proved, lowered at
    LL128 and run by the runtime interpreter (FIFO depth, races, postcondition)."""
    topo = dgx_a100(10)
    plan = plan_rails(topo, 1, 17)
    assert (plan.segments, plan.lanes) == (1, (0, 2))
    validate_schedule(topo, rails_schedule(topo, coll, 1, budget=17), Protocol.LL128)


def test_too_small_a_budget_names_the_smallest_that_works() -> None:
    with pytest.raises(InfeasibleError, match="at least 17 threadblocks"):
        rails_schedule(dgx_a100(2), Collective.ALLGATHER, 8, budget=16)
    assert plan_rails(dgx_a100(2), 8, 17).threadblocks == 17


def test_needs_boxes() -> None:
    with pytest.raises(UnsupportedError, match="at least two boxes"):
        rails_schedule(torus([4, 4], 25), Collective.ALLGATHER, 2)


@pytest.mark.parametrize("coll", COLLS)
@pytest.mark.parametrize("nboxes,chunks,budget,segments", [(2, 2, 32, 16), (3, 1, 24, 16),
                                                           (5, 1, 24, 8)])
def test_boxes_without_a_switch_relay_on_their_links(nboxes, chunks, budget, segments,
                                                     coll) -> None:
    """MI250 boxes (no box switch): box peers are reached along spanning trees of
    the xGMI links, every transfer between linked GCDs or rail peers (with
    segments of several shards too: the receiving carrier's sums go down its
    tree to their owners, not through the NIC)."""
    topo = mi250(nboxes)
    plan = plan_rails(topo, chunks, budget)
    assert plan.trees and plan.threadblocks <= budget and plan.segments == segments
    sched = rails_schedule(topo, coll, chunks, budget=budget)
    linked = {(topo.rank_of[u], topo.rank_of[v]) for u, v in topo.capacity()
              if u in topo.rank_of and v in topo.rank_of}
    box_of = {r: i for i, g in enumerate(boxes(topo)) for r in g}
    for op in sched.ops:
        a, b = op.src.rank, op.dst.rank
        if a != b:
            assert (a, b) in linked if box_of[a] == box_of[b] else a % 16 == b % 16
    validate_schedule(topo, sched)


def test_box_trees_spread_over_the_links() -> None:
    """Each place's tree spans its box; no link carries more trees per unit of
    bandwidth than 1.5 times the average (breadth-first trees: 2.8 times)."""
    topo = mi250(2)
    trees = rails.box_trees(topo, boxes(topo))
    cap = {(int(u[3:]), int(v[3:])): c for (u, v), c in topo.capacity().items()
           if u.startswith("b0g") and v.startswith("b0g")}
    load = Counter(e for edges in trees for e in edges)
    for g, edges in enumerate(trees):
        assert sorted(v for _, v in edges) == [h for h in range(16) if h != g]
        assert all(e in cap for e in edges)
    mean = sum(load.values()) / sum(float(c) for c in cap.values())
    assert max(n / float(cap[e]) for e, n in load.items()) <= 1.5 * mean


def test_compiled_file_within_budget_is_verified() -> None:
    result = compile_topology(dgx_a100(2), CompileOptions(
        algorithm="rails", collective=Collective.ALLGATHER, max_threadblocks=24,
        rank_sizes=(1 << 20,)))
    assert result.program.max_threadblocks <= 24
    assert result.algorithm.startswith("rails/")


def test_large_sizes_fall_back_to_ll128_where_no_simple_file_is_correct(monkeypatch) -> None:
    """The portfolio ranks Simple alone above 256 MiB; when no Simple file is
    correct (DGX A100 x128 rails), LL128 serves those sizes and a note says so."""
    from colc.compiler.pipeline import Compiler
    from colc.compiler.portfolio import build_portfolio

    def refuse_simple(topo, coll, chunks, budget, depth, simple=False):
        return "pieces exceed the FIFO" if depth == 2 else None

    real_lower = Compiler._lower

    def no_unpaired_simple(self, variant, first=0):  # it fits 32 since copies share
        if variant.unpaired and variant.protocol is Protocol.SIMPLE:
            raise InfeasibleError("unpaired: refused by the test")
        return real_lower(self, variant, first)

    monkeypatch.setattr(rails, "fifo_problem", refuse_simple)
    monkeypatch.setattr(Compiler, "_lower", no_unpaired_simple)
    port = build_portfolio(dgx_a100(2), CompileOptions(
        algorithm="rails", collective=Collective.ALLGATHER, chunks=8, jobs=1),
        sizes=(64 << 20, 1 << 30))
    assert {w.variant.protocol.value for w in port.windows} == {"LL128"}
    assert any("at 1GB no Simple file is correct" in n for n in port.notes)


def test_large_sizes_rank_ll128_where_every_simple_file_is_slower(monkeypatch) -> None:
    """Past LL128's range only Simple files are ranked; where the best of them
    is slower than the best file one size below (DGX A100 x16 allreduce: a
    ring at 1 GiB after rails' LL128 at 128 MiB), LL128 is ranked there too
    and serves the size when faster, with a note."""
    from colc.compiler import pipeline
    from colc.compiler.portfolio import build_portfolio
    from helpers import slow_simple_past_256m

    real = slow_simple_past_256m(monkeypatch)
    port = build_portfolio(dgx_a100(2), CompileOptions(
        algorithm="rails", collective=Collective.ALLGATHER, chunks=8, jobs=1),
        sizes=(64 << 20, 1 << 30))
    from colc.ir.simulate import iteration_limit

    top = port.windows[-1]  # unlimited, or ended at its loop-iteration limit (420 GB)
    assert top.variant.protocol is Protocol.LL128 and top.hi in (0, iteration_limit(top.program))
    assert any("at 1GB LL128" in n and "faster than every Simple file" in n
               for n in port.notes)
    monkeypatch.setattr(pipeline.Compiler, "simulate", real)
    plain = build_portfolio(dgx_a100(2), CompileOptions(
        algorithm="rails", collective=Collective.ALLGATHER, chunks=8, jobs=1),
        sizes=(64 << 20, 1 << 30))
    assert plain.windows[-1].variant.protocol is Protocol.SIMPLE


def test_large_sizes_also_simulate_the_ll128_file_that_led_below(monkeypatch) -> None:
    """Where Simple does not fall behind, past LL128's range the LL128 variant
    fastest at the largest size in its range is simulated as well (only that
    one), and serves the size when it beats every Simple file."""
    from colc.compiler import pipeline
    from colc.compiler.portfolio import build_portfolio

    def build():
        return build_portfolio(dgx_a100(2), CompileOptions(
            algorithm="rails", collective=Collective.ALLGATHER, chunks=8, jobs=1),
            sizes=(64 << 20, 1 << 30))

    port = build()
    led = max((r.algbw, label) for label, s, r in port.table
              if s == 64 << 20 and label.endswith("/LL128"))[1]
    big = {label: r.algbw for label, s, r in port.table if s == 1 << 30}
    assert [x for x in big if x.endswith("/LL128")] == [led]
    assert port.windows[-1].variant.label == max(big, key=big.get)
    real = pipeline.Compiler.simulate

    def slower(self, variant, size, program=None):  # Simple 10% slower at 1 GiB:
        res = real(self, variant, size, program)  # still ahead of its own 64 MiB
        if variant.protocol is Protocol.SIMPLE and size > 256 << 20:
            res = dataclasses.replace(res, algbw=min(res.algbw, big[led] / 1.1))
        return res

    monkeypatch.setattr(pipeline.Compiler, "simulate", slower)
    port = build()
    assert port.windows[-1].variant.label == led
    assert any("at 1GB LL128" in n for n in port.notes)
    # past COARSE_RANKS it is not simulated there (DGX A100 x128 allreduce:
    # 358 s of one core at 1 GiB for a file rings2d beat); Simple stays
    from colc.compiler import portfolio

    monkeypatch.setattr(pipeline.Compiler, "simulate", real)
    monkeypatch.setattr(portfolio, "COARSE_RANKS", 8)
    port = build()
    assert not [label for label, s, _ in port.table
                if s == 1 << 30 and label.endswith("/LL128")]
    assert port.windows[-1].variant.protocol is Protocol.SIMPLE


def test_boxes_without_a_switch_lower_decoupled_within_the_budget() -> None:
    """The pipeline lowers rails on MI250 boxes with a send and a receive
    threadblock per lane (planned that way), within the budget, verified."""
    result = compile_topology(mi250(2), CompileOptions(
        algorithm="rails", collective=Collective.REDUCESCATTER, chunks=1,
        max_threadblocks=32, rank_sizes=(1 << 20,)))
    program = result.program
    assert result.algorithm.startswith("rails/") and program.max_threadblocks <= 32
    box = set(range(16))
    for rank in program.ranks[:16]:
        for tb in rank.threadblocks:  # never a send and a receive within the box
            assert not (tb.send in box and tb.recv in box), (rank.rank, tb.id)


def test_meshed_allreduce_at_256_ranks_lowers_within_its_plan() -> None:
    """MI250 x16 allreduce (256 GCDs): both phases' relays share a lane, so the
    plan counts their steps together; the decoupled lowering keeps the
    planned threadblocks (planned as one phase it split the relay lanes: 60
    per GPU against 31 planned, and no file fit 32)."""
    from colc.compiler.pipeline import DECOUPLED

    topo = mi250(16)
    plan = plan_rails(topo, 1, 32, 2)
    sched = rails_schedule(topo, Collective.ALLREDUCE, 1, budget=32)
    program = lower_to_program(sched, LoweringOptions(
        protocol=Protocol.SIMPLE, inplace=sched.inplace, outofplace=sched.outofplace,
        max_threadblocks=32, name="x", **DECOUPLED[0]))
    assert program.max_threadblocks <= plan.threadblocks <= 32


def test_separated_rounds_give_a_lane_one_transfer_per_round() -> None:
    """The same ops, in other rounds: no (pair, lane) carries two transfers in
    one round (the plain rounds do), and the schedule still verifies."""
    topo = dgx_a100(4)
    plain = rails_schedule(topo, Collective.ALLREDUCE, 2, budget=24)
    rounds = rails.separated_rounds(topo, Collective.ALLREDUCE, 2, budget=24)
    assert len(rounds) == len(plain.ops)
    per_round = Counter((r, op.src.rank, op.dst.rank, op.channel)
                        for r, op in zip(rounds, plain.ops, strict=True)
                        if op.src.rank != op.dst.rank)
    assert max(per_round.values()) == 1
    twice = Counter((r, op.src.rank, op.dst.rank, op.channel)
                    for r, op in zip(plain.rounds, plain.ops, strict=True)
                    if op.src.rank != op.dst.rank)
    assert max(twice.values()) > 1  # the plain rounds do put two on a lane
    validate_schedule(topo, rails_schedule(topo, Collective.ALLREDUCE, 2, budget=24,
                                           separate=True))


def test_a_paired_schedule_that_hangs_at_simple_lowers_with_separated_rounds() -> None:
    """DGX A100 x6 reduce-scatter, chunking 8, budget 24: paired in the plain
    rounds the Simple lowering deadlocks (a lane sends twice in a row into a
    FIFO of 2 calls) and unpaired it does not fit; the pipeline's next
    strategy lowers the same pairing in separated rounds, within 24."""
    from colc.compiler.pipeline import FUSED, RAILS, Compiler, Variant
    from colc.ir.interpret import deadlocks

    topo = dgx_a100(6)
    sched = rails_schedule(topo, Collective.REDUCESCATTER, 8, budget=24)
    plain = lower_to_program(sched, LoweringOptions(
        protocol=Protocol.SIMPLE, max_threadblocks=24, **FUSED[0]))
    assert deadlocks(plain, Protocol.SIMPLE.fifo_depth)
    compiler = Compiler(topo, CompileOptions(algorithm="rails",
                                             collective=Collective.REDUCESCATTER,
                                             max_threadblocks=24, rank_sizes=(1 << 20,),
                                             jobs=1))
    variant = Variant("rails", 8, Protocol.SIMPLE)
    program = compiler.program(variant)
    assert RAILS[compiler._strategy[variant]].get("rounds") == "separated"
    assert program.max_threadblocks <= 24
    assert not deadlocks(program, Protocol.SIMPLE.fifo_depth)
    assert compiler.simulate(variant, 1 << 20).algbw > 0


def test_boxes_without_a_switch_name_the_smallest_budget() -> None:
    """MI250: a send and a receive threadblock per link and lane, both ways."""
    with pytest.raises(InfeasibleError, match="at least 21 threadblocks"):
        plan_rails(mi250(2), 1, 20)
    assert plan_rails(mi250(2), 1, 21).threadblocks == 21


@pytest.mark.parametrize("coll", COLLS)
def test_boxes_of_one_rank_behind_a_network_switch(coll) -> None:
    """Every GPU its own box, one network switch: no box transfers at all."""
    from colc.frontends.yaml_topology import parse_topology_text

    text = "nodes:\n" + "".join(f"  - {{id: g{i}, kind: gpu}}\n" for i in range(4)) + \
        "  - {id: ib, kind: switch, net: true}\nlinks:\n" + \
        "".join(f"  - {{src: g{i}, dst: ib, bandwidth: 25, duplex: true}}\n" for i in range(4))
    topo = parse_topology_text(text)
    assert not plan_rails(topo, 2, 32).trees
    validate_schedule(topo, rails_schedule(topo, coll, 2))


def _first_crossing_depth(topo, sched) -> int:
    """Transfers (ops between ranks) on the longest dependency path up to
    and including the earliest network crossing."""
    box_of = {r: i for i, g in enumerate(boxes(topo)) for r in g}
    depth: dict[int, int] = {}
    best = None
    for op in sched.ops:  # deps point to earlier ops
        moves = op.src.rank != op.dst.rank
        depth[op.op_id] = max((depth[d] for d in op.deps), default=0) + moves
        if box_of[op.src.rank] != box_of[op.dst.rank]:
            best = depth[op.op_id] if best is None else min(best, depth[op.op_id])
    return best


@pytest.mark.parametrize("coll", (Collective.REDUCESCATTER, Collective.ALLREDUCE))
def test_carriers_sum_their_box_in_short_chains(coll, monkeypatch) -> None:
    """With a threadblock to spare, a carrier sums its seven box peers' inputs
    in four chains of at most two transfers, so the first piece leaves on the
    rail after three transfers instead of eight; the schedule stays proved."""
    topo = dgx_a100(4)
    plan = plan_rails(topo, 2, 32, 2 if coll is Collective.ALLREDUCE else 1, reduces=True)
    assert plan.sum_chains == rails.SUM_CHAINS == 4
    sched = rails_schedule(topo, coll, 2)
    validate_schedule(topo, sched, lower=False)
    assert _first_crossing_depth(topo, sched) == 3
    monkeypatch.setattr(rails.plan, "SUM_CHAINS", 1)
    assert _first_crossing_depth(topo, rails_schedule(topo, coll, 2)) == 8


def test_split_sums_take_only_a_spare_threadblock() -> None:
    """The combining threadblock never costs a lane: at the budget the lanes
    need exactly, the sums stay one chain; allgathers never split."""
    topo = dgx_a100(4)
    tight = plan_rails(topo, 2, 28, reduces=True)
    assert (tight.sum_chains, tight.threadblocks) == (1, 28)
    roomy = plan_rails(topo, 2, 29, reduces=True)
    assert (roomy.sum_chains, roomy.threadblocks, roomy.lanes) == (4, 29, tight.lanes)
    assert plan_rails(topo, 2, 32).sum_chains == 1
    sched = rails_schedule(topo, Collective.REDUCESCATTER, 2, budget=29)
    program = lower_to_program(sched, LoweringOptions(protocol=Protocol.SIMPLE,
                                                      max_threadblocks=29))
    assert program.max_threadblocks == 29


def test_short_chains_reach_the_rail_sooner_in_simulation(monkeypatch) -> None:
    """DGX A100 x4 reduce-scatter at 16 MiB, Simple: the split sums are
    faster than one chain (the NIC idled while the first piece passed seven
    peers; 78.8 against 69.8 GB/s).  At 1 GiB, since the lanes are shared
    (``SHARED_PHASE_TRANSFERS``), one chain leads (202.2 against 193.6); the
    plan still splits the sums there, and the portfolio ranks the chunkings
    (rings2d's switched form is the 1 GiB file)."""
    from colc.ir.runtime_model import A100
    from colc.ir.simulate import simulate

    topo = dgx_a100(4)

    def algbw() -> float:
        sched = rails_schedule(topo, Collective.REDUCESCATTER, 2)
        program = lower_to_program(sched, LoweringOptions(protocol=Protocol.SIMPLE,
                                                          max_threadblocks=32))
        return simulate(program, topo, A100, 16 << 20).algbw

    split = algbw()
    monkeypatch.setattr(rails.plan, "SUM_CHAINS", 1)
    assert split > 1.05 * algbw()


def _nic_shards(topo, sched, cf) -> Counter:
    """Chunks each rank receives over the network, in shards."""
    box_of = {r: i for i, g in enumerate(boxes(topo)) for r in g}
    got: Counter = Counter()
    for op in sched.ops:
        if box_of[op.src.rank] != box_of[op.dst.rank]:
            got[op.dst.rank] += op.count
    return Counter({r: n / cf for r, n in got.items()})


def test_spread_distances_give_every_nic_the_same_share() -> None:
    """DGX A100 x16 at 4 segments per block: carried in turn, places 0-3 took
    16 shards over their NICs and places 4-7 took 14; spreading distances 7
    and 8 one shard per place gives every NIC 15, with one rail peer more."""
    topo = dgx_a100(16)
    plan = plan_rails(topo, 2, 32)
    assert (plan.segments, plan.spread) == (4, (7, 8))
    assert plan.threadblocks <= 32
    loads = set(_nic_shards(topo, rails_schedule(topo, Collective.ALLGATHER, 2), 2).values())
    assert loads == {15.0}
    even = rails.RailPlan(plan.groups, plan.segments, plan.lanes, plan.net_lanes,
                          plan.piece, plan.threadblocks)
    turns = Counter(even.carrier(d, j) for d in range(1, 16) for j in range(4))
    assert sorted(set(turns.values())) == [7, 8]


def test_spread_takes_only_spare_threadblocks() -> None:
    """At the budget the lanes need exactly there is no rail peer to spare."""
    topo = dgx_a100(16)
    assert plan_rails(topo, 2, 30).spread == ()
    assert plan_rails(topo, 2, 30).threadblocks <= 30


@pytest.mark.parametrize("coll", COLLS)
def test_spread_schedules_are_proved(coll) -> None:
    """DGX A100 x12 spreads distances 5 and 6 (one-shard segments beside
    two-shard ones, fewer pieces on those crossings): proved in place and out
    of place."""
    topo = dgx_a100(12)
    sched = rails_schedule(topo, coll, 1)
    assert plan_rails(topo, 1, 32).spread == (5, 6)
    validate_schedule(topo, sched, lower=False)


def test_even_nics_are_faster_in_simulation(monkeypatch) -> None:
    """DGX A100 x12 allgather at 1 GiB, Simple: spread beats carriers in turn."""
    from colc.ir.runtime_model import A100
    from colc.ir.simulate import simulate

    topo = dgx_a100(12)

    def algbw() -> float:
        sched = rails_schedule(topo, Collective.ALLGATHER, 2)
        program = lower_to_program(sched, LoweringOptions(protocol=Protocol.SIMPLE,
                                                          max_threadblocks=32))
        assert program.max_threadblocks <= 32
        return simulate(program, topo, A100, 1 << 30).algbw

    spread = algbw()
    monkeypatch.setattr(rails.plan, "_spread_choice", lambda *args: ())
    assert spread > 1.1 * algbw()


@pytest.mark.parametrize("budget", [17, 25, 28])
def test_plan_counts_the_lanes_two_boxes_use(budget: int) -> None:
    """Two boxes split an odd lane total evenly (``_split_lanes``), so the odd
    lane is not used: the plan's count is what the lowered file takes, give
    or take the local threadblock (it counted the odd lane, 24 against 17 at
    budget 25, so spare-threadblock choices saw no room)."""
    from colc.compiler.pipeline import Compiler, Variant

    topo = dgx_a100(2)
    plan = plan_rails(topo, 16, budget, reduces=True)
    comp = Compiler(topo, CompileOptions(algorithm="rails", collective=Collective.REDUCESCATTER,
                                         max_threadblocks=budget, jobs=1))
    used = comp.program(Variant("rails", 16, Protocol.SIMPLE)).max_threadblocks
    assert used <= plan.threadblocks <= used + 1  # the local one may fold into a lane


def test_two_boxes_also_try_rails_unpaired() -> None:
    """Behind box switches, two boxes add rails variants lowered unpaired (the
    lanes planned for about half the budget); four boxes, meshed boxes and
    all-to-all do not."""
    from colc.compiler.pipeline import Compiler, variants

    def labels(topo, coll):
        comp = Compiler(topo, CompileOptions(algorithm="rails", collective=coll))
        return [v.label for v in variants(comp, (Protocol.SIMPLE,))]

    two = labels(dgx_a100(2), Collective.REDUCESCATTER)
    assert "rails/c16/Simple/unpaired" in two and "rails/c16/Simple" in two
    assert not [x for x in labels(dgx_a100(4), Collective.REDUCESCATTER) if "unpaired" in x]
    assert not [x for x in labels(mi250(2), Collective.REDUCESCATTER) if "unpaired" in x]
    assert not [x for x in labels(dgx_a100(2), Collective.ALLTOALL) if "unpaired" in x]


def test_rails_chunkings_narrow_with_the_ranks() -> None:
    """Past 128 ranks behind box switches rails tries one and two chunks per
    shard (DGX A100 x32: its pieces are a whole shard whatever the chunking),
    past 256 only one; below, the usual four."""
    from colc.compiler.pipeline import CHUNKINGS, Compiler, variants

    def chunkings(boxes):
        comp = Compiler(dgx_a100(boxes), CompileOptions(algorithm="rails",
                                                        collective=Collective.ALLGATHER))
        return sorted({v.chunks for v in variants(comp, (Protocol.SIMPLE,))})

    assert chunkings(16) == sorted(CHUNKINGS["rails"])
    assert chunkings(32) == [1, 2]
    assert chunkings(64) == [1]


@pytest.mark.parametrize("coll", COLLS)
def test_unpaired_schedules_are_proved_and_lower_within_the_budget(coll) -> None:
    """Own and relayed data share the lanes; lowered unpaired, the plan of 17
    takes at most 32 threadblocks (a budget of 32 halved, plus one); the file
    passes the runtime interpreter."""
    from colc.compiler.pipeline import Compiler, Variant

    topo = dgx_a100(2)
    assert plan_rails(topo, 8, 17, reduces=True, unpaired=True).lanes == (0, 2)
    sched = rails_schedule(topo, coll, 8, budget=17, unpaired=True)
    validate_schedule(topo, sched, lower=False)
    comp = Compiler(topo, CompileOptions(algorithm="rails", collective=coll, jobs=1))
    variant = Variant("rails", 8, Protocol.SIMPLE, unpaired=True)
    assert comp.plan_budget(variant) == 17
    program, text = comp.finish(variant, "")
    assert program.max_threadblocks <= 32
    assert all(tb.send is None or tb.recv is None
               for rp in program.ranks for tb in rp.threadblocks)
    # allgather's own copy took a 33rd, local threadblock (refused); it now
    # goes on the connection threadblock of the send that reads it
    assert all(tb.send is not None or tb.recv is not None
               for rp in program.ranks for tb in rp.threadblocks)


def test_unpaired_reduce_scatter_runs_the_carriers_ahead(monkeypatch) -> None:
    """DGX A100 x2 reduce-scatter at 1 GiB, unpaired: with the carriers' sums
    ``LEAD`` pieces ahead of the owners' sums the last network crossing
    overlaps the box links (254 GB/s); all carriers first, the NIC waits on
    the owners' sums and ends last (246)."""
    from colc.ir.runtime_model import A100
    from colc.ir.simulate import simulate

    topo = dgx_a100(2)

    def algbw() -> float:
        sched = rails_schedule(topo, Collective.REDUCESCATTER, 16, budget=17, unpaired=True)
        program = lower_to_program(sched, LoweringOptions(
            protocol=Protocol.SIMPLE, max_threadblocks=32, pair_connections=False))
        return simulate(program, topo, A100, 1 << 30).algbw

    ahead = algbw()
    monkeypatch.setattr(rails.scatter, "LEAD", 64)  # every carrier piece before any owner's
    assert ahead > 1.02 * algbw()


def test_two_boxes_reduce_scatter_beats_forestcoll_within_32() -> None:
    """Issue 18's figure for DGX A100 x2 reduce-scatter at the default budget:
    at least ForestColl's measured 185 / 247 GB/s at 128M / 1G (seed 004,
    inventory 3.6, with its 25 threadblocks), simulated, in at most 32."""
    topo = dgx_a100(2)
    res = compile_topology(topo, CompileOptions(algorithm="rails",
                                                collective=Collective.REDUCESCATTER,
                                                chunks=16, jobs=1))
    assert res.variant.unpaired and res.program.max_threadblocks <= 32
    got = dict((s, r.algbw) for s, r in res.predicted)
    assert got[128 << 20] >= 185 and got[1 << 30] >= 247


def test_two_boxes_share_an_odd_lane_total_within_forestcolls_count() -> None:
    """At ForestColl's own 25 threadblocks (seed 004, DGX A100 x2 allgather:
    201 / 247 GB/s measured at 128M / 1G) the plan has three lanes per box
    peer: split evenly the odd one went unused (17 threadblocks, 176.7 /
    223.6); shared by own and relayed data, all three carry (24)."""
    from colc.compiler.pipeline import Compiler, Variant

    topo = dgx_a100(2)
    assert plan_rails(topo, 8, 25).lanes == (0, 3)
    assert plan_rails(topo, 8, 25, reduces=True).lanes == (1, 1)  # reduce-scatter keeps it
    comp = Compiler(topo, CompileOptions(algorithm="rails", collective=Collective.ALLGATHER,
                                         max_threadblocks=25, jobs=1))
    at_128m = Variant("rails", 8, Protocol.SIMPLE)
    at_1g = Variant("rails", 16, Protocol.SIMPLE)
    assert max(comp.program(v).max_threadblocks for v in (at_128m, at_1g)) <= 25
    assert comp.simulate(at_128m, 128 << 20).algbw >= 201
    assert comp.simulate(at_1g, 1 << 30).algbw >= 247


def test_last_round_of_relays_keeps_off_the_lane_of_the_own_shards() -> None:
    """Where own shards and relays share the lanes (DGX A100 x128), the last
    round of relays goes on the other lanes, so the next loop iteration's own
    shards, which every crossing waits for, are not queued behind it; the
    lanes stay within their transfers per peer.  With a lane of its own for
    the own shard (x64) the lanes are dealt as before."""
    sched = rails_schedule(dgx_a100(128), Collective.ALLGATHER, 1, 32)
    box = {r: r // 8 for r in range(sched.ngpus)}
    cross = [r for op, r in zip(sched.ops, sched.rounds) if box[op.src.rank] != box[op.dst.rank]]
    local = [(op, r) for op, r in zip(sched.ops, sched.rounds)
             if op.is_transfer and box[op.src.rank] == box[op.dst.rank]]
    last = max(cross)
    assert {op.channel for op, r in local if r >= last} == {1}
    assert {op.channel for op, r in local if op.src.buffer.value == "input"} == {0}
    assert {op.channel for op, r in local if r < last} == {0, 1}
    per_lane = Counter((op.src.rank, op.dst.rank, op.channel) for op, _ in local)
    assert max(per_lane.values()) <= rails.STEPS_PER_LANE
    plan = plan_rails(dgx_a100(64), 1, 32)
    assert plan.lanes[0] == 1
    sched = rails_schedule(dgx_a100(64), Collective.ALLGATHER, 1, 32)
    own = {op.channel for op in sched.ops if op.is_transfer and op.src.buffer.value == "input"
           and op.src.rank // 8 == op.dst.rank // 8}
    assert own == {0}


def test_allgather_tapers_its_last_pieces_with_one_segment_per_block() -> None:
    """With one segment per block (DGX A100 x64, pieces of 2 chunks) the
    allgather cuts each crossing's last piece in halves, so the round that
    lands last and is forwarded last is half as large; every relay lane
    stays within its transfers per peer.  Four segments per block (x16) and
    the reduce-scatter keep even pieces."""
    topo = dgx_a100(64)
    plan = plan_rails(topo, 1, 32)
    assert plan.segments == 1 and plan.piece == 2
    sched = rails_schedule(topo, Collective.ALLGATHER, 1, 32)
    cross = [op for op in sched.ops if op.src.rank // 8 != op.dst.rank // 8]
    block = Counter()
    for op in cross:
        block[(op.src.rank, op.dst.rank, op.count)] += 1
    assert {k[2] for k in block} == {1, 2}
    assert all(block[(s, d, 1)] == 2 and block[(s, d, 2)] == 3 for s, d, c in block)
    local = Counter((op.src.rank, op.dst.rank, op.channel) for op in sched.ops
                    if op.is_transfer and op.src.rank // 8 == op.dst.rank // 8)
    assert max(local.values()) <= rails.STEPS_PER_LANE
    rs = rails_schedule(topo, Collective.REDUCESCATTER, 1, 32)
    assert {op.count for op in rs.ops if op.src.rank // 8 != op.dst.rank // 8} == {2}
    x16 = rails_schedule(dgx_a100(16), Collective.ALLGATHER, 4, 32)
    assert {op.count for op in x16.ops if op.src.rank // 8 != op.dst.rank // 8} == {2}


@pytest.mark.scale
def test_only_simple_files_take_the_simple_form() -> None:
    """The pipeline builds rails' form for Simple files for those only (LL
    pays a round more of latency at small sizes): on DGX A100 x64 the Simple
    allgather's schedule has one-chunk crossings and the Simple allreduce's
    pieces of 2 chunks, the LL and LL128 variants' and the reduce-scatter's
    (it lands partials up to 32 boxes, ``_lands``) do not; where none
    applies (x16 allgather) every protocol shares one schedule."""
    from colc.compiler.pipeline import Compiler, Variant

    def counts(boxes, coll, proto):
        comp = Compiler(dgx_a100(boxes), CompileOptions(
            algorithm="rails", collective=coll, prove=False))
        v = Variant("rails", 1, proto)
        sched = comp.variant_schedule(v)
        return comp.schedule_key(v), {op.count for op in sched.ops
                                      if op.src.rank // 8 != op.dst.rank // 8}

    key, simple = counts(64, Collective.ALLGATHER, Protocol.SIMPLE)
    assert key[-1] and simple == {1, 2}
    for proto in (Protocol.LL, Protocol.LL128):
        key, got = counts(64, Collective.ALLGATHER, proto)
        assert not key[-1] and got == {2}
    assert not counts(64, Collective.REDUCESCATTER, Protocol.SIMPLE)[0][-1]
    assert not counts(16, Collective.ALLGATHER, Protocol.SIMPLE)[0][-1]
    key, fine = counts(64, Collective.ALLREDUCE, Protocol.SIMPLE)
    assert key[-1] and fine == {2}
    key, coarse = counts(64, Collective.ALLREDUCE, Protocol.LL)
    assert not key[-1] and coarse == {4}


def test_simple_reduce_scatter_files_land_the_partials_a_carrier_sums() -> None:
    """On DGX A100 x16 a receiving carrier sums the partials of one chunk that
    cross to it from several boxes.  Reduced as they arrive they chain
    across its rail threadblocks (a reduce whose source is in another box);
    in the form for Simple files each lands in scratch and a local
    threadblock sums them, so no reduce crosses the network.  The pipeline
    asks that form for Simple files only, and not on 8 boxes, where a
    carrier sums one partial per chunk, nor past ``LANDS_BOXES``."""
    from colc.compiler.pipeline import Compiler, Variant
    from colc.ir.chunks import OpKind

    topo = dgx_a100(16)

    def rail_reduces(sched) -> int:
        return sum(op.kind is OpKind.REDUCE and op.src.rank // 8 != op.dst.rank // 8
                   for op in sched.ops)

    coarse = rails_schedule(topo, Collective.REDUCESCATTER, 2, simple=False)
    landed = rails_schedule(topo, Collective.REDUCESCATTER, 2)
    assert rail_reduces(coarse) > 0 and rail_reduces(landed) == 0
    assert len(landed.ops) == len(coarse.ops) + rail_reduces(coarse)
    validate_schedule(topo, landed, lower=False)
    comp = Compiler(topo, CompileOptions(algorithm="rails",
                                         collective=Collective.REDUCESCATTER, prove=False))
    assert comp.schedule_key(Variant("rails", 2, Protocol.SIMPLE))[-1]
    assert not comp.schedule_key(Variant("rails", 2, Protocol.LL128))[-1]
    assert not rails.simple_form(dgx_a100(8), Collective.REDUCESCATTER, 2)
    assert rails.simple_form(dgx_a100(rails.LANDS_BOXES), Collective.REDUCESCATTER, 1)
    assert not rails.simple_form(dgx_a100(2 * rails.LANDS_BOXES), Collective.REDUCESCATTER, 1)
    assert not rails.simple_form(topo, Collective.ALLREDUCE, 2)


def test_owner_sums_take_the_crossed_partials_last() -> None:
    """DGX A100 x12 reduce-scatter (four segments: receiving carriers forward
    partials to the owners): each owner's chain receives its box peers'
    inputs first and the forwarded partials in a later round, and sums what
    landed on it apart, reduced into the result by one local reduce last."""
    from colc.ir.chunks import OpKind

    topo = dgx_a100(12)
    sched = rails_schedule(topo, Collective.REDUCESCATTER, 2)
    writer: dict = {}  # slot -> indices of the ops that wrote it, in order
    for i, op in enumerate(sched.ops):
        writer.setdefault(op.dst, []).append(i)
    chains = []
    for slot, ids in writer.items():
        if slot.buffer is not Buffer.OUTPUT:
            continue
        chain, at = [ids[-1]], ids[-1]
        while (prev := sched.ops[at].operand) is not None and prev.buffer is not Buffer.INPUT:
            at = max(j for j in writer[prev] if j < at)  # its last write before
            chain.append(at)
        chains.append(chain[::-1])
    assert len(chains) == topo.num_ranks * 2
    forwarded = 0
    for chain in chains:
        ops = [sched.ops[i] for i in chain]
        kinds = ["local" if op.src.rank == op.dst.rank else
                 "box" if op.src.buffer is Buffer.INPUT else "crossed" for op in ops]
        assert "local" not in kinds[:-1]  # landed partials: one reduce, the last
        assert kinds == sorted(kinds, key=["box", "crossed", "local"].index)
        box = [sched.rounds[i] for i, k in zip(chain, kinds) if k == "box"]
        crossed = [sched.rounds[i] for i, k in zip(chain, kinds) if k == "crossed"]
        assert not crossed or min(crossed) > max(box)
        forwarded += len(crossed)
    assert forwarded > 0


def test_reduce_scatter_and_allreduce_share_every_lane_with_a_segment_per_place(
        monkeypatch) -> None:
    """From three boxes up to ``PHASE_RANKS`` ranks with a segment per place
    (DGX A100 x3 to x8), a reduce-scatter's and an allreduce's own shards
    and relays share every lane (``(0, 3)``), an allreduce's two phases
    each within ``SHARED_PHASE_TRANSFERS`` per peer and direction, so 16
    chunks per shard on x4 (one loop iteration at 1 GiB) lower within 29
    threadblocks, where split lanes took 49; proved; faster in simulation
    at 1 GiB than the split form of 8 chunks the portfolio took before.
    The allgather (its own shards would go first on every lane), two boxes
    and x16 (4 segments) keep split lanes."""
    x4 = dgx_a100(4)
    plan = plan_rails(x4, 16, 32, 2, True)
    assert (plan.segments, plan.lanes, plan.piece) == (8, (0, 3), 2)
    assert plan_rails(x4, 8, 32, 1, True).lanes == (0, 3)
    assert plan_rails(x4, 8, 32).lanes == (1, 2)
    assert plan_rails(dgx_a100(8), 8, 32, 2, True).lanes == (0, 3)
    assert plan_rails(dgx_a100(16), 2, 32, 2, True).lanes == (1, 2)
    assert plan_rails(dgx_a100(2), 8, 32, 2, True).lanes == (2, 2)
    assert plan_rails(dgx_a100(12), 1, 64, 1, True).lanes[0] > 0  # past SHARED_BOXES
    sched = rails_schedule(x4, Collective.ALLREDUCE, 16, 32)
    lane = Counter((op.src.rank, op.dst.rank, op.channel) for op in sched.ops
                   if op.is_transfer and op.src.rank // 8 == op.dst.rank // 8)
    assert max(lane.values()) <= 2 * rails.SHARED_PHASE_TRANSFERS
    x3 = dgx_a100(3)
    assert plan_rails(x3, 4, 32, 2, True).lanes == (0, 3)
    validate_schedule(x3, rails_schedule(x3, Collective.ALLREDUCE, 4, 32), Protocol.SIMPLE)
    validate_schedule(x3, rails_schedule(x3, Collective.REDUCESCATTER, 4, 32), Protocol.LL128)
    from colc.ir.runtime_model import A100
    from colc.ir.simulate import simulate

    def run(chunks: int) -> tuple[int, float]:
        program = lower_to_program(
            rails_schedule(x4, Collective.ALLREDUCE, chunks, 32),
            LoweringOptions(protocol=Protocol.SIMPLE, max_threadblocks=32))
        return (max(len(r.threadblocks) for r in program.ranks),
                simulate(program, x4, A100, 1 << 30).algbw)

    tbs, shared = run(16)
    assert tbs == 29
    split = rails._split_lanes
    monkeypatch.setattr(rails.plan, "_split_lanes", lambda total, nb, _=False: split(total, nb))
    monkeypatch.setattr(rails.plan, "SHARED_PHASE_TRANSFERS", rails.STEPS_PER_LANE)
    old = plan_rails(x4, 8, 32, 2, True)  # the split plan the portfolio took before
    assert (old.lanes, old.piece) == ((1, 2), 1)
    with pytest.raises(InfeasibleError, match="threadblocks"):
        run(16)  # 16 chunks on split lanes: past the budget
    assert shared > 1.02 * run(8)[1]


def test_allreduce_spreads_own_shards_as_their_sums_end_from_single_chunk_pieces() -> None:
    """DGX A100 x4, 16 chunks per shard (pieces of 2): a Simple allreduce's
    reduce-scatter moves the first ``LEAD_PIECES`` pieces' chunks one a
    piece, so the network starts sooner; every owner spreads a piece of its
    reduced shard to its box peers ``SPREAD_LAG`` pieces of owners' sums
    after that piece's sum, long before the reduce-scatter's last owners'
    sums (before, the spreads followed the whole reduce-scatter and the box
    links idled while its last partials crossed; two boxes still do).
    Proved; within 29 threadblocks; at 1 GiB it reaches 80% of the
    allreduce bound (issue 18), which it did not before (102.8 against
    106.7 GB/s)."""
    from colc.compiler.analyze import _bounds
    from colc.ir.runtime_model import A100
    from colc.ir.simulate import simulate

    x4 = dgx_a100(4)
    sched = rails_schedule(x4, Collective.ALLREDUCE, 16, 32)
    lead = rails.LEAD_PIECES * 2
    crossings = [op for op in sched.ops if op.src.rank // 8 != op.dst.rank // 8]
    pairs: dict[tuple[int, int], Counter] = {}
    for op in crossings:
        if op.src.buffer is not Buffer.OUTPUT:  # the reduce-scatter's
            pairs.setdefault((op.src.rank, op.dst.rank), Counter())[op.count] += 1
    assert all(c == {1: lead, 2: (16 - lead) // 2} for c in pairs.values())
    # an owner's spread: its reduced shard from its output to a box peer
    spreads = [op.op_id for op in sched.ops
               if op.src.buffer is Buffer.OUTPUT and op.src.index // 16 == op.src.rank
               and op.dst.rank // 8 == op.src.rank // 8 and op.dst.rank != op.src.rank]
    sums = [op.op_id for op in sched.ops
            if op.dst.buffer is Buffer.OUTPUT and op.kind.name == "REDUCE"]
    assert spreads and min(spreads) < max(sums)
    assert max(spreads) < min(op.op_id for op in crossings if op.src.buffer is Buffer.OUTPUT)
    x2 = rails_schedule(dgx_a100(2), Collective.ALLREDUCE, 16, 32)  # below SPREAD_BOXES
    x2_spreads = [op.op_id for op in x2.ops
                  if op.src.buffer is Buffer.OUTPUT and op.src.index // 16 == op.src.rank
                  and op.dst.rank // 8 == op.src.rank // 8 and op.dst.rank != op.src.rank]
    assert min(x2_spreads) > max(op.op_id for op in x2.ops
                                 if op.dst.buffer is Buffer.OUTPUT and op.kind.name == "REDUCE")
    validate_schedule(x4, sched, Protocol.SIMPLE)
    other = rails_schedule(x4, Collective.ALLREDUCE, 16, 32, simple=False)
    assert {op.count for op in other.ops if op.src.rank // 8 != op.dst.rank // 8} == {2}
    program = lower_to_program(sched, LoweringOptions(protocol=Protocol.SIMPLE,
                                                      max_threadblocks=32))
    assert program.max_threadblocks == 29
    bound = _bounds(x4)["allreduce"]["algbw"]
    assert simulate(program, x4, A100, 1 << 30).algbw >= 0.8 * bound


@pytest.mark.scale
def test_allreduce_on_eight_boxes_staggers_its_crossings() -> None:
    """DGX A100 x8 (seven crossings a rank, 8 chunks per shard): a Simple
    allreduce's allgather starts a rank's first ``STAGGER_FREE`` crossings
    together and each later one ``STAGGER_PIECES`` pieces after the one
    before it, held by a gate on that one's piece, so they end one after
    another and the receiving carriers relay each last piece while the NIC
    still carries the others.  Its carriers' split sums take a second
    combining threadblock, which makes room for one-chunk lead pieces
    (``_lead_plan``).  Proved; 31 threadblocks; faster at 1 GiB than the
    schedule for LL and LL128 (neither), and at 80% of the allreduce bound
    (issue 18), where NCCL's rings (88.7 GB/s) were the file before.  Four
    and five crossings a rank (x5, x6), and pieces of one chunk (x8 with 4
    chunks per shard), do not stagger."""
    from colc.compiler.analyze import _bounds
    from colc.ir.runtime_model import A100
    from colc.ir.simulate import simulate

    x8 = dgx_a100(8)
    sched = rails_schedule(x8, Collective.ALLREDUCE, 8, 32)
    plain = rails_schedule(x8, Collective.ALLREDUCE, 8, 32, simple=False)
    gathers = [op for op in sched.ops if op.src.rank // 8 != op.dst.rank // 8
               and op.src.buffer is Buffer.OUTPUT]
    gated = [op for op in gathers if sched.gates[op.op_id] >= 0]
    starts = Counter(op.src.rank for op in gated)
    assert set(starts.values()) == {7 - rails.STAGGER_FREE}  # every rank, each later crossing
    for op in gated:
        gate = sched.ops[sched.gates[op.op_id]]
        assert gate.src.rank == op.src.rank and gate in gathers
        assert gate.dst.rank // 8 != op.dst.rank // 8  # the crossing before, to another box
    assert not any(g >= 0 for g in plain.gates)
    program = validated_program(x8, sched, Protocol.SIMPLE, 32)
    staggered = simulate(program, x8, A100, 1 << 30).algbw
    unstaggered = simulate(lower_to_program(plain, LoweringOptions(
        protocol=Protocol.SIMPLE, max_threadblocks=32)), x8, A100, 1 << 30).algbw
    assert program.max_threadblocks == 31 and staggered > 1.03 * unstaggered
    assert staggered >= 0.8 * _bounds(x8)["allreduce"]["algbw"]
    crossed = Counter(op.count for op in sched.ops if op.src.rank // 8 != op.dst.rank // 8
                      and op.src.buffer is not Buffer.OUTPUT)
    assert crossed[1] and crossed[2]  # lead pieces of one chunk, then pieces of two
    for nb, cf in ((5, 8), (6, 4), (8, 4)):  # fewer crossings; pieces of one chunk
        assert not any(g >= 0 for g in rails_schedule(dgx_a100(nb), Collective.ALLREDUCE,
                                                      cf, 32).gates)
