"""Timing simulator of the MSCCL executor: how long one call of a file takes.

Input: a ``Program`` (from the compiler or ``colc.backends.msccl_reader``), the
``Topology`` it runs on, a ``RuntimeModel`` and a message size.  Output: a
``SimResult`` with the time of one collective call, algbw and busbw in the
nccl-tests conventions, whether the runtime would select the file at that
size, and the busiest threadblock and link.

What is simulated (runtime notes sections 4.2-4.8; constants in
``colc.ir.runtime_model``):

* the kernel's loop: chunk size ``S = count / nchunksperloop`` elements, cut
  into iterations of at most one protocol call's worth; every threadblock
  runs its whole transmission list once per iteration, as a sequential
  process; a step of ``cnt`` chunks is ``ceil(cnt / maxAllowedCount)``
  primitive calls, each cut into the protocol's slices (Simple 2, LL and
  LL128 1);
* connections as FIFOs with the protocol's real credit (Simple 4 slices = 2
  calls, LL/LL128 8): a sender waits for a free slot, a receiver for a slice;
  slices and credits become visible after the hop latency;
* dependency flags: a step waits until the threadblock it depends on has
  published a flag at least ``(iteration, step)``;
* bandwidth: a P2P transfer is done by the sending threadblock, capped at the
  protocol's per-threadblock rate; a NET transfer (its path crosses a
  network switch or NIC) is staged by the threadblock and then carried by the
  NIC without it; LL and LL128 put their flag overhead on the wire; every
  transfer is a fluid flow over the links of its switch path, and each link's
  capacity (nominal bandwidth times the runtime's efficiency) is shared
  max-min fairly among the flows crossing it, given their per-threadblock caps;
* fixed costs: the kernel launch once per call, a per-call overhead, per-hop
  latencies of the protocol and transport plus the links' own latencies.

The simulation is event driven (a heap of timed events, one generator per
threadblock); complexity is O(E log E + E * F) for E slices and at most F
flows sharing a link.  It assumes the program is correct (``colc verify``);
a program that hangs raises ``SimulationError``.
"""

from __future__ import annotations

import functools
import heapq
import itertools
import math
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass

from colc.errors import ColcError
from colc.ir.core import Collective, runtime_bytes
from colc.ir.load_checks import LoadedProgram, load_program
from colc.ir.oneccl import ThreadSchedule
from colc.ir.program import Program, StepKind
from colc.ir.routing import Router
from colc.ir.runtime_model import RuntimeModel
from colc.ir.topology import Topology

#: MSCCL_MAX_COUNT - 1: largest maxAllowedCount.
MAX_ALLOWED_COUNT = 71
#: Loop iterations above which ``simulate`` extrapolates from 4 and 8.
EXTRAPOLATE_ABOVE = 8
#: Flags encode (iteration, step) as iteration * FLAG_BASE + step.
FLAG_BASE = 1 << 16
_INF = float("inf")


class SimulationError(ColcError):
    """The program cannot be simulated (it hangs, or it does not fit the topology)."""


@dataclass(frozen=True, slots=True)
class SimResult:
    """One simulated call.

    Attributes
    ----------
    nbytes : int
        Message size asked for (the whole collective: allgather output,
        reducescatter input, allreduce buffer), bytes; the time, algbw and
        selection are those of what nccl-tests moves then
        (``nccl_tests_bytes``).
    time_us : float
        Time of one call, microseconds.
    algbw, busbw : float
        GB/s, nccl-tests conventions (busbw = algbw * (n-1)/n for allgather
        and reducescatter, * 2(n-1)/n for allreduce).
    selected : bool
        Whether the runtime would pick this file for a call of this size
        (count a multiple of nchunksperloop, size within the window).
    why_not : str
        Empty when selected, else the reason.
    busiest_tb : tuple
        ``(rank, threadblock, busy fraction)`` of the busiest threadblock.
    busiest_link : tuple
        ``(src node, dst node, utilisation)`` of the busiest link.
    """

    nbytes: int
    time_us: float
    algbw: float
    busbw: float
    selected: bool
    why_not: str
    busiest_tb: tuple[int, int, float]
    busiest_link: tuple[str, str, float]


def busbw_factor(collective: Collective, n: int) -> float:
    """nccl-tests' busbw / algbw ratio."""
    if n < 2:
        return 1.0
    if collective is Collective.ALLREDUCE:
        return 2 * (n - 1) / n
    return (n - 1) / n  # allgather, reducescatter, alltoall


def selection(program: Program, nbytes: int, dtype_bytes: int) -> str:
    """Why the runtime would not select ``program`` for ``nbytes`` ('' if it would).

    Parameters
    ----------
    program : Program
    nbytes : int
        Whole-collective size in bytes.
    dtype_bytes : int
        Element size (4 for fp32, 2 for fp16/bf16).

    Examples
    --------
    The count must be a multiple of nchunksperloop (runtime notes 4.1).
    """
    return window_selection(program.nchunks, program.min_bytes, program.max_bytes, nbytes,
                            dtype_bytes)


