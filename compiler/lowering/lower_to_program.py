"""Pass ``lower-to-program``: chunk schedule -> threadblock program.

Input invariant: a ``Schedule`` whose program order is a correct sequential
execution (``check_schedule`` passes).
Output invariant: a ``Program`` (``colc.ir.program``) with, on every rank,
at most one send peer and one receive peer per threadblock, no two
threadblocks sharing a (channel, peer, direction) connection, the k-th send
of every connection matched by the k-th receive of its peer, steps ordered
so that the program runs to completion with unbounded FIFOs, dependencies as
(threadblock, step) pairs with extra ones carried by preceding nops, and
``has_dep`` set on every dependency target.

Algorithm (runtime notes sections 3, 4.3, 4.4, 6.2-6.4):

1. *Split*: every op becomes parts: a transfer is a send part (source rank)
   and a receive part (destination rank); a local op is one part.
2. *Hazards*: per rank and physical chunk (in-place aliasing, which covers
   out-of-place too) each part depends on earlier conflicting parts.
3. *Fuse*: a receive of chunk X followed by a send of X from the same rank
   on the same channel becomes ``rcs`` (copy), ``rrcs`` (reduce, result
   kept) or ``rrs`` (reduce, result dead afterwards), when the send's other
   hazards precede the receive and the two connections can share a
   threadblock.
4. *Threadblocks*: connections joined by fusion form one threadblock;
   leftover send-only and receive-only connections of a channel are paired
   (unpaired, each takes its own, but with ``pair_mirrors`` a channel's one
   lone send and one lone receive whose peers mirror a fused threadblock's);
   local copies/reductions get a local threadblock per channel, and where
   those would pass the threadblock budget they share what it leaves, or,
   with nothing left, the connection threadblock of the step that reads
   their result (``_local_threadblocks``).  Without fusion the
   threadblocks follow from the ops' channels alone, so an unfused attempt
   counts them first (``_unfused_steps``) and stops when they break a limit.
5. *Order*: a list simulation with unbounded FIFOs in program-order priority
   gives one global execution; every threadblock lists its steps in that
   order, which also makes every connection FIFO-consistent.
6. *Dependencies*: per step, the latest step of each other threadblock it
   waits for; the first goes on the step, the others on nops before it.

When a threadblock would exceed the runtime's 64 steps, transfers are split
into phases by dependency depth, each phase on its own connections.
Each group of ops (channel hint x phase) gets its own channel while they fit
in 32; beyond that channels are packed (``pack_channels``): each group takes
the lowest channel not used by a group sharing a rank pair with it, so
channels grow with the groups per pair, not with the groups; when that
still exceeds the budget, the hints are dropped.  Phases only shorten
threadblocks, so the search stops at once when the limit broken is
another one, and before any attempt when one connection has more than 64
transfers at one dependency depth (they share a threadblock in every
split); an attempt already over the channel, threadblock or step limits
after step 4 skips steps 5-6.

Complexity: O(P log P) for P parts, plus O(P) per phase attempt.
"""

from __future__ import annotations

import heapq
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from colc.compiler.lowering.infer_dependencies import chunk_keys
from colc.errors import InfeasibleError, InternalError
from colc.ir.chunks import Op, OpKind, Schedule
from colc.ir.core import Buffer, Collective, Protocol, buffer_extents, inplace_aliaser
from colc.ir.program import Loc, Program, RankProgram, Step, StepKind, Threadblock

NAME = "lower-to-program"
MAX_STEPS = 64
MAX_CHANNELS = 32
MAX_TBS_PER_CHANNEL = 32  # sending (and receiving) threadblocks per channel and rank
MAX_THREADBLOCKS = 108
MAX_COUNT = 71
MAX_DEPID = 127
MAX_OFFSET = 32767  # chunk offsets are stored as int16
MAX_NODES = 4096  # XML nodes the parser stores per rank: algo + every gpu + own tbs + own steps


class LoweringStalled(InternalError):
    """The ordering simulation found no runnable step (fusion created a cycle)."""


@dataclass(frozen=True, slots=True)
class LoweringOptions:
    """Runtime-facing choices of the lowering (they map to CLI flags)."""

    protocol: Protocol = Protocol.SIMPLE
    inplace: bool = True
    outofplace: bool = True
    min_bytes: int = 0
    max_bytes: int = 0
    name: str = "colc"
    max_threadblocks: int = MAX_THREADBLOCKS
    max_channels: int = MAX_CHANNELS  # lower only in tests (channel packing under pressure)
    fuse: bool = True  # merge receive+send into rcs/rrs/rrcs
    pair_connections: bool = True  # let one threadblock serve a lone send and a lone receive
    # unpaired, let one threadblock serve a lone send and a lone receive whose
    # peers mirror a fused threadblock's on their channel (a relay's way back)
    pair_mirrors: bool = False


#: Lowering variants from the most economical to the most decoupled; the
#: pipeline takes the first whose file verifies at the protocol's FIFO depth.
STRATEGIES = ({"fuse": True, "pair_connections": True},
              {"fuse": True, "pair_connections": False},
              {"fuse": False, "pair_connections": False})


