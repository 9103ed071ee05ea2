"""Ring baseline: correctness on every family, bandwidth as the ring theory says."""

from __future__ import annotations

from fractions import Fraction

import pytest

from colc.compiler.estimate_bandwidth import schedule_algbw, schedule_steps
from colc.compiler.rings.ring import ring_schedule
from colc.frontends import families as fam
from colc.frontends import load_topology
from colc.ir.core import Collective, Protocol
from helpers import validate_schedule

COLLS = [Collective.ALLGATHER, Collective.REDUCESCATTER, Collective.ALLREDUCE]

ZOO = {
    "ring8": lambda: fam.ring(8, 10),
    "uniring6": lambda: fam.ring(6, 10, bidirectional=False),
    "torus3x5": lambda: fam.torus([3, 5], 10),
    "torus2x3": lambda: fam.torus([2, 3], 10),
    "hypercube3": lambda: fam.hypercube(3, 10),
    "complete5": lambda: fam.complete(5, 10),
    "k44": lambda: fam.complete_bipartite(8, 10),
    "circulant12": lambda: fam.circulant(12, [2, 3], 10),
    "kautz8": lambda: fam.generalized_kautz(8, 2, 10),
    "a100x2": lambda: fam.dgx_a100(2),
    "h100x2": lambda: fam.dgx_h100(2),
    "mi250x1": lambda: fam.mi250(1),
}


@pytest.mark.parametrize("coll", COLLS, ids=lambda c: c.value)
@pytest.mark.parametrize("name", sorted(ZOO))
def test_ring_is_correct_and_runs(name: str, coll: Collective) -> None:
    topo = ZOO[name]()
    sched = ring_schedule(topo, coll)
    validate_schedule(topo, sched, Protocol.SIMPLE)


def _ring_algbw(n: int, link_bw: int, rings: int) -> Fraction:
    return Fraction(n, n - 1) * link_bw * rings


@pytest.mark.parametrize(("topo", "rings"), [
    (fam.ring(8, 10), 2),                        # both directions of a duplex ring
    (fam.ring(6, 10, bidirectional=False), 1),
    (fam.torus([3, 5], 10), 2),                  # Hamiltonian cycle, both directions
    (fam.hypercube(4, 10), 2),
])
def test_ring_bandwidth_matches_theory(topo, rings) -> None:
    n = topo.num_ranks
    ag = ring_schedule(topo, Collective.ALLGATHER)
    assert schedule_algbw(ag, topo) == _ring_algbw(n, 10, rings)
    ar = ring_schedule(topo, Collective.ALLREDUCE)
    assert schedule_algbw(ar, topo) == _ring_algbw(n, 10, rings) / 2
    assert schedule_steps(ag) == n - 1
    assert schedule_steps(ar) == 2 * (n - 1)


def test_switch_tree_ring_is_contention_free() -> None:
    # Patarasuk-Yuan: on a tree the DFS ring uses every link once per direction,
    # so the ring runs at the speed of one link.
    topo = load_topology("examples/switch-tree.yaml")
    sched = ring_schedule(topo, Collective.ALLGATHER)
    assert schedule_algbw(sched, topo) == Fraction(8, 7) * 10


def test_dgx_a100_ring_crosses_boxes_on_matching_rails() -> None:
    topo = fam.dgx_a100(2)
    sched = ring_schedule(topo, Collective.ALLREDUCE)
    validate_schedule(topo, sched, lower=False)
    # Two rings (one per direction), each crossing the IB fabric twice at 25 GB/s.
    assert schedule_algbw(sched, topo) == Fraction(16, 15) * 25


def test_line_needs_relays_and_stays_physical() -> None:
    from colc.ir.chunks import Buffer
    from colc.ir.topology import Link, Node, Topology

    nodes = tuple(Node(f"r{i}", "gpu") for i in range(4))
    links = []
    for i in range(3):
        links += [Link(f"r{i}", f"r{i+1}", Fraction(10)), Link(f"r{i+1}", f"r{i}", Fraction(10))]
    topo = Topology("line4", nodes, tuple(links))
    for coll in COLLS:
        sched = ring_schedule(topo, coll)
        assert any(op.dst.buffer is Buffer.SCRATCH for op in sched.ops)
        validate_schedule(topo, sched)


@pytest.mark.parametrize("coll", COLLS, ids=lambda c: c.value)
@pytest.mark.parametrize("name", ["torus3x5", "hypercube3", "circulant12", "kautz8", "k44"])
def test_bfb_compiles_to_verified_xml_and_beats_ring(name: str, coll: Collective) -> None:
    from colc.compiler.pipeline import CompileOptions, compile_topology

    topo = ZOO[name]()
    bfb = compile_topology(topo, CompileOptions(algorithm="bfb", collective=coll))
    ring = ring_schedule(topo, coll)
    assert bfb.algbw >= schedule_algbw(ring, topo)
    assert schedule_steps(bfb.schedule) <= schedule_steps(ring)


