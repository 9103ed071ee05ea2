"""Pass ``bfb-to-chunks``: lower a step schedule to the chunk-level ``Schedule``.

Input invariant: an allgather ``StepSchedule``/``BfbSolution`` on the
topology's ranks (for reduce-scatter and allreduce on a topology whose
capacity is not symmetric: an allgather schedule of the *transpose* graph,
computed here with BFB when not given).
Output invariant: a ``colc.ir.chunks.Schedule`` with ``nchunks = N P``
whose ops, run sequentially in program order (step-major), meet the
collective's postcondition in-place and out-of-place; ``deps`` are empty
(``infer_dependencies`` adds them).

Lowering (seed 001 section 3.3, A.2, Def 5, Thm 1):

* allgather: every rank copies its input shard to ``output[r P ..]``; a
  send of chunks ``[a, b)`` of shard ``v`` from ``w`` to ``u`` in step ``t``
  is a COPY ``w.o[vP+a] -> u.o[vP+a]``;
* reduce-scatter: the reverse of an allgather schedule ``A`` of ``G^T``.  A
  send of ``A`` from ``w`` to ``u`` in step ``t`` becomes, in step
  ``D - t + 1``, a REDUCE of ``u``'s partial of those chunks into ``w``'s
  (``dst = operand = w.i[vP+a]``).  Every rank receives each point of a
  foreign shard exactly once in ``A``, so the reversed sends form reduction
  trees towards ``v`` and a rank only forwards a partial after all its
  subtree's REDUCEs (earlier steps).  Partials live in the input buffer;
  rank ``v`` finally copies ``i[vP..]`` to ``o[0..]``.  Where several
  neighbours reduce into the same chunks of a rank in one step (a
  broadcast's fan-out, reversed), their REDUCEs are cut into parts and
  staggered (``_interleaved``) so they run side by side instead of each
  waiting for the previous neighbour's whole reduction;
* allreduce: copy input to output (in pieces of at most 71 chunks, the
  runtime's count per step), reduce-scatter in the output buffer, then
  allgather in the output buffer.

``Op.channel`` is the index of the sending rank among the receiver's
in-neighbours (in the allgather orientation), so parallel in-links of a rank
can run on parallel channels.

Complexity: O(sends), and O(k m^2) per fan-in of k senders over m parts.
"""

from __future__ import annotations

from colc.compiler.bfb.schedule import generate_bfb, is_capacity_symmetric, rank_capacity
from colc.compiler.bfb.discretize_chunks import choose_chunks_per_shard, discretize_chunks
from colc.errors import InternalError, UnsupportedError
from colc.ir.bfb import BfbSolution, ChunkedSchedule, StepSchedule
from colc.ir.chunks import Op, OpKind, Schedule, Slot
from colc.ir.core import Buffer, Collective
from colc.ir.load_checks import MAX_COUNT
from colc.ir.topology import Topology

NAME = "bfb-to-chunks"


