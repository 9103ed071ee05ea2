"""``Schedule.gates``: a wait the lowering adds where no data dependency would."""

from __future__ import annotations

import dataclasses

import pytest

from colc.compiler.lowering.balance_lanes import LanePlan, balance_lanes
from colc.compiler.lowering.infer_dependencies import infer_dependencies
from colc.compiler.lowering.lower_to_program import LoweringOptions, lower_to_program
from colc.compiler.lowering.replicate_instances import replicate_instances
from colc.errors import InternalError
from colc.ir.chunks import Op, OpKind, Schedule, Slot
from colc.ir.core import Buffer, Collective

IN, OUT = Buffer.INPUT, Buffer.OUTPUT


def _exchange(gates: tuple[int, ...] = ()) -> Schedule:
    """Two ranks swap their shards on channels 0 and 1: rank 1's send (op 2)
    needs nothing rank 0 sends (op 1)."""
    ops = (Op(0, OpKind.COPY, Slot(0, IN, 0), Slot(0, OUT, 0)),
           Op(1, OpKind.COPY, Slot(0, IN, 0), Slot(1, OUT, 0), channel=0),
           Op(2, OpKind.COPY, Slot(1, IN, 0), Slot(0, OUT, 1), channel=1),
           Op(3, OpKind.COPY, Slot(1, IN, 0), Slot(1, OUT, 1)))
    return infer_dependencies(Schedule(Collective.ALLGATHER, 2, 2, 0, ops, gates=gates))


def _first_send(prog, rank: int):
    return next(tb.steps[0] for tb in prog.ranks[rank].threadblocks if tb.send is not None)


def test_a_gated_send_waits_for_its_gate_on_the_sending_rank() -> None:
    plain = lower_to_program(_exchange(), LoweringOptions())
    assert _first_send(plain, 1).dep is None
    gated = lower_to_program(_exchange((-1, -1, 1, -1)), LoweringOptions())
    waits = _first_send(gated, 1).dep
    assert waits is not None
    tb, _ = waits
    assert gated.ranks[1].threadblocks[tb].recv == 0  # rank 1's receive of op 1


def test_stale_gates_are_ignored_and_mapped_ones_follow_their_ops() -> None:
    stale = lower_to_program(_exchange((-1, 1)), LoweringOptions())
    assert _first_send(stale, 1).dep is None
    doubled = replicate_instances(_exchange((-1, -1, 1, -1)), 2)
    assert doubled.gates == (-1, -1, -1, -1, 2, 3, -1, -1)
    assert all(doubled.ops[g].src.rank == 0 and doubled.ops[g].dst.rank == 1
               for g in doubled.gates if g >= 0)


def test_a_gate_on_a_later_op_is_an_internal_error() -> None:
    sched = dataclasses.replace(_exchange(), gates=(-1, 3, -1, -1))
    with pytest.raises(InternalError, match="gated by a later op 3"):
        lower_to_program(sched, LoweringOptions())


def test_lane_balancing_schedules_a_gated_op_after_its_gate() -> None:
    """The list schedule waits for a gate as for a dependency, so the gate
    stays an earlier op in the new program order (rank 1's send has nothing
    to wait for but its gate, and would otherwise go first)."""
    ops = (Op(0, OpKind.COPY, Slot(0, IN, 0), Slot(0, OUT, 0)),
           Op(1, OpKind.COPY, Slot(0, OUT, 0), Slot(1, OUT, 0), channel=0),
           Op(2, OpKind.COPY, Slot(1, IN, 0), Slot(0, OUT, 1), channel=1),
           Op(3, OpKind.COPY, Slot(1, IN, 0), Slot(1, OUT, 1)))
    sched = infer_dependencies(Schedule(Collective.ALLGATHER, 2, 2, 0, ops,
                                        gates=(-1, -1, 1, -1), inplace=False))
    plan = LanePlan({(0, 1): 1, (1, 0): 1}, 10.0, {(0, 1): 10.0, (1, 0): 10.0},
                    {(0, 1): 1.0, (1, 0): 1.0}, 10.0)
    balanced = balance_lanes(sched, plan)
    gated = [(i, g) for i, g in enumerate(balanced.gates) if g >= 0]
    assert len(gated) == 1
    i, g = gated[0]
    assert g < i and balanced.ops[i].src.rank == 1 and balanced.ops[g].dst.rank == 1
    prog = lower_to_program(balanced, LoweringOptions(inplace=False))
    (tb,) = [tb for tb in prog.ranks[1].threadblocks if tb.send is not None]
    sends = [i for i, step in enumerate(tb.steps) if step.kind.value == "send"]
    # after the receive on its own threadblock (one lane each way), or waiting for it
    assert sends[0] > 0 or tb.steps[0].dep is not None
