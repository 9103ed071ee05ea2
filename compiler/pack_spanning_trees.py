"""Pass ``pack-spanning-trees``: k spanning out-trees per root, in batches.

Input invariant: a switch-free integer-capacity digraph on ranks
``0..N-1`` and ``k`` with ``c(S, S-bar) >= |S| k`` for every proper subset
``S`` (Theorem 30; what ``split_switches`` guarantees).
Output invariant: a tuple of ``TreeBatch`` (root, edges, multiplicity
``m``): the edges of each batch form an out-tree rooted at ``root`` that
spans every rank, the multiplicities of each root add up to ``k``, and on
every arc the multiplicities of the batches using it add up to at most its
capacity.  Verified before returning (``InternalError`` otherwise).

Algorithm (seed 001 B.5.3, Algorithm 4, Theorems 31-32, Berczi-Frank):
start with one batch ``{u}`` of multiplicity ``k`` per root; grow one batch
at a time to all ranks.  For a candidate arc ``(x, y)`` leaving the batch
``R_1``, ``mu = min(g(x, y), m(R_1), F(x, y; D-bar) - sum_{i != 1} m(R_i))``
where ``D-bar`` is the residual graph plus, per other batch ``R_i``, a node
``s_i`` with an arc ``x -> s_i`` of capacity ``m(R_i)`` and infinite arcs
``s_i -> R_i`` (B.4).  If ``0 < mu < m(R_1)`` the batch is split: a copy with
multiplicity ``m - mu`` stays behind.  Batches with equal vertex sets share
one ``s_i`` and singleton batches become plain arcs (both exact), so the
flow network stays small.  A candidate with ``mu = 0`` stays at ``0`` while
the same batch grows (the tight cut stays tight), so it is not re-tried.
Candidates are scanned in breadth-first order from the root, which keeps
trees shallow.

Complexity: independent of ``k``: one max-flow per candidate arc, O(N) per
batch for the successes plus the rejected candidates; batches number at
most ``N + (number of splits)``.

Example
-------
>>> pack = pack_spanning_trees(3, {(0, 1): 2, (1, 2): 2, (2, 0): 2}, 1)
>>> [(b.root, b.edges, b.multiplicity) for b in pack]
[(0, ((0, 1), (1, 2)), 1), (1, ((1, 2), (2, 0)), 1), (2, ((2, 0), (0, 1)), 1)]
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from colc.compiler.max_flow import FlowProblem, solve_batch
from colc.errors import InternalError

NAME = "pack-spanning-trees"

#: Alternative candidates evaluated beside each speculative step.
_ALTERNATIVES = 2


@dataclass(frozen=True, slots=True)
class TreeBatch:
    """``multiplicity`` identical out-trees rooted at ``root`` (rank indices)."""

    root: int
    edges: tuple[tuple[int, int], ...]
    multiplicity: int


@dataclass(slots=True)
class _Batch:
    root: int
    m: int
    order: list[int]
    vset: set[int]
    edges: list[tuple[int, int]] = field(default_factory=list)

    def copy(self, m: int) -> _Batch:
        return _Batch(self.root, m, list(self.order), set(self.vset), list(self.edges))


class _Packer:
    """Mutable state of Algorithm 4 (private)."""

    def __init__(self, n: int, capacity: dict[tuple[int, int], int], k: int) -> None:
        self.n = n
        self.k = k
        self.g = {e: c for e, c in capacity.items() if c > 0}
        self.succ: list[list[int]] = [[] for _ in range(n)]
        for (u, v) in sorted(self.g):
            self.succ[u].append(v)
        self.batches: list[_Batch] = [_Batch(u, k, [u], {u}) for u in range(n)]
        self.chain = 8

    def _groups(self, current: int) -> tuple[np.ndarray, np.ndarray, list[tuple[int, int]], int, int]:
        """Arcs ``s_i -> R_i`` of the other batches, the per-``x`` arc heads/caps, sum m."""
        groups: dict[frozenset[int], int] = {}
        order: list[frozenset[int]] = []
        total = 0
        for i, b in enumerate(self.batches):
            if i == current:
                continue
            key = frozenset(b.vset)
            if key not in groups:
                groups[key] = 0
                order.append(key)
            groups[key] += b.m
            total += b.m
        multi = [key for key in order if len(key) > 1]
        tails: list[int] = []
        heads: list[int] = []
        for j, key in enumerate(multi):
            members = sorted(key)
            tails.extend([self.n + j] * len(members))
            heads.extend(members)
        x_arcs = [(self.n + j, groups[key]) for j, key in enumerate(multi)]
        x_arcs += [(next(iter(key)), groups[key]) for key in order if len(key) == 1]
        return (np.asarray(tails, dtype=np.int64), np.asarray(heads, dtype=np.int64),
                x_arcs, total, self.n + len(multi))

    def grow(self, idx: int) -> None:
        """Grow batch ``idx`` to all ranks, speculating chains of full-``mu`` steps."""
        b = self.batches[idx]
        failed: set[tuple[int, int]] = set()
        groups, count = self._groups(idx), len(self.batches)
        while len(b.vset) < self.n:
            if not self._step_chain(b, failed, groups):
                raise InternalError(
                    f"tree packing: no arc can extend the batch of root {b.root} "
                    f"(capacity condition of Theorem 30 does not hold)")
            if len(self.batches) != count:
                groups, count = self._groups(idx), len(self.batches)

    def _step_chain(self, b: _Batch, failed: set[tuple[int, int]],
                    groups: tuple[np.ndarray, np.ndarray, list[tuple[int, int]], int, int]
                    ) -> bool:
        """Evaluate up to ``self.chain`` speculative steps in one batched flow call.

        Step ``j`` is evaluated in the state where steps ``0..j-1`` were
        accepted with ``mu = m``; results are used only while that holds.
        Returns whether any candidate was left to try.
        """
        g_tails, g_heads, x_arcs, total, n_nodes = groups
        arcs = list(self.g.items())
        pos = {e: i for i, (e, _) in enumerate(arcs)}
        a_tails = np.asarray([u for (u, _), _ in arcs], dtype=np.int64)
        a_heads = np.asarray([v for (_, v), _ in arcs], dtype=np.int64)
        caps = np.asarray([c for _, c in arcs], dtype=np.int64)
        inf = int(caps.sum()) + total + 1
        g_caps = np.full(len(g_tails), inf, dtype=np.int64)
        order, vset, g_spec = list(b.order), set(b.vset), dict(self.g)
        steps: list[list[tuple[int, int]]] = []
        problems: list[FlowProblem] = []
        state = (a_tails, a_heads, caps, g_caps)
        while len(steps) < self.chain and len(vset) < self.n:
            cands = self._candidates(order, vset, g_spec, failed, 1 + _ALTERNATIVES)
            if not cands:
                break
            problems.extend(self._problem(groups, state, x, y) for x, y in cands)
            steps.append(cands)
            first = cands[0]
            if g_spec[first] < b.m:
                break  # a split would follow: stop speculating
            g_spec[first] -= b.m
            caps = caps.copy()
            caps[pos[first]] -= b.m
            state = (a_tails, a_heads, caps, g_caps)
            order.append(first[1])
            vset.add(first[1])
        if not steps:
            return False
        results = iter(solve_batch(problems, want_cut=False))
        for cands in steps:
            flows = [next(results)[0] for _ in cands]
            m_before = b.m
            for i, ((x, y), flow) in enumerate(zip(cands, flows)):
                mu = max(0, min(self.g[(x, y)], m_before, flow - total))
                if mu == 0:
                    failed.add((x, y))
                    continue
                self._accept(b, x, y, mu)
                if i > 0 or mu < m_before:
                    # an alternative or a split: the later steps assumed otherwise
                    self.chain = max(2, self.chain // 2)
                    return True
                break
            else:
                self.chain = max(2, self.chain // 2)
                return True
        self.chain = min(64, self.chain * 2)
        return True

    def _candidates(self, order: list[int], vset: set[int], g: dict[tuple[int, int], int],
                    failed: set[tuple[int, int]], count: int) -> list[tuple[int, int]]:
        """The first ``count`` untried frontier arcs in breadth-first order."""
        out: list[tuple[int, int]] = []
        for x in order:
            for y in self.succ[x]:
                if y not in vset and (x, y) not in failed and g.get((x, y), 0) > 0:
                    out.append((x, y))
                    if len(out) == count:
                        return out
        return out

    def _problem(self, groups: tuple[np.ndarray, np.ndarray, list[tuple[int, int]], int, int],
                 arcs: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
                 x: int, y: int) -> FlowProblem:
        """``D-bar`` of (B.4) for candidate ``(x, y)``."""
        g_tails, g_heads, x_arcs, _, n_nodes = groups
        a_tails, a_heads, caps, g_caps = arcs
        xs = [(h, c) for h, c in x_arcs if h != x]
        return FlowProblem(
            n_nodes,
            np.concatenate([a_tails, g_tails, np.full(len(xs), x, dtype=np.int64)]),
            np.concatenate([a_heads, g_heads, np.asarray([h for h, _ in xs], dtype=np.int64)]),
            np.concatenate([caps, g_caps, np.asarray([c for _, c in xs], dtype=np.int64)]),
            x, y)

    def _accept(self, b: _Batch, x: int, y: int, mu: int) -> None:
        if mu < b.m:
            self.batches.append(b.copy(b.m - mu))
            b.m = mu
        b.edges.append((x, y))
        b.order.append(y)
        b.vset.add(y)
        left = self.g[(x, y)] - mu
        if left:
            self.g[(x, y)] = left
        else:
            del self.g[(x, y)]


def pack_spanning_trees(
    num_ranks: int,
    capacity: dict[tuple[int, int], int],
    k: int,
    *,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[TreeBatch, ...]:
    """Pack ``k`` spanning out-trees per rank into integer capacities.

    Parameters
    ----------
    num_ranks : int
        N; ranks are ``0..N-1``.
    capacity : dict
        ``(u, v) -> integer`` tree capacity of each arc.
    k : int
        Trees per root.
    progress : callable or None
        ``progress(done, total)`` after each finished batch (``total`` is
        the current number of batches).

    Returns
    -------
    tuple of TreeBatch
        Ordered by root, then creation.

    Raises
    ------
    InternalError
        If the capacities do not admit the packing (caller's invariant).
    """
    p = _Packer(num_ranks, capacity, k)
    i = 0
    while i < len(p.batches):
        if num_ranks > 1:
            p.grow(i)
        i += 1
        if progress is not None:
            progress(i, len(p.batches))
    out = sorted(
        (TreeBatch(b.root, tuple(b.edges), b.m) for b in p.batches),
        key=lambda t: t.root,
    )
    verify_packing(num_ranks, capacity, k, out)
    return tuple(out)


def verify_packing(num_ranks: int, capacity: dict[tuple[int, int], int], k: int,
                   batches: list[TreeBatch] | tuple[TreeBatch, ...]) -> None:
    """Raise ``InternalError`` unless the batches are spanning, k per root, within capacity."""
    per_root = [0] * num_ranks
    used: dict[tuple[int, int], int] = {}
    for b in batches:
        per_root[b.root] += b.multiplicity
        reached = {b.root}
        for x, y in b.edges:
            if x not in reached or y in reached:
                raise InternalError(f"batch of root {b.root}: edge {(x, y)} breaks the out-tree")
            reached.add(y)
            used[(x, y)] = used.get((x, y), 0) + b.multiplicity
        if len(reached) != num_ranks:
            raise InternalError(f"batch of root {b.root} does not span all ranks")
    for r, m in enumerate(per_root):
        if m != k:
            raise InternalError(f"root {r} has {m} trees, expected {k}")
    for e, u in used.items():
        if u > capacity.get(e, 0):
            raise InternalError(f"arc {e} carries {u} trees over capacity {capacity.get(e, 0)}")