def bfb_to_schedule(
    bfb: BfbSolution | StepSchedule,
    topo: Topology,
    collective: Collective,
    chunks_per_shard: int | None = None,
    *,
    transpose_bfb: BfbSolution | StepSchedule | None = None,
) -> Schedule:
    """Chunk-level schedule of an allgather, reduce-scatter or allreduce.

    Parameters
    ----------
    bfb : BfbSolution or StepSchedule
        Allgather schedule of ``topo``.
    topo : Topology
    collective : Collective
    chunks_per_shard : int or None
        ``P``; ``None`` picks it with ``choose_chunks_per_shard``.
    transpose_bfb : BfbSolution or StepSchedule or None
        Allgather schedule of the transpose graph, for reduce-scatter and
        allreduce; defaults to ``bfb`` on capacity-symmetric topologies and
        to a fresh BFB of the transpose otherwise.

    Returns
    -------
    Schedule

    Raises
    ------
    UnsupportedError
        Collectives other than allgather, reduce-scatter and allreduce.

    Examples
    --------
    >>> from colc.frontends.families import ring
    >>> from colc.compiler.bfb.schedule import generate_bfb
    >>> t = ring(4, 1)
    >>> s = bfb_to_schedule(generate_bfb(t), t, Collective.ALLGATHER)
    >>> s.nchunks, len(s.ops)
    (8, 20)
    """
    if collective not in (Collective.ALLGATHER, Collective.REDUCESCATTER, Collective.ALLREDUCE):
        raise UnsupportedError(f"BFB lowering has no {collective.value}")
    n = topo.num_ranks
    ag = bfb.to_steps() if isinstance(bfb, BfbSolution) else bfb
    if ag.num_ranks != n:
        raise InternalError(f"schedule has {ag.num_ranks} ranks, topology {n}")
    rs: StepSchedule | None = None
    if collective is not Collective.ALLGATHER:
        if transpose_bfb is None:
            transpose_bfb = bfb if is_capacity_symmetric(topo) else generate_bfb(topo, transpose=True)
        rs = transpose_bfb.to_steps() if isinstance(transpose_bfb, BfbSolution) else transpose_bfb
    cap = rank_capacity(topo)
    if chunks_per_shard is None:
        chunks_per_shard = choose_chunks_per_shard(ag, cap)
        if rs is not None:
            rs_cap = {(b, a): c for (a, b), c in cap.items()}
            chunks_per_shard = max(chunks_per_shard, choose_chunks_per_shard(rs, rs_cap))
    p = chunks_per_shard
    b = _Builder()
    if collective is Collective.ALLGATHER:
        for r in range(n):
            b.add(OpKind.COPY, Slot(r, Buffer.INPUT, 0), Slot(r, Buffer.OUTPUT, r * p), p)
        _allgather_ops(b, discretize_chunks(ag, p))
    elif collective is Collective.REDUCESCATTER:
        _reduce_ops(b, discretize_chunks(_need(rs), p), Buffer.INPUT)
        for r in range(n):
            b.add(OpKind.COPY, Slot(r, Buffer.INPUT, r * p), Slot(r, Buffer.OUTPUT, 0), p)
    else:
        for r in range(n):
            b.copy(Slot(r, Buffer.INPUT, 0), Slot(r, Buffer.OUTPUT, 0), n * p)
        _reduce_ops(b, discretize_chunks(_need(rs), p), Buffer.OUTPUT)
        _allgather_ops(b, discretize_chunks(ag, p))
    return Schedule(
        collective=collective,
        ngpus=n,
        nchunks=n * p,
        scratch_chunks=0,
        ops=tuple(b.ops),
        algorithm=ag.name or "bfb",
        # BFB's steps as rounds: a rank's sends of a step go before the
        # receives that end there (two ranks that swap shards overlap)
        rounds=tuple(b.rounds),
    )


def _need(rs: StepSchedule | None) -> StepSchedule:
    if rs is None:
        raise InternalError("reduce-scatter lowering without a transpose schedule")
    return rs


