"""Rank classes of a direct fabric under its automorphisms (for LP (A.1)).

LP (A.1) is invariant under the fabric's automorphisms, so it has an
optimal flow that is too: the flow of a source ``s`` is the flow of any
other source ``o`` carried by an automorphism ``g`` with ``g(o) = s``.  So
the LP needs one source per class of ranks that automorphisms join, and for
every other source one automorphism from its class's representative.
``rank_translations`` in ``mcf.py`` knows the families' numbering (cyclic
shifts, torus translations, XOR); this module finds automorphisms of any
fabric of ranks, e.g. line-graph expansions, whose numbering hides them
(seed 001 Table 3.4's L^3(C(16,{3,4})): 1024 ranks in 32 classes, so the LP
has 32 sources instead of 1024).

Method: individualization and refinement, as graph canonisation tools do.
Colour refinement gives every rank a colour from its own colour and the
multisets of (colour, capacity) of its in- and out-neighbours, until the
partition stops splitting; colours are 64-bit hashes, so two runs colour
equivalent ranks alike.  Giving rank ``x`` a colour of its own and refining
yields an invariant of ``x`` (the sorted colours): ranks with different
invariants are in different classes.  Within a cell of equal invariants,
``a`` is mapped to ``b`` by refining both sides, and, while cells of several
ranks remain, individualizing one rank of the first such cell on the ``a``
side against each of that cell's ranks on the ``b`` side (backtracking,
``SEARCH_BUDGET`` refinements at most).  A discrete partition pairs ranks by
colour; the pairing is kept only if it maps every link onto a link of the
same capacity.  Automorphisms found join classes (union-find); each class's
transversal is the closure of the found automorphisms from its
representative (breadth first, so the result is deterministic).

Hash collisions can only merge colours, never split equivalent ranks, and
every permutation is checked against the links, so the classes are always
correct; a search that gives up only leaves more classes (a larger LP).
Ranks already joined are not searched again (networkx's ``UnionFind``).

Input invariant: ``n`` ranks and directed links ``(u, v)`` with capacities
(no switches: the LP's nodes are the ranks).
Output invariant: ``RankClasses`` whose ``perm[s]`` is an automorphism of
the links with ``perm[s][rep[s]] = s``.
Complexity: ``N`` refinements of ``O(E)`` numpy work each (about
``diameter`` rounds), plus one search per automorphism kept and per
invariant-equal pair that no automorphism joins.
Seed: 001 appendix A.1.5 (LP (A.1)); symmetry reduction of the LP is
colc's (the seed solves the whole LP).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np
from networkx.utils import UnionFind

#: Refinements one search for an automorphism ``a -> b`` may spend.
SEARCH_BUDGET = 64
#: Searches that found no automorphism after which the rest are not tried.
MAX_FAILED_SEARCHES = 64

_U64 = np.uint64


@dataclass(frozen=True, slots=True)
class RankClasses:
    """Classes of ranks joined by automorphisms.

    Attributes
    ----------
    reps : tuple of int
        The representatives, ascending (the smallest rank of each class).
    rep : tuple of int
        Per rank, its class's representative.
    perm : tuple of numpy.ndarray
        Per rank ``s``, an automorphism (node permutation, ``int64``) with
        ``perm[s][rep[s]] == s`` (the identity for a representative).
    """

    reps: tuple[int, ...]
    rep: tuple[int, ...]
    perm: tuple[np.ndarray, ...]


def rank_classes(n: int, edges: list[tuple[int, int]], capacity: list[float]) -> RankClasses:
    """Classes of the ``n`` ranks under automorphisms of the weighted links.

    Parameters
    ----------
    n : int
        Ranks, numbered ``0 .. n-1``.
    edges : list of (int, int)
        Directed links, no duplicates.
    capacity : list of float
        Per link.

    Returns
    -------
    RankClasses
    """
    graph = _Graph(n, edges, capacity)
    base = graph.refine(np.zeros(n, dtype=_U64))
    invariants = [_digest(graph.refine(_individualize(base, x, 0))) for x in range(n)]
    joined = UnionFind(range(n))
    gens: list[np.ndarray] = []
    failed = 0
    for cell in _cells(invariants):
        a = cell[0]
        side_a = graph.refine(_individualize(base, a, 0))
        for b in cell[1:]:
            if joined[b] == joined[a] or failed >= MAX_FAILED_SEARCHES:
                continue
            perm = _Search(graph).run(side_a, graph.refine(_individualize(base, b, 0)), 1)
            if perm is None:
                failed += 1
                continue
            gens.append(perm)
            for x in range(n):
                joined.union(x, int(perm[x]))
    return _transversals(n, gens)


class _Graph:
    """Links as arrays, with colour refinement over them."""

    def __init__(self, n: int, edges: list[tuple[int, int]], capacity: list[float]) -> None:
        self.n = n
        self.us = np.array([u for u, _ in edges], dtype=np.int64)
        self.vs = np.array([v for _, v in edges], dtype=np.int64)
        _, code = np.unique(np.asarray(capacity, dtype=float), return_inverse=True)
        self.cap = code.astype(_U64) + _U64(1)
        self.cap_of = dict(zip((self.us * n + self.vs).tolist(), code.tolist(), strict=True))

    def refine(self, colors: np.ndarray) -> np.ndarray:
        """Colour refinement from ``colors`` (uint64) until no cell splits."""
        count = len(np.unique(colors))
        with np.errstate(over="ignore"):
            while True:
                out = np.zeros(self.n, dtype=_U64)
                inn = np.zeros(self.n, dtype=_U64)
                np.add.at(out, self.us, _mix(colors[self.vs] * _U64(0x100000001B3) + self.cap))
                np.add.at(inn, self.vs, _mix(colors[self.us] * _U64(0xC2B2AE3D27D4EB4F)
                                             + self.cap))
                colors = _mix(_mix(colors) + out * _U64(3) + _mix(inn))
                now = len(np.unique(colors))
                if now == count:
                    return colors
                count = now

    def is_automorphism(self, perm: np.ndarray) -> bool:
        """Whether ``perm`` maps every link onto a link of the same capacity."""
        n = self.n
        mapped = (perm[self.us] * n + perm[self.vs]).tolist()
        own = (self.us * n + self.vs).tolist()
        cap_of = self.cap_of
        return all(cap_of.get(k) == cap_of[o] for k, o in zip(mapped, own, strict=True))


class _Search:
    """Backtracking search for an automorphism between two refined colourings."""

    def __init__(self, graph: _Graph) -> None:
        self.graph = graph
        self.left = SEARCH_BUDGET

    def run(self, ca: np.ndarray, cb: np.ndarray, depth: int) -> np.ndarray | None:
        """An automorphism taking the ranks of each colour of ``ca`` to those of
        the same colour of ``cb``, or None (none, or the budget ran out)."""
        sa, sb = np.sort(ca), np.sort(cb)
        if not np.array_equal(sa, sb):
            return None
        order_a, order_b = np.argsort(ca, kind="stable"), np.argsort(cb, kind="stable")
        repeated = np.flatnonzero(sa[1:] == sa[:-1])
        if not len(repeated):
            perm = np.empty(self.graph.n, dtype=np.int64)
            perm[order_a] = order_b
            return perm if self.graph.is_automorphism(perm) else None
        color = sa[repeated[0]]
        x = int(np.flatnonzero(ca == color)[0])
        left_a = None
        for y in np.flatnonzero(cb == color).tolist():
            if self.left <= 0:
                return None
            self.left -= 2
            if left_a is None:
                left_a = self.graph.refine(_individualize(ca, x, depth))
            found = self.run(left_a, self.graph.refine(_individualize(cb, y, depth)), depth + 1)
            if found is not None:
                return found
        return None


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser, elementwise on uint64 (wrapping)."""
    with np.errstate(over="ignore"):
        x = x + _U64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> _U64(30))) * _U64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> _U64(27))) * _U64(0x94D049BB133111EB)
        return x ^ (x >> _U64(31))


