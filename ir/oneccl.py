"""CPU-thread program IR: what the oneCCL XML interpreter executes, per rank.

The oneCCL backend lowers a threadblock-level ``Program`` into this IR and
prints it; the oneCCL reader parses a file back into it; and
``colc.ir.interpret_oneccl`` executes it symbolically.  The format and its
semantics are specified in ``docs/oneccl-xml.md``; in short:

* a schedule is a list of ranks, each a list of CPU threads, each an ordered
  list of instructions;
* ``SEND``/``RECV`` are point-to-point messages of ``count`` chunks matched by
  ``(sender rank, receiver rank, tag)`` -- never by arrival order;
* ``COPY`` is ``dst <- src`` and ``REDUCE`` is ``dst <- dst (+) src``, both
  local;
* ``SYNC`` waits until thread ``wait_thread`` of the same rank has completed
  its instruction ``wait_instr`` (and hence all earlier ones);
* buffers are the rank's ``input``/``output``/``scratch`` and a per-thread
  ``tmp`` staging area, addressed in chunks.

Example
-------
>>> i = Instr(InstrKind.COPY, src=Region.INPUT, src_off=0, dst=Region.OUTPUT, dst_off=0, count=1)
>>> i.reads, i.writes
((<Region.INPUT: 'input'>, 0), (<Region.OUTPUT: 'output'>, 0))
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from colc.ir.core import Buffer, Collective


class InstrKind(Enum):
    """Instruction kinds of the oneCCL XML interpreter."""

    SEND = "send"
    RECV = "recv"
    COPY = "copy"
    REDUCE = "reduce"
    SYNC = "sync"


class Region(Enum):
    """Memory a thread can address: the rank's three buffers or its own ``tmp``."""

    INPUT = "input"
    OUTPUT = "output"
    SCRATCH = "scratch"
    TMP = "tmp"

    @property
    def buffer(self) -> Buffer | None:
        """The rank buffer this region is, or None for the thread-local ``tmp``."""
        return _TO_BUFFER.get(self)

    @staticmethod
    def of(buffer: Buffer) -> Region:
        """The region naming a rank buffer."""
        return _FROM_BUFFER[buffer]


_TO_BUFFER = {Region.INPUT: Buffer.INPUT, Region.OUTPUT: Buffer.OUTPUT,
              Region.SCRATCH: Buffer.SCRATCH}
_FROM_BUFFER = {b: r for r, b in _TO_BUFFER.items()}


@dataclass(frozen=True, slots=True)
class Instr:
    """One instruction of a thread.

    Parameters
    ----------
    kind : InstrKind
    peer : int or None
        Other rank of a ``SEND``/``RECV``.
    tag : int or None
        Message tag of a ``SEND``/``RECV``; unique per (sender, receiver).
    src, src_off : Region, int or None
        Chunks read: the payload of a ``SEND``, the source of ``COPY`` and
        the operand of ``REDUCE``.
    dst, dst_off : Region, int or None
        Chunks written: the target of ``RECV``, ``COPY`` and ``REDUCE``.
    count : int
        Consecutive chunks (>= 1 for data instructions, 0 for ``SYNC``).
    wait_thread, wait_instr : int or None
        Target of a ``SYNC``: thread id on the same rank and instruction index.
    """

    kind: InstrKind
    peer: int | None = None
    tag: int | None = None
    src: Region | None = None
    src_off: int | None = None
    dst: Region | None = None
    dst_off: int | None = None
    count: int = 0
    wait_thread: int | None = None
    wait_instr: int | None = None

    @property
    def reads(self) -> tuple[Region, int] | None:
        """``(region, first chunk)`` read, if any (``REDUCE`` also reads ``dst``)."""
        if self.src is None or self.src_off is None:
            return None
        return (self.src, self.src_off)

    @property
    def writes(self) -> tuple[Region, int] | None:
        """``(region, first chunk)`` written, if any."""
        if self.dst is None or self.dst_off is None:
            return None
        return (self.dst, self.dst_off)


@dataclass(frozen=True, slots=True)
class Thread:
    """A CPU thread: an ordered instruction list and its ``tmp`` size in chunks.

    ``channel`` is informative (the MSCCL channel the thread came from).
    """

    id: int
    channel: int
    tmp_chunks: int
    instrs: tuple[Instr, ...]


@dataclass(frozen=True, slots=True)
class RankThreads:
    """The threads of one rank and its buffer sizes in chunks."""

    rank: int
    input_chunks: int
    output_chunks: int
    scratch_chunks: int
    threads: tuple[Thread, ...]


@dataclass(frozen=True, slots=True)
class ThreadSchedule:
    """A whole oneCCL XML schedule.

    Parameters
    ----------
    name : str
    collective : Collective
    nranks : int
    nchunks : int
        Chunks of the whole logical buffer (as MSCCL's ``nchunksperloop``).
    inplace, outofplace : bool
        Aliasings under which the schedule is correct.
    min_bytes, max_bytes : int
        Message sizes the runtime may use it for (``max_bytes`` 0 = no limit).
    eager_depth : int
        Messages per (sender thread, receiver rank) the runtime must be able
        to buffer before a send blocks until its receive is posted.
    ranks : tuple of RankThreads
        Rank ``r`` at index ``r``.
    """

    name: str
    collective: Collective
    nranks: int
    nchunks: int
    inplace: bool
    outofplace: bool
    min_bytes: int
    max_bytes: int
    eager_depth: int
    ranks: tuple[RankThreads, ...]