class _Builder:
    """Appends ops with consecutive ids."""

    def __init__(self) -> None:
        self.ops: list[Op] = []
        self.rounds: list[int] = []
        self.base = 0  # the round of the phase's first step

    def add(self, kind: OpKind, src: Slot, dst: Slot, count: int, *,
            operand: Slot | None = None, channel: int = 0, step: int = 0) -> None:
        self.ops.append(Op(len(self.ops), kind, src, dst, count, operand, (), channel))
        self.rounds.append(self.base + step)

    def copy(self, src: Slot, dst: Slot, count: int) -> None:
        """A local copy, cut into as few near-equal pieces as a step's count
        allows: an allreduce's ``N P`` chunks reach the runtime's
        ``MAX_COUNT`` from 72 on."""
        k = -(-count // (MAX_COUNT - 1))
        for i in range(k):
            a = count * i // k
            self.add(OpKind.COPY, Slot(src.rank, src.buffer, src.index + a),
                     Slot(dst.rank, dst.buffer, dst.index + a), count * (i + 1) // k - a)


def _channels(cs: ChunkedSchedule) -> dict[tuple[int, int], int]:
    """Channel of a (src, dst) pair: index of src among dst's senders."""
    senders: dict[int, set[int]] = {}
    for s in cs.sends:
        senders.setdefault(s.dst, set()).add(s.src)
    return {(w, u): i for u, ws in senders.items() for i, w in enumerate(sorted(ws))}


def _allgather_ops(b: _Builder, cs: ChunkedSchedule) -> None:
    p, chan = cs.chunks_per_shard, _channels(cs)
    first = min((s.step for s in cs.sends), default=0)
    for s in cs.sends:
        at = s.shard * p + s.first
        b.add(OpKind.COPY, Slot(s.src, Buffer.OUTPUT, at), Slot(s.dst, Buffer.OUTPUT, at),
              s.count, channel=chan[(s.src, s.dst)], step=s.step - first)
    b.base += cs.num_steps


def _reduce_ops(b: _Builder, cs: ChunkedSchedule, buf: Buffer) -> None:
    """Reversed allgather of the transpose graph (see the module docstring)."""
    p, chan = cs.chunks_per_shard, _channels(cs)
    last = max((s.step for s in cs.sends), default=0)
    groups: dict[tuple[int, int, int], list] = {}
    for s in cs.sends:
        groups.setdefault((-s.step, s.src, s.shard), []).append(s)
    for key in sorted(groups):
        for s, first, count in _interleaved(groups[key]):
            at = s.shard * p + first
            dst = Slot(s.src, buf, at)
            b.add(OpKind.REDUCE, Slot(s.dst, buf, at), dst, count, operand=dst,
                  channel=chan[(s.src, s.dst)], step=last - s.step)
    b.base += cs.num_steps


def _interleaved(fan: list) -> list[tuple]:
    """A step's partials of one shard into one rank, cut and ordered so that
    no two of them reduce the same chunks at once.

    ``fan`` holds the sends (allgather orientation: ``src`` reduces what
    ``dst`` sends) of one step, one receiving rank and one shard.  Partials
    into the same chunks must reduce one after another; in program order
    one whole partial after another, every sender but the first waits for
    the previous sender's whole reduction.  Here the chunks are cut at every
    range's ends and each piece is cut again into as many parts as senders
    cover it (while it has chunks to cut), then emitted in rounds: in each
    round a sender takes its first part that no other sender took in that
    round (or, if none is left, its first part).  On 2, 4 or 8 senders of
    one range this is a Latin square: the reductions run side by side, each
    waiting only for a part another sender reduced in the round before; 3,
    5, 6 or 7 leave a few parts shared in a round.  An exact Latin square
    (a maximum matching per round) simulated no faster on hypercube 4 and
    tori 4x4 and 3x5 (reduce-scatter, 4 chunks: 37.6, 37.6, 39.5 GB/s
    against 38.0, 38.0, 41.3 at 1 GiB).

    Returns ``(send, first, count)`` in program order.
    """
    fan = sorted(fan, key=lambda x: (x.dst, x.first))
    if len(fan) == 1:
        return [(fan[0], fan[0].first, fan[0].count)]
    ends = sorted({x.first for x in fan} | {x.first + x.count for x in fan})
    parts: list[tuple[int, int]] = []
    for a, z in zip(ends, ends[1:]):
        k = min(z - a, sum(1 for x in fan if x.first <= a and z <= x.first + x.count))
        parts += [(a + (z - a) * i // k, a + (z - a) * (i + 1) // k) for i in range(k)]
    todo = [[pt for pt in parts if x.first <= pt[0] and pt[1] <= x.first + x.count] for x in fan]
    out: list[tuple] = []
    while any(todo):
        taken: set[tuple[int, int]] = set()
        for j, x in enumerate(fan):
            free = [pt for pt in todo[j] if pt not in taken]
            if todo[j]:
                pt = (free or todo[j])[0]
                taken.add(pt)
                todo[j].remove(pt)
                out.append((x, pt[0], pt[1] - pt[0]))
    return out
