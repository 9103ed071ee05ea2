"""Pass ``ring``: bandwidth-optimal ring allgather, reducescatter and allreduce.

Input invariant: a validated ``Topology`` in which every rank reaches every
other rank.
Output invariant: a ``Schedule`` (deps inferred) that ``check_schedule``
proves for in-place and out-of-place, whose transfers only join ranks that
reach each other through switches (non-neighbours are relayed through
scratch on intermediate ranks).

Ring construction (the best of these by bandwidth-only cost, ties to the
fewest relays and fewest rings):

1. a Hamiltonian cycle of the rank-reach graph, found by a bounded
   backtracking search preferring wide links (Warnsdorff tie-break); on
   symmetric fabrics also the same cycle used in both directions (two rings,
   each carrying half of every shard);
2. on symmetric fabrics, the depth-first order of a maximum-bandwidth
   spanning tree (Patarasuk and Yuan, seed 002: on a tree no link carries two
   ring hops in the same direction), hops relayed along the tree;
3. a depth-first order of the rank-reach graph with hops relayed along
   fewest-relay paths (always exists when the fabric is strongly connected).

Schedules (N ranks, ring positions p, ``cf`` = number of rings): allgather
step t sends the shard of ``P[p-t]`` from ``P[p]`` to ``P[p+1]``;
reducescatter step t sends the partial of ``P[p-t-1]``, which the receiver
reduces with its own input; allreduce is reducescatter (partials in the
output buffer) then allgather.  Each rank sends (N-1)/N of the data per
phase: optimal for a ring.

Complexity: O(N^2 * cf) ops; the Hamiltonian search is capped at
``SEARCH_BUDGET`` expansions.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from fractions import Fraction

from colc.compiler.lowering.infer_dependencies import infer_dependencies
from colc.compiler.lowering.replicate_instances import replicate_instances
from colc.compiler.route_paths import Router
from colc.errors import UnsupportedError
from colc.ir.chunks import Op, OpKind, Schedule, Slot
from colc.ir.core import Buffer, Collective
from colc.ir.topology import Topology

NAME = "ring"
SEARCH_BUDGET = 150000
RESTARTS = 3

IN, OUT, SCR = Buffer.INPUT, Buffer.OUTPUT, Buffer.SCRATCH


@dataclass(frozen=True, slots=True)
class Ring:
    """A ring: ``order[p]`` sends to ``order[p+1]`` along ``hops[p]`` (rank path)."""

    order: tuple[int, ...]
    hops: tuple[tuple[int, ...], ...]

    def reversed(self) -> Ring:
        """The same cycle walked backwards (hops reversed)."""
        n = len(self.order)
        order = tuple(self.order[(-p) % n] for p in range(n))
        hops = tuple(tuple(reversed(self.hops[(-p - 1) % n])) for p in range(n))
        return Ring(order, hops)


def ring_schedule(topo: Topology, collective: Collective, copies: int | None = None) -> Schedule:
    """Build the ring schedule of ``collective`` on ``topo``.

    Parameters
    ----------
    topo : Topology
    collective : Collective
        allgather, reducescatter or allreduce.
    copies : int, optional
        Interleaved copies of the rings, each with its own chunk of every
        shard and channel hints of its own (``replicate_instances``), so
        each can run on threadblocks of its own (lane balancing may merge
        them; ``--algorithm ring --chunks C``;
        ``auto`` tries them where one threadblock is slower than the
        links, ``choose_variants.ring_copies``).  None or 1: one.

    Returns
    -------
    Schedule
        With dependencies inferred.

    Raises
    ------
    UnsupportedError
        For other collectives.
    TopologyError
        When some rank cannot reach another.
    """
    if collective not in (Collective.ALLGATHER, Collective.REDUCESCATTER, Collective.ALLREDUCE):
        raise UnsupportedError(f"the ring algorithm does not implement {collective.value}")
    rings = plan_rings(topo, Router(topo))
    return replicate_instances(build_ring_schedule(topo.num_ranks, rings, collective),
                               copies or 1)


def plan_rings(topo: Topology, router: Router) -> tuple[Ring, ...]:
    """Choose the rings with the best bandwidth-only cost (see module docstring)."""
    n = topo.num_ranks
    if n == 1:
        return (Ring((0,), ((0,),)),)
    candidates: list[tuple[Ring, ...]] = []
    cycle = _hamiltonian_cycle(n, router)
    symmetric = _is_symmetric(topo)
    if cycle is not None:
        ring = Ring(tuple(cycle), tuple((cycle[p], cycle[(p + 1) % n]) for p in range(n)))
        candidates.append((ring,))
        if symmetric:
            candidates.append((ring, ring.reversed()))
    if symmetric:
        candidates.append((_relay_ring(_tree_order(topo), router),))
    candidates.append((_relay_ring(_reach_dfs_order(n, router), router),))
    return max(candidates, key=lambda rs: (_ring_algbw(rs, router, n), -_relays(rs), -len(rs)))


def _relays(rings: tuple[Ring, ...]) -> int:
    return sum(len(h) - 2 for r in rings for h in r.hops)


def _ring_algbw(rings: tuple[Ring, ...], router: Router, n: int) -> Fraction:
    """Allgather algbw: each hop carries (N-1)/(N * #rings) of M."""
    per_hop = Fraction(n - 1, n * len(rings))
    loads: dict[tuple[str, str], Fraction] = {}
    for ring in rings:
        for hop in ring.hops:
            for a, b in zip(hop, hop[1:], strict=False):
                path = router.switch_paths(a)[b]
                for edge in zip(path, path[1:], strict=False):
                    loads[edge] = loads.get(edge, Fraction(0)) + per_hop
    return 1 / max(load / router.cap[e] for e, load in loads.items())


def _is_symmetric(topo: Topology) -> bool:
    cap = topo.capacity()
    return all(cap.get((v, u)) == c for (u, v), c in cap.items())


def _hamiltonian_cycle(n: int, router: Router) -> list[int] | None:
    """Bounded backtracking search for a directed Hamiltonian cycle from rank 0.

    The first attempt breaks ties deterministically; later attempts break them
    with seeded pseudo-random keys (restarts escape a bad early choice).
    """
    width = {u: {v: router.bottleneck(p) for v, p in router.switch_paths(u).items() if v != u}
             for u in range(n)}
    preds = {v: {u for u in range(n) if v in width[u]} for v in range(n)}
    for attempt in range(RESTARTS):
        tie = [0.0] * n if attempt == 0 else [random.Random(attempt).random() for _ in range(n)]
        found = _search(n, width, preds, tie, SEARCH_BUDGET // RESTARTS)
        if found is not None:
            return found
    return None


def _search(n: int, width: dict[int, dict[int, Fraction]], preds: dict[int, set[int]],
            tie: list[float], budget: int) -> list[int] | None:
    path, on_path = [0], {0}
    stack = [_ordered(0, width, on_path, tie)]
    while stack and budget > 0:
        if len(path) == n:
            if 0 in width[path[-1]]:
                return path
            _pop(path, on_path, stack)
            continue
        nxt = next(stack[-1], None)
        if nxt is None:
            _pop(path, on_path, stack)
            continue
        budget -= 1
        path.append(nxt)
        on_path.add(nxt)
        if len(path) < n and _stranded(path, on_path, width, preds):
            _pop(path, on_path, stack, keep_frame=True)
            continue
        stack.append(_ordered(nxt, width, on_path, tie))
    return None


def _stranded(path: list[int], on_path: set[int], width: dict[int, dict[int, Fraction]],
              preds: dict[int, set[int]]) -> bool:
    """Whether extending ``path`` left some node that can no longer be entered or left."""
    if not preds[0] - on_path:
        return True
    end, interior = path[-1], path[-2]
    for w in set(width[interior]) | preds[interior]:
        if w in on_path:
            continue
        if not any(u not in on_path or u == end for u in preds[w]):
            return True
        if not any(x not in on_path or x == 0 for x in width[w]):
            return True
    return False


def _pop(path: list[int], on_path: set[int], stack: list, keep_frame: bool = False) -> None:
    if not keep_frame:
        stack.pop()
    on_path.discard(path.pop())


def _ordered(u: int, width: dict[int, dict[int, Fraction]], on_path: set[int],
             tie: list[float]):
    free = [v for v in width[u] if v not in on_path]

    def onward(v: int) -> int:
        return sum(1 for w in width[v] if w not in on_path)

    return iter(sorted(free, key=lambda v: (-width[u][v], onward(v), tie[v], v)))


def _tree_order(topo: Topology) -> list[int]:
    """Ranks in depth-first order of a maximum-bandwidth spanning tree (Kruskal)."""
    cap = topo.capacity()
    pos = {n.id: i for i, n in enumerate(topo.nodes)}
    edges = sorted(((min(c, cap[(v, u)]), u, v) for (u, v), c in cap.items() if pos[u] < pos[v]),
                   key=lambda e: (-e[0], pos[e[1]], pos[e[2]]))
    parent = {n.id: n.id for n in topo.nodes}

    def find(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    adj: dict[str, list[tuple[Fraction, str]]] = {n.id: [] for n in topo.nodes}
    for w, u, v in edges:
        ru, rv = find(u), find(v)
        if ru != rv:
            parent[ru] = rv
            adj[u].append((w, v))
            adj[v].append((w, u))
    order, seen, stack = [], set(), [topo.ranks[0]]
    while stack:
        u = stack.pop()
        if u in seen:
            continue
        seen.add(u)
        if topo.node[u].is_compute:
            order.append(topo.rank_of[u])
        kids = sorted((x for x in adj[u] if x[1] not in seen), key=lambda x: (-x[0], pos[x[1]]))
        stack.extend(v for _, v in reversed(kids))
    return order


def _reach_dfs_order(n: int, router: Router) -> list[int]:
    order, seen, stack = [], set(), [0]
    while stack:
        u = stack.pop()
        if u in seen:
            continue
        seen.add(u)
        order.append(u)
        stack.extend(sorted((v for v in router.switch_paths(u) if v not in seen), reverse=True))
    return order


def _relay_ring(order: list[int], router: Router) -> Ring:
    n = len(order)
    hops = tuple(router.relay_path(order[p], order[(p + 1) % n]) for p in range(n))
    return Ring(tuple(order), hops)


class _Builder:
    """Accumulates ops in program order and hands out scratch slots."""

    def __init__(self, ngpus: int) -> None:
        self.ops: list[Op] = []
        self.scratch = [0] * ngpus
        self.round = 0  # the ring step the next ops belong to
        self.rounds: list[int] = []

    def add(self, kind: OpKind, src: Slot, dst: Slot, channel: int,
            operand: Slot | None = None) -> None:
        self.ops.append(Op(len(self.ops), kind, src, dst, 1, operand, (), channel))
        self.rounds.append(self.round)

    def hop(self, path: tuple[int, ...], src: Slot, dst: Slot, channel: int,
            kind: OpKind = OpKind.COPY, operand: Slot | None = None) -> None:
        """Move ``src`` to ``dst`` along ``path``, relaying through scratch."""
        cur = src
        for m in path[1:-1]:
            relay = Slot(m, SCR, self.scratch[m])
            self.scratch[m] += 1
            self.add(OpKind.COPY, cur, relay, channel)
            cur = relay
        self.add(kind, cur, dst, channel, operand)


def build_ring_schedule(n: int, rings: tuple[Ring, ...], collective: Collective) -> Schedule:
    """Lay out the ring algorithm over ``rings`` (ring j owns chunk j of each shard)."""
    cf = len(rings)
    b = _Builder(n)
    if collective is not Collective.ALLGATHER:
        _reduce_scatter(b, rings, n, collective)
    if collective is not Collective.REDUCESCATTER:
        if collective is Collective.ALLGATHER:
            for r in range(n):
                for j in range(cf):
                    b.add(OpKind.COPY, Slot(r, IN, j), Slot(r, OUT, r * cf + j), j)
        _allgather(b, rings, n)
    if n == 1:
        extent = cf if collective is Collective.REDUCESCATTER else n * cf
        b.ops = [Op(k, OpKind.COPY, Slot(0, IN, k), Slot(0, OUT, k), 1, None, (), 0)
                 for k in range(extent)]
        b.rounds = [0] * extent
    scratch = max(b.scratch)
    # rounds: the ring steps, so in each step a rank sends before it takes a
    # receive that ends there (on two ranks both directions then overlap)
    sched = Schedule(collective, n, n * cf, scratch, tuple(b.ops), algorithm=NAME,
                     rounds=tuple(b.rounds))
    return infer_dependencies(sched)


def _allgather(b: _Builder, rings: tuple[Ring, ...], n: int) -> None:
    cf = len(rings)
    first = b.round
    for t in range(n - 1):
        b.round = first + t
        for j, ring in enumerate(rings):
            order = ring.order
            for p in range(n):
                owner = order[(p - t) % n]
                slot = owner * cf + j
                b.hop(ring.hops[p], Slot(order[p], OUT, slot),
                      Slot(order[(p + 1) % n], OUT, slot), j)


def _reduce_scatter(b: _Builder, rings: tuple[Ring, ...], n: int, coll: Collective) -> None:
    cf = len(rings)
    # Partials live in scratch (reducescatter, whose output is one shard) or in
    # the output chunk the allgather phase overwrites later (allreduce).
    part_buf = SCR if coll is Collective.REDUCESCATTER else OUT
    part_off = max(b.scratch) if coll is Collective.REDUCESCATTER else 0
    if coll is Collective.REDUCESCATTER:
        b.scratch = [part_off + n * cf] * n
    for t in range(n - 1):
        b.round = t
        for j, ring in enumerate(rings):
            order = ring.order
            for p in range(n):
                owner = order[(p - t - 1) % n]
                slot = owner * cf + j
                sender, receiver = order[p], order[(p + 1) % n]
                src = (Slot(sender, IN, slot) if t == 0
                       else Slot(sender, part_buf, part_off + slot))
                if receiver == owner:
                    dst = Slot(owner, OUT, j if coll is Collective.REDUCESCATTER else slot)
                else:
                    dst = Slot(receiver, part_buf, part_off + slot)
                b.hop(ring.hops[p], src, dst, j, OpKind.REDUCE, Slot(receiver, IN, slot))
    b.round = n - 1  # the allgather's first step