@pytest.mark.parametrize("coll", [Collective.ALLGATHER, Collective.REDUCESCATTER])
@pytest.mark.parametrize("instances", [1, 2])
def test_two_rank_ring_runs_both_directions_at_once(coll: Collective, instances: int) -> None:
    """On two ranks rank 1 received before it sent (the op list's order), so
    the two directions ran one after the other: 9.3 GB/s simulated against
    20 bandwidth-only.  The ring's steps are now rounds: sends go first, and
    --instances keeps them (it dropped them: 9.4 GB/s again, review)."""
    from colc.compiler.pipeline import CompileOptions, compile_topology

    topo = fam.ring(2, 10, bidirectional=True)
    result = compile_topology(topo, CompileOptions(algorithm="ring", collective=coll,
                                                   instances=instances,
                                                   rank_sizes=(1 << 30,)))
    for rank in result.program.ranks:
        first = [tb.steps[0].kind.value for tb in rank.threadblocks if tb.send is not None]
        assert first and all(k == "send" for k in first), (rank.rank, first)
    (size, sim), = result.predicted
    assert sim.algbw > 0.85 * float(result.algbw), (sim.algbw, result.algbw)


@pytest.mark.parametrize("coll", COLLS, ids=lambda c: c.value)
def test_ring_copies_are_correct_and_use_the_budget_where_links_outrun_a_threadblock(
        coll: Collective) -> None:
    """``ring``'s chunks are copies of its rings, each on threadblocks of its
    own: proved and verified, and on one DGX A100 box (NVSwitch, 300 GB/s a
    GPU against a threadblock's 20) the file auto writes within 5
    threadblocks is the copies', at 1 GiB at least 3x the one ring (an
    allgather 87.2 against 22.0 GB/s, simulated)."""
    from colc.compiler.options import Variant
    from colc.compiler.pipeline import CompileOptions, Compiler, compile_topology

    topo = fam.dgx_a100(1)
    validate_schedule(topo, ring_schedule(topo, coll, 4), Protocol.SIMPLE)
    result = compile_topology(topo, CompileOptions(collective=coll, max_threadblocks=5, jobs=1,
                                                   rank_sizes=(1 << 30,)))
    assert result.variant.algorithm == "ring" and (result.variant.chunks or 1) > 1
    assert result.program.max_threadblocks <= 5
    one = Compiler(topo, CompileOptions(collective=coll, max_threadblocks=5)).simulate(
        Variant("ring", None, Protocol.SIMPLE, budget=2), 1 << 30)
    assert result.predicted[0][1].algbw >= 3 * one.algbw


def test_ring_copies_are_lowered_without_balancing_where_that_fits_the_budget() -> None:
    """Lane balancing merged the copies onto fewer lanes by their estimated
    rates and reordered their steps, so the rings stopped pipelining: one
    DGX A100 box's allgather with 8 copies within 8 threadblocks simulated
    93.1 GB/s at 1 GiB balanced and 170.4 lowered plain.  Copies are lowered
    plain first and balanced only where plain does not fit the budget (16
    copies within 8); a single ring is balanced (its second lane pays)."""
    from colc.compiler.options import Variant
    from colc.compiler.pipeline import CompileOptions, Compiler

    topo = fam.dgx_a100(1)
    figures = {}
    for balance in (True, False):
        comp = Compiler(topo, CompileOptions(collective=Collective.ALLGATHER, max_threadblocks=8,
                                             balance=balance, jobs=1))
        v = Variant("ring", 8, Protocol.SIMPLE)
        assert comp.program(v).max_threadblocks <= 8
        figures[balance] = comp.simulate(v, 1 << 30).algbw
    assert figures[True] == figures[False] > 150  # plain first: the same file
    comp = Compiler(topo, CompileOptions(collective=Collective.ALLGATHER, max_threadblocks=8,
                                         jobs=1))
    sixteen = Variant("ring", 16, Protocol.SIMPLE)
    assert comp.program(sixteen).max_threadblocks <= 8  # balanced: plain takes 16
    assert sixteen in comp._rebalanced
    assert not comp._balances(Variant("ring", 8, Protocol.SIMPLE))
    assert comp._balances(Variant("ring", None, Protocol.SIMPLE))


def test_ring_copies_whose_plain_files_fail_verification_are_lowered_balanced() -> None:
    """Once the plain lowering strategies of ring copies are spent (each
    file failed verification), the next strategy is the first balanced one,
    not a refusal; after the balanced ones nothing is left."""
    from colc.compiler.options import Variant
    from colc.compiler.pipeline import CompileOptions, Compiler

    comp = Compiler(fam.ring(4, 25, bidirectional=True),
                    CompileOptions(collective=Collective.ALLGATHER, jobs=1))
    v = Variant("ring", 2, Protocol.SIMPLE)
    strategies = len(comp._strategies(v))
    for _ in range(strategies - 1):
        assert comp._next_strategy(v) and not comp._balances(v)
    assert comp._next_strategy(v) and comp._balances(v) and comp._strategy[v] == 0
    for _ in range(strategies - 1):
        assert comp._next_strategy(v)
    assert not comp._next_strategy(v)
    validate = comp.program(v)  # the balanced lowering of the last strategy runs
    assert validate.max_threadblocks <= comp.budget
