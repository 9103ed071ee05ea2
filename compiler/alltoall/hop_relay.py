"""Pass ``hop-relay``: routed all-to-all as CPU threads, one message per link and hop.

``mcf`` lowers every (block, hop) to its own transfer, and so to MSCCL's
threadblocks of 64 steps: a rank of a 1024-rank fabric would send or relay
about 4900 of them, more than any MSCCL file holds.  The oneCCL format has
no such limit, and this pass writes it directly from the routes
(``balanced_trees``), aggregated so that each link carries one message per
hop:

* rank ``u`` has a *receive thread* per in-neighbour ``p`` and a *send
  thread* per out-neighbour ``v``;
* the send thread for ``v`` sends, for every hop ``h``, one message holding
  every block that crosses ``u -> v`` as its ``h``-th hop.  It is staged in
  scratch (the *outbox* of ``(h, v)``): at hop 1 the send thread copies its
  own blocks in from the input; later, the receive threads copy in what
  they received at hop ``h - 1``, and the send thread ``sync``s on each of
  them before it sends;
* the receive thread for ``p`` receives each hop's message into its *inbox*
  (one per thread, reused hop after hop), then copies each block on: into
  the outbox of the block's next hop, or, at its destination, into the
  output.  Blocks in a message are
  ordered by their next hop, then the rank they came from, then source and
  destination, so copies move runs of blocks where they can.

Message tags are the hop, unique per (sender, receiver); every send can
complete without buffering (``eager_depth`` 0): a receive thread takes its
messages in hop order, and a hop-``h`` message needs only messages of hop
``h - 1``.  The file is correct out of place.

Input invariant: a ``RouteTrees`` of the fabric.
Output invariant: a ``ThreadSchedule`` of ``Collective.ALLTOALL`` whose
transfers go over links only (the runtime routes nothing), one message per
(link, hop) with traffic; ``colc verify`` proves it (postcondition, races,
deadlock at ``eager_depth`` 0).

Complexity: O(R log R) for the R = sum over pairs of their hops (block-hop
records; Pi_{4,1024}: 4.8 million), plus one instruction per copied run.
Seed: 001 appendix A.1.5 (routed all-to-all on direct-connect fabrics); the
aggregation per link and hop is this project's (issue 19).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from colc.compiler.alltoall.balanced_trees import RouteTrees
from colc.errors import InternalError
from colc.ir.core import Collective
from colc.ir.oneccl import Instr, InstrKind, RankThreads, Region, Thread, ThreadSchedule

NAME = "hop-relay"


@dataclass(frozen=True, slots=True)
class _Records:
    """Every (block, hop), sorted by message: sender ``u``, hop ``h``, receiver
    ``v``, then the order inside the message."""

    u: np.ndarray
    h: np.ndarray
    v: np.ndarray
    nxt: np.ndarray  # the hop after v, -1 at the destination
    s: np.ndarray
    t: np.ndarray
    group: np.ndarray  # message id (0.. in sorted order)
    pos: np.ndarray  # block index inside its message
    after: np.ndarray  # record index of the same block's next hop, -1 at the end


@dataclass(frozen=True, slots=True)
class _Messages:
    """The messages (one per link and hop with traffic), in record order, and
    where each record's block sits."""

    start: np.ndarray  # first record of each message
    size: np.ndarray  # blocks of each message
    u: np.ndarray  # sender
    h: np.ndarray  # hop
    v: np.ndarray  # receiver
    out_base: np.ndarray  # outbox of each message in the sender's scratch (blocks)
    in_base: np.ndarray  # inbox of each message in the receiver's scratch (blocks)
    out_off: np.ndarray  # each record's block in its sender's outbox
    in_off: np.ndarray  # each record's block in its receiver's inbox
    dst: np.ndarray  # where the receiver copies it: output block or next outbox


def hop_relay_threads(trees: RouteTrees, cf: int = 1, name: str = NAME) -> ThreadSchedule:
    """The all-to-all on ``trees`` as a oneCCL thread schedule (see module docstring).

    Parameters
    ----------
    trees : RouteTrees
    cf : int
        Chunks per block.
    name : str
        Schedule name.

    Returns
    -------
    ThreadSchedule
    """
    rec = _records(trees)
    n = trees.ranks
    msg, scratch = _messages(rec, n)
    final = rec.nxt < 0
    dst_group = np.where(final, -1, rec.group[np.maximum(rec.after, 0)])
    relay_runs = _runs(rec.group, dst_group, msg.in_off, msg.dst)
    first = np.flatnonzero(rec.h == 1)
    gather_runs = _runs(rec.group[first], rec.group[first], rec.t[first], msg.out_off[first])
    builder = _Threads(n, cf, rec, msg)
    builder.receives(relay_runs)
    builder.sends(first[gather_runs[0]], gather_runs[1])
    ranks = tuple(RankThreads(r, n * cf, n * cf, int(scratch[r]) * cf, builder.threads_of(r))
                  for r in range(n))
    return ThreadSchedule(name, Collective.ALLTOALL, n, n * cf, False, True, 0, 0, 0, ranks)


