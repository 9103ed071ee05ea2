"""rails' op writer: transfers into ``Op`` lists, lane by lane.

``_Builder`` keeps the ops in program order with each pair's lane counter
and each rank's scratch offset; ``_piece_list`` cuts a transfer into
pieces, ``_spread`` and ``_gather`` move pieces down and up a box tree
(``box_trees``) level by level.  Output invariant: every op moves a
contiguous range between ranks joined by a switch or a link, on the lane
(channel hint) its pair takes next.  O(1) per op.
"""

from __future__ import annotations

from colc.compiler.hierarchical.rails.plan import IN, OUT, SCR, RailPlan
from colc.ir.chunks import Op, OpKind, Slot


class _Builder:
    """Ops in program order, with per-pair lane counters and scratch offsets."""

    def __init__(self, plan: RailPlan, cf: int, n: int, separate: bool = False) -> None:
        self.plan = plan
        self.cf = cf
        self.n = n
        self.lead = 0  # a reduce-scatter's first chunks one a piece (``_lead_chunks``)
        self.gates: dict[int, int] = {}  # ``Schedule.gates``
        self.sums: dict[int, int] = {}  # rank -> split sums combined so far
        self.ops: list[Op] = []
        self.turn: dict[tuple[int, int], int] = {}
        self.scratch = [0] * n
        self.box_of = {r: b for b, g in enumerate(plan.groups) for r in g}
        self.place = {r: p for g in plan.groups for p, r in enumerate(g)}
        self.links = dict(plan.link_lanes)
        self.width = plan.width
        self.relay = 0  # lane class of the transfers being added (1: relayed data)
        # Receiving carriers land each crossing partial and sum them locally
        # (``_lands``: reduce-scatter's form for Simple files).
        self.land = False
        # Relays kept off the first shared lane (``_spare_first_lane``).
        self.spare = False
        self.round = 0  # ``Schedule.rounds`` of the transfers being added
        self.rounds: list[int] = []
        # Trees in a box put several transfers on one (pair, lane) in a round:
        # the next round starts at the second (``Schedule.rounds``' promise).
        # Elsewhere only on request (``separated_rounds``).
        self.last: dict[tuple[int, int, int], int] | None = \
            {} if plan.trees or separate else None

    def lane(self, src: int, dst: int) -> int:
        """Channel of the next transfer of ``src -> dst`` (round robin over the lanes
        of its class)."""
        own, relay = self.plan.lanes
        cls = self.relay if own else 1  # without own lanes, own data rides the relay lanes
        same_box = self.box_of[src] == self.box_of[dst]
        if same_box and self.spare and self.relay:  # off the first lane, a count of its own
            key = (src, dst, 2)
            k = self.turn.get(key, 0)
            self.turn[key] = k + 1
            return 1 + k % (relay - 1)
        key = (src, dst, cls)
        k = self.turn.get(key, 0)
        self.turn[key] = k + 1
        if same_box:
            if cls and self.links:
                relay = self.links[(self.place[src], self.place[dst])]
            return own + k % relay if cls else k % own
        if self.plan.split_net:  # a channel per sending box: sends never pair with receives
            return own + self.width + self.box_of[src]
        return own + self.width + k % self.plan.net_lanes

    def add(self, kind: OpKind, src: Slot, dst: Slot, count: int,
            operand: Slot | None = None, local: int = 0) -> None:
        ch = local if src.rank == dst.rank else self.lane(src.rank, dst.rank)
        if self.last is not None and src.rank != dst.rank:
            key = (src.rank, dst.rank, ch)
            if self.last.get(key) == self.round:
                self.round += 1
            self.last[key] = self.round
        self.ops.append(Op(len(self.ops), kind, src, dst, count, operand, (), ch))
        self.rounds.append(self.round)

    def alloc(self, rank: int, count: int) -> int:
        at = self.scratch[rank]
        self.scratch[rank] += count
        return at

    def pieces(self, start: int, length: int, taper: bool = False,
               lead: int = 0) -> list[tuple[int, int]]:
        """``(first chunk, count)`` of each piece of ``length`` chunks from
        ``start``; ``taper``: the last one cut in halves down to one chunk
        (``_tapered``); ``lead``: the first ``lead`` chunks one a piece
        (``_lead_chunks``)."""
        return _piece_list(start, length, self.plan.piece, taper, lead)


