"""What the MSCCL runtime does to a ``Program`` when it loads it.

Implements ``shared/reference/msccl-xml-runtime.md`` section 4.4 (nop folding,
``re`` fusion, the kernel step counter) and the load-time checks of sections
2 and 5 that the typed IR can express (threadblock ids, channels, peers, cnt,
declared-offset bounds, threadblocks per channel, nop chains), plus the
conditions the runtime leaves silently wrong but that certainly hang
(a tb with a peer on ``chan >= nchannels``, peers ``>= ngpus``, shared connections, unpaired
connections, dependencies on missing threadblocks).

Input: a ``Program`` (from the reader or from the compiler).  Output: a
``LoadedProgram``: per rank, per threadblock, the list of *transmissions* the
kernel executes, and the diagnostics.  Complexity: O(total steps + ranks *
threadblocks).

Example: a tb ``nop(dep 2.1); re s[0]->i[0] (dep 1.1); re s[3]->i[0]`` becomes
one fused transmission with deps ``(2,1), (1,1)`` and operands ``s[0], s[3]``
that publishes kernel step 2 (section 4.4, item 3).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from colc.ir.core import Buffer, Collective, buffer_extents
from colc.ir.diagnostics import Diagnostic, error, warning
from colc.ir.program import Loc, Program, RankProgram, Step, StepKind, Threadblock

MAX_STEPS = 64  # MSCCL_MAX_NUM_STEPS
MAX_COUNT = 72  # MSCCL_MAX_COUNT: cnt must be < 72
MAX_CHANNELS = 32  # MAXCHANNELS
MAX_TBS = 1024  # MSCCL_MAX_NUM_THREAD_BLOCKS
MAX_TBS_PER_CHANNEL = 32  # MSCCL_MAX_NUM_THREAD_BLOCKS_PER_CHANNEL
MAX_REDUCE_FUSION = 16  # MSCCL_MAX_REDUCE_FUSION
MAX_DEPID = 127  # dependentBid is an int8_t

#: A rank without a ``<tb>``: the runtime launches its kernel with a grid of
#: nBlocks = 0, which CUDA refuses (the call fails).
NO_THREADBLOCK = ("no threadblock: the runtime launches this rank's kernel with a grid of 0 "
                  "blocks, which fails (every call of the collective errors)")

# Fields whose start offset the parser bounds-checks (section 3 table).
CHECKED_FIELDS: dict[StepKind, tuple[bool, bool]] = {
    StepKind.SEND: (True, False),
    StepKind.RECV: (False, True),
    StepKind.RECV_COPY_SEND: (False, True),
    StepKind.RECV_REDUCE_SEND: (True, False),
    StepKind.RECV_REDUCE_COPY: (False, False),
    StepKind.RECV_REDUCE_COPY_SEND: (True, True),
    StepKind.COPY: (True, True),
    StepKind.REDUCE: (True, True),
    StepKind.NOP: (False, False),
}

_CHECKED_BY_VALUE = {k._value_: v for k, v in CHECKED_FIELDS.items()}

# Fields the runtime actually reads or writes locally (section 3 table).
USED_FIELDS: dict[StepKind, tuple[bool, bool]] = {
    StepKind.SEND: (True, False),
    StepKind.RECV: (False, True),
    StepKind.RECV_COPY_SEND: (False, True),
    StepKind.RECV_REDUCE_SEND: (True, False),
    StepKind.RECV_REDUCE_COPY: (True, True),
    StepKind.RECV_REDUCE_COPY_SEND: (True, True),
    StepKind.COPY: (True, True),
    StepKind.REDUCE: (True, True),
    StepKind.NOP: (False, False),
}


# Kind properties keyed by the plain ``_value_`` string (hashing Enum members
# runs Python code; this module touches every step several times).
_SENDS = frozenset(k._value_ for k in StepKind if k.sends)
_RECEIVES = frozenset(k._value_ for k in StepKind if k.receives)
_NOP = StepKind.NOP


@dataclass(frozen=True, slots=True)
class Transmission:
    """One entry of the kernel's per-tb transmission list.

    ``deps`` are ``(tb, step, xml position)``; ``operands`` are the source
    offsets of a (possibly fused) ``re`` (one per member), empty otherwise.
    ``flag`` is the kernel step counter published when ``has_dep``.
    ``position`` is the XML position of the first real member, ``last`` of
    the last one.
    """

    kind: StepKind
    src: Loc
    dst: Loc
    count: int
    deps: tuple[tuple[int, int, int], ...]
    has_dep: bool
    flag: int
    operands: tuple[int | None, ...]
    position: int
    last: int


@dataclass(frozen=True, slots=True)
class FoldedThreadblock:
    """A threadblock as the kernel sees it."""

    id: int
    send: int | None
    recv: int | None
    channel: int
    transmissions: tuple[Transmission, ...]


@dataclass(frozen=True, slots=True)
class LoadedProgram:
    """Result of ``load_program``; ``tbs[r]`` is rank r's folded threadblocks.

    ``runnable`` is False when an error makes execution meaningless (the
    runtime rejects the file); errors that only make the run hang (unpaired
    connections, dependencies on missing tbs) leave it True so the
    interpreter can show the deadlock.
    """

    program: Program
    tbs: tuple[tuple[FoldedThreadblock, ...], ...]
    diagnostics: tuple[Diagnostic, ...]
    runnable: bool = True

    @property
    def ok(self) -> bool:
        """Whether no error was found (warnings allowed)."""
        return not any(d.is_error for d in self.diagnostics)


@dataclass
class _Pending:
    """A transmission under construction (mutable, private)."""

    step: Step
    position: int
    deps: list[tuple[int, int, int]]
    operands: list[int | None] = field(default_factory=list)
    counts: list[int] = field(default_factory=list)
    last: int = 0


def fold_threadblock(tb: Threadblock, rank: int) -> tuple[FoldedThreadblock, list[Diagnostic]]:
    """Fold nops and fuse ``re`` chains exactly like the runtime's parser.

    Parameters
    ----------
    tb : Threadblock
    rank : int
        Only used to locate diagnostics.

    Returns
    -------
    (FoldedThreadblock, list of Diagnostic)
    """
    diags: list[Diagnostic] = []
    if len(tb.steps) > MAX_STEPS:
        diags.append(error(f"{len(tb.steps)} steps; the runtime holds at most {MAX_STEPS} "
                           "(MSCCL_MAX_NUM_STEPS)", rank, tb.id))
    pending_deps: list[tuple[int, int, int]] = []
    built: list[_Pending] = []
    chain: tuple[Buffer, int | None, Buffer] | None = None
    n_reductions = 0
    for pos, st in enumerate(tb.steps):
        if st.kind is _NOP:
            if st.dep is not None and st.dep[0] > MAX_DEPID:  # a nop's depid is int8 too
                diags.append(_depid_error(st.dep[0], rank, tb.id, pos))
            if st.dep is not None and st.dep[0] >= 0:
                pending_deps.append((st.dep[0], st.dep[1], pos))
            else:
                diags.append(warning("nop without a dependency is dropped and shifts the "
                                     "kernel's step numbering by -1 for the rest of the tb",
                                     rank, tb.id, pos))
            continue
        diags.extend(_check_step(st, tb, rank, pos))
        key = (st.dst.buffer, st.dst.offset, st.src.buffer)
        own_dep = st.dep if st.dep is not None and st.dep[0] >= 0 else None
        # parser.cc:559 fuses only depid == -1; a depid below -1 (a dep
        # (-2, ...) read from a file) waits for nothing but starts a chain.
        # It compares the stored int16 dstOffset before with the int read
        # now: a dstoff past int16 (not fusable) continues no chain.
        if st.kind is StepKind.REDUCE and chain == key and st.dep is None and st.fusable:
            cur = built[-1]
            cur.step = st
            cur.operands.append(st.src.offset)
            cur.counts.append(st.count)
            cur.last = pos
        else:
            deps = list(pending_deps)
            if own_dep is not None:
                deps.append((own_dep[0], own_dep[1], pos))
            if pending_deps and own_dep is None:
                diags.append(error("nops before this step carry dependencies but the step has "
                                   "none (runtime: 'when there is a chain of dependencies...'; "
                                   "load fails)", rank, tb.id, pos))
            pending_deps = []
            cur = _Pending(st, pos, deps, last=pos)
            if st.kind is StepKind.REDUCE:
                cur.operands.append(st.src.offset)
                cur.counts.append(st.count)
            built.append(cur)
        if st.kind is StepKind.REDUCE:
            n_reductions += 1
            chain = None if (st.has_dep or n_reductions == MAX_REDUCE_FUSION) else key
        else:
            chain = None
    if pending_deps:
        d = pending_deps[0]
        diags.append(warning("trailing nops are dropped together with their dependencies",
                             rank, tb.id, d[2]))
    txs = []
    counter = 0
    for cur in built:
        st = cur.step
        if cur.deps:
            counter += len(cur.deps) - 1
        m = len(cur.operands)
        if m > 1:
            diags.extend(_check_fusion(cur, tb, rank))
            if st.count > 0:
                counter += m - 1
        txs.append(Transmission(st.kind, st.src, st.dst, st.count, tuple(cur.deps), st.has_dep,
                                counter, tuple(cur.operands), cur.position, cur.last))
        counter += 1
    return FoldedThreadblock(tb.id, tb.send, tb.recv, tb.channel, tuple(txs)), diags


def _check_fusion(cur: _Pending, tb: Threadblock, rank: int) -> list[Diagnostic]:
    m = len(cur.operands)
    span = f"steps {cur.position}..{cur.last}"
    where = (rank, tb.id, cur.position)
    out = []
    if len(set(cur.counts)) > 1:
        out.append(warning(f"fused re chain ({span}) has unequal cnt {cur.counts}; the runtime "
                           "uses the last one", *where))
    if m == MAX_REDUCE_FUSION:
        out.append(error(f"fused re chain of {m} steps ({span}): for large messages reduceCopy "
                         "drops the old destination value (keep chains <= 15)", *where))
    elif m > MAX_REDUCE_FUSION:
        out.append(error(f"fused re chain of {m} steps ({span}) overflows the kernel's source "
                         "array (keep chains <= 15)", *where))
    return out


def _check_step(st: Step, tb: Threadblock, rank: int, pos: int) -> list[Diagnostic]:
    out = []
    if not 0 <= st.count < MAX_COUNT:
        out.append(error(f"cnt {st.count} out of range 0..{MAX_COUNT - 1}", rank, tb.id, pos))
    if tb.send is None and st.kind._value_ in _SENDS:
        out.append(error(f"{st.kind.value} step in a tb without a send peer", rank, tb.id, pos))
    if tb.recv is None and st.kind._value_ in _RECEIVES:
        out.append(error(f"{st.kind.value} step in a tb without a recv peer", rank, tb.id, pos))
    if st.dep is not None and st.dep[0] > MAX_DEPID:
        out.append(_depid_error(st.dep[0], rank, tb.id, pos))
    return out


def _depid_error(depid: int, rank: int, tb: int, pos: int) -> Diagnostic:
    """The runtime keeps a depid in an int8: 128 names no threadblock (the
    wait reads outside the flags: a hang), 256 + k names threadblock k."""
    stored = depid % 256
    target = f"threadblock {stored}" if stored <= MAX_DEPID else "no threadblock"
    return error(f"depid {depid} > {MAX_DEPID} (stored as int8: the runtime waits on {target} "
                 f"instead)", rank, tb, pos)


def _declared(rp: RankProgram, buf: Buffer) -> int:
    if buf is Buffer.INPUT:
        return rp.input_chunks
    if buf is Buffer.OUTPUT:
        return rp.output_chunks
    return rp.scratch_chunks


def _check_offsets(rp: RankProgram, tb: Threadblock) -> list[Diagnostic]:
    out = []
    for pos, st in enumerate(tb.steps):
        check_src, check_dst = _CHECKED_BY_VALUE[st.kind._value_]
        for name, checked, loc in (("src", check_src, st.src), ("dst", check_dst, st.dst)):
            if checked and loc.offset is not None and loc.offset >= _declared(rp, loc.buffer):
                out.append(error(
                    f"{name}off {loc.offset} >= declared {loc.buffer.value[0]}_chunks "
                    f"{_declared(rp, loc.buffer)} (runtime: 'Incorrect offset')",
                    rp.rank, tb.id, pos))
    return out


def _check_tbs(program: Program, rp: RankProgram) -> list[Diagnostic]:
    r = rp.rank
    out = []
    ids = [tb.id for tb in rp.threadblocks]
    seen: set[int] = set()
    for tid in ids:
        if not 0 <= tid < MAX_TBS:
            out.append(error(f"tb id {tid} out of range 0..{MAX_TBS - 1}", r, tid))
        elif tid in seen:
            out.append(error(f"duplicate tb id {tid}", r, tid))
        seen.add(tid)
    for tid in range(1, MAX_TBS):  # each gap once, named by its first id
        if tid in seen and tid - 1 not in seen:
            first = max((t for t in seen if 0 <= t < tid - 1), default=-1) + 1
            gap = f"tb {first} is" if first == tid - 1 else f"tbs {first}-{tid - 1} are"
            out.append(error(f"tb ids must be contiguous from 0: {gap} missing", r))
    n_send = [0] * (MAX_CHANNELS + 1)
    n_recv = [0] * (MAX_CHANNELS + 1)
    for tb in rp.threadblocks:
        c = tb.channel
        if not 0 <= c < MAX_CHANNELS:
            extra = " (32 slips through the runtime's off-by-one check and indexes out of " \
                    "bounds)" if c == MAX_CHANNELS else ""
            out.append(error(f"chan {c} out of range 0..{MAX_CHANNELS - 1}{extra}", r, tb.id))
        elif c >= program.nchannels and (tb.send is not None or tb.recv is not None):
            # a peerless tb loads no connection (prims_simple.h): its local steps run
            out.append(error(f"chan {c} >= nchannels {program.nchannels}: this tb is never "
                             "connected (hang)", r, tb.id))
        for what, peer in (("send", tb.send), ("recv", tb.recv)):
            if peer is not None and not 0 <= peer < program.ngpus:
                out.append(error(f"{what} peer {peer} is not a rank 0..{program.ngpus - 1}",
                                 r, tb.id))
            elif peer == r:
                out.append(error(f"{what} peer {peer} is the tb's own rank", r, tb.id))
        if 0 <= c <= MAX_CHANNELS:
            for what, peer, counts, kinds in (("send", tb.send, n_send, _SENDS),
                                              ("recv", tb.recv, n_recv, _RECEIVES)):
                used = peer is not None and any(s.kind._value_ in kinds for s in tb.steps)
                if peer is not None and counts[c] >= MAX_TBS_PER_CHANNEL and (
                        used or counts[c] == MAX_TBS_PER_CHANNEL):  # the first, and each sender
                    out.append(_peers_error(what, c, used, r, tb.id))
                counts[c] += peer is not None
    out.extend(_check_connections(rp))
    return out


def _peers_error(what: str, channel: int, used: bool, rank: int, tb: int) -> Diagnostic:
    """The first threadblock past ``MAX_TBS_PER_CHANNEL`` with a ``what`` peer
    on ``channel``: the parser refuses its first such step, and after the
    threadblock records the peer in a 32-entry array without a check."""
    effect = (f"too many {what}s per channel (load fails)" if used else
              f"the parser writes its peer past the channel's {MAX_TBS_PER_CHANNEL}-entry array")
    return error(f"more than {MAX_TBS_PER_CHANNEL} tbs with a {what} peer on channel {channel}: "
                 f"{effect}", rank, tb)


def _check_connections(rp: RankProgram) -> list[Diagnostic]:
    out = []
    for what in ("send", "recv"):
        owner: dict[tuple[int, int], int] = {}
        for tb in rp.threadblocks:
            peer = tb.send if what == "send" else tb.recv
            if peer is None:
                continue
            key = (tb.channel, peer)
            if key in owner:
                out.append(error(f"tbs {owner[key]} and {tb.id} share the {what} connection "
                                 f"(chan {tb.channel}, peer {peer}); they would corrupt one FIFO",
                                 rp.rank, tb.id))
            else:
                owner[key] = tb.id
    return out


def _check_pairing(program: Program) -> list[Diagnostic]:
    """Every declared connection needs a tb at the other end.

    The runtime connects every ``(chan, send)`` and ``(chan, recv)`` a tb
    declares, steps or not (its parser registers the peer per channel), and
    NCCL's connection setup waits for the other end's half: a declared end
    without its partner hangs the communicator's setup, a used one the run.
    """
    recv_ends = set()
    send_ends = set()
    for rp in program.ranks:
        for tb in rp.threadblocks:
            if tb.recv is not None:
                recv_ends.add((tb.channel, tb.recv, rp.rank))
            if tb.send is not None:
                send_ends.add((tb.channel, rp.rank, tb.send))
    out = []

    def real(peer: int | None, rank: int) -> bool:  # other peers are errors of their own
        return peer is not None and 0 <= peer < program.ngpus and peer != rank

    for rp in program.ranks:
        for tb in rp.threadblocks:
            if real(tb.send, rp.rank) and (tb.channel, rp.rank, tb.send) not in recv_ends:
                out.append(_unpaired(tb, "send", rp.rank, tb.send, _SENDS))
            if real(tb.recv, rp.rank) and (tb.channel, tb.recv, rp.rank) not in send_ends:
                out.append(_unpaired(tb, "recv", rp.rank, tb.recv, _RECEIVES))
    return out


def _unpaired(tb: Threadblock, end: str, rank: int, peer: int, kinds: frozenset) -> Diagnostic:
    """The error for ``tb``'s ``end`` (send or recv) to ``peer`` that no tb
    on ``peer`` matches on its channel."""
    used = [i for i, s in enumerate(tb.steps) if s.kind._value_ in kinds]
    verb, back, use = (("receives from", "recv", "sends") if end == "send"
                       else ("sends to", "send", "receives"))
    msg = f"no tb on rank {peer} {verb} rank {rank} on chan {tb.channel}"
    if not used:
        msg += (f" (this tb declares {end}={peer} but never {use}: the runtime connects "
                f"it anyway and its setup waits for rank {peer}'s {back} end, a hang)")
        return error(msg, rank, tb.id)
    return error(msg, rank, tb.id, used[0])


def _check_deps(rp: RankProgram) -> list[Diagnostic]:
    ids = {tb.id for tb in rp.threadblocks}
    out = []
    for tb in rp.threadblocks:
        for pos, st in enumerate(tb.steps):
            if st.dep is not None and st.dep[0] >= 0 and st.dep[0] not in ids:
                out.append(error(f"depends on tb {st.dep[0]}, which does not exist (hang)",
                                 rp.rank, tb.id, pos))
    return out


def _check_header(program: Program) -> list[Diagnostic]:
    out = []
    if program.ngpus <= 0 or len(program.ranks) != program.ngpus:
        out.append(error(f"ngpus {program.ngpus} but {len(program.ranks)} rank programs"))
    for i, rp in enumerate(program.ranks):
        if rp.rank != i:
            out.append(error(f"rank program {i} is labelled rank {rp.rank}"))
    if program.nchunks <= 0:
        out.append(error(f"nchunksperloop {program.nchunks} must be > 0"))
    elif program.ngpus > 0 and program.nchunks % program.ngpus and program.collective in (
            Collective.ALLGATHER, Collective.REDUCESCATTER, Collective.ALLTOALL):
        out.append(error(f"nchunksperloop {program.nchunks} is not a multiple of ngpus "
                         f"{program.ngpus}"))
    if not 0 < program.nchannels <= MAX_CHANNELS:
        out.append(error(f"nchannels {program.nchannels} out of range 1..{MAX_CHANNELS}"))
    return out


#: Chunk slots (every rank's input, output and scratch chunks) colc's
#: interpreters follow at most: they keep a value, a writer and a reader per
#: slot, about 37 bytes each in the MSCCL interpreter and 100 in oneCCL's
#: (1.2 and 3.5 GB at this count).  colc's largest files hold about 6 M
#: (DGX A100 x128 rings2d allreduce: 512 chunks per loop, 4608 of scratch per
#: rank); hand-edited chunk counts of 600 M (MSCCL) and 30 M (oneCCL) took
#: 24 and 12.7 GB before this limit.
MAX_VERIFY_SLOTS = 1 << 25


def slots_problem(coll: Collective, nchunks: int, ranks) -> str:
    """Why a file's buffers are too many chunk slots to interpret, or "".

    ``ranks`` are the file's ranks (MSCCL ``RankProgram``s or oneCCL
    ``RankThreads``: both declare ``input_chunks``, ``output_chunks`` and
    ``scratch_chunks``); the interpreters size input and output by
    ``nchunks`` too, so each counts at the larger of the two.

    >>> from colc.ir.program import RankProgram
    >>> slots_problem(Collective.ALLGATHER, 8, [RankProgram(r, 2, 8, 0, ()) for r in range(4)])
    ''
    >>> big = [RankProgram(0, 1 << 30, 1 << 30, 0, ())]
    >>> slots_problem(Collective.ALLREDUCE, 1 << 30, big)[:40]
    'buffers of 2147483648 chunk slots over a'
    """
    ext = buffer_extents(coll, nchunks, max(1, len(ranks)))
    total = sum(max(r.input_chunks, ext[Buffer.INPUT]) + max(r.output_chunks, ext[Buffer.OUTPUT])
                + max(0, r.scratch_chunks) for r in ranks)
    if total <= MAX_VERIFY_SLOTS:
        return ""
    return (f"buffers of {total} chunk slots over all ranks (nchunks {nchunks}, their input, "
            f"output and scratch chunks): more than colc's interpreter follows "
            f"({MAX_VERIFY_SLOTS}; colc's own files need at most about 6 M)")


def load_program(program: Program) -> LoadedProgram:
    """Fold every threadblock and run every load-time check.

    Parameters
    ----------
    program : Program

    Returns
    -------
    LoadedProgram
        Folded threadblocks (in the program's order) and diagnostics, sorted
        by rank, tb, step.
    """
    diags = _check_header(program)
    if diags:
        return LoadedProgram(program, (), tuple(diags), False)
    folded = []
    for rp in program.ranks:
        if rp.scratch_chunks < 0:
            diags.append(error(f"s_chunks {rp.scratch_chunks} must be >= 0", rp.rank))
        if not rp.threadblocks:
            diags.append(error(NO_THREADBLOCK, rp.rank))
        diags.extend(_check_tbs(program, rp))
        row = []
        for tb in rp.threadblocks:
            diags.extend(_check_offsets(rp, tb))
            ftb, d = fold_threadblock(tb, rp.rank)
            diags.extend(d)
            row.append(ftb)
        folded.append(tuple(row))
    runnable = not any(d.is_error for d in diags)
    for rp in program.ranks:
        diags.extend(_check_deps(rp))
    diags.extend(_check_pairing(program))
    return LoadedProgram(program, tuple(folded), tuple(sort_diagnostics(diags)), runnable)


def sort_diagnostics(diags: list[Diagnostic]) -> list[Diagnostic]:
    """Stable order by (rank, tb, step); unlocated findings first."""
    def key(d: Diagnostic) -> tuple[int, int, int]:
        return (-1 if d.rank is None else d.rank, -1 if d.tb is None else d.tb,
                -1 if d.step is None else d.step)
    return sorted(diags, key=key)
