"""Symbolic interpreter of a threadblock ``Program`` under the MSCCL runtime's semantics.

Implements ``shared/reference/msccl-xml-runtime.md`` section 4 (with section 3
for what each step does): the program is folded into kernel transmissions
(``colc.ir.load_checks``, section 4.4), then executed with

* one call per chunk (``maxAllowedCount`` = 1, the large-message case, 4.5);
  a local step of cnt >= 2 whose source overlaps its destination at another
  offset, which a call of several chunks runs as one racing range, is
  reported where it is compiled (``_overlap``);
* one FIFO per (channel, sender, receiver) holding ``fifo_depth`` calls
  (None = unbounded), matched in order; ``rcs``/``rrs``/``rrcs`` need an
  incoming message and outgoing space at once (4.3, 4.8);
* monotone flags: a dependency on (b, s) is met once tb b published a flag
  >= s; only ``hasdep`` transmissions publish (4.6);
* symbolic data: input chunk k of rank r is the contribution (r, k); a value
  is a set of contributions, reducing one twice or reading uninitialised
  memory is an error; in-place aliasing per section 4.2; every access is
  checked against the real buffer extents;
* race detection with vector clocks over happens-before = program order +
  send -> matching receive + flag write -> satisfied wait (the first
  publication that satisfies the wait, so the result holds for every timing).
  Memory is per rank and only the rank's own threadblocks touch it, so the
  first run keeps clocks over the rank's threadblocks only and leaves the
  send -> receive edges out (a subset of happens-before: what it orders is
  ordered); only when it finds a race is the run repeated with clocks over
  every threadblock and every edge, whose findings are the answer.

Scheduling is deterministic (a ready queue seeded in rank/tb order, each tb
runs until it blocks).  Every enabled action stays enabled until taken
(unique FIFO ends, monotone flags), so one order decides deadlock.

Input: a ``Program``.  Output: a list of ``Diagnostic`` (deadlock,
unconsumed messages, cnt mismatches, races, overlapping ranges,
uninitialised reads, double reductions, bounds, postcondition failures).
Complexity: O(C * (1 + T)) for C calls (chunks moved) and T threadblocks per rank (vector-clock joins are
numpy operations of length T, one per satisfied dependency); a program with a
race reported costs a second run with T the threadblocks of every rank.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import deque

import numpy as np

from colc.errors import InternalError
from colc.ir.core import Buffer, Collective, buffer_extents, inplace_alias, runtime_bytes
from colc.ir.diagnostics import Diagnostic, error
from colc.ir.load_checks import (
    USED_FIELDS,
    LoadedProgram,
    Transmission,
    load_program,
    sort_diagnostics,
)
from colc.ir.program import Program, StepKind

_CAP = 20  # findings reported per category before summarising

_UNINIT = "uninit"  # memory never written
_POISON = "poison"  # value produced after an earlier error (no further reports)

_LETTER = {Buffer.INPUT: "i", Buffer.OUTPUT: "o", Buffer.SCRATCH: "s"}

Value = tuple[tuple[int, int], ...] | str


def _reduce(a: Value, b: Value) -> tuple[Value, bool]:
    """Combine two symbolic values; the flag says a contribution appeared twice."""
    if isinstance(a, str) or isinstance(b, str):
        return _POISON, False
    if len(a) == 1 and len(b) == 1 and a[0][0] == b[0][0]:
        if a[0][1] & b[0][1]:
            return _POISON, True
        return ((a[0][0], a[0][1] | b[0][1]),), False
    merged = dict(a)
    for k, m in b:
        old = merged.get(k, 0)
        if old & m:
            return _POISON, True
        merged[k] = old | m
    return tuple(sorted(merged.items())), False


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def describe(value: Value) -> str:
    """Human form of a symbolic value, e.g. ``i0[2]+i1[2]``."""
    if value == _UNINIT:
        return "uninitialised"
    if value == _POISON:
        return "garbage (after an earlier error)"
    terms = []
    for k, mask in value:
        ranks = [r for r in range(mask.bit_length()) if mask >> r & 1]
        if len(ranks) <= 4:
            terms.extend(f"i{r}[{k}]" for r in ranks)
        else:
            terms.append(f"sum of i[{k}] over {len(ranks)} ranks")
    return "+".join(terms)


class _Tx:
    """A transmission compiled against one rank's memory layout."""

    __slots__ = ("t", "kind", "count", "src", "dst", "ops", "bad", "sends", "recvs")

    def __init__(self, t: Transmission, src: int, dst: int, ops: tuple[int, ...], bad: bool):
        self.t = t
        self.kind = t.kind
        self.count = t.count
        self.src = src
        self.dst = dst
        self.ops = ops
        self.bad = bad
        self.sends = t.kind.sends
        self.recvs = t.kind.receives