def _piece_list(start: int, length: int, step: int, taper: bool,
                lead: int = 0) -> list[tuple[int, int]]:
    lead = min(lead, length)
    out = [(c, 1) for c in range(start, start + lead)]
    out += [(c, min(step, start + length - c))
            for c in range(start + lead, start + length, step)]
    if taper and len(out) > 1:
        c, k = out.pop()
        while k > 1:
            out.append((c, k - k // 2))
            c, k = c + k - k // 2, k // 2
        out.append((c, k))
    return out


def _levels(edges) -> tuple[dict[int, list[int]], dict[int, int]]:
    """Children and depth of every place of a tree given top-down."""
    children: dict[int, list[int]] = {}
    depth = {edges[0][0]: 0} if edges else {}
    for u, v in edges:
        children.setdefault(u, []).append(v)
        depth[v] = depth[u] + 1
    return children, depth


def _spread(out: _Builder, jobs: list) -> None:
    """For each ``(members, edges, first, c, k)``: chunks ``c .. c+k`` from
    ``first`` (on the tree's root) to every box peer along ``edges``, inner
    ranks forwarding what landed in their output.  All trees go level by
    level (every first hop, then every second), so on each pair of ranks
    both sides meet the transfers in the same order (no paired threadblock
    waits for a receive its peer has queued behind one of its own)."""
    levels = [_levels(job[1])[1] for job in jobs]
    for level in range(1, max((max(d.values(), default=0) for d in levels), default=0) + 1):
        for (members, edges, first, c, k), depth in zip(jobs, levels):
            for u, v in edges:
                if depth[v] == level:
                    src = first if members[u] == first.rank else Slot(members[u], OUT, c)
                    out.add(OpKind.COPY, src, Slot(members[v], OUT, c), k)


def _gather(out: _Builder, jobs: list) -> list[list[Slot]]:
    """For each ``(members, edges, c, k)``: the partial sums of input chunks
    ``c .. c+k`` of each subtree under the root (the tree run backwards):
    leaves give their input, inner ranks reduce their input and their
    children's partials in scratch.  Level by level from the deepest, all
    trees together (as ``_spread``); the root's own sums are the caller's."""
    shapes = [_levels(job[1]) for job in jobs]
    partial: list[dict[int, Slot]] = [{} for _ in jobs]
    top = max((max(d.values(), default=0) for _, d in shapes), default=0)
    for level in range(top - 1, 0, -1):
        for i, (members, edges, c, k) in enumerate(jobs):
            children, depth = shapes[i]
            for v in (v for _, v in edges if depth[v] == level and v in children):
                acc = Slot(members[v], SCR, out.alloc(members[v], k))
                prev = Slot(members[v], IN, c)
                for w in children[v]:
                    out.add(OpKind.REDUCE, partial[i].get(w, Slot(members[w], IN, c)), acc,
                            k, prev)
                    prev = acc
                partial[i][v] = acc
    return [[partial[i].get(w, Slot(members[w], IN, c))
             for w in shapes[i][0].get(edges[0][0], [])] if edges else []
            for i, (members, edges, c, k) in enumerate(jobs)]


def _by_receiver(crossings: list, receiver) -> list[list]:
    """Crossings in batches: batch ``j`` holds each receiving rank's ``j``-th."""
    seen: dict[int, int] = {}
    batches: list[list] = []
    for x in crossings:
        j = seen.get(receiver(x), 0)
        seen[receiver(x)] = j + 1
        if j == len(batches):
            batches.append([])
        batches[j].append(x)
    return batches