def window_selection(nchunks: int, min_bytes: int, max_bytes: int, nbytes: int,
                     dtype_bytes: int) -> str:
    """``selection`` of a file of ``nchunks`` chunks per loop and window
    ``[min_bytes, max_bytes]`` (``max_bytes`` 0: unlimited), before it is
    lowered (a schedule's chunks and the options' window).  The bounds are
    compared as the runtime does, unsigned (``runtime_bytes``).

    >>> window_selection(2, -1, 0, 1024, 4), window_selection(2, 0, -1, 1024, 4)
    ('below minBytes -1 (unsigned: 18446744073709551615)', '')
    """
    if nbytes <= 0 or nbytes % dtype_bytes:
        return f"{nbytes} bytes is not a whole number of {dtype_bytes}-byte elements"
    count = nbytes // dtype_bytes
    if count % nchunks:
        return f"{count} elements is not a multiple of nchunksperloop {nchunks}"
    lo, hi = runtime_bytes(min_bytes), runtime_bytes(max_bytes)
    if nbytes < lo:
        return f"below minBytes {min_bytes}" + (f" (unsigned: {lo})" if lo != min_bytes else "")
    if hi and nbytes > hi:
        return f"above maxBytes {max_bytes}"
    return ""


def nccl_tests_bytes(collective: Collective, ngpus: int, size: int, dtype_bytes: int) -> int:
    """The bytes nccl-tests moves when asked for ``size`` bytes (``-b``/``-e``).

    Allgather, reduce-scatter and all-to-all move a per-rank count rounded
    down to 16 bytes (``(count / nranks) & -(16 / eltSize)`` in their
    ``GetCollByteCount``); allreduce moves whole elements.  So on a rank
    count that is not a power of two the collective is a little below the
    power of two, and the runtime's selection sees that size.

    Parameters
    ----------
    collective : Collective
    ngpus : int
        Ranks.
    size : int
        The size nccl-tests is asked for, bytes.
    dtype_bytes : int
        Element size.

    Returns
    -------
    int
        Bytes of the whole collective (allgather output, reduce-scatter
        input, all-to-all buffer, allreduce buffer); 0 below 16 bytes per rank.

    Examples
    --------
    >>> nccl_tests_bytes(Collective.ALLGATHER, 7, 1 << 20, 4)
    1048544
    >>> nccl_tests_bytes(Collective.REDUCESCATTER, 7, 1 << 20, 2)
    1048544
    >>> nccl_tests_bytes(Collective.ALLREDUCE, 7, 1 << 20, 4)
    1048576
    """
    count = size // dtype_bytes
    if collective is not Collective.ALLREDUCE:
        align = max(1, 16 // dtype_bytes)
        count = count // ngpus // align * align * ngpus
    return count * dtype_bytes


def _ranks(program: Program | ThreadSchedule) -> int:
    return program.nranks if isinstance(program, ThreadSchedule) else program.ngpus


def selectable_sizes(program: Program | ThreadSchedule, dtype_bytes: int = 4,
                     lo: int = 1024, hi: int = 1 << 34) -> list[int]:
    """Power-of-two message sizes in ``[lo, hi]`` at which the runtime selects ``program``.

    A size is what nccl-tests is asked for (``-b``/``-e``); the runtime sees
    what nccl-tests moves at that size (``nccl_tests_bytes``: per-rank counts
    of whole 16 bytes for allgather, reduce-scatter and all-to-all), so on a rank count that is not a power of two the collective
    is a little below the power of two.  A oneCCL schedule (``ThreadSchedule``)
    is used only where its equal chunks cut the call (docs/oneccl-xml.md), the
    same rule.

    Examples
    --------
    >>> from colc.ir.program import Program
    >>> from colc.ir.core import Collective, Protocol
    >>> p = Program("x", Collective.ALLGATHER, Protocol.SIMPLE, 1, 3, 3, True, True, 0, 0, ())
    >>> selectable_sizes(p, 4, lo=1024, hi=4096)
    [1024, 2048, 4096]
    """
    out = []
    size = lo
    while size <= hi:
        nbytes = nccl_tests_bytes(program.collective, _ranks(program), size, dtype_bytes)
        if nbytes and not window_selection(program.nchunks, program.min_bytes, program.max_bytes,
                                           nbytes, dtype_bytes):
            out.append(size)
        size *= 2
    return out


#: Loop iterations one call may run (``MSCCL_MAX_ITER``): a threadblock's
#: dependency flag is (launch, iteration, step) with 16 bits for the
#: iteration, so past it the iteration spills into the launch and a wait
#: on the flag never ends (or, in the next call, ends early).
MAX_ITERATIONS = 1 << 16


#: Calls of this many bytes exceed every GPU's memory (the largest hold 256
#: GB): a limit past it is never met.
UNREACHABLE_BYTES = 1 << 40


def iteration_limit(program: Program) -> int | None:
    """The largest call (bytes) ``program`` runs in at most
    ``MAX_ITERATIONS`` loop iterations, or None when no step waits on a
    dependency flag (the overflow then harms nothing) or no GPU holds a
    call that large (``UNREACHABLE_BYTES``).

    An iteration moves at most the protocol's ``call_bytes`` of every chunk
    (Simple 2 MiB; LL 32 KiB, RCCL's 16 KiB; LL128 540000 bytes, RCCL's
    50176: the smaller, as a file runs on either), and a call of ``nbytes``
    has chunks of ``nbytes / nchunksperloop``.

    Examples
    --------
    >>> import dataclasses
    >>> from colc.ir.program import Loc, Program, RankProgram, Step, Threadblock
    >>> from colc.ir.core import Buffer, Collective, Protocol
    >>> wait = Step(StepKind.COPY, Loc(Buffer.INPUT, 0), Loc(Buffer.OUTPUT, 0), 1, dep=(1, 0))
    >>> rank = RankProgram(0, 1, 1, 0, (Threadblock(0, None, None, 0, (wait,)),))
    >>> p = Program("x", Collective.ALLREDUCE, Protocol.LL, 1, 3, 1, True, True, 0, 0, (rank,))
    >>> iteration_limit(p) == 3 * (1 << 16) * (1 << 14)  # 3 GiB (RCCL's LL)
    True
    >>> iteration_limit(dataclasses.replace(p, protocol=Protocol.SIMPLE))  # 384 GiB
    412316860416
    >>> iteration_limit(dataclasses.replace(p, nchunks=3 << 9)) is None  # 3 TiB: no GPU's
    True
    """
    from colc.ir.runtime_model import GEOMETRY, RCCL_GEOMETRY

    waits = any(st.dep is not None and st.dep[0] >= 0
                for rank in program.ranks for tb in rank.threadblocks for st in tb.steps)
    call = min(g[program.protocol].call_bytes for g in (GEOMETRY, RCCL_GEOMETRY))
    limit = MAX_ITERATIONS * call * program.nchunks
    return limit if waits and limit < UNREACHABLE_BYTES else None


def iteration_warnings(program: Program) -> list[str]:
    """A warning when the runtime may select ``program`` for calls that run
    more than ``MAX_ITERATIONS`` loop iterations (``iteration_limit``;
    colc caps the maxBytes of the files it writes there).

    Parameters
    ----------
    program : Program
        A loaded file (its window, protocol, chunks and dependencies).

    Returns
    -------
    list of str
        The warning, naming the limit in bytes, or nothing.
    """
    from colc.sizes import format_size

    limit = iteration_limit(program)
    top = runtime_bytes(program.max_bytes)
    if limit is None or (top and top <= limit):
        return []
    return [f"maxBytes {program.max_bytes} lets the runtime select this file for calls above "
            f"{format_size(limit)}, which run more than {MAX_ITERATIONS} loop iterations "
            f"(nchunksperloop {program.nchunks}, {program.protocol.value}): the dependency "
            f"flags overflow (MSCCL_MAX_ITER) and such a call can hang or race; set maxBytes "
            f"to at most {limit}"]


def nccl_tests_range(program: Program | ThreadSchedule) -> tuple[int, int]:
    """The power-of-two sizes a file's selection is told over: nccl-tests'
    least (8 bytes) to 16G, or to the first power of two of a window that
    starts above 16G.

    >>> from colc.ir.program import Program
    >>> from colc.ir.core import Collective, Protocol
    >>> p = Program("x", Collective.ALLREDUCE, Protocol.SIMPLE, 1, 8, 4, True, True, 0, 0, ())
    >>> from dataclasses import replace
    >>> nccl_tests_range(p), nccl_tests_range(replace(p, min_bytes=(32 << 30) + 1))
    ((8, 17179869184), (8, 68719476736))
    """
    return 8, max(1 << 34, 1 << max(0, runtime_bytes(program.min_bytes) - 1).bit_length())


def selection_warnings(program: Program | ThreadSchedule, backend: str | None = None) -> list[str]:
    """Why the runtime selects ``program`` at no power-of-two size.

    Parameters
    ----------
    program : Program or ThreadSchedule
        An MSCCL program, or a oneCCL schedule.
    backend : {"msccl", "oneccl"} or None
        The file's format, for its terms (None: a ThreadSchedule is oneCCL).

    Returns
    -------
    list of str
        One warning when no power-of-two size nccl-tests runs in fp32 or
        fp16 (8 bytes up to the window's start or 16G) selects ``program``
        (``selectable_sizes``), naming a size in the file's window that
        does, or saying the window holds no power of two; else empty.
    """
    from colc.sizes import format_size

    lo, hi = nccl_tests_range(program)
    if selectable_sizes(program, 4, lo, hi) or selectable_sizes(program, 2, lo, hi):
        return []
    n = _ranks(program)
    least = runtime_bytes(program.min_bytes)
    top = runtime_bytes(program.max_bytes) or hi

    def called(size: int, dtype: int) -> bool:  # what nccl-tests moves lies in the window
        nbytes = nccl_tests_bytes(program.collective, n, size, dtype)
        return 0 < nbytes and least <= nbytes <= top

    if not any(called(1 << k, d) for k in range(3, hi.bit_length()) for d in (4, 2)):
        return [f"no power-of-two size nccl-tests runs lies in the file's window "
                f"({program.min_bytes}..{top} bytes): the runtime never uses it"]
    oneccl = backend == "oneccl" or backend is None and isinstance(program, ThreadSchedule)
    term = "nchunks" if oneccl else "nchunksperloop"
    odd = program.nchunks // (program.nchunks & -program.nchunks)
    advice = (f", or a power-of-two {term} gives files selected there: in a colc "
              f"compile its factor {odd} comes from --chunks or --instances, or from "
              f"the rings --max-threadblocks allows (nccl-rings)"
              if n & (n - 1) == 0 and odd > 1 else "")
    step = program.nchunks * 4 * 1024  # fp32, a multiple of 16 bytes per rank
    example = max(step, -(-least // step) * step)
    never = ("no such call cuts into its equal chunks, so the runtime never uses it there"
             if oneccl else "the runtime never selects it there")
    where = (f"it does at sizes of a multiple of {program.nchunks} elements, e.g. "
             f"{format_size(example)} in fp32" if example <= top else
             f"it would at sizes of a multiple of {program.nchunks} elements, and nccl-tests "
             f"runs none in the window")
    return [f"{term} {program.nchunks} divides no element count of an nccl-tests "
            f"power-of-two size in the file's window: {never} ({where}{advice})"]


def selection_gaps(program: Program | ThreadSchedule, backend: str | None = None,
                   lo: int = 1024, hi: int = 1 << 30,
                   portfolio: str = "a folder (-o DIR/) gets") -> list[str]:
    """A note when the runtime selects ``program`` at some of the fp32
    power-of-two sizes in ``[lo, hi]`` (nccl-tests' ``-b 1K -e 1G``) its
    window holds, but not at all of them: at the others the call runs
    NCCL's own algorithm (a 15-rank allgather with nchunksperloop 240 is
    selected at every other pair of sizes).  Empty when it is selected at
    all, or when ``selection_warnings`` warns (at no size at all).

    Parameters
    ----------
    program : Program or ThreadSchedule
    backend : {"msccl", "oneccl"} or None
        The file's format, for its terms (None: a ThreadSchedule is oneCCL).
    lo, hi : int
        The sizes told over.
    portfolio : str
        How the caller gets a portfolio instead (an MSCCL file's note ends
        "; {portfolio} a portfolio whose files serve every size").

    Returns
    -------
    list of str

    Examples
    --------
    >>> from colc.ir.program import Program
    >>> from colc.ir.core import Collective, Protocol
    >>> p = Program("x", Collective.ALLGATHER, Protocol.LL, 1, 240, 15, True, True, 0, 0, ())
    >>> selection_gaps(p)[0][:60]
    'the runtime selects this file at 11 of the 21 power-of-two s'
    >>> selection_gaps(Program("x", Collective.ALLGATHER, Protocol.LL, 1, 60, 15, True, True,
    ...                        0, 0, ()))
    []
    """
    from colc.sizes import format_size

    n = _ranks(program)
    least = runtime_bytes(program.min_bytes)
    top = runtime_bytes(program.max_bytes) or UNREACHABLE_BYTES
    called = []
    size = lo
    while size <= hi:
        nbytes = nccl_tests_bytes(program.collective, n, size, 4)
        if 0 < nbytes and least <= nbytes <= top:
            called.append(size)
        size *= 2
    chosen = set(selectable_sizes(program, 4, lo, hi))
    missed = [s for s in called if s not in chosen]
    if not missed or selection_warnings(program, backend):
        return []
    oneccl = backend == "oneccl" or backend is None and isinstance(program, ThreadSchedule)
    term = "nchunks" if oneccl else "nchunksperloop"
    folder = "" if oneccl else f"; {portfolio} a portfolio whose files serve every size"
    span = (f"{len(called)} power-of-two sizes {format_size(called[0])}.."
            f"{format_size(called[-1])} in fp32 (the element count must be a multiple of "
            f"{term} {program.nchunks}")
    if len(missed) == len(called):
        return [f"the runtime selects this file at none of the {span}): the call runs "
                f"NCCL's own algorithm there{folder}"]
    return [f"the runtime selects this file at {len(called) - len(missed)} of the {span}; "
            f"not at {format_size(missed[0])}, for one): at the others the call runs "
            f"NCCL's own algorithm{folder}"]


@functools.lru_cache(maxsize=4)
def router_for(topo: Topology) -> Router:
    """A ``Router`` shared by every simulation of one topology."""
    return Router(topo)


@functools.lru_cache(maxsize=4)
def _latencies(topo: Topology) -> dict[tuple[str, str], float]:
    return {k: float(v) for k, v in topo.latency().items()}


class _Link:
    __slots__ = ("cap", "flows", "level", "carried", "ends", "caps")

    def __init__(self, cap: float, ends: tuple[str, str]) -> None:
        self.cap = cap
        self.flows: set[_Flow] = set()
        self.level = _INF
        self.carried = 0.0
        self.ends = ends
        self.caps: dict[float, int] = {}  # multiset of the flows' caps (few distinct)

    def add(self, flow: _Flow) -> None:
        self.flows.add(flow)
        self.caps[flow.cap] = self.caps.get(flow.cap, 0) + 1

    def remove(self, flow: _Flow) -> None:
        self.flows.discard(flow)
        left = self.caps[flow.cap] - 1
        if left:
            self.caps[flow.cap] = left
        else:
            del self.caps[flow.cap]

    def refresh(self) -> bool:
        """Recompute the max-min fair level (water-filling over the caps); whether it changed."""
        remaining, n, level = self.cap, len(self.flows), _INF
        caps = self.caps
        if len(caps) == 1:  # one cap shared by every flow (the usual case)
            for c in caps:
                if c * n > remaining:
                    level = remaining / n
            changed = level != self.level
            self.level = level
            return changed
        for c in sorted(caps):
            k = self.caps[c]
            if c * n <= remaining:
                remaining -= c * k
                n -= k
            else:
                level = remaining / n
                break
        changed = level != self.level
        self.level = level
        return changed


class _Flow:
    __slots__ = ("rem", "rate", "t", "links", "cap", "ver", "done", "total", "due", "tb",
                 "start")

    def __init__(self, nbytes: float, links: tuple[_Link, ...], cap: float, done) -> None:
        self.tb: _Tb | None = None  # the threadblock busy with it (P2P), woken when it ends
        self.start = 0.0
        self.rem = nbytes
        self.total = nbytes
        self.rate = 0.0
        self.t = 0.0
        self.links = links
        self.cap = cap
        self.ver = 0
        self.done = done
        self.due = _INF  # time of the pending completion event


class _Fifo:
    """One connection (channel, sender, receiver) in slices."""

    __slots__ = ("cap", "posted", "credit", "arrived", "consumed", "send_wait", "recv_wait",
                 "links", "hop", "net", "pending", "back", "credits", "arrivals")

    def __init__(self, cap: int, links: tuple[_Link, ...], hop: float, net: bool,
                 back: float) -> None:
        self.cap = cap
        self.posted = 0  # slices the sender has finished (P2P) or staged (NET)
        self.credit = 0  # slices whose release the sender has seen
        self.arrived = 0  # slices visible to the receiver
        self.consumed = 0  # slices the receiver has released
        self.send_wait = None
        self.recv_wait = None
        self.links = links
        self.hop = hop
        self.net = net
        self.back = back  # credit latency
        self.pending: dict[int, bool] = {}  # NET: slices delivered out of order
        # Times at which released slots (credits) and P2P slices (arrivals)
        # become visible, in order: a party reads them when it looks, and an
        # event is queued only to wake one that waits (most slices need none).
        self.credits: deque[float] = deque()
        self.arrivals: deque[float] = deque()


class _Engine:
    """Event queue plus the fluid-flow network.

    A flow's completion event is pushed again only when a rate change makes
    it due *earlier*; when the rate drops, the old event stays and, when it
    fires, finds bytes left and re-arms itself (far fewer heap operations on
    links shared by many flows).
    """

    def __init__(self, wake=None) -> None:
        self.now = 0.0
        self.before = 0.0  # the clock before the event being run
        self.heap: list = []
        self.seq = itertools.count(1)  # ties run in the order they were scheduled
        self.wake = wake  # resumes a threadblock whose flow ended

    def at(self, t: float, fn, arg) -> None:
        heapq.heappush(self.heap, (t, next(self.seq), fn, arg))

    def run(self) -> None:
        """Run the events in time order.  The clock ends at the last event
        that happened: a flow's completion superseded when its rate changed
        is not one (until 2026-11-29 it moved the clock, and a call ended
        at the last such stale event: DGX A100 x64 reduce-scatter at 1 GiB
        126 us after its last threadblock and credit)."""
        heap = self.heap
        while heap:
            t, _, fn, arg = heapq.heappop(heap)
            self.before, self.now = self.now, t
            fn(arg)

    # -- flows -----------------------------------------------------------------
    def start_flow(self, flow: _Flow) -> None:
        flow.t = self.now
        for link in flow.links:
            link.add(flow)
        self._rebalance(flow.links, extra=flow)

    def _finish_flow(self, arg) -> None:
        flow, ver = arg
        if ver != flow.ver:  # superseded: the flow's rate changed since
            self.now = self.before  # not an event: the clock stays where it was
            return
        now = self.now
        flow.rem -= flow.rate * (now - flow.t)
        flow.t = now
        if flow.rem > 1e-9 * flow.total + 1e-9:  # the rate dropped since: not done yet
            due = now + flow.rem / flow.rate
            if due > now:  # else the rest is below the clock's resolution: done
                flow.ver += 1
                flow.due = due
                self.at(due, self._finish_flow, (flow, flow.ver))
                return
        for link in flow.links:
            link.remove(flow)
            link.carried += flow.total
        self._rebalance(flow.links)
        tb = flow.tb
        if tb is None:
            flow.done()
        else:
            tb.busy += now - flow.start
            self.wake(tb)

    def _rebalance(self, links: tuple[_Link, ...], extra: _Flow | None = None) -> None:
        if len(links) == 1:  # a P2P link (most flows): no union to build
            touched = links[0].flows if links[0].refresh() else ()
            if extra is not None and not touched:
                touched = (extra,)
        else:
            touched = set()
            for link in links:
                if link.refresh():
                    touched |= link.flows
            if extra is not None:
                touched.add(extra)
        now = self.now
        for f in touched:
            rate = f.cap
            for link in f.links:
                if link.level < rate:
                    rate = link.level
            if rate == f.rate:
                continue
            if f.rate > 0:
                f.rem -= f.rate * (now - f.t)
            f.t = now
            f.rate = rate
            due = now + (f.rem / rate if f.rem > 0 else 0.0)
            if due < f.due:
                f.due = due
                f.ver += 1
                heapq.heappush(self.heap, (due, next(self.seq), self._finish_flow, (f, f.ver)))


#: (sends, receives) of each step kind (looked up once per transmission and simulation).
_ENDS = {k: (k.sends, k.receives) for k in StepKind}


@functools.lru_cache(maxsize=64)
def _local_work(kind: StepKind, operands: int) -> float:
    """Bytes of local copy work per data byte of a step that sends nothing.

    A copy (``cpy``, or a receive draining its FIFO) is 1; a reduction reads one
    more operand per source (``rrc``: 1.5, a fused ``re`` of m operands 1 + m/2).
    """
    if kind is StepKind.REDUCE:
        return 1.0 + 0.5 * max(1, operands)
    return 1.5 if kind.reduces else 1.0


#: The last programs' transmission tables (``_transmission_table``), by identity.
_TABLES: dict[int, tuple[tuple, float, list]] = {}


def _transmission_table(loaded: LoadedProgram, local: float) -> list[list[list[tuple]]]:
    """Per rank, per threadblock: each transmission as the simulator reads it
    (sends, receives, count, deps, has_dep, flag, local seconds per byte).
    One program is simulated at several sizes: the table is kept for the last
    few programs (the entry holds the threadblocks, so their id is not reused)."""
    key = id(loaded.tbs)  # shared by the program run under another protocol
    hit = _TABLES.get(key)
    if hit is not None and hit[0] is loaded.tbs and hit[1] == local:
        return hit[2]
    _check_dependencies(loaded)  # once per program, not per simulated size
    table = [[[(*_ENDS[t.kind], t.count, t.deps, t.has_dep, t.flag,
                _local_work(t.kind, len(t.operands)) / local) for t in ftb.transmissions]
              for ftb in tbs] for tbs in loaded.tbs]
    if len(_TABLES) >= 4:
        del _TABLES[next(iter(_TABLES))]
    _TABLES[key] = (loaded.tbs, local, table)
    return table


class _Tb:
    __slots__ = ("rank", "id", "gen", "busy", "done")

    def __init__(self, rank: int, tid: int) -> None:
        self.rank = rank
        self.id = tid
        self.gen: Iterator | None = None
        self.busy = 0.0
        self.done = False


class _Simulation:
    def __init__(self, loaded: LoadedProgram, topo: Topology, model: RuntimeModel,
                 nbytes: int, dtype_bytes: int) -> None:
        program = loaded.program
        self.program = program
        self.model = model
        self.costs = model.latency(program.protocol)
        self.geom = model.geometry[program.protocol]
        self.dtype = dtype_bytes
        self.local = model.local_bw * 1000.0
        n = program.nchunks
        count = max(1, -(-nbytes // dtype_bytes))
        self.chunk_elems = -(-count // n)
        per_call = self.geom.call_bytes // dtype_bytes
        self.iters = [min(per_call, self.chunk_elems - g)
                      for g in range(0, self.chunk_elems, per_call)]
        self.mac = max(1, min(MAX_ALLOWED_COUNT, self.geom.call_bytes // -(-nbytes // n)))
        self.engine = _Engine(self.resume)
        self.links: dict[tuple[str, str], _Link] = {}
        self.router = router_for(topo)
        self.latency = _latencies(topo)
        self.topo = topo
        self.fifos: dict[tuple[int, int, int], _Fifo] = {}
        self.flags: list[list[int]] = [[-1] * len(tbs) for tbs in loaded.tbs]
        self.flag_wait: dict[tuple[int, int], list[tuple[int, _Tb]]] = {}
        self.tbs: list[_Tb] = []
        table = _transmission_table(loaded, self.local)
        for r, tbs in enumerate(loaded.tbs):
            for ftb, txs in zip(tbs, table[r], strict=True):
                tb = _Tb(r, ftb.id)
                tb.gen = self._process(tb, ftb, txs)
                self.tbs.append(tb)

    # -- topology ----------------------------------------------------------------
    def _link(self, u: str, v: str) -> _Link:
        link = self.links.get((u, v))
        if link is None:
            node = self.topo.node
            eff = (self.model.net_efficiency if node[u].is_network or node[v].is_network
                   else self.model.p2p_efficiency)
            link = _Link(float(self.router.cap[(u, v)]) * 1000.0 * eff, (u, v))
            self.links[(u, v)] = link
        return link

    def fifo(self, chan: int, src: int, dst: int) -> _Fifo:
        key = (chan, src, dst)
        f = self.fifos.get(key)
        if f is None:
            path = self.router.switch_paths(src).get(dst)
            if path is None:
                topo = self.topo
                raise SimulationError(
                    f"rank {src} ({topo.ranks[src]}) has no link or switch path to rank "
                    f"{dst} ({topo.ranks[dst]}) on topology {topo.name}")
            net = any(self.topo.node[v].is_network for v in path)
            lat = self.latency
            hop = (self.costs.hop_net if net else self.costs.hop_p2p) + sum(
                lat.get((a, b), 0.0) for a, b in zip(path, path[1:], strict=False))
            links = tuple(self._link(a, b) for a, b in zip(path, path[1:], strict=False))
            back = self.model.credit_net if net else self.model.credit_p2p
            f = _Fifo(self.geom.fifo_slices, links, hop, net, back)
            self.fifos[key] = f
        return f

    # -- waking ------------------------------------------------------------------
    def resume(self, tb: _Tb) -> None:
        """Run ``tb`` to its next request: a float is a busy delay, a ``_Flow``
        a transfer that ends the wait, None a park until someone wakes it."""
        try:
            req = next(tb.gen)
        except StopIteration:
            tb.done = True
            return
        if req is None:  # parked on a flag, data or a credit
            return
        eng = self.engine
        if req.__class__ is float:  # delay
            tb.busy += req
            heapq.heappush(eng.heap, (eng.now + req, next(eng.seq), self.resume, tb))
        else:  # flow, resume when done
            req.tb = tb
            req.start = eng.now
            eng.start_flow(req)

    def _arrive(self, fifo: _Fifo) -> None:
        fifo.arrived += 1
        tb = fifo.recv_wait
        if tb is not None:
            fifo.recv_wait = None
            self.resume(tb)

    def _net_delivered(self, arg) -> None:
        fifo, k = arg
        fifo.pending[k] = True
        while fifo.pending.pop(fifo.arrived, False):
            self._arrive(fifo)

    def _publish(self, tb: _Tb, value: int) -> None:
        row = self.flags[tb.rank]
        if value <= row[tb.id]:
            return
        row[tb.id] = value
        waiters = self.flag_wait.get((tb.rank, tb.id))
        if not waiters:
            return
        keep = []
        for need, other in waiters:
            if need <= value:
                self.resume(other)
            else:
                keep.append((need, other))
        self.flag_wait[(tb.rank, tb.id)] = keep

    # -- one threadblock -----------------------------------------------------------
    def _process(self, tb: _Tb, ftb, txs: list[tuple]) -> Iterator:
        eng = self.engine
        costs, geom, dtype, mac = self.costs, self.geom, self.dtype, self.mac
        call = float(costs.call)
        out = self.fifo(ftb.channel, tb.rank, ftb.send) if ftb.send is not None else None
        inn = self.fifo(ftb.channel, ftb.recv, tb.rank) if ftb.recv is not None else None
        flags = self.flags[tb.rank]
        nslices = geom.slices_per_call
        wire = geom.wire_factor
        local = self.local
        delivered, resume = self._net_delivered, self.resume
        heap, seq, push = eng.heap, eng.seq, heapq.heappush
        if out is not None:
            cap_wire = (costs.conn_net if out.net else costs.tb_p2p) * 1000.0 * wire
        for it, nelem in enumerate(self.iters):
            base = it * FLAG_BASE
            for sends, receives, count, deps, has_dep, flag, work in txs:
                for dtb, dstep, _pos in deps:
                    need = base + dstep
                    if flags[dtb] < need:
                        self.flag_wait.setdefault((tb.rank, dtb), []).append((need, tb))
                        yield None  # parked on the flag
                j = 0
                while j < count:
                    chunks = min(mac, count - j)
                    j += chunks
                    data = chunks * nelem * dtype
                    piece = data / nslices
                    for _ in range(nslices):
                        # a slice (credit) in flight is taken once visible; a
                        # threadblock that must wait is woken when the first
                        # in flight lands, else by the other end
                        while receives and inn.arrived <= inn.consumed:
                            q = inn.arrivals
                            if q and q[0] <= eng.now:
                                q.popleft()
                                inn.arrived += 1
                                break
                            if q:
                                push(heap, (q[0], next(seq), resume, tb))
                            else:
                                inn.recv_wait = tb
                            yield None
                        while sends and out.posted - out.credit >= out.cap:
                            q = out.credits
                            if q and q[0] <= eng.now:
                                q.popleft()
                                out.credit += 1
                                break
                            if q:
                                push(heap, (q[0], next(seq), resume, tb))
                            else:
                                out.send_wait = tb
                            yield None
                        if sends:
                            k = out.posted  # _send, inlined (one generator less per slice)
                            if out.net:
                                yield piece / local  # stage into the NET buffer
                                out.posted += 1
                                eng.start_flow(_Flow(
                                    piece * wire, out.links, cap_wire,
                                    lambda out=out, k=k: eng.at(eng.now + out.hop, delivered,
                                                                (out, k))))
                            else:
                                yield _Flow(piece * wire, out.links, cap_wire, None)
                                out.posted += 1
                                t = eng.now + out.hop
                                out.arrivals.append(t)
                                if out.recv_wait is not None:
                                    push(heap, (t, next(seq), resume, out.recv_wait))
                                    out.recv_wait = None
                        else:
                            yield piece * work
                        if receives:
                            inn.consumed += 1
                            t = eng.now + inn.back
                            inn.credits.append(t)
                            if inn.send_wait is not None:
                                push(heap, (t, next(seq), resume, inn.send_wait))
                                inn.send_wait = None
                    yield call
                if has_dep:
                    self._publish(tb, base + flag)

    # -- run ---------------------------------------------------------------------
    def run(self) -> float:
        eng = self.engine
        for tb in self.tbs:
            self.resume(tb)
        eng.run()
        # The last credits (and slices nobody receives) become visible after
        # every threadblock is done; the makespan includes them, as when they
        # were events (the model's calibration counted them).
        eng.now = max([eng.now, *(q[-1] for f in self.fifos.values()
                                  for q in (f.credits, f.arrivals) if q)])
        stuck = [tb for tb in self.tbs if not tb.done]
        if stuck:
            tb = stuck[0]
            raise SimulationError(
                f"the program hangs in simulation: {len(stuck)} threadblock"
                f"{'s never finish' if len(stuck) > 1 else ' never finishes'} "
                f"(first: rank {tb.rank} threadblock {tb.id}); run colc verify on it")
        return eng.now


def _check_dependencies(loaded: LoadedProgram) -> None:
    """Refuse a file whose step waits on a threadblock its rank lacks (the
    runtime hangs; ``colc verify`` says so)."""
    for r, tbs in enumerate(loaded.tbs):
        for ftb in tbs:
            for t in ftb.transmissions:
                for dtb, _, _ in t.deps:
                    if not 0 <= dtb < len(tbs):
                        raise SimulationError(
                            f"rank {r} threadblock {ftb.id} waits on threadblock {dtb}, which "
                            f"the rank does not have (the runtime hangs); run colc verify on it")


def simulate(program: Program, topo: Topology, model: RuntimeModel, nbytes: int,
             dtype_bytes: int = 4, loaded: LoadedProgram | None = None,
             extrapolate: bool = True) -> SimResult:
    """Simulate one call of ``program`` with a message of ``nbytes`` bytes.

    Parameters
    ----------
    program : Program
    topo : Topology
        Must have ``program.ngpus`` ranks.
    model : RuntimeModel
    nbytes : int
        Whole-collective size (nccl-tests' "size"): the call moves and is
        selected for what nccl-tests moves at that size (``nccl_tests_bytes``);
        the result keeps ``nbytes``.
    dtype_bytes : int
        Element size: 4 (fp32), 2 (fp16, bf16).
    loaded : LoadedProgram, optional
        ``load_program(program)`` if already computed (saves time when one
        program is simulated at many sizes).
    extrapolate : bool
        When the call runs more than ``EXTRAPOLATE_ABOVE`` loop iterations,
        simulate 4 and 8 of them and extend the per-iteration difference to
        the real count (the iterations after the first few repeat the same
        steady state); False simulates every iteration.

    Returns
    -------
    SimResult

    Raises
    ------
    SimulationError
        Rank counts differ, a connection has no path, or the program hangs.
    """
    if program.ngpus != topo.num_ranks:
        raise SimulationError(
            f"the file is for {program.ngpus} ranks but topology {topo.name} has "
            f"{topo.num_ranks}")
    if nbytes <= 0:
        raise SimulationError(f"message size must be positive, got {nbytes}")
    moved = nccl_tests_bytes(program.collective, program.ngpus, nbytes, dtype_bytes)
    nothing = moved <= 0
    if nothing:
        moved = nbytes  # below 16 bytes per rank: simulated as asked, never selected
    loaded = loaded or load_program(program)
    if not loaded.runnable:
        first = next((d for d in loaded.diagnostics if d.is_error), None)
        raise SimulationError(f"the runtime would reject the file: {first}")
    sim = _Simulation(loaded, topo, model, moved, dtype_bytes)
    iters = sim.iters
    if extrapolate and len(iters) > EXTRAPOLATE_ABOVE:
        # Steady state: simulate k and 2k loop iterations, extend the difference.
        k = EXTRAPOLATE_ABOVE // 2
        short = _Simulation(loaded, topo, model, moved, dtype_bytes)
        short.iters = [iters[0]] * (k - 1) + [iters[-1]]
        sim.iters = [iters[0]] * (2 * k - 1) + [iters[-1]]
        t_short, t_long = short.run(), sim.run()
        scale = 1 + (len(iters) - 2 * k) * (t_long - t_short) / (k * t_long) if t_long else 1
        makespan = t_long * scale
        for tb in sim.tbs:
            tb.busy *= scale
        for lk in sim.links.values():
            lk.carried *= scale
    else:
        makespan = sim.run()
    total = makespan + model.latency(program.protocol).base
    algbw = moved / total / 1000.0
    n = program.ngpus
    busy = max(sim.tbs, key=lambda tb: (tb.busy, -tb.rank, -tb.id), default=None)
    busiest_tb = (busy.rank, busy.id, busy.busy / makespan if makespan else 0.0) if busy else (
        -1, -1, 0.0)
    link = max(sim.links.values(), key=lambda lk: (lk.carried / lk.cap, lk.ends), default=None)
    busiest_link = ((link.ends[0], link.ends[1], link.carried / link.cap / makespan)
                    if link is not None and makespan else ("", "", 0.0))
    why = (f"nccl-tests moves nothing at {nbytes} bytes (below 16 bytes per rank)" if nothing
           else selection(program, moved, dtype_bytes))
    return SimResult(nbytes, total, algbw, algbw * busbw_factor(program.collective, n),
                     not why, why, busiest_tb, busiest_link)


__all__ = ["MAX_ITERATIONS", "SimResult", "SimulationError", "busbw_factor", "iteration_limit",
           "iteration_warnings", "nccl_tests_bytes", "selectable_sizes", "selection",
           "selection_warnings", "simulate", "window_selection"]
_ = math