class _TB:
    """Mutable execution state of one threadblock."""

    __slots__ = ("rank", "tid", "cid", "id", "txs", "pc", "call", "deps_done", "clock", "base",
                 "inq", "outq", "inkey", "outkey", "flags", "snaps", "queued", "wait", "mem")

    def __init__(self, rank: int, tid: int, cid: int, tbid: int, txs: list[_Tx],
                 base: np.ndarray):
        self.rank = rank
        self.tid = tid
        self.cid = cid  # index in the clocks: tid, or the place in its rank (local clocks)
        self.id = tbid
        self.txs = txs
        self.pc = 0
        self.call = 0
        self.deps_done = False
        self.clock = 0
        self.base = base
        self.inq: deque | None = None
        self.outq: deque | None = None
        self.inkey: tuple[int, int, int] | None = None
        self.outkey: tuple[int, int, int] | None = None
        self.flags: list[int] = []
        self.snaps: list[tuple[np.ndarray, int] | None] = []
        self.queued = False
        self.wait: tuple = ()
        self.mem: _Mem | None = None


class _Mem:
    """Physical chunks of one rank with race-detection metadata."""

    __slots__ = ("rank", "vals", "writes", "reads", "init_lo", "init_hi", "layout")

    def __init__(self, rank: int, size: int, init_lo: int, init_hi: int):
        self.rank = rank
        self.vals: list = [_UNINIT] * size
        self.vals[init_lo:init_hi] = [None] * (init_hi - init_lo)
        self.writes: list = [None] * size
        self.reads: list = [None] * size
        self.init_lo = init_lo
        self.init_hi = init_hi
        self.layout: dict[Buffer, tuple[int, int]] = {}

    def name(self, p: int) -> str:
        """Logical name of physical chunk ``p`` (the input name wins on an alias)."""
        for buf in (Buffer.INPUT, Buffer.OUTPUT, Buffer.SCRATCH):
            base, n = self.layout[buf]
            if base <= p < base + n:
                return f"{_LETTER[buf]}[{p - base}]"
        raise InternalError(f"physical chunk {p} of rank {self.rank} has no name")