def _individualize(colors: np.ndarray, x: int, depth: int) -> np.ndarray:
    """``colors`` with rank ``x`` given a colour of its own (one per depth, so
    both sides of a search individualize alike)."""
    out = colors.copy()
    with np.errstate(over="ignore"):
        out[x] = _mix(np.array([0x5EED + depth], dtype=_U64))[0] ^ _mix(colors[x:x + 1])[0]
    return out


def _digest(colors: np.ndarray) -> bytes:
    return np.sort(colors).tobytes()


def _cells(invariants: list[bytes]) -> list[list[int]]:
    """Ranks grouped by invariant, each group ascending, groups by first rank."""
    groups: dict[bytes, list[int]] = {}
    for x, key in enumerate(invariants):
        groups.setdefault(key, []).append(x)
    return sorted((g for g in groups.values() if len(g) > 1), key=lambda g: g[0])


def _transversals(n: int, gens: list[np.ndarray]) -> RankClasses:
    """Per class, breadth first from its smallest rank over the generators:
    an automorphism from the representative to every rank of the class."""
    identity = np.arange(n, dtype=np.int64)
    perm: list[np.ndarray | None] = [None] * n
    rep = [0] * n
    reps = []
    for o in range(n):
        if perm[o] is not None:
            continue
        reps.append(o)
        perm[o], rep[o] = identity, o
        queue = deque([o])
        while queue:
            s = queue.popleft()
            for g in gens:
                t = int(g[s])
                if perm[t] is None:
                    perm[t], rep[t] = g[perm[s]], o
                    queue.append(t)
    return RankClasses(tuple(reps), tuple(rep), tuple(perm))  # type: ignore[arg-type]
