"""Chunk-level schedule IR: which chunk moves from which rank to which.

A ``Schedule`` is a collective over ``ngpus`` ranks whose logical buffer is
cut into ``nchunks`` equal chunks (``nchunks`` is a multiple of ``ngpus``;
``cf = nchunks // ngpus`` chunks form one rank's shard).  Buffer extents per
collective are those of ``colc.ir.core.buffer_extents``; each rank also has
``scratch_chunks`` scratch chunks.

An ``Op`` moves ``count`` consecutive chunks:

* ``COPY``:   ``dst <- src``
* ``REDUCE``: ``dst <- src (+) operand`` where ``operand`` is on the
  destination rank (it may equal ``dst``).

When ``src.rank != dst.rank`` the op is a network transfer (a send on the
source rank and a receive on the destination rank); otherwise it is a local
copy/reduce (a local REDUCE needs ``operand == dst``).  ``deps`` lists op ids
that must complete first; ``channel`` is a hint grouping transfers into
parallel streams (lowering maps it to runtime channels).  Ops are stored in
a *program order*: a sequential execution in that order is one valid
execution.

The checker ``colc.ir.check_chunks`` proves, for the in-place and out-of-place
aliasing, that every execution respecting ``deps`` meets the postcondition
(race freedom + symbolic execution).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from colc.ir.core import Buffer, Collective, IdentityEnum


class OpKind(IdentityEnum):
    """What an op does to its destination."""

    COPY = "copy"
    REDUCE = "reduce"


@dataclass(frozen=True, slots=True, order=True)
class Slot:
    """``buffer[index]`` on ``rank`` (the first chunk of a range)."""

    rank: int
    buffer: Buffer
    index: int

    def shifted(self, delta: int) -> Slot:
        """The slot ``delta`` chunks further in the same buffer."""
        return Slot(self.rank, self.buffer, self.index + delta)


@dataclass(frozen=True, slots=True)
class Op:
    """One chunk movement; see the module docstring for the semantics."""

    op_id: int
    kind: OpKind
    src: Slot
    dst: Slot
    count: int = 1
    operand: Slot | None = None
    deps: tuple[int, ...] = ()
    channel: int = 0

    @property
    def is_transfer(self) -> bool:
        """Whether the op crosses ranks."""
        return self.src.rank != self.dst.rank


@dataclass(frozen=True, slots=True)
class Schedule:
    """A chunk-level schedule of one collective.

    Parameters
    ----------
    collective : Collective
    ngpus : int
    nchunks : int
        Chunks of the whole logical buffer (multiple of ``ngpus``).
    scratch_chunks : int
        Scratch chunks per rank.
    ops : tuple of Op
        In program order; ``ops[i].op_id == i``.
    algorithm : str
        Name of the generator (for reports and the XML name).
    inplace, outofplace : bool
        Under which aliasing the schedule is meant to be correct.
    routes : tuple
        Optional routing witness: ``((src, dst), ((path, weight), ...))``
        per rank pair, ``path`` a node-id tuple through switches only and
        ``weight`` a positive integer.  The pair's traffic is spread over
        its paths in proportion to the weights (what the generator assumed,
        e.g. the switch paths of ForestColl's edge splitting); pairs without
        an entry take the fabric's default path (``Router``).  The runtime
        file does not carry routes; the checker proves each path is real.
    rounds : tuple of int
        Ordering hint for the lowering, one round number per op (empty: none,
        or stale after a pass that rebuilt the ops): among the steps ready in
        its list simulation the lowering takes earlier rounds first and, in a
        round, sends before receives, so the two directions of a symmetric
        exchange alternate on both sides instead of one side receiving first
        (which serialises them).  A generator gives each (pair, lane) at most
        one transfer per round.
    gates : tuple of int
        Ordering hint for the lowering, one entry per op (``-1``: none;
        empty: none, or stale after a pass that rebuilt the ops): op ``i``'s
        send starts only after op ``gates[i]``, an earlier op, is done on op
        ``i``'s sending rank.  A generator holds a threadblock back with it
        where no data dependency would (rings2d's switched reduce-scatter
        starts part of its first pass's rings once the others are a step from
        the end of that pass, so the first partials reach the network
        sooner).
    """

    collective: Collective
    ngpus: int
    nchunks: int
    scratch_chunks: int
    ops: tuple[Op, ...]
    algorithm: str = ""
    inplace: bool = True
    outofplace: bool = True
    routes: tuple[tuple[tuple[int, int], tuple[tuple[tuple[str, ...], int], ...]], ...] = ()
    rounds: tuple[int, ...] = ()
    gates: tuple[int, ...] = ()

    def rounds_of(self, source: Sequence[int]) -> tuple[int, ...]:
        """Rounds for ops made from these (``self.ops[k]`` for each ``k`` of
        ``source``: a piece or a copy keeps its op's round), or ``()`` when
        this schedule has none (or stale ones)."""
        if len(self.rounds) != len(self.ops):
            return ()
        return tuple(self.rounds[k] for k in source)

    @property
    def chunks_per_rank(self) -> int:
        """``cf``: chunks in one rank's shard."""
        return self.nchunks // self.ngpus
