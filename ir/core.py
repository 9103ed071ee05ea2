"""Vocabulary shared by every IR: collectives, buffers, protocols.

Mnemonics of a runtime (``"i"``, ``"Simple"``) belong to the backends; the
enum values here are colc's own names.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
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


#: The runtime compares a call's size (``size_t``) with a file's ``int64``
#: minBytes and maxBytes, so C reads those as unsigned 64-bit values.
SIZE_T_VALUES = 1 << 64


def runtime_bytes(value: int) -> int:
    """A file's minBytes or maxBytes as the runtime compares it with a call's
    size: unsigned 64-bit, so a negative value is a huge one (maxBytes -1 is
    no upper limit in effect, minBytes -1 is never met).

    Parameters
    ----------
    value : int
        The attribute as written (an ``int64``).

    Returns
    -------
    int
        ``value`` modulo 2**64.

    Examples
    --------
    >>> runtime_bytes(4096), runtime_bytes(-1)
    (4096, 18446744073709551615)
    """
    return value % SIZE_T_VALUES


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
    return inplace_aliaser(coll, nchunks, ngpus)(rank, buf, index)


@functools.lru_cache(maxsize=64)
def inplace_aliaser(coll: Collective, nchunks: int,
                    ngpus: int) -> Callable[[int, Buffer, int], tuple[Buffer, int]]:
    """``inplace_alias`` for one collective and chunk count, as a function of
    ``(rank, buf, index)`` (passes that map every chunk of a schedule call it).

    Examples
    --------
    >>> inplace_aliaser(Collective.REDUCESCATTER, 4, 2)(1, Buffer.OUTPUT, 1)
    (<Buffer.INPUT: 'input'>, 3)
    """
    cf = nchunks // ngpus
    scratch, inp, out = Buffer.SCRATCH, Buffer.INPUT, Buffer.OUTPUT
    if coll is Collective.ALLGATHER:
        def alias(rank: int, buf: Buffer, index: int) -> tuple[Buffer, int]:
            return (out, rank * cf + index) if buf is inp else (buf, index)
    elif coll is Collective.REDUCESCATTER:
        def alias(rank: int, buf: Buffer, index: int) -> tuple[Buffer, int]:
            return (inp, rank * cf + index) if buf is out else (buf, index)
    else:
        def alias(rank: int, buf: Buffer, index: int) -> tuple[Buffer, int]:
            return (buf, index) if buf is scratch else (inp, index)
    return alias