@dataclass(slots=True)
class _Part:
    """Half of an op living on one rank."""

    pid: int
    op: Op
    rank: int
    role: str  # "send", "recv" or "local"
    deps: set[int] = field(default_factory=set)


@dataclass(slots=True)
class _Instr:
    """One step-to-be: one part or a fused receive+send pair."""

    iid: int
    rank: int
    parts: tuple[_Part, ...]
    kind: StepKind
    send_conn: tuple[int, int] | None = None  # (channel, peer)
    recv_conn: tuple[int, int] | None = None
    local_ch: int = 0  # channel of a local step's threadblock
    deps: set[int] = field(default_factory=set)  # instr ids on the same rank
    tb: int = -1
    pos: int = -1
    recv: _Part | None = None  # the receiving part, if any
    send: _Part | None = None  # the sending part, if any

    @property
    def key(self) -> int:
        return max(self.parts[0].pid, self.parts[-1].pid)  # one part, or a fused pair


def lower_to_program(sched: Schedule, opts: LoweringOptions) -> Program:
    """Lower ``sched`` to a threadblock program (see module docstring).

    Parameters
    ----------
    sched : Schedule
    opts : LoweringOptions

    Returns
    -------
    Program

    Raises
    ------
    InfeasibleError
        When no phase split fits the runtime's limits.
    """
    depth = _transfer_depth(sched)
    max_depth = max(depth, default=0)
    crowded = _crowded_connection(sched, depth)
    if crowded is not None:
        raise InfeasibleError(f"cannot fit the schedule in the runtime's limits: {crowded}")
    phases = 1
    max_channels = min(opts.max_channels, MAX_CHANNELS)
    while True:
        phase_len = (max_depth // phases) + 1
        nchannels, program, worst = _lower_once(sched, opts, depth, phase_len)
        if worst is None:
            return program
        too_long = _STEPS_PROBLEM in worst
        for packing in ("packed", "merged"):
            if nchannels <= max_channels:
                break
            # Too many channels: groups that share no rank pair share a channel;
            # failing that, drop the hints (each pair's ops of a phase on one
            # connection).
            nchannels, program, worst = _lower_once(sched, opts, depth, phase_len, packing)
            if worst is None:
                return program
            too_long = too_long or _STEPS_PROBLEM in worst
        # More phases only shorten threadblocks (they add channels and
        # threadblocks), so any other limit is final.
        if phases >= max_depth + 1 or not too_long:
            raise InfeasibleError(f"cannot fit the schedule in the runtime's limits: {worst}")
        phases = min(max_depth + 1, phases * 2)


def _crowded_connection(sched: Schedule, depth: list[int]) -> str | None:
    """Transfers that share one threadblock under every phase split: those of one
    (sender, receiver, channel hint) at one dependency depth.  More than
    ``MAX_STEPS`` of them cannot be lowered (each send is its own step)."""
    count = Counter((op.src.rank, op.dst.rank, op.channel, depth[op.op_id])
                    for op in sched.ops if op.is_transfer)
    if max(count.values(), default=0) <= MAX_STEPS:
        return None
    (src, dst, _, _), n = max(sorted(count.items()), key=lambda e: e[1])
    return (f"rank {src} sends {n} transfers to rank {dst} at one dependency depth on one "
            f"channel hint, a threadblock of at least {n} {_STEPS_PROBLEM} {MAX_STEPS}")


def _transfer_depth(sched: Schedule) -> list[int]:
    depth = [0] * len(sched.ops)
    for op in sched.ops:
        base = max((depth[d] for d in op.deps), default=-1)
        depth[op.op_id] = base + (1 if op.is_transfer else 0) if op.deps else 0
    return depth


#: The last schedule's parts, whether their hazards are set, and their value
#: readers: they depend on the schedule only, so phase attempts and lowering
#: strategies share them.
_LAST: list[list] = []


def _analysis(sched: Schedule, hazards: bool = True,
              readers: bool = False) -> tuple[list[_Part], dict | None]:
    """The parts of ``sched``, with ``hazards`` their dependencies (set on the
    parts), and with ``readers`` their value readers as well (else None).
    Unfused attempts need the hazards only once they fit the limits (most of
    the cost of a refusal) and never the value readers (only fusion reads
    them)."""
    if not (_LAST and _LAST[0][0] is sched):
        _LAST[:] = [[sched, _split(sched), False, None]]
    entry = _LAST[0]
    if (hazards or readers) and not entry[2]:
        _hazards(sched, entry[1])
        entry[2] = True
    if readers and entry[3] is None:
        entry[3] = _value_readers(sched, entry[1])
    return entry[1], entry[3]


def _lower_once(sched: Schedule, opts: LoweringOptions, depth: list[int], phase_len: int,
                packing: str = "spread") -> tuple[int, Program | None, str | None]:
    use_hints = packing != "merged"
    hints = sorted({op.channel for op in sched.ops}) if use_hints else [None]
    hint_index = {h: i for i, h in enumerate(hints)} if use_hints else defaultdict(int)

    def group(op: Op) -> int:
        return hint_index[op.channel] + len(hints) * (depth[op.op_id] // phase_len)

    color = pack_channels(sched, group) if packing != "spread" else None
    slot, nslots = _peer_slots(sched)
    span = (max(color.values(), default=0) + 1) if color is not None else (
        len(hints) * (max(depth, default=0) // phase_len + 1))

    def channel_of(op: Op) -> int:
        base = group(op) if color is None else color[group(op)]
        return base + span * slot[(op.src.rank, op.dst.rank)] if nslots > 1 else base

    channels = [channel_of(op) for op in sched.ops]

    def channel(op: Op) -> int:
        return channels[op.op_id]

    if not opts.fuse:  # the threadblocks follow from the channels alone
        nchannels = max(channels, default=0) + 1
        early = _early_problem(_unfused_steps(sched, channels, opts.pair_connections,
                                              opts.max_threadblocks), nchannels, opts)
        if early is not None:  # building the steps would be wasted
            return nchannels, None, early
    parts, readers = _analysis(sched, hazards=opts.fuse, readers=opts.fuse)  # fusion reads both
    instrs = _fuse(parts, readers, channel, opts.fuse)
    by_rank = _group_by_rank(sched.ngpus, instrs)
    for rank_instrs in by_rank:
        _assign_threadblocks(rank_instrs, opts.pair_connections, opts.pair_mirrors,
                             opts.max_threadblocks)
    nchannels = max((_instr_channel(i) for i in instrs), default=0) + 1
    early = _early_problem([Counter(i.tb for i in instrs).values() for instrs in by_rank],
                           nchannels, opts)
    if early is not None:  # ordering and printing would be wasted
        return nchannels, None, early
    parts, _ = _analysis(sched)
    _order(sched, parts, instrs)
    program = _build_program(sched, opts, by_rank)
    return program.nchannels, program, _limit_problem(program, opts)


def _instr_channel(ins: _Instr) -> int:
    conn = ins.send_conn or ins.recv_conn
    return conn[0] if conn else ins.local_ch


def _unfused_steps(sched: Schedule, channels: list[int], pair: bool,
                   budget: int | None = None) -> list[list[int]]:
    """Per rank, the steps of each threadblock an unfused lowering gives
    (``_assign_threadblocks`` without fused pairs: a threadblock per send
    and per receive connection, or with ``pair`` one serving the k-th of each
    on a channel, plus one per local channel), from the ops' channels.
    Where the local threadblocks would pass ``budget`` they are shared as
    ``_local_threadblocks`` shares them; their steps are then left out (the
    count is a lower bound: the built program is checked exactly)."""
    send = [Counter() for _ in range(sched.ngpus)]
    recv = [Counter() for _ in range(sched.ngpus)]
    local = [Counter() for _ in range(sched.ngpus)]
    for op in sched.ops:
        ch = channels[op.op_id]
        a, b = op.src.rank, op.dst.rank
        if a != b:
            send[a][(ch, b)] += 1
            recv[b][(ch, a)] += 1
        else:
            local[b][ch] += 1
    out = []
    for r in range(sched.ngpus):
        if not pair:
            steps = list(send[r].values()) + list(recv[r].values())
        else:
            steps = []
            sends, recvs = defaultdict(list), defaultdict(list)  # channel -> steps, by peer
            for (c, _), n in sorted(send[r].items()):
                sends[c].append(n)
            for (c, _), n in sorted(recv[r].items()):
                recvs[c].append(n)
            for ch in sorted(sends.keys() | recvs.keys()):
                s, v = sends[ch], recvs[ch]
                steps += [(s[k] if k < len(s) else 0) + (v[k] if k < len(v) else 0)
                          for k in range(max(len(s), len(v)))]
        locals_ = list(local[r].values())
        room = _local_room(len(steps), len(locals_), budget)
        out.append((locals_ if room is None else [0] * room) + steps)
    return out


def _local_room(nconn: int, nlocal: int, budget: int | None) -> int | None:
    """Local threadblocks a rank keeps when its ``nconn`` connection
    threadblocks and ``nlocal`` local ones (one per local channel) pass
    ``budget``: None when they fit (one per channel), else what the budget
    leaves (0: every local step goes on a connection threadblock)."""
    if budget is None or nconn + nlocal <= budget or not nconn:
        return None
    return max(0, min(nlocal, budget - nconn))


def _early_problem(by_rank: list, nchannels: int, opts: LoweringOptions) -> str | None:
    """A limit broken before steps are ordered: channels, threadblocks per rank, or
    steps per threadblock (nops only add steps), given each rank's steps per
    threadblock.  Worded as ``_limit_problem``."""
    problem = _channels_problem(nchannels, opts)
    if problem is not None:
        return problem
    for rank, steps in enumerate(by_rank):
        problem = _threadblocks_problem(rank, len(steps), opts)
        if problem is not None:
            return problem
        longest = max(steps, default=0)
        if longest > MAX_STEPS:
            return (f"rank {rank} has a threadblock of at least {longest} "
                    f"{_STEPS_PROBLEM} {MAX_STEPS}")
    return None


def _channels_problem(nchannels: int, opts: LoweringOptions) -> str | None:
    budget = min(opts.max_channels, MAX_CHANNELS)
    return f"{nchannels} channels > {budget}" if nchannels > budget else None


def _threadblocks_problem(rank: int, ntbs: int, opts: LoweringOptions) -> str | None:
    if ntbs > opts.max_threadblocks:
        return (f"rank {rank} needs {ntbs} threadblocks > {opts.max_threadblocks} (the "
                f"threadblock budget per GPU)")
    return None


def _peer_slots(sched: Schedule) -> tuple[dict[tuple[int, int], int], int]:
    """Slot of each directed pair so that no rank has more than 32 send (or receive)
    peers in one slot: the runtime takes at most 32 sending and 32 receiving
    threadblocks per channel, so pairs of later slots move to further channels.

    Returns the slot per pair and the number of slots (1 unless some rank has
    more than ``MAX_TBS_PER_CHANNEL`` peers one way).
    """
    pairs = sorted({(op.src.rank, op.dst.rank) for op in sched.ops if op.is_transfer})
    used_out: dict[tuple[int, int], int] = defaultdict(int)  # (rank, slot) -> pairs
    used_in: dict[tuple[int, int], int] = defaultdict(int)
    slot: dict[tuple[int, int], int] = {}
    for a, b in pairs:  # greedy: the first slot with room at both ends
        k = 0
        while used_out[(a, k)] >= MAX_TBS_PER_CHANNEL or used_in[(b, k)] >= MAX_TBS_PER_CHANNEL:
            k += 1
        slot[(a, b)] = k
        used_out[(a, k)] += 1
        used_in[(b, k)] += 1
    for op in sched.ops:
        if not op.is_transfer:
            slot.setdefault((op.src.rank, op.dst.rank), 0)
    return slot, max(slot.values(), default=0) + 1


def pack_channels(sched: Schedule, group) -> dict[int, int]:
    """Channel of each op group: groups that never share a connection share a channel.

    A connection is (channel, peer, direction), and the runtime gives each
    one threadblock, so two groups (channel hint x phase) need distinct
    channels only when some directed rank pair carries ops of both (or one
    rank runs local ops of both, which share a local threadblock per
    channel).  Greedy colouring of that conflict graph, groups in order, each
    taking the smallest channel its neighbours leave free: a torus or
    hypercube whose groups each touch a few pairs packs into a few channels
    instead of one channel per group.

    Parameters
    ----------
    sched : Schedule
    group : callable
        Op -> group number.

    Returns
    -------
    dict of int to int
        Group -> channel.

    Complexity: O(sum over pairs of (groups on the pair)^2).
    """
    on_pair: dict[tuple[int, int], set[int]] = defaultdict(set)
    for op in sched.ops:
        pair = (op.src.rank, op.dst.rank)
        on_pair[pair].add(group(op))
    conflicts: dict[int, set[int]] = defaultdict(set)
    for groups in on_pair.values():
        for g in groups:
            conflicts[g] |= groups
    color: dict[int, int] = {}
    for g in sorted(conflicts):
        taken = {color[h] for h in conflicts[g] if h in color}
        color[g] = next(c for c in range(len(taken) + 1) if c not in taken)
    return color


def _split(sched: Schedule) -> list[_Part]:
    parts: list[_Part] = []
    for op in sched.ops:
        if op.is_transfer:
            parts.append(_Part(len(parts), op, op.src.rank, "send"))
            parts.append(_Part(len(parts), op, op.dst.rank, "recv"))
        else:
            parts.append(_Part(len(parts), op, op.dst.rank, "local"))
    return parts


def _part_chunks(part: _Part, alias) -> tuple[list, list]:
    """``(reads, writes)`` of ``part`` as ``(rank, buffer, index)`` keys
    (``chunk_keys``; every slot a part touches is on its rank)."""
    op = part.op
    n = op.count
    if part.role == "send":
        return chunk_keys(op.src, n, alias), []
    reads = chunk_keys(op.operand, n, alias) if op.operand is not None else []
    if part.role == "local":
        reads += chunk_keys(op.src, n, alias)
    return reads, chunk_keys(op.dst, n, alias)


def _hazards(sched: Schedule, parts: list[_Part]) -> None:
    """Per-rank RAW/WAR/WAW part dependencies from program order."""
    alias = inplace_aliaser(sched.collective, sched.nchunks, sched.ngpus)
    last_write: dict[tuple, int] = {}
    readers: dict[tuple, list[int]] = defaultdict(list)
    for part in parts:
        reads, writes = _part_chunks(part, alias)
        deps = part.deps
        for key in reads + writes:
            if key in last_write:
                deps.add(last_write[key])
        for key in writes:
            deps.update(readers[key])
        for key in reads:
            readers[key].append(part.pid)
        for key in writes:
            last_write[key] = part.pid
            readers[key] = []
        deps.discard(part.pid)
    _gate(sched, parts)


def _gate(sched: Schedule, parts: list[_Part]) -> None:
    """Make each gated op's send (``Schedule.gates``) wait for its gate's
    parts on the sending rank; stale or absent gates are ignored.  A gate
    with no part on that rank, or on a local op, adds nothing; a gated send
    that forwards a received chunk is not fused with that receive when the
    gate comes between them (``_fuse``)."""
    gates = sched.gates if len(sched.gates) == len(sched.ops) else ()
    if not any(g >= 0 for g in gates):
        return
    on_rank: dict[tuple[int, int], list[int]] = defaultdict(list)
    for part in parts:
        on_rank[(part.op.op_id, part.rank)].append(part.pid)
    for part in parts:
        gate = gates[part.op.op_id]
        if part.role != "send" or gate < 0:
            continue
        if gate >= part.op.op_id:
            raise InternalError(f"op {part.op.op_id} is gated by a later op {gate}")
        part.deps.update(on_rank[(gate, part.rank)])


def _fuse(parts: list[_Part], readers: dict[int, set[int]], channel,
          enabled: bool) -> list[_Instr]:
    """Pair receives with the send that forwards their chunk (runtime notes 6.2)."""
    recv_of = {p.op.op_id: p for p in parts if p.role == "recv"}
    fused_with: dict[int, _Part] = {}  # send pid -> recv part
    taken: set[int] = set()
    conns: dict[int, _ConnUnion] = defaultdict(_ConnUnion)
    for part in parts:
        if part.role != "send" or not enabled:
            continue
        recv = _producer_recv(part, parts, recv_of)
        if recv is None or recv.pid in taken or channel(recv.op) != channel(part.op):
            continue
        if any(d > recv.pid for d in part.deps if d != recv.pid):
            continue
        ch = channel(part.op)
        if conns[part.rank].join((ch, recv.op.src.rank), (ch, part.op.dst.rank)):
            fused_with[part.pid] = recv
            taken.add(recv.pid)
    instrs: list[_Instr] = []
    for part in parts:
        if part.pid in taken:
            continue
        recv = fused_with.get(part.pid)
        instrs.append(_make_instr(len(instrs), part, recv, readers, channel))
    return instrs


class _ConnUnion:
    """Union-find of a rank's connections; a class may hold one send and one recv."""

    def __init__(self) -> None:
        self.send_of: dict[tuple[int, int], tuple[int, int]] = {}
        self.recv_of: dict[tuple[int, int], tuple[int, int]] = {}

    def join(self, recv_conn: tuple[int, int], send_conn: tuple[int, int]) -> bool:
        partner = self.send_of.get(recv_conn)
        back = self.recv_of.get(send_conn)
        if partner is None and back is None:
            self.send_of[recv_conn] = send_conn
            self.recv_of[send_conn] = recv_conn
            return True
        return partner == send_conn and back == recv_conn


def _producer_recv(send: _Part, parts: list[_Part], recv_of: dict[int, _Part]) -> _Part | None:
    """The receive part whose written chunks this send reads, if it is one receive."""
    producers = {d for d in send.deps if parts[d].role == "recv" and parts[d].rank == send.rank}
    for d in sorted(producers, reverse=True):
        recv = parts[d]
        if (recv.op.dst == send.op.src and recv.op.count == send.op.count
                and recv_of.get(recv.op.op_id) is recv):
            return recv
    return None


def _value_readers(sched: Schedule, parts: list[_Part]) -> dict[int, set[int]]:
    """Per writing part: the parts reading what it wrote, in either aliasing mode."""
    out: dict[int, set[int]] = defaultdict(set)
    for alias in (inplace_aliaser(sched.collective, sched.nchunks, sched.ngpus), None):
        last: dict[tuple, int] = {}
        for part in parts:
            reads, writes = _part_chunks(part, alias)
            for c in reads:
                if c in last:
                    out[last[c]].add(part.pid)
            for c in writes:
                last[c] = part.pid
        for pid in set(last.values()):
            out[pid].add(-1)  # final value is observable
    return out


def _make_instr(iid: int, part: _Part, recv: _Part | None,
                readers: dict[int, set[int]], channel) -> _Instr:
    op = part.op
    if recv is not None:
        reduce = recv.op.kind is OpKind.REDUCE
        dead = readers[recv.pid] == {part.pid}
        kind = (StepKind.RECV_REDUCE_SEND if reduce and dead else
                StepKind.RECV_REDUCE_COPY_SEND if reduce else StepKind.RECV_COPY_SEND)
        ch = channel(op)
        return _Instr(iid, part.rank, (recv, part), kind, send_conn=(ch, op.dst.rank),
                      recv_conn=(ch, recv.op.src.rank), recv=recv, send=part)
    if part.role == "send":
        return _Instr(iid, part.rank, (part,), StepKind.SEND,
                      send_conn=(channel(op), op.dst.rank), send=part)
    if part.role == "recv":
        kind = StepKind.RECV_REDUCE_COPY if op.kind is OpKind.REDUCE else StepKind.RECV
        return _Instr(iid, part.rank, (part,), kind, recv_conn=(channel(op), op.src.rank),
                      recv=part)
    kind = StepKind.REDUCE if op.kind is OpKind.REDUCE else StepKind.COPY
    return _Instr(iid, part.rank, (part,), kind, local_ch=channel(op))


def _group_by_rank(ngpus: int, instrs: list[_Instr]) -> list[list[_Instr]]:
    by_rank: list[list[_Instr]] = [[] for _ in range(ngpus)]
    for ins in instrs:
        by_rank[ins.rank].append(ins)
    return by_rank


def _assign_threadblocks(instrs: list[_Instr], pair: bool, mirrors: bool = False,
                         budget: int | None = None) -> None:
    """Give every instruction of one rank its threadblock (see step 4).

    ``mirrors``: unpaired, a channel's one lone send and one lone receive
    still share a threadblock where a fused one there receives from the
    send's peer and sends to the receive's (rings2d's grid reduce-scatter:
    a relay's landings fused with its forwarding, and the sends that feed
    the peer's relay and the forwarded partial's landing the other way).
    ``budget``: where a local threadblock per channel would pass it, local
    steps share what is left (``_local_threadblocks``)."""
    send_tb: dict[tuple[int, int], int] = {}
    recv_tb: dict[tuple[int, int], int] = {}
    tb_channel: list[int] = []

    def new_tb(ch: int) -> int:
        tb_channel.append(ch)
        return len(tb_channel) - 1

    for ins in instrs:  # fused pairs first fix the shared threadblocks
        if ins.send_conn and ins.recv_conn:
            tb = send_tb.get(ins.send_conn, recv_tb.get(ins.recv_conn))
            if tb is None:
                tb = new_tb(ins.send_conn[0])
            send_tb[ins.send_conn] = recv_tb[ins.recv_conn] = tb
    lonely_send = sorted({i.send_conn for i in instrs if i.send_conn and i.send_conn not in send_tb})
    lonely_recv = sorted({i.recv_conn for i in instrs if i.recv_conn and i.recv_conn not in recv_tb})
    for ch in sorted({c[0] for c in lonely_send} | {c[0] for c in lonely_recv}):
        sends = [c for c in lonely_send if c[0] == ch]
        recvs = [c for c in lonely_recv if c[0] == ch]
        if (mirrors and not pair and len(sends) == len(recvs) == 1
                and recv_tb.get((ch, sends[0][1])) is not None
                and recv_tb.get((ch, sends[0][1])) == send_tb.get((ch, recvs[0][1]))):
            send_tb[sends[0]] = recv_tb[recvs[0]] = new_tb(ch)
            continue
        if pair:
            for k in range(max(len(sends), len(recvs))):
                tb = new_tb(ch)
                if k < len(sends):
                    send_tb[sends[k]] = tb
                if k < len(recvs):
                    recv_tb[recvs[k]] = tb
            continue
        for conn in sends:
            send_tb[conn] = new_tb(ch)
        for conn in recvs:
            recv_tb[conn] = new_tb(ch)
    for ins in instrs:
        if ins.send_conn:
            ins.tb = send_tb[ins.send_conn]
        elif ins.recv_conn:
            ins.tb = recv_tb[ins.recv_conn]
    _local_threadblocks(instrs, new_tb, len(tb_channel), budget)


def _local_threadblocks(instrs: list[_Instr], new_tb, nconn: int, budget: int | None) -> None:
    """Threadblocks of one rank's local steps: one per local channel, or,
    when those would pass ``budget``, the ``budget - nconn`` left (channels
    round-robin), or with none left each step on the connection
    threadblock of the first step on this rank that reads what it writes
    (a send after a copy: no wait across threadblocks), else of the one
    that wrote its input, else the least loaded one.  The order pass then
    places it among that threadblock's steps."""
    local = [ins for ins in instrs if ins.tb < 0]
    channels = list(dict.fromkeys(ins.local_ch for ins in local))  # first use first
    room = _local_room(nconn, len(channels), budget)
    if room is None or room > 0:
        slots = len(channels) if room is None else room
        tb_of: dict[int, int] = {}
        for k, ch in enumerate(channels):
            tb_of[ch] = tb_of[channels[k % slots]] if k >= slots else new_tb(ch)
        for ins in local:
            ins.tb = tb_of[ins.local_ch]
        return
    by_op = {p.op.op_id: ins for ins in instrs for p in ins.parts}
    reader: dict[int, _Instr] = {}
    for ins in instrs:
        for p in ins.parts:
            for d in p.op.deps:
                if d in by_op and d not in reader and by_op[d] is not ins:
                    reader[d] = ins
    load = Counter(ins.tb for ins in instrs if ins.tb >= 0)
    for ins in local:
        op = ins.parts[0].op
        near = reader.get(op.op_id)
        if near is None or near.tb < 0:
            near = next((by_op[d] for d in op.deps if d in by_op and by_op[d].tb >= 0), None)
        ins.tb = near.tb if near is not None else min(load, key=lambda tb: (load[tb], tb))
        load[ins.tb] += 1


def _order(sched: Schedule, parts: list[_Part], instrs: list[_Instr]) -> None:
    """Simulate with unbounded FIFOs; set ``pos`` = place in the global execution."""
    instr_of = {}
    for ins in instrs:
        for p in ins.parts:
            instr_of[p.pid] = ins.iid
    for ins in instrs:
        ins.deps = {instr_of[d] for p in ins.parts for d in p.deps} - {ins.iid}
    rounds = sched.rounds if len(sched.rounds) == len(sched.ops) else ()
    dependents: dict[int, list[int]] = defaultdict(list)
    waiting = {}
    for ins in instrs:
        waiting[ins.iid] = len(ins.deps)
        for d in ins.deps:
            dependents[d].append(ins.iid)
    arrived: set[int] = set()  # op ids whose send part ran
    fifo_next: dict[tuple, int] = defaultdict(int)  # recv-side connection -> next message no.
    sent_no: dict[int, int] = {}  # op id -> message number on its connection
    sent_count: dict[tuple, int] = defaultdict(int)
    # Messages leave every connection in program order, so receives (which
    # follow arrival order) also meet them in program order: with one part
    # per instruction the earliest pending part is always runnable.
    send_queue: dict[tuple, list[int]] = defaultdict(list)
    for ins in instrs:
        for p in ins.parts:
            if p.role == "send":
                send_queue[(ins.send_conn[0], ins.rank, p.op.dst.rank)].append(p.pid)
    for queue in send_queue.values():
        queue.sort()
    send_turn: dict[tuple, int] = defaultdict(int)

    def key(ins: _Instr) -> tuple[int, int]:
        if not rounds:
            return (0, ins.key)
        lone_recv = ins.recv_conn is not None and ins.send_conn is None
        return (2 * min(rounds[p.op.op_id] for p in ins.parts) + lone_recv, ins.key)

    heap = [(key(ins), ins.iid) for ins in instrs if waiting[ins.iid] == 0]
    heapq.heapify(heap)
    blocked: dict[tuple, list[int]] = defaultdict(list)
    done = 0
    while heap:
        _, iid = heapq.heappop(heap)
        ins = instrs[iid]
        recv, send = ins.recv, ins.send
        if recv is not None:
            conn = (ins.recv_conn[0], recv.op.src.rank, ins.rank)
            if recv.op.op_id not in arrived or sent_no[recv.op.op_id] != fifo_next[conn]:
                blocked[conn].append(iid)
                continue
        if send is not None:
            out = (ins.send_conn[0], ins.rank, send.op.dst.rank)
            if send_queue[out][send_turn[out]] != send.pid:
                blocked[out].append(iid)
                continue
        if recv is not None:
            fifo_next[(ins.recv_conn[0], recv.op.src.rank, ins.rank)] += 1
        ins.pos = done
        done += 1
        if send is not None:
            conn = (ins.send_conn[0], ins.rank, send.op.dst.rank)
            send_turn[conn] += 1
            sent_no[send.op.op_id] = sent_count[conn]
            sent_count[conn] += 1
            arrived.add(send.op.op_id)
            _wake(blocked, conn, heap, instrs, key)
        if recv is not None:
            _wake(blocked, (ins.recv_conn[0], recv.op.src.rank, ins.rank), heap, instrs, key)
        for dep in dependents[iid]:
            waiting[dep] -= 1
            if waiting[dep] == 0:
                heapq.heappush(heap, (key(instrs[dep]), dep))
    if done != len(instrs):
        raise LoweringStalled(f"lowering stalled after {done} of {len(instrs)} steps")


def _wake(blocked: dict, conn: tuple, heap: list, instrs: list[_Instr], key) -> None:
    for iid in blocked.pop(conn, ()):
        heapq.heappush(heap, (key(instrs[iid]), iid))


_SRC_IS_OPERAND = {StepKind.RECV_REDUCE_SEND, StepKind.RECV_REDUCE_COPY,
                   StepKind.RECV_REDUCE_COPY_SEND}


def _step_fields(ins: _Instr) -> tuple[Loc, Loc, int]:
    first = ins.parts[0].op
    if ins.kind is StepKind.SEND:
        return Loc(first.src.buffer, first.src.index), Loc(first.dst.buffer, first.dst.index), \
            first.count
    if ins.kind in _SRC_IS_OPERAND:
        operand = first.operand
        return Loc(operand.buffer, operand.index), Loc(first.dst.buffer, first.dst.index), \
            first.count
    if ins.kind is StepKind.RECV_COPY_SEND:
        loc = Loc(first.dst.buffer, first.dst.index)
        return loc, loc, first.count
    return Loc(first.src.buffer, first.src.index), Loc(first.dst.buffer, first.dst.index), \
        first.count


def _build_program(sched: Schedule, opts: LoweringOptions,
                   by_rank: list[list[_Instr]]) -> Program:
    ranks = []
    nchannels = 1
    ext = buffer_extents(sched.collective, sched.nchunks, sched.ngpus)
    scratch = _scratch_used(sched)
    for r, instrs in enumerate(by_rank):
        tbs = _rank_threadblocks(instrs)
        nchannels = max([nchannels] + [tb.channel + 1 for tb in tbs])
        ranks.append(RankProgram(r, ext[Buffer.INPUT], ext[Buffer.OUTPUT], scratch[r],
                                 tuple(tbs)))
    return Program(
        name=opts.name, collective=sched.collective, protocol=opts.protocol,
        nchannels=nchannels, nchunks=sched.nchunks, ngpus=sched.ngpus,
        inplace=opts.inplace and sched.inplace, outofplace=opts.outofplace and sched.outofplace,
        min_bytes=opts.min_bytes, max_bytes=opts.max_bytes, ranks=tuple(ranks))


def _scratch_used(sched: Schedule) -> list[int]:
    """Scratch chunks each rank uses: past the last one any slot of an op names
    on it (every slot lives on its own rank's part of the op)."""
    used = [0] * sched.ngpus
    for op in sched.ops:
        for slot in (op.src, op.dst, op.operand):
            if slot is not None and slot.buffer is Buffer.SCRATCH:
                used[slot.rank] = max(used[slot.rank], slot.index + op.count)
    return used


def _rank_threadblocks(instrs: list[_Instr]) -> list[Threadblock]:
    """Order each threadblock's steps, renumber threadblocks, encode deps as steps."""
    per_tb: dict[int, list[_Instr]] = defaultdict(list)
    for ins in sorted(instrs, key=lambda i: i.pos):
        per_tb[ins.tb].append(ins)
    # Deterministic threadblock ids: by (channel, send peer, recv peer, first step).
    def tb_sort_key(tb: int):
        first = per_tb[tb][0]
        send = next((i.send_conn for i in per_tb[tb] if i.send_conn), None)
        recv = next((i.recv_conn for i in per_tb[tb] if i.recv_conn), None)
        chan = (send or recv or (first.local_ch, -1))[0]
        return (chan, send[1] if send else -1, recv[1] if recv else -1, first.pos)

    order = sorted(per_tb, key=tb_sort_key)
    new_id = {old: k for k, old in enumerate(order)}
    by_iid = {i.iid: i for i in instrs}
    # First pass: how many nops precede each instruction; positions count them.
    wait_on: dict[int, list[tuple[int, int]]] = {}
    position: dict[int, int] = {}
    for old in order:
        pos = 0
        waited: dict[int, int] = {}  # other tb -> latest global pos already waited for
        for ins in per_tb[old]:
            latest: dict[int, _Instr] = {}
            for d in ins.deps:
                other = by_iid[d]
                tb = new_id[other.tb]
                if other.tb == ins.tb or other.pos <= waited.get(tb, -1):
                    continue
                if tb not in latest or other.pos > latest[tb].pos:
                    latest[tb] = other
            for tb, other in latest.items():
                waited[tb] = other.pos
            wait_on[ins.iid] = sorted((tb, other.iid) for tb, other in latest.items())
            pos += max(0, len(latest) - 1)
            position[ins.iid] = pos
            pos += 1
    targets = {iid for deps in wait_on.values() for _, iid in deps}
    tbs = []
    for old in order:
        steps: list[Step] = []
        chan, send, recv = per_tb[old][0].local_ch, None, None
        for ins in per_tb[old]:
            deps = [(tb, position[iid]) for tb, iid in wait_on[ins.iid]]
            steps += [Step(StepKind.NOP, Loc(Buffer.INPUT, None), Loc(Buffer.OUTPUT, None), 0,
                           dep) for dep in deps[1:]]
            src, dst, count = _step_fields(ins)
            steps.append(Step(ins.kind, src, dst, count, deps[0] if deps else None,
                              ins.iid in targets))
            if ins.send_conn:
                chan, send = ins.send_conn
            if ins.recv_conn:
                chan, recv = ins.recv_conn
        tbs.append(Threadblock(new_id[old], send, recv, chan, tuple(steps)))
    return tbs


#: How ``_limit_problem`` words a threadblock with too many steps.
_STEPS_PROBLEM = "steps >"


def _limit_problem(program: Program, opts: LoweringOptions) -> str | None:
    """The first runtime limit the program breaks, if any."""
    problem = _channels_problem(program.nchannels, opts)
    if problem is not None:
        return problem
    for rp in program.ranks:
        size = max(rp.input_chunks, rp.output_chunks, rp.scratch_chunks)
        if size > MAX_OFFSET + 1:
            return f"rank {rp.rank} has a buffer of {size} chunks > {MAX_OFFSET + 1} (int16 offsets)"
    for rp in program.ranks:
        problem = _threadblocks_problem(rp.rank, len(rp.threadblocks), opts)
        if problem is not None:
            return problem
        if len(rp.threadblocks) > MAX_DEPID + 1 and any(
                st.dep is not None and st.dep[0] > MAX_DEPID
                for tb in rp.threadblocks for st in tb.steps):
            return f"rank {rp.rank} depends on threadblock ids > {MAX_DEPID} (int8 depid)"
        for tb in rp.threadblocks:
            if any(st.count > MAX_COUNT for st in tb.steps):
                return f"rank {rp.rank} threadblock {tb.id} moves more than {MAX_COUNT} chunks in a step"
            if len(tb.steps) > MAX_STEPS:
                return (f"rank {rp.rank} threadblock {tb.id} has {len(tb.steps)} "
                        f"{_STEPS_PROBLEM} {MAX_STEPS}")
        nodes = 1 + program.ngpus + len(rp.threadblocks) + sum(len(t.steps) for t in rp.threadblocks)
        if nodes >= MAX_NODES:
            return f"rank {rp.rank} needs {nodes} XML nodes >= {MAX_NODES}"
    return None


__all__ = ["NAME", "STRATEGIES", "LoweringOptions", "LoweringStalled", "lower_to_program"]
_ = Collective
