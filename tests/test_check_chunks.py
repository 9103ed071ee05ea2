"""The chunk-level checker must catch what is wrong, not only pass what is right."""

from __future__ import annotations

import dataclasses
from fractions import Fraction

from colc.compiler.rings.ring import ring_schedule
from colc.frontends import families as fam
from colc.ir.check_chunks import check_schedule
from colc.ir.chunks import Op, OpKind, Schedule, Slot
from colc.ir.core import Buffer, Collective
from colc.ir.topology import Link, Node, Topology


def _replace_op(sched: Schedule, k: int, **changes) -> Schedule:
    ops = list(sched.ops)
    ops[k] = dataclasses.replace(ops[k], **changes)
    return dataclasses.replace(sched, ops=tuple(ops))


def test_good_ring_passes() -> None:
    topo = fam.ring(4, 10)
    assert check_schedule(ring_schedule(topo, Collective.ALLREDUCE), topo) == []


def test_missing_dependency_is_a_race() -> None:
    sched = ring_schedule(fam.ring(4, 10), Collective.ALLREDUCE)
    k = next(op.op_id for op in sched.ops if op.deps)
    problems = check_schedule(_replace_op(sched, k, deps=()))
    assert any("race" in p for p in problems)


def test_double_reduction_and_wrong_result_are_reported() -> None:
    sched = ring_schedule(fam.ring(3, 10), Collective.ALLREDUCE)
    extra = Op(len(sched.ops), OpKind.REDUCE, Slot(0, Buffer.INPUT, 0), Slot(1, Buffer.OUTPUT, 0),
               operand=Slot(1, Buffer.OUTPUT, 0), deps=tuple(range(len(sched.ops))))
    bad = dataclasses.replace(sched, ops=(*sched.ops, extra))
    assert any("twice" in p for p in check_schedule(bad))
    dropped = dataclasses.replace(sched, ops=sched.ops[:-1])
    assert any("expected" in p for p in check_schedule(dropped))


def test_transfer_between_non_neighbours_is_rejected() -> None:
    nodes = tuple(Node(f"r{i}", "gpu") for i in range(3))
    links = (Link("r0", "r1", Fraction(1)), Link("r1", "r2", Fraction(1)),
             Link("r2", "r0", Fraction(1)))
    topo = Topology("uni3", nodes, links)
    op = Op(0, OpKind.COPY, Slot(0, Buffer.INPUT, 0), Slot(2, Buffer.OUTPUT, 0))
    sched = Schedule(Collective.ALLGATHER, 3, 3, 0, (op,))
    assert any("not connected" in p for p in check_schedule(sched, topo))


def test_out_of_range_slot() -> None:
    op = Op(0, OpKind.COPY, Slot(0, Buffer.INPUT, 5), Slot(1, Buffer.OUTPUT, 0))
    sched = Schedule(Collective.ALLGATHER, 2, 2, 0, (op,))
    assert any("outside" in p for p in check_schedule(sched))
