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


def test_allreduce_may_have_fewer_chunks_than_ranks() -> None:
    """An allreduce names every chunk alike on every rank, so its chunk
    count need not be a multiple of the ranks (rings2d's paired halves on
    1024 GPUs: 512): a chain of 4 ranks over 2 chunks proves and runs; an
    allgather of 2 chunks on 4 ranks is still refused."""
    from colc.compiler.lowering.infer_dependencies import infer_dependencies
    from helpers import validate_schedule

    topo = fam.ring(4, 10)
    ops: list[Op] = []
    for k in range(2):
        for r in range(3):
            src = Slot(r, Buffer.INPUT if r == 0 else Buffer.OUTPUT, k)
            ops.append(Op(len(ops), OpKind.REDUCE, src, Slot(r + 1, Buffer.OUTPUT, k),
                          operand=Slot(r + 1, Buffer.INPUT, k)))
        for r in (3, 0, 1):
            ops.append(Op(len(ops), OpKind.COPY, Slot(r, Buffer.OUTPUT, k),
                          Slot((r + 1) % 4, Buffer.OUTPUT, k)))
    sched = infer_dependencies(Schedule(Collective.ALLREDUCE, 4, 2, 0, tuple(ops)))
    assert check_schedule(sched, topo) == []
    validate_schedule(topo, sched)
    gather = Schedule(Collective.ALLGATHER, 4, 2, 0, ())
    assert any("not a multiple" in p for p in check_schedule(gather))