def _messages(rec: _Records, n: int) -> tuple[_Messages, np.ndarray]:
    """The messages of ``rec`` with their scratch regions, and each rank's
    scratch size in blocks."""
    start = np.r_[0, np.flatnonzero(np.diff(rec.group)) + 1]
    size = np.diff(np.r_[start, len(rec.group)])
    u, h, v = rec.u[start], rec.h[start], rec.v[start]
    out_base, in_base, scratch = _regions(n, u, v, size)
    out_off = out_base[rec.group] + rec.pos
    in_off = in_base[rec.group] + rec.pos
    dst = np.where(rec.nxt < 0, rec.s, out_off[np.maximum(rec.after, 0)])
    return _Messages(start, size, u, h, v, out_base, in_base, out_off, in_off, dst), scratch


def _records(trees: RouteTrees) -> _Records:
    """Every (block, hop) of the routes, in message order."""
    n, parent, level = trees.ranks, trees.parent, trees.level
    s, t = np.nonzero(~np.eye(n, dtype=bool))
    hops = level[s, t].astype(np.int64)
    depth = int(hops.max(initial=0))
    path = np.full((len(s), depth + 2), -1, dtype=np.int64)  # path[:, depth + 1] stays -1
    cur = t.astype(np.int64)
    for k in range(depth, 0, -1):
        m = hops >= k
        path[m, k] = cur[m]
        cur[m] = parent[s[m], cur[m]]
    if not np.array_equal(cur, s):
        raise InternalError(f"{NAME}: a route does not lead back to its source")
    path[:, 0] = s
    cols = {"u": [], "h": [], "v": [], "prev": [], "nxt": [], "pair": []}
    for h in range(1, depth + 1):
        idx = np.flatnonzero(hops >= h)
        cols["u"].append(path[idx, h - 1])
        cols["v"].append(path[idx, h])
        cols["prev"].append(path[idx, h - 2] if h >= 2 else np.full(len(idx), -1))
        cols["nxt"].append(np.where(hops[idx] > h, path[idx, h + 1], -1))
        cols["h"].append(np.full(len(idx), h, dtype=np.int64))
        cols["pair"].append(idx)
    u, h, v, prev, nxt, pair = (np.concatenate(cols[k]) for k in
                                ("u", "h", "v", "prev", "nxt", "pair"))
    order = np.lexsort((t[pair], s[pair], prev, nxt, v, h, u))
    u, h, v, nxt, pair = u[order], h[order], v[order], nxt[order], pair[order]
    key = (u * (depth + 1) + h) * n + v
    new = np.r_[True, key[1:] != key[:-1]]
    group = np.cumsum(new) - 1
    starts = np.flatnonzero(new)
    pos = np.arange(len(u)) - starts[group]
    at = np.full(len(s) * (depth + 2), -1, dtype=np.int64)
    at[pair * (depth + 2) + h] = np.arange(len(u))
    after = at[pair * (depth + 2) + h + 1]
    return _Records(u, h, v, nxt, s[pair], t[pair], group, pos, after)


def _regions(n: int, g_u: np.ndarray, g_v: np.ndarray, sizes: np.ndarray):
    """Scratch bases (in blocks) of every message's outbox (at its sender) and
    inbox (at its receiver), and each rank's scratch size.

    Outboxes come first, one per message.  A receive thread copies each
    message on before it receives the next, so its messages share one inbox,
    as large as the largest."""
    out_total = np.bincount(g_u, weights=sizes, minlength=n).astype(np.int64)
    out_base = _cumulative_by(g_u, sizes, n)
    link = g_u * n + g_v
    links, which = np.unique(link, return_inverse=True)
    largest = np.zeros(len(links), dtype=np.int64)
    np.maximum.at(largest, which, sizes)
    receiver = links % n
    link_base = out_total[receiver] + _cumulative_by(receiver, largest, n)
    in_base = link_base[which]
    scratch = out_total + np.bincount(receiver, weights=largest, minlength=n).astype(np.int64)
    return out_base, in_base, scratch


def _cumulative_by(owner: np.ndarray, sizes: np.ndarray, n: int) -> np.ndarray:
    """For each item, the sizes of the earlier items of the same owner, summed."""
    order = np.argsort(owner, kind="stable")
    csum = np.cumsum(sizes[order]) - sizes[order]
    first = np.searchsorted(owner[order], np.arange(n))
    base_of_owner = np.r_[csum, 0][first]
    out = np.empty(len(sizes), dtype=np.int64)
    out[order] = csum - base_of_owner[owner[order]]
    return out


def _runs(group: np.ndarray, target: np.ndarray, src: np.ndarray, dst: np.ndarray):
    """Maximal runs of consecutive items with the same group and target whose
    source and destination both advance by one: ``(first item, length)``."""
    if len(group) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    brk = np.ones(len(group), dtype=bool)
    brk[1:] = ((group[1:] != group[:-1]) | (target[1:] != target[:-1])
               | (src[1:] != src[:-1] + 1) | (dst[1:] != dst[:-1] + 1))
    first = np.flatnonzero(brk)
    return first, np.diff(np.r_[first, len(group)])


