"""Threadblock-level program IR: what a runtime executes, per rank.

This is the MSCCL executor's model written as typed, immutable data: a
program is a list of ranks, each a list of threadblocks, each an ordered
list of steps.  The MSCCL backend prints it one-to-one; the MSCCL reader
parses a file back into it; ``colc.ir.interpret`` executes it.

Step fields mirror the runtime's (see ``shared/reference/msccl-xml-runtime.md``
sections 2-3): ``src``/``dst`` are (buffer, offset) pairs; for a ``SEND`` the
``dst`` names the receiver's destination and for ``RECV``-family steps the
``src`` names the sender's source (convention only; the runtime uses the
local fields of section 3).  A dependency is ``(threadblock, step index)``
within the same rank.  ``NOP`` steps carry extra dependencies for the next
step.
"""

from __future__ import annotations

from dataclasses import dataclass

from colc.ir.core import Buffer, Collective, IdentityEnum, Protocol


class StepKind(IdentityEnum):
    """Instruction kinds of the runtime (section 3 of the runtime notes)."""

    SEND = "send"
    RECV = "recv"
    RECV_COPY_SEND = "recv_copy_send"
    RECV_REDUCE_SEND = "recv_reduce_send"
    RECV_REDUCE_COPY = "recv_reduce_copy"
    RECV_REDUCE_COPY_SEND = "recv_reduce_copy_send"
    COPY = "copy"
    REDUCE = "reduce"
    NOP = "nop"

    @property
    def sends(self) -> bool:
        """Whether the step pushes to the send connection."""
        return self in _SENDING

    @property
    def receives(self) -> bool:
        """Whether the step pops from the receive connection."""
        return self in _RECEIVING

    @property
    def reduces(self) -> bool:
        """Whether the step applies the reduction operator."""
        return self in _REDUCING


_SENDING = frozenset({StepKind.SEND, StepKind.RECV_COPY_SEND, StepKind.RECV_REDUCE_SEND,
                      StepKind.RECV_REDUCE_COPY_SEND})
_RECEIVING = frozenset({StepKind.RECV, StepKind.RECV_COPY_SEND, StepKind.RECV_REDUCE_SEND,
                        StepKind.RECV_REDUCE_COPY, StepKind.RECV_REDUCE_COPY_SEND})
_REDUCING = frozenset({StepKind.RECV_REDUCE_SEND, StepKind.RECV_REDUCE_COPY,
                       StepKind.RECV_REDUCE_COPY_SEND, StepKind.REDUCE})


@dataclass(frozen=True, slots=True)
class Loc:
    """A chunk range start: ``buffer[offset]``; ``offset`` None means unused (-1)."""

    buffer: Buffer
    offset: int | None


@dataclass(frozen=True, slots=True)
class Step:
    """One instruction of a threadblock.

    Parameters
    ----------
    kind : StepKind
    src, dst : Loc
    count : int
        Consecutive chunks (0..71 for the MSCCL runtime).
    dep : tuple of (int, int) or None
        ``(threadblock id, step index)`` on the same rank to wait for.
    has_dep : bool
        Whether another step depends on this one (publishes a flag).
    fusable : bool
        Whether the runtime's parser may fuse this ``re`` into the ``re``
        before it.  False for one read from a file with a dstoff past int16:
        the parser compares the int16 the previous ``re`` stored with the
        int it reads (never equal).  Programs colc writes leave it True.
    """

    kind: StepKind
    src: Loc
    dst: Loc
    count: int
    dep: tuple[int, int] | None = None
    has_dep: bool = False
    fusable: bool = True


@dataclass(frozen=True, slots=True)
class Threadblock:
    """A threadblock: one send peer, one receive peer, one channel."""

    id: int
    send: int | None
    recv: int | None
    channel: int
    steps: tuple[Step, ...]


@dataclass(frozen=True, slots=True)
class RankProgram:
    """What one rank runs, with its declared buffer sizes in chunks."""

    rank: int
    input_chunks: int
    output_chunks: int
    scratch_chunks: int
    threadblocks: tuple[Threadblock, ...]


@dataclass(frozen=True, slots=True)
class Program:
    """A whole algorithm file.

    ``min_bytes``/``max_bytes`` select the message sizes the runtime uses it
    for (``max_bytes`` 0 = no limit).  ``comment`` is free text the printer
    puts before the ``<algo>`` element (provenance; the runtime skips it).
    """

    name: str
    collective: Collective
    protocol: Protocol
    nchannels: int
    nchunks: int
    ngpus: int
    inplace: bool
    outofplace: bool
    min_bytes: int
    max_bytes: int
    ranks: tuple[RankProgram, ...]
    comment: str = ""

    @property
    def max_threadblocks(self) -> int:
        """Threadblocks of the rank with the most: the SMs the file takes per GPU."""
        return max((len(rp.threadblocks) for rp in self.ranks), default=0)
