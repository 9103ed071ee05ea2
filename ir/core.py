"""Vocabulary shared by every IR: collectives, buffers, protocols.

Mnemonics of a runtime (``"i"``, ``"Simple"``) belong to the backends; the
enum values here are colc's own names.
"""

from __future__ import annotations

from enum import Enum


class IdentityEnum(Enum):
    """An Enum hashed by identity, as it compares (``Enum`` hashes its name in
    Python: chunk keys such as ``(rank, Buffer, index)`` are hashed millions of
    times per lowering and simulation; this is several times faster).  Sets
    of members iterate in no fixed order either way; nothing may rely on it.
    """

    __hash__ = object.__hash__


class Collective(IdentityEnum):
    """A collective operation and its postcondition (see ``ir.chunks``)."""

    ALLGATHER = "allgather"
    REDUCESCATTER = "reducescatter"
    ALLREDUCE = "allreduce"
    BROADCAST = "broadcast"
    REDUCE = "reduce"
    ALLTOALL = "alltoall"

    @property
    def reduces(self) -> bool:
        """Whether the collective combines contributions."""
        return self in (Collective.REDUCESCATTER, Collective.ALLREDUCE, Collective.REDUCE)


class Buffer(IdentityEnum):
    """The three buffers a rank owns."""

    INPUT = "input"
    OUTPUT = "output"
    SCRATCH = "scratch"


class Protocol(IdentityEnum):
    """NCCL protocols; they differ in FIFO depth (calls a connection buffers)."""

    SIMPLE = "Simple"
    LL = "LL"
    LL128 = "LL128"

    @property
    def fifo_depth(self) -> int:
        """Calls a connection can buffer before the sender blocks."""
        return 2 if self is Protocol.SIMPLE else 8


def buffer_extents(coll: Collective, nchunks: int, ngpus: int) -> dict[Buffer, int]:
    """Real sizes, in chunks, of the input and output buffers of a rank.

    Parameters
    ----------
    coll : Collective
    nchunks : int
        Chunks of the whole logical buffer (``nchunksperloop``).
    ngpus : int

    Returns
    -------
    dict
        ``{Buffer.INPUT: n, Buffer.OUTPUT: m}``.

    Examples
    --------
    >>> buffer_extents(Collective.ALLGATHER, 8, 4)[Buffer.INPUT]
    2
    """
    per_rank = nchunks // ngpus
    if coll is Collective.ALLGATHER:
        return {Buffer.INPUT: per_rank, Buffer.OUTPUT: nchunks}
    if coll is Collective.REDUCESCATTER:
        return {Buffer.INPUT: nchunks, Buffer.OUTPUT: per_rank}
    return {Buffer.INPUT: nchunks, Buffer.OUTPUT: nchunks}


def inplace_alias(
    coll: Collective, rank: int, nchunks: int, ngpus: int, buf: Buffer, index: int
) -> tuple[Buffer, int]:
    """Physical location of ``buf[index]`` on ``rank`` when the call is in-place.

    allreduce/broadcast/reduce/alltoall: output is input.  allgather: ``i[k]`` is
    ``o[rank*cf + k]``.  reducescatter: ``o[k]`` is ``i[rank*cf + k]``.
    Scratch never aliases.  The canonical name is returned.

    Examples
    --------
    >>> inplace_alias(Collective.ALLGATHER, 1, 4, 4, Buffer.INPUT, 0)
    (<Buffer.OUTPUT: 'output'>, 1)
    """
    if buf is Buffer.SCRATCH:
        return buf, index
    cf = nchunks // ngpus
    if coll is Collective.ALLGATHER:
        if buf is Buffer.INPUT:
            return Buffer.OUTPUT, rank * cf + index
        return buf, index
    if coll is Collective.REDUCESCATTER:
        if buf is Buffer.OUTPUT:
            return Buffer.INPUT, rank * cf + index
        return buf, index
    return Buffer.INPUT, index