class _Threads:
    """Per rank, its receive threads (one per in-neighbour) and send threads
    (one per out-neighbour), filled message by message."""

    def __init__(self, n: int, cf: int, rec: _Records, msg: _Messages) -> None:
        self.n = n
        self.cf = cf
        self.rec = rec
        self.msg = msg
        self.recv: list[dict[int, list[Instr]]] = [{} for _ in range(n)]
        self.send: list[dict[int, list[Instr]]] = [{} for _ in range(n)]
        # (rank, in-neighbour, hop) -> index of the receive thread's last
        # instruction for that hop's message
        self.done: dict[tuple[int, int, int], int] = {}
        # (rank, hop, out-neighbour) -> in-neighbours whose copies fill that outbox
        self.fills: dict[tuple[int, int, int], set[int]] = {}

    def receives(self, runs: tuple[np.ndarray, np.ndarray]) -> None:
        """Receive threads: each message's receive, then its copies on
        (``runs``: first record and length of every copied run)."""
        cf, rec, msg = self.cf, self.rec, self.msg
        first, length = runs
        run_at = np.searchsorted(first, msg.start)  # first run of each message
        run_group = rec.group[first]
        final = rec.nxt[first] < 0
        for g in range(len(msg.start)):
            u, h, v = int(msg.u[g]), int(msg.h[g]), int(msg.v[g])
            code = self.recv[v].setdefault(u, [])
            code.append(Instr(InstrKind.RECV, peer=u, tag=h, dst=Region.SCRATCH,
                              dst_off=int(msg.in_base[g]) * cf, count=int(msg.size[g]) * cf))
            k = int(run_at[g])
            while k < len(first) and run_group[k] == g:
                j = int(first[k])
                if final[k]:
                    target = Region.OUTPUT
                else:
                    target = Region.SCRATCH
                    self.fills.setdefault((v, h + 1, int(rec.nxt[j])), set()).add(u)
                code.append(Instr(InstrKind.COPY, src=Region.SCRATCH,
                                  src_off=int(msg.in_off[j]) * cf, dst=target,
                                  dst_off=int(msg.dst[j]) * cf, count=int(length[k]) * cf))
                k += 1
            self.done[(v, u, h)] = len(code) - 1

    def sends(self, items: np.ndarray, length: np.ndarray) -> None:
        """Send threads: each message's staging (copies from the input at hop 1,
        ``items`` the first record and ``length`` the blocks of each run; syncs
        on the receive threads after), then its send."""
        cf, rec, msg = self.cf, self.rec, self.msg
        run_group = rec.group[items]
        run_at = np.searchsorted(run_group, np.arange(len(msg.start)))
        for g in range(len(msg.start)):
            u, h, v = int(msg.u[g]), int(msg.h[g]), int(msg.v[g])
            code = self.send[u].setdefault(v, [])
            if h == 1:
                k = int(run_at[g])
                while k < len(items) and run_group[k] == g:
                    j = int(items[k])
                    code.append(Instr(InstrKind.COPY, src=Region.INPUT,
                                      src_off=int(rec.t[j]) * cf, dst=Region.SCRATCH,
                                      dst_off=int(msg.out_off[j]) * cf,
                                      count=int(length[k]) * cf))
                    k += 1
            else:
                for p in sorted(self.fills.get((u, h, v), ())):
                    code.append(Instr(InstrKind.SYNC, wait_thread=p,
                                      wait_instr=self.done[(u, p, h - 1)]))
            code.append(Instr(InstrKind.SEND, peer=v, tag=h, src=Region.SCRATCH,
                              src_off=int(msg.out_base[g]) * cf, count=int(msg.size[g]) * cf))

    def threads_of(self, r: int) -> tuple[Thread, ...]:
        """Rank ``r``'s threads: receive threads by in-neighbour, then send
        threads by out-neighbour; syncs name receive threads by position."""
        recv_ids = {p: i for i, p in enumerate(sorted(self.recv[r]))}
        threads = [Thread(i, 0, 0, tuple(self.recv[r][p])) for p, i in recv_ids.items()]
        own = Instr(InstrKind.COPY, src=Region.INPUT, src_off=r * self.cf, dst=Region.OUTPUT,
                    dst_off=r * self.cf, count=self.cf)
        for k, v in enumerate(sorted(self.send[r])):
            code = [_renumber(ins, recv_ids) for ins in self.send[r][v]]
            if k == 0:
                code.insert(0, own)
            threads.append(Thread(len(threads), 0, 0, tuple(code)))
        if not self.send[r]:
            threads.append(Thread(len(threads), 0, 0, (own,)))
        return tuple(threads)


def _renumber(ins: Instr, ids: dict[int, int]) -> Instr:
    """A sync naming an in-neighbour, renamed to its receive thread's id."""
    if ins.kind is not InstrKind.SYNC:
        return ins
    return Instr(InstrKind.SYNC, wait_thread=ids[ins.wait_thread], wait_instr=ins.wait_instr)


__all__ = ["NAME", "hop_relay_threads"]
