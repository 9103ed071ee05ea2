"""Pass ``replicate-instances``: run I copies of a schedule side by side.

Input invariant: a correct ``Schedule`` with ``cf`` chunks per shard.
Output invariant: a correct ``Schedule`` with ``cf * I`` chunks per shard in
which copy ``i`` owns chunks ``i*cf .. i*cf+cf-1`` of every shard (so ranges
stay contiguous and each copy keeps the shard ownership the postcondition
needs), scratch is stacked per copy, channel hints are offset so copies use
disjoint channels, and dependencies stay inside each copy.  Copies are
interleaved in program order (op k of every copy, then op k+1), which keeps
the copies' progress balanced.  This is the runtime's "instances"
(runtime notes 6.5), with a shard-preserving layout instead of MSCCLang's
stride (which is valid only for single-chunk ops).

Complexity: O(I * #ops).
"""

from __future__ import annotations

import dataclasses

from colc.errors import ColcError
from colc.ir.chunks import Op, Schedule, Slot
from colc.ir.core import Buffer, Collective
from colc.ir.load_checks import MAX_CHANNELS

NAME = "replicate-instances"


def replicate_instances(sched: Schedule, instances: int) -> Schedule:
    """Return ``instances`` interleaved copies of ``sched``.

    Parameters
    ----------
    sched : Schedule
    instances : int
        At least 1; 1 returns ``sched`` unchanged.

    Returns
    -------
    Schedule

    Raises
    ------
    ColcError
        When ``instances`` < 1, or more than the runtime's channels
        (``MAX_CHANNELS``, 32: each instance takes channels of its own).
    """
    if instances < 1:
        raise ColcError(f"--instances must be at least 1, got {instances}")
    if instances > MAX_CHANNELS:
        raise ColcError(f"--instances must be at most {MAX_CHANNELS}, got {instances}: each "
                        f"instance takes channels of its own, and the runtime has "
                        f"{MAX_CHANNELS}")
    if instances == 1:
        return sched
    sched = split_at_shards(sched)
    cf = max(1, sched.chunks_per_rank)  # an allreduce may have fewer chunks than ranks
    nhints = max(op.channel for op in sched.ops) + 1 if sched.ops else 1
    n = len(sched.ops)

    def remap(slot: Slot, i: int) -> Slot:
        if slot.buffer is Buffer.SCRATCH:
            return Slot(slot.rank, slot.buffer, i * sched.scratch_chunks + slot.index)
        shard, k = divmod(slot.index, cf)
        return Slot(slot.rank, slot.buffer, shard * cf * instances + i * cf + k)

    ops: list[Op] = []
    for k, op in enumerate(sched.ops):
        for i in range(instances):
            ops.append(Op(
                op_id=k * instances + i, kind=op.kind, src=remap(op.src, i), dst=remap(op.dst, i),
                count=op.count, operand=remap(op.operand, i) if op.operand else None,
                deps=tuple(d * instances + i for d in op.deps),
                channel=op.channel + i * nhints))
    assert len(ops) == n * instances
    gates = tuple(g * instances + i if g >= 0 else -1
                  for g in sched.gates for i in range(instances)) if len(sched.gates) == n else ()
    rounds = sched.rounds_of([k for k in range(n) for _ in range(instances)])
    return dataclasses.replace(sched, nchunks=sched.nchunks * instances,
                               scratch_chunks=sched.scratch_chunks * instances, ops=tuple(ops),
                               gates=gates, rounds=rounds)


def split_at_shards(sched: Schedule) -> Schedule:
    """Cut every op whose input/output range crosses a shard boundary.

    The instance layout keeps each shard contiguous per instance, so an op
    moving chunks of two shards (BFB allreduce copies its whole input to
    its output in one op) must be cut at the shard boundaries first;
    dependencies are then inferred again from program order.

    Examples
    --------
    >>> from colc.ir.chunks import Op, OpKind
    >>> s = Schedule(Collective.ALLREDUCE, 2, 4, 0,
    ...              (Op(0, OpKind.COPY, Slot(0, Buffer.INPUT, 0), Slot(0, Buffer.OUTPUT, 0), 4),))
    >>> [(o.src.index, o.count) for o in split_at_shards(s).ops]
    [(0, 2), (2, 2)]
    """
    cf = max(1, sched.chunks_per_rank)
    out: list[Op] = []
    source: list[int] = []  # the op each piece was cut from
    changed = False
    for j, op in enumerate(sched.ops):
        cuts = {0, op.count}
        for slot in (op.src, op.dst, op.operand):
            if slot is None or slot.buffer is Buffer.SCRATCH:
                continue
            cuts.update(range((-slot.index) % cf or cf, op.count, cf))
        if len(cuts) == 2:
            out.append(dataclasses.replace(op, op_id=len(out)))
            source.append(j)
            continue
        changed = True
        pts = sorted(cuts)
        for a, b in zip(pts, pts[1:], strict=False):
            out.append(Op(len(out), op.kind, op.src.shifted(a), op.dst.shifted(a), b - a,
                          op.operand.shifted(a) if op.operand is not None else None, (),
                          op.channel))
            source.append(j)
    if not changed:
        return sched
    from colc.compiler.lowering.infer_dependencies import infer_dependencies

    return infer_dependencies(dataclasses.replace(
        sched, ops=tuple(dataclasses.replace(o, deps=()) for o in out),
        rounds=sched.rounds_of(source)))
