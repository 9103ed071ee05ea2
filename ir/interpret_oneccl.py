"""Symbolic interpreter and verifier of oneCCL thread schedules.

Input: a ``ThreadSchedule`` (from ``colc.backends.oneccl_reader`` or the
oneCCL lowering).  Output: ``Diagnostic`` records (``ThreadDiagnostic``,
printed ``rank R thread T instr I: message``) for

* structure: real buffer extents, out-of-bounds ranges, message matching by
  ``(sender, receiver, tag)`` (unmatched, duplicate, size mismatch), sync
  targets that wait on themselves;
* deadlock, under the bounded-buffering model of ``docs/oneccl-xml.md``
  (a send completes eagerly while fewer than ``eager_depth`` of its thread's
  messages to that receiver are unconsumed, otherwise it waits until the
  matching receive is posted) and under unbounded buffering;
* data races: two accesses to the same chunk of a rank, one a write, not
  ordered by happens-before (program order, send -> matching receive,
  completed instruction -> satisfied ``sync``), found with vector clocks;
* the postcondition of the collective for every declared aliasing
  (in-place and/or out-of-place), with symbolic values: a chunk holds the set
  of input chunks ``(rank, index)`` summed into it; reducing the same
  contribution twice or reading an unwritten chunk is an error.

Algorithm: threads run until none can progress, in a fixed order.  Every
blocking condition is monotone (a message once sent stays until its unique
receiver takes it, a thread's progress only grows, a posted receive stays
posted) and matching is by tag, so no enabled instruction is ever disabled:
whether the schedule deadlocks, the happens-before relation and (for a
race-free schedule) the final data are the same in every interleaving, and
one run decides them.  Cost: O(I * G) for I instructions and G threads
(vector clocks of length G).

Example
-------
>>> from colc.ir.core import Collective
>>> from colc.ir.oneccl import Instr, InstrKind, RankThreads, Region, Thread, ThreadSchedule
>>> cp = Instr(InstrKind.COPY, src=Region.INPUT, src_off=0, dst=Region.OUTPUT, dst_off=0, count=1)
>>> one = ThreadSchedule("c", Collective.ALLREDUCE, 1, 1, False, True, 0, 0, 2,
...                      (RankThreads(0, 1, 1, 0, (Thread(0, 0, 0, (cp,)),)),))
>>> verify_thread_schedule(one)
[]
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from colc.ir.core import Buffer, Collective, buffer_extents, inplace_alias
from colc.ir.diagnostics import Diagnostic, Severity
from colc.ir.oneccl import Instr, InstrKind, Region, ThreadSchedule

#: At most this many diagnostics of one kind are reported per run.
MAX_PER_KIND = 12

#: A symbolic chunk value: the input chunks (rank, index) summed into it;
#: None is "never written".
Value = frozenset[tuple[int, int]] | None

#: A memory cell: (rank, buffer or ("tmp", thread), chunk index).
_Cell = tuple[int, object, int]


@dataclass(frozen=True, slots=True)
class ThreadDiagnostic(Diagnostic):
    """A ``Diagnostic`` located by rank, thread (``tb``) and instruction (``step``).

    Examples
    --------
    >>> str(ThreadDiagnostic("recv never matched", rank=1, tb=0, step=3))
    'rank 1 thread 0 instr 3: recv never matched'
    """

    @staticmethod
    def labels() -> tuple[str, str]:
        """A oneCCL location is a thread and an instruction."""
        return "thread", "instr"


def _err(msg: str, rank: int | None = None, thread: int | None = None,
         instr: int | None = None) -> ThreadDiagnostic:
    return ThreadDiagnostic(msg, rank, thread, instr, Severity.ERROR)


def _warn(msg: str, rank: int | None = None) -> ThreadDiagnostic:
    return ThreadDiagnostic(msg, rank, None, None, Severity.WARNING)


# --------------------------------------------------------------------------- static checks


def _extent(sched: ThreadSchedule, rank: int, thread: int, region: Region) -> int:
    rt = sched.ranks[rank]
    if region is Region.INPUT:
        return rt.input_chunks
    if region is Region.OUTPUT:
        return rt.output_chunks
    if region is Region.SCRATCH:
        return rt.scratch_chunks
    return rt.threads[thread].tmp_chunks


def check_thread_schedule(sched: ThreadSchedule) -> list[ThreadDiagnostic]:
    """Structural checks that need no execution.

    Parameters
    ----------
    sched : ThreadSchedule

    Returns
    -------
    list of ThreadDiagnostic
        Empty when the schedule is well-formed.  Deadlock, race and
        postcondition checks need a well-formed schedule.
    """
    out: list[ThreadDiagnostic] = []
    n = sched.nranks
    if len(sched.ranks) != n or any(rt.rank != r for r, rt in enumerate(sched.ranks)):
        return [_err(f"ranks must be 0..{n - 1} in order")]
    if sched.nchunks % n:
        return [_err(f"nchunks={sched.nchunks} is not a multiple of nranks={n}")]
    if not (sched.inplace or sched.outofplace):
        out.append(_err("schedule is declared neither in-place nor out-of-place"))
    real = buffer_extents(sched.collective, sched.nchunks, n)
    for rt in sched.ranks:
        for name, declared, want in (("input_chunks", rt.input_chunks, real[Buffer.INPUT]),
                                     ("output_chunks", rt.output_chunks, real[Buffer.OUTPUT])):
            if declared != want:
                out.append(_err(f"{name}={declared}, but {sched.collective.value} of "
                                f"{sched.nchunks} chunks on {n} ranks has {want}", rt.rank))
    sends: dict[tuple[int, int, int], tuple[int, int, int, int]] = {}
    recvs: dict[tuple[int, int, int], tuple[int, int, int, int]] = {}
    for rt in sched.ranks:
        for th in rt.threads:
            for i, ins in enumerate(th.instrs):
                out.extend(_check_instr(sched, rt.rank, th.id, i, ins, sends, recvs))
    for key, (r, t, i, cnt) in sends.items():
        got = recvs.get(key)
        if got is None:
            out.append(_err(f"send to rank {key[1]} tag {key[2]} is never received", r, t, i))
        elif got[3] != cnt:
            out.append(_err(f"send of {cnt} chunks to rank {key[1]} tag {key[2]} is received "
                            f"as {got[3]} chunks by thread {got[1]} instr {got[2]}", r, t, i))
    for key, (r, t, i, _) in recvs.items():
        if key not in sends:
            out.append(_err(f"recv from rank {key[0]} tag {key[2]} is never sent", r, t, i))
    return out


def _check_instr(sched: ThreadSchedule, rank: int, tid: int, i: int, ins: Instr,
                 sends: dict[tuple[int, int, int], tuple[int, int, int, int]],
                 recvs: dict[tuple[int, int, int], tuple[int, int, int, int]]
                 ) -> list[ThreadDiagnostic]:
    out: list[ThreadDiagnostic] = []
    rt = sched.ranks[rank]
    if ins.kind is InstrKind.SYNC:
        wt, wi = ins.wait_thread, ins.wait_instr
        if wt is None or wi is None or not 0 <= wt < len(rt.threads) \
                or not 0 <= wi < len(rt.threads[wt].instrs):
            out.append(_err(f"sync on missing thread {wt} instr {wi}", rank, tid, i))
        elif wt == tid and wi >= i:
            out.append(_err(f"sync waits for its own thread's instr {wi}, which cannot "
                            "have completed", rank, tid, i))
        return out
    if ins.count < 1:
        out.append(_err(f"{ins.kind.value} of {ins.count} chunks", rank, tid, i))
    for loc in (ins.reads, ins.writes):
        if loc is None:
            continue
        region, off = loc
        ext = _extent(sched, rank, tid, region)
        if off < 0 or off + ins.count > ext:
            out.append(_err(f"{ins.kind.value} touches {region.value}[{off}..{off + ins.count - 1}]"
                            f" but {region.value} has {ext} chunks", rank, tid, i))
    if ins.kind in (InstrKind.SEND, InstrKind.RECV):
        peer, tag = ins.peer, ins.tag
        if peer is None or tag is None or not 0 <= peer < sched.nranks or peer == rank:
            out.append(_err(f"{ins.kind.value} with invalid peer {peer}", rank, tid, i))
            return out
        is_send = ins.kind is InstrKind.SEND
        key = (rank, peer, tag) if is_send else (peer, rank, tag)
        table = sends if is_send else recvs
        if key in table:
            r, t, j, _ = table[key]
            what = f"to rank {peer}" if is_send else f"from rank {peer}"
            out.append(_err(f"{ins.kind.value} {what} reuses tag {tag} of thread {t} instr {j}",
                            rank, tid, i))
        else:
            table[key] = (rank, tid, i, ins.count)
    return out


# --------------------------------------------------------------------------- execution


def _expected(coll: Collective, rank: int, k: int, n: int, cf: int) -> Value:
    if coll is Collective.ALLGATHER:
        return frozenset({(k // cf, k % cf)})
    if coll is Collective.ALLTOALL:
        return frozenset({(k // cf, rank * cf + k % cf)})
    if coll is Collective.REDUCESCATTER:
        return frozenset((q, rank * cf + k) for q in range(n))
    return frozenset((q, k) for q in range(n))


def _show(v: Value) -> str:
    """Human form of a symbolic value, e.g. ``i0[2]+i1[2]`` (as ``colc.ir.interpret``)."""
    if v is None:
        return "uninitialised"
    if len(v) > 8:
        return f"a sum of {len(v)} contributions"
    return "+".join(f"i{q}[{k}]" for q, k in sorted(v))


class _Diags:
    """Collects diagnostics, at most MAX_PER_KIND per kind, then a summary."""

    def __init__(self, suffix: str) -> None:
        self.suffix = suffix
        self.items: list[ThreadDiagnostic] = []
        self.counts: dict[str, int] = {}

    def add(self, kind: str, msg: str, rank: int | None = None, thread: int | None = None,
            instr: int | None = None) -> None:
        c = self.counts.get(kind, 0) + 1
        self.counts[kind] = c
        if c <= MAX_PER_KIND:
            self.items.append(_err(msg + self.suffix, rank, thread, instr))

    def finish(self) -> list[ThreadDiagnostic]:
        for kind, c in self.counts.items():
            if c > MAX_PER_KIND:
                self.items.append(_err(f"{c - MAX_PER_KIND} more {kind} diagnostics{self.suffix}"))
        return self.items


class _Run:
    """One execution of a well-formed schedule."""

    def __init__(self, sched: ThreadSchedule, inplace: bool, depth: int | None,
                 local: bool = False) -> None:
        self.s = sched
        self.local = local
        self.inplace = inplace
        self.depth = depth
        self.cf = sched.nchunks // sched.nranks
        self.where: list[tuple[int, int]] = []
        self.gid: dict[tuple[int, int], int] = {}
        for rt in sched.ranks:
            for th in rt.threads:
                self.gid[(rt.rank, th.id)] = len(self.where)
                self.where.append((rt.rank, th.id))
        g_all = len(self.where)
        self.code = [sched.ranks[r].threads[t].instrs for r, t in self.where]
        self.pc = [0] * g_all
        # Clock index of each thread: global, or (local) its place on its rank.
        if local:
            place: dict[int, int] = {}
            self.idx = []
            for r, _ in self.where:
                self.idx.append(place.get(r, 0))
                place[r] = place.get(r, 0) + 1
            self.vc = [[0] * place[r] for r, _ in self.where]
        else:
            self.idx = list(range(g_all))
            self.vc = [[0] * g_all for _ in range(g_all)]
        self.snap: dict[tuple[int, int], list[int]] = {}
        self.targets: set[tuple[int, int]] = set()
        self.recv_at: dict[tuple[int, int, int], tuple[int, int]] = {}
        for g, (r, _) in enumerate(self.where):
            for i, ins in enumerate(self.code[g]):
                if ins.kind is InstrKind.SYNC:
                    self.targets.add((self.gid[(r, ins.wait_thread or 0)], ins.wait_instr or 0))
                elif ins.kind is InstrKind.RECV:
                    self.recv_at[(ins.peer or 0, r, ins.tag or 0)] = (g, i)
        self.mailbox: dict[tuple[int, int, int], tuple[list[Value], list[int], int]] = {}
        self.inflight: dict[tuple[int, int], int] = {}
        self.mem: dict[_Cell, Value] = {}
        self.last_write: dict[_Cell, tuple[int, int, int]] = {}
        self.reads: dict[_Cell, dict[int, tuple[int, int]]] = {}
        mode = "in-place" if inplace else "out-of-place"
        self.diags = _Diags(f" ({mode})")
        for rt in sched.ranks:
            for k in range(rt.input_chunks):
                self.mem[self._cell(rt.rank, 0, Region.INPUT, k)] = frozenset({(rt.rank, k)})

    # -- memory ---------------------------------------------------------------
    def _cell(self, rank: int, thread: int, region: Region, k: int) -> _Cell:
        buf = region.buffer
        if buf is None:
            return (rank, ("tmp", thread), k)
        if self.inplace:
            buf, k = inplace_alias(self.s.collective, rank, self.s.nchunks, self.s.nranks, buf, k)
        return (rank, buf, k)

    def _access(self, g: int, i: int, region: Region, off: int, count: int,
                write: bool, values: list[Value] | None = None) -> list[Value]:
        rank, tid = self.where[g]
        vc, idx = self.vc[g], self.idx
        me = (g, vc[idx[g]], i)
        out: list[Value] = []
        for j in range(count):
            cell = self._cell(rank, tid, region, off + j)
            lw = self.last_write.get(cell)
            if lw is not None and lw[0] != g and vc[idx[lw[0]]] < lw[1]:
                self._race(g, i, region, off + j, write, lw, True)
            if write:
                for h, (clock, hi) in self.reads.get(cell, {}).items():
                    if h != g and vc[idx[h]] < clock:
                        self._race(g, i, region, off + j, True, (h, clock, hi), False)
                self.last_write[cell] = me
                self.reads[cell] = {}
                self.mem[cell] = values[j] if values is not None else None
            else:
                self.reads.setdefault(cell, {})[g] = (vc[idx[g]], i)
                value = self.mem.get(cell)
                if value is None:
                    self.diags.add("uninitialised-read", f"reads uninitialised "
                                   f"{region.value}[{off + j}]", rank, tid, i)
                out.append(value)
        return out

    def _race(self, g: int, i: int, region: Region, k: int, write: bool,
              other: tuple[int, int, int], other_writes: bool) -> None:
        rank, tid = self.where[g]
        oth = self.where[other[0]][1]
        mine = "write" if write else "read"
        theirs = "write" if other_writes else "read"
        self.diags.add("race", f"data race on {region.value}[{k}]: {mine} here and {theirs} by "
                       f"thread {oth} instr {other[2]}, not ordered", rank, tid, i)

    # -- execution ------------------------------------------------------------
    def run(self) -> bool:
        """Run to completion or deadlock; return whether every thread finished."""
        progress = True
        while progress:
            progress = False
            for g in range(len(self.where)):
                while self.pc[g] < len(self.code[g]) and self._step(g):
                    progress = True
        return all(self.pc[g] == len(self.code[g]) for g in range(len(self.where)))

    def _step(self, g: int) -> bool:
        rank, _ = self.where[g]
        i = self.pc[g]
        ins = self.code[g][i]
        vc = self.vc[g]
        me = self.idx[g]
        k = ins.kind
        if k is InstrKind.SYNC:
            tg = self.gid[(rank, ins.wait_thread or 0)]
            if self.pc[tg] <= (ins.wait_instr or 0):
                return False
            _join(vc, self.snap[(tg, ins.wait_instr or 0)])
            vc[me] += 1
        elif k is InstrKind.SEND:
            if not self._can_send(g, rank, ins):
                return False
            vc[me] += 1
            vals = self._access(g, i, ins.src, ins.src_off, ins.count, False)
            key = (rank, ins.peer or 0, ins.tag or 0)
            # rank-local clocks carry no send -> receive edge
            self.mailbox[key] = (vals, None if self.local else list(vc), g)
            slot = (g, ins.peer or 0)
            self.inflight[slot] = self.inflight.get(slot, 0) + 1
        elif k is InstrKind.RECV:
            key = (ins.peer or 0, rank, ins.tag or 0)
            msg = self.mailbox.pop(key, None)
            if msg is None:
                return False
            vals, clock, sender = msg
            self.inflight[(sender, rank)] -= 1
            if clock is not None:
                _join(vc, clock)
            vc[me] += 1
            self._access(g, i, ins.dst, ins.dst_off, ins.count, True, vals)
        elif k is InstrKind.COPY:
            vc[me] += 1
            vals = self._access(g, i, ins.src, ins.src_off, ins.count, False)
            self._access(g, i, ins.dst, ins.dst_off, ins.count, True, vals)
        else:
            vc[me] += 1
            a = self._access(g, i, ins.src, ins.src_off, ins.count, False)
            b = self._access(g, i, ins.dst, ins.dst_off, ins.count, False)
            self._access(g, i, ins.dst, ins.dst_off, ins.count, True,
                         [self._combine(g, i, x, y) for x, y in zip(a, b)])
        self.pc[g] = i + 1
        if (g, i) in self.targets:
            self.snap[(g, i)] = list(vc)
        return True

    def _can_send(self, g: int, rank: int, ins: Instr) -> bool:
        if self.depth is None or self.inflight.get((g, ins.peer or 0), 0) < self.depth:
            return True
        rg, ri = self.recv_at[(rank, ins.peer or 0, ins.tag or 0)]
        return self.pc[rg] == ri  # rendezvous: the matching receive is posted

    def _combine(self, g: int, i: int, a: Value, b: Value) -> Value:
        rank, tid = self.where[g]
        if a is None or b is None:
            return None  # reported by the read
        if a & b:
            self.diags.add("double-reduction", f"reduces a contribution twice: {_show(b)} (+) "
                           f"{_show(a)}", rank, tid, i)
        return a | b

    # -- results --------------------------------------------------------------
    def deadlock(self, label: str) -> list[ThreadDiagnostic]:
        out = []
        for g, (rank, tid) in enumerate(self.where):
            i = self.pc[g]
            if i < len(self.code[g]):
                out.append(_err(f"deadlock ({label}): blocked in "
                                f"{self._blocked(g, rank, self.code[g][i])}", rank, tid, i))
        return out

    def _blocked(self, g: int, rank: int, ins: Instr) -> str:
        if ins.kind is InstrKind.SYNC:
            tg = self.gid[(rank, ins.wait_thread or 0)]
            return (f"sync on thread {ins.wait_thread} instr {ins.wait_instr}, which is "
                    f"stuck at instr {self.pc[tg]}")
        if ins.kind is InstrKind.RECV:
            return f"recv from rank {ins.peer} tag {ins.tag} waits for a message never sent"
        rg, ri = self.recv_at[(rank, ins.peer or 0, ins.tag or 0)]
        rr, rt = self.where[rg]
        return (f"send to rank {ins.peer} tag {ins.tag} has {self.depth} unreceived messages "
                f"ahead and its receiver (thread {rt} instr {ri}) is stuck at instr "
                f"{self.pc[rg]}")

    def postcondition(self) -> list[ThreadDiagnostic]:
        coll = self.s.collective
        if coll not in (Collective.ALLGATHER, Collective.REDUCESCATTER, Collective.ALLREDUCE,
                        Collective.ALLTOALL):
            return [_warn(f"postcondition of {coll.value} is not checked (no root in the "
                          "format)")]
        n = self.s.nranks
        for rt in self.s.ranks:
            for k in range(rt.output_chunks):
                got = self.mem.get(self._cell(rt.rank, 0, Region.OUTPUT, k))
                want = _expected(coll, rt.rank, k, n, self.cf)
                if got != want:
                    self.diags.add("postcondition", f"postcondition of {coll.value} fails: "
                                   f"output[{k}] holds {_show(got)}, expected {_show(want)}",
                                   rt.rank)
        return self.diags.finish()


def _join(into: list[int], other: list[int]) -> None:
    for h, c in enumerate(other):
        if c > into[h]:
            into[h] = c


# --------------------------------------------------------------------------- entry points


def interpret_thread_schedule(
    sched: ThreadSchedule, *, inplace: bool, eager_depth: int | None
) -> tuple[bool, list[ThreadDiagnostic]]:
    """Execute a well-formed schedule once under one aliasing and buffering.

    Parameters
    ----------
    sched : ThreadSchedule
        Must pass ``check_thread_schedule``.
    inplace : bool
        Apply the collective's in-place aliasing.
    eager_depth : int or None
        Eager messages per (sender thread, receiver rank); None = unbounded.

    Returns
    -------
    (bool, list of ThreadDiagnostic)
        Whether all threads finished, and the deadlock, race and
        postcondition diagnostics (postcondition only when finished).
    """
    # Clocks over each rank's own threads first (a subset of happens-before,
    # memory linear in the threads): no race there means none at all; only a
    # race found is checked again with global clocks (memory quadratic in the
    # threads: 25,000 threads of a 2500-rank file would need gigabytes).
    run = _Run(sched, inplace, eager_depth, local=True)
    done = run.run()
    if run.diags.counts.get("race"):
        run = _Run(sched, inplace, eager_depth)
        done = run.run()
    if not done:
        label = "unbounded buffering" if eager_depth is None else f"eager depth {eager_depth}"
        return False, run.deadlock(label) + run.diags.finish()
    return True, run.postcondition()


def verify_thread_schedule(sched: ThreadSchedule) -> list[ThreadDiagnostic]:
    """All checks: structure, then deadlock, races and postcondition.

    Execution runs for every declared aliasing (in-place, out-of-place) at
    the schedule's ``eager_depth``; when that deadlocks it is rerun with
    unbounded buffering to tell "needs more buffering" from "deadlocks
    regardless", and the data checks come from the unbounded run.

    Parameters
    ----------
    sched : ThreadSchedule

    Returns
    -------
    list of ThreadDiagnostic
        Empty when the schedule is correct.
    """
    diags = check_thread_schedule(sched)
    if any(d.is_error for d in diags):
        return diags
    modes = [m for m, on in ((True, sched.inplace), (False, sched.outofplace)) if on]
    out: list[ThreadDiagnostic] = list(diags)
    for inplace in modes:
        done, found = interpret_thread_schedule(sched, inplace=inplace,
                                                eager_depth=sched.eager_depth)
        if not done:
            _extend_unique(out, found)
            done, found = interpret_thread_schedule(sched, inplace=inplace, eager_depth=None)
        _extend_unique(out, found)
    return out


def _extend_unique(out: list[ThreadDiagnostic], new: Iterable[ThreadDiagnostic]) -> None:
    seen = {str(d) for d in out}
    for d in new:
        if str(d) not in seen:
            seen.add(str(d))
            out.append(d)