class _Interpreter:
    """One run of a loaded program in one mode."""

    def __init__(self, loaded: LoadedProgram, fifo_depth: int | None, inplace: bool,
                 local: bool = False, data: bool = True) -> None:
        self.p = loaded.program
        self.cap = fifo_depth
        self.inplace = inplace
        self.local = local  # clocks over a rank's threadblocks, no send -> receive edges
        self.data = data  # False: messages and flags only (deadlock), no values or races
        # what a token game reports: the findings about messages and flags
        self.only = None if data else frozenset({"deadlock", "unconsumed"})
        self.diags: list[Diagnostic] = []
        self.counts: dict[str, int] = {}
        self.seen: set = set()
        self.mode = f"{'in-place' if inplace else 'out-of-place'}, FIFO depth " \
                    f"{'unbounded' if fifo_depth is None else fifo_depth}"
        self.tbs: list[_TB] = []
        self.by_rank: list[dict[int, _TB]] = []
        self.clock_owner: list[list[_TB]] = []  # per rank: the tb of each clock index
        self.fifos: dict[tuple[int, int, int], deque] = {}
        self.flag_waiters: dict[int, list[_TB]] = {}
        self.mems: list[_Mem] = []
        self.layouts: list[dict[Buffer, tuple[int, int]]] = []
        self._build(loaded)
        self.receivers = {tb.inkey: tb for tb in self.tbs if tb.inkey is not None}
        self.snap_users = self._snap_users()

    def _snap_users(self) -> list[list[int]]:
        """Per tb, how many dependencies each of its flag publications satisfies.

        A dependency on ``(b, s)`` is met by the first publication of ``b``
        with a flag ``>= s``; the flags a tb publishes are fixed by its
        program, so this is known before running.  Publications nobody waits
        for keep no clock snapshot, and a snapshot is dropped once its last
        waiter has joined it (memory O(outstanding waits * T), not
        O(publications * T)).
        """
        flags = [[tx.t.flag for tx in tb.txs if tx.t.has_dep] for tb in self.tbs]
        users = [[0] * len(f) for f in flags]
        for tb in self.tbs:
            tbs = self.by_rank[tb.rank]
            for tx in tb.txs:
                for b, s, _pos in tx.t.deps:
                    target = tbs.get(b)
                    if target is not None:
                        i = bisect_left(flags[target.tid], s)
                        if i < len(users[target.tid]):
                            users[target.tid][i] += 1
        return users

    # ----------------------------------------------------------------- setup
    def report(self, category: str, d: Diagnostic) -> None:
        if self.only is not None and category not in self.only:
            return
        n = self.counts.get(category, 0)
        self.counts[category] = n + 1
        if n < _CAP:
            self.diags.append(d)

    def _build(self, loaded: LoadedProgram) -> None:
        p = self.p
        ext = buffer_extents(p.collective, p.nchunks, p.ngpus)
        total = sum(len(row) for row in loaded.tbs)
        calls = max((sum(t.count for t in ftb.transmissions) for row in loaded.tbs
                     for ftb in row), default=0)
        # a clock counts its tb's calls: int16 halves the O(T) arrays when it fits
        dtype = np.int16 if calls < np.iinfo(np.int16).max else np.int32
        zero = np.zeros(total, dtype=dtype)
        zero.flags.writeable = False
        owners: list[_TB] = []
        for rp, row in zip(p.ranks, loaded.tbs):
            layout, mem = self._layout(rp.rank, ext, rp.scratch_chunks)
            self.layouts.append(layout)
            self.mems.append(mem)
            if self.local:
                zero = np.zeros(len(row), dtype=dtype)
                zero.flags.writeable = False
                owners = []
            tbs = {}
            for ftb in row:
                txs = [self._compile(rp.rank, ftb.id, t, layout) for t in ftb.transmissions]
                tb = _TB(rp.rank, len(self.tbs), len(owners), ftb.id, txs, zero)
                owners.append(tb)
                tb.mem = mem
                if ftb.send is not None:
                    tb.outkey = (ftb.channel, rp.rank, ftb.send)
                    tb.outq = self.fifos.setdefault(tb.outkey, deque())
                if ftb.recv is not None:
                    tb.inkey = (ftb.channel, ftb.recv, rp.rank)
                    tb.inq = self.fifos.setdefault(tb.inkey, deque())
                self.tbs.append(tb)
                tbs[ftb.id] = tb
            self.by_rank.append(tbs)
            self.clock_owner.append(owners)

    def _layout(self, rank: int, ext: dict[Buffer, int], scratch: int
                ) -> tuple[dict[Buffer, tuple[int, int]], _Mem]:
        """Map each logical buffer to (physical base, real extent)."""
        p = self.p
        region = {Buffer.INPUT: 0, Buffer.OUTPUT: ext[Buffer.INPUT],
                  Buffer.SCRATCH: ext[Buffer.INPUT] + ext[Buffer.OUTPUT]}
        size = region[Buffer.SCRATCH] + max(scratch, 0)
        sizes = {Buffer.INPUT: ext[Buffer.INPUT], Buffer.OUTPUT: ext[Buffer.OUTPUT],
                 Buffer.SCRATCH: max(scratch, 0)}
        layout = {}
        for buf in Buffer:
            canon, idx0 = (inplace_alias(p.collective, rank, p.nchunks, p.ngpus, buf, 0)
                           if self.inplace else (buf, 0))
            layout[buf] = (region[canon] + idx0, sizes[buf])
        lo = layout[Buffer.INPUT][0]
        mem = _Mem(rank, size, lo, lo + sizes[Buffer.INPUT])
        mem.layout = layout
        return layout, mem

    def _compile(self, rank: int, tbid: int, t: Transmission,
                 layout: dict[Buffer, tuple[int, int]]) -> _Tx:
        use_src, use_dst = USED_FIELDS[t.kind]
        bad = False
        phys = {}
        locs = []
        if use_src and t.kind is StepKind.REDUCE:
            locs += [("src", t.src.buffer, off) for off in t.operands]
        elif use_src:
            locs.append(("src", t.src.buffer, t.src.offset))
        if use_dst:
            locs.append(("dst", t.dst.buffer, t.dst.offset))
        for name, buf, off in locs:
            base, n = layout[buf]
            if t.count == 0:
                continue
            if off is None or off < 0 or off + t.count > n:
                bad = True
                shown = -1 if off is None else off
                self.report("bounds", error(
                    f"{name} {_LETTER[buf]}[{shown}..{shown + t.count - 1}] outside the real "
                    f"extent {n} of {_LETTER[buf]} ({self.p.collective.value})",
                    rank, tbid, t.position))
            else:
                phys.setdefault(name, []).append(base + off)
        src = phys.get("src", [0])[0]
        dst = phys.get("dst", [0])[0]
        ops = tuple(phys.get("src", ())) if t.kind is StepKind.REDUCE else ()
        if t.count >= 2 and not bad and use_src and use_dst:
            sources = [(buf, off) for name, buf, off in locs if name == "src"]
            for (buf, off), p in zip(sources, phys["src"], strict=True):
                if p != dst and abs(p - dst) < t.count:
                    self._overlap(rank, tbid, t, buf, off, abs(p - dst))
        return _Tx(t, src, dst, ops, bad)

    def _overlap(self, rank: int, tbid: int, t: Transmission, buf: Buffer, off: int,
                 shift: int) -> None:
        """Report a source ``buf[off..]`` of ``t`` that overlaps its destination
        ``shift`` chunks apart, where the runtime may run the step as one call.

        The interpreter runs one call per chunk (the large-message case), where
        such a step is sequential; a call of ``mac`` chunks moves one contiguous
        range, whose threads read what others write once ``mac > shift``.
        ``mac = call_bytes // ceil(nBytes / nchunks)`` (runtime notes 4.5), so
        that is the case for calls of up to ``nchunks * (call_bytes // (shift
        + 1))`` bytes (the larger of NCCL's and RCCL's ``call_bytes``): no
        finding when the file's minBytes is above that.
        """
        from colc.ir.runtime_model import GEOMETRY, RCCL_GEOMETRY  # networkx: only here

        p = self.p
        call = max(g[p.protocol].call_bytes for g in (GEOMETRY, RCCL_GEOMETRY))
        limit = p.nchunks * (call // (shift + 1))
        if runtime_bytes(p.min_bytes) > limit:
            return
        n = t.count
        d = t.dst
        alias = "" if buf is d.buffer else " through the in-place aliasing"
        self.report("overlap", error(
            f"{t.kind.value} cnt {n}: src {_LETTER[buf]}[{off}..{off + n - 1}] and dst "
            f"{_LETTER[d.buffer]}[{d.offset}..{d.offset + n - 1}] overlap{alias}, "
            f"{_count(shift, 'chunk')} apart; for calls up to {limit} bytes "
            f"(maxAllowedCount > {shift}) the "
            f"runtime moves the {n} chunks as one contiguous range, whose threads read what "
            f"others write: a race", rank, tbid, t.position))

    # ------------------------------------------------------------- execution
    def run(self) -> list[Diagnostic]:
        ready = deque(self.tbs)
        for tb in self.tbs:
            tb.queued = True
        while ready:
            tb = ready.popleft()
            tb.queued = False
            woken = self._advance(tb)
            for w in woken:
                if not w.queued:
                    w.queued = True
                    ready.append(w)
        stuck = [tb for tb in self.tbs if tb.pc < len(tb.txs)]
        if stuck:
            self._report_deadlock(stuck)
        self._report_unconsumed()
        if not stuck and self.data:
            self._check_postcondition()
        self.diags = sort_diagnostics(self.diags)
        for cat, n in sorted(self.counts.items()):
            if n > _CAP:
                self.diags.append(error(f"... and {n - _CAP} more {cat} findings ({self.mode})"))
        return self.diags

    def _advance(self, tb: _TB) -> list[_TB]:
        """Run ``tb`` until it blocks or ends; return the tbs to wake."""
        woken: list[_TB] = []
        txs = tb.txs
        cap = self.cap
        while tb.pc < len(txs):
            tx = txs[tb.pc]
            if not tb.deps_done:
                if not self._take_deps(tb, tx):
                    return woken
                tb.deps_done = True
            while tb.call < tx.count:
                if tx.recvs and not tb.inq:
                    tb.wait = ("recv",)
                    return woken
                if tx.sends and cap is not None and len(tb.outq) >= cap:
                    tb.wait = ("send",)
                    return woken
                self._call(tb, tx, tb.call, woken)
                tb.call += 1
            if tx.t.has_dep:
                tb.flags.append(tx.t.flag)
                wanted = self.snap_users[tb.tid][len(tb.snaps)]
                tb.snaps.append((tb.base, tb.clock) if wanted else None)
                waiters = self.flag_waiters.pop(tb.tid, None)
                if waiters:
                    woken.extend(waiters)
            tb.pc += 1
            tb.call = 0
            tb.deps_done = False
        tb.wait = ()
        return woken

    def _take_deps(self, tb: _TB, tx: _Tx) -> bool:
        """Check every dependency; join the clocks of the satisfying flags if all hold."""
        tbs = self.by_rank[tb.rank]
        found = []
        for b, s, _pos in tx.t.deps:
            target = tbs.get(b)
            if target is None:
                tb.wait = ("flag", b, s, None)
                return False
            i = bisect_left(target.flags, s)
            if i == len(target.flags):
                tb.wait = ("flag", b, s, target)
                self.flag_waiters.setdefault(target.tid, []).append(tb)
                return False
            found.append((target, i))
        for target, i in found:
            entry = target.snaps[i]
            if entry is None:
                raise InternalError("interpreter: a satisfied wait has no clock snapshot")
            snap, clock = entry
            if target is not tb and self.data:
                self._join(tb, snap, target.cid, clock)
            users = self.snap_users[target.tid]
            users[i] -= 1
            if users[i] == 0:
                target.snaps[i] = None
        return True

    @staticmethod
    def _join(tb: _TB, base: np.ndarray, cid: int, clock: int) -> None:
        mine = tb.base
        if base is not mine:
            new = np.maximum(mine, base)
        elif mine[cid] >= clock:
            return
        else:
            new = mine.copy()
        if new[cid] < clock:
            new[cid] = clock
        tb.base = new

    def _call(self, tb: _TB, tx: _Tx, j: int, woken: list[_TB]) -> None:
        """Execute one call (one chunk) of ``tx``."""
        tb.clock += 1
        kind = tx.kind
        mem = tb.mem
        bad = tx.bad
        if tx.recvs:
            msg = tb.inq.popleft()
            sender = self.tbs[msg[2]]
            woken.append(sender)
            if not self.local and self.data:
                self._join(tb, msg[1], sender.cid, msg[3])
            if msg[5] != tx.count and (tb.tid, tx.t.position) not in self.seen:
                self.seen.add((tb.tid, tx.t.position))
                self.report("cnt-mismatch", error(
                    f"receives cnt={tx.count} but the matching send (rank {sender.rank} tb "
                    f"{sender.id} step {msg[4]}) has cnt={msg[5]} ({self.mode})",
                    tb.rank, tb.id, tx.t.position))
            incoming = msg[0]
        if not self.data:
            bad = True  # no values: every memory access is skipped below
        if kind is StepKind.SEND:
            out = _POISON if bad else self._read(tb, tx, tx.src + j)
        elif kind is StepKind.RECV:
            if not bad:
                self._write(tb, tx, tx.dst + j, incoming)
        elif kind is StepKind.RECV_COPY_SEND:
            out = incoming
            if not bad:
                self._write(tb, tx, tx.dst + j, incoming)
        elif kind is StepKind.COPY:
            if not bad:
                self._write(tb, tx, tx.dst + j, self._read(tb, tx, tx.src + j))
        elif kind is StepKind.REDUCE:
            if not bad:
                self._fused_reduce(tb, tx, j)
        else:  # rrs, rrc, rrcs
            out = _POISON if bad else self._combine(tb, tx, incoming,
                                                    self._read(tb, tx, tx.src + j))
            if kind is not StepKind.RECV_REDUCE_SEND and not bad:
                self._write(tb, tx, tx.dst + j, out)
        if tx.sends:
            tb.outq.append((out, tb.base, tb.tid, tb.clock, tx.t.position, tx.count))
            receiver = self.receivers.get(tb.outkey)
            if receiver is not None:
                woken.append(receiver)

    def _fused_reduce(self, tb: _TB, tx: _Tx, j: int) -> None:
        ops = [self._read(tb, tx, o + j) for o in tx.ops]
        if len(tx.ops) == 16:  # reduceCopy takes 16 sources including DST: DST dropped
            acc = ops[0]
            rest = ops[1:]
        else:
            acc = self._read(tb, tx, tx.dst + j)
            rest = ops
        for v in rest:
            acc = self._combine(tb, tx, acc, v)
        self._write(tb, tx, tx.dst + j, acc)

    def _combine(self, tb: _TB, tx: _Tx, a: Value, b: Value) -> Value:
        v, twice = _reduce(a, b)
        if twice:
            self.report("double-reduction", error(
                f"reduces a contribution twice: {describe(a)} (+) {describe(b)} ({self.mode})",
                tb.rank, tb.id, tx.t.position))
        return v

    def _read(self, tb: _TB, tx: _Tx, p: int) -> Value:
        mem = tb.mem
        v = mem.vals[p]
        if v is None:
            v = ((p - mem.init_lo, 1 << mem.rank),)
            mem.vals[p] = v
        w = mem.writes[p]
        if w is not None and w[0] != tb.cid and tb.base[w[0]] < w[1]:
            self._race(tb, tx, p, "read", w, "write")
        rd = mem.reads[p]
        if rd is None:
            mem.reads[p] = {tb.cid: (tb.clock, tx.t.position)}
        else:
            rd[tb.cid] = (tb.clock, tx.t.position)
        if v == _UNINIT:
            self.report("uninitialised-read", error(
                f"reads uninitialised {mem.name(p)} ({self.mode})", tb.rank, tb.id,
                tx.t.position))
            return _POISON
        return v

    def _write(self, tb: _TB, tx: _Tx, p: int, v: Value) -> None:
        mem = tb.mem
        w = mem.writes[p]
        base = tb.base
        if w is not None and w[0] != tb.cid and base[w[0]] < w[1]:
            self._race(tb, tx, p, "write", w, "write")
        rd = mem.reads[p]
        if rd is not None:
            for cid, (clock, pos) in rd.items():
                if cid != tb.cid and base[cid] < clock:
                    self._race(tb, tx, p, "write", (cid, clock, pos), "read")
            mem.reads[p] = None
        mem.writes[p] = (tb.cid, tb.clock, tx.t.position)
        mem.vals[p] = v

    def _race(self, tb: _TB, tx: _Tx, p: int, mine: str, other: tuple, theirs: str) -> None:
        o = self.owner(tb.rank, other[0])
        key = ("race", tb.tid, tx.t.position, o.tid, other[2])
        if key in self.seen:
            return
        self.seen.add(key)
        self.report("race", error(
            f"data race on {tb.mem.name(p)}: {mine} here and {theirs} by tb {o.id} step "
            f"{other[2]} are not ordered by happens-before ({self.mode})",
            tb.rank, tb.id, tx.t.position))

    def owner(self, rank: int, cid: int) -> _TB:
        """The threadblock whose clock index on ``rank`` is ``cid``."""
        return self.clock_owner[rank][cid] if self.local else self.tbs[cid]

    # ------------------------------------------------------------- reporting
    def _report_deadlock(self, stuck: list[_TB]) -> None:
        for tb in stuck:
            tx = tb.txs[tb.pc]
            why = tb.wait
            if why and why[0] == "flag":
                b, s, target = why[1], why[2], why[3]
                if target is None:
                    what = f"a flag of tb {b}, which does not exist"
                else:
                    last = target.flags[-1] if target.flags else "nothing"
                    what = f"tb {b} to publish step >= {s} (published so far: {last})"
            elif why and why[0] == "recv":
                chan, src, _dst = tb.inkey
                what = f"a message from rank {src} on chan {chan}"
            elif why and why[0] == "send":
                chan, _src, dst = tb.outkey
                what = f"space in the full FIFO to rank {dst} on chan {chan}"
            else:
                raise InternalError(f"tb {tb.id} on rank {tb.rank} stuck without a reason")
            self.report("deadlock", error(f"deadlock ({self.mode}): blocked waiting for {what}",
                                          tb.rank, tb.id, tx.t.position))

    def _report_unconsumed(self) -> None:
        owners = {tb.outkey: tb for tb in self.tbs if tb.outkey is not None}
        for key in sorted(self.fifos):
            q = self.fifos[key]
            if q:
                chan, src, dst = key
                tb = owners[key]
                self.report("unconsumed", error(
                    f"{len(q)} message call(s) sent to rank {dst} on chan {chan} are never "
                    f"received ({self.mode})", src, tb.id, q[0][4]))

    def _expected(self, rank: int, k: int) -> Value | None:
        p = self.p
        cf = p.nchunks // p.ngpus
        full = (1 << p.ngpus) - 1
        coll = p.collective
        if coll is Collective.ALLREDUCE:
            return ((k, full),)
        if coll is Collective.ALLGATHER:
            return ((k % cf, 1 << (k // cf)),)
        if coll is Collective.REDUCESCATTER:
            return ((rank * cf + k, full),)
        if coll is Collective.BROADCAST:  # root 0
            return ((k, 1),)
        if coll is Collective.ALLTOALL:  # o[k] = i_{k/cf}[rank*cf + k%cf]
            return ((rank * cf + k % cf, 1 << (k // cf)),)
        if coll is Collective.REDUCE:  # root 0
            return ((k, full),) if rank == 0 else None
        raise InternalError(f"no postcondition for {coll}")

    def _check_postcondition(self) -> None:
        for rank, mem in enumerate(self.mems):
            base, n = self.layouts[rank][Buffer.OUTPUT]
            for k in range(n):
                want = self._expected(rank, k)
                if want is None:
                    continue
                p = base + k
                got = mem.vals[p]
                if got is None:
                    got = ((p - mem.init_lo, 1 << rank),)
                if got != want:
                    w = mem.writes[p]
                    tb = self.owner(rank, w[0]) if w is not None else None
                    self.report("postcondition", error(
                        f"postcondition of {self.p.collective.value} fails ({self.mode}): o[{k}] "
                        f"holds {describe(got)}, expected {describe(want)}",
                        rank, tb.id if tb else None, w[2] if w else None))


def interpret(program: Program, *, fifo_depth: int | None, inplace: bool,
              loaded: LoadedProgram | None = None) -> list[Diagnostic]:
    """Execute ``program`` symbolically and report everything that goes wrong.

    Parameters
    ----------
    program : Program
    fifo_depth : int or None
        Calls a connection buffers (Simple 2, LL/LL128 8); None = unbounded.
    inplace : bool
        Model the in-place aliasing of section 4.2.
    loaded : LoadedProgram, optional
        ``load_program(program)`` when the caller already has it.

    Returns
    -------
    list of Diagnostic
        Load-time findings (``colc.ir.load_checks``) first; when the runtime
        would reject the program nothing is executed.  Then execution findings in a
        deterministic order.

    Examples
    --------
    >>> from colc.ir.program import Program, RankProgram, Threadblock
    >>> from colc.ir.core import Collective, Protocol
    >>> idle = Threadblock(0, None, None, 0, ())
    >>> p = Program("idle", Collective.ALLREDUCE, Protocol.SIMPLE, 1, 1, 1, True, False, 0, 0,
    ...             (RankProgram(0, 1, 1, 0, (idle,)),))
    >>> interpret(p, fifo_depth=2, inplace=True)
    []
    """
    if fifo_depth is not None and fifo_depth < 1:
        raise InternalError(f"fifo_depth must be >= 1 or None, got {fifo_depth}")
    if loaded is None:
        loaded = load_program(program)
    out = list(loaded.diagnostics)
    if not loaded.runnable:
        return out
    first = _Interpreter(loaded, fifo_depth, inplace, local=True)
    found = first.run()
    if first.counts.get("race"):  # rank-local clocks may miss an order through other ranks
        found = _Interpreter(loaded, fifo_depth, inplace).run()
    out.extend(found)
    return out


def deadlocks(program: Program, fifo_depth: int,
              loaded: LoadedProgram | None = None) -> list[Diagnostic]:
    """Deadlocks and unconsumed messages of ``program`` at ``fifo_depth``, one call per chunk.

    The token game of ``interpret`` without values, clocks or the
    postcondition: what a lowering is checked for before it is kept (several
    times cheaper than a simulation or a full interpretation).  Load-time
    findings come first; a program the runtime would reject is not run.

    Examples
    --------
    >>> from colc.ir.program import Program, RankProgram, Threadblock
    >>> from colc.ir.core import Collective, Protocol
    >>> idle = Threadblock(0, None, None, 0, ())
    >>> p = Program("idle", Collective.ALLREDUCE, Protocol.SIMPLE, 1, 1, 1, True, False, 0, 0,
    ...             (RankProgram(0, 1, 1, 0, (idle,)),))
    >>> deadlocks(p, 2)
    []
    """
    if loaded is None:
        loaded = load_program(program)
    out = list(loaded.diagnostics)
    if loaded.runnable:
        out.extend(_Interpreter(loaded, fifo_depth, True, local=True, data=False).run())
    return out
