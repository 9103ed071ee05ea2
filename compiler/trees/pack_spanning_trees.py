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
No flow is needed when ``g(x, y) >= sum of m(R_i) over the batches i
lacking y`` (current batch included): the direct arc and the paths
``x -> s_i -> y`` of the batches containing ``y`` already carry
``F >= sum_i m(R_i)``, so ``mu = m(R_1)``.  On boxes with wide internal
links most candidates pass this way.
Candidates are scanned in breadth-first order from the root, which keeps
trees shallow.  The arcs ``x -> s_i`` go through one hub node, so one
network per growing batch serves every candidate (only the hub arc of the
candidate's tail and the accepted arc's residual change between max-flows,
which run in C++ on that persistent network).

Complexity: independent of ``k``: one max-flow per candidate arc, O(N) per
batch for the successes plus the rejected candidates; batches number at
most ``N + (number of splits)``; the frontier scan is amortised O(arcs)
per batch.

Example
-------
>>> pack = pack_spanning_trees(3, {(0, 1): 2, (1, 2): 2, (2, 0): 2}, 1)
>>> [(b.root, b.edges, b.multiplicity) for b in pack]
[(0, ((0, 1), (1, 2)), 1), (1, ((1, 2), (2, 0)), 1), (2, ((2, 0), (0, 1)), 1)]
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from colc.compiler.trees.max_flow import FlowNetwork, SolverNetwork, solve_batch
from colc.errors import InternalError

NAME = "pack-spanning-trees"

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


class _Auxiliary:
    """``D-bar`` of (B.4) for one growing batch, kept in the C++ solver.

    Nodes: ranks ``0..n-1``, one node ``s_j`` per group of other batches with
    the same vertex set (more than one vertex), and a hub.  Arcs: the
    residual tree capacities, ``s_j -> R_j`` (infinite), ``hub -> s_j``
    (the group's multiplicity; a singleton group ``{u}`` gets ``hub -> u``)
    and ``x -> hub`` for every rank, at capacity 0 except for the current
    candidate's tail.  ``x -> hub -> s_j`` is exactly the seed's arc
    ``x -> s_j``: the hub is entered only from ``x``, and ``hub -> x`` only
    closes a cycle.
    """

    def __init__(self, packer: _Packer, current: int) -> None:
        n = packer.n
        groups: dict[frozenset[int], int] = {}
        for i, b in enumerate(packer.batches):
            if i != current:
                key = frozenset(b.vset)
                groups[key] = groups.get(key, 0) + b.m
        self.total = sum(groups.values())
        multi = sorted((sorted(key), m) for key, m in groups.items() if len(key) > 1)
        single = sorted((next(iter(key)), m) for key, m in groups.items() if len(key) == 1)
        hub = n + len(multi)
        tails: list[int] = []
        heads: list[int] = []
        caps: list[int] = []
        self.arc_of: dict[tuple[int, int], int] = {}
        for e, c in packer.g.items():
            self.arc_of[e] = len(tails)
            tails.append(e[0])
            heads.append(e[1])
            caps.append(c)
        self.inf = sum(caps) + self.total + 1
        for j, (members, m) in enumerate(multi):
            tails.append(hub)
            heads.append(n + j)
            caps.append(m)
            tails.extend([n + j] * len(members))
            heads.extend(members)
            caps.extend([self.inf] * len(members))
        for u, m in single:
            tails.append(hub)
            heads.append(u)
            caps.append(m)
        self.hub_arc = len(tails)
        tails.extend(range(n))
        heads.extend([hub] * n)
        caps.extend([0] * n)
        self.net = SolverNetwork(hub + 1, tails, heads, caps)
        self.open: int | None = None

    def flow(self, x: int, y: int) -> int:
        """``F(x, y; D-bar)``."""
        if self.open != x:
            if self.open is not None:
                self.net.set_capacity(self.hub_arc + self.open, 0)
            self.net.set_capacity(self.hub_arc + x, self.inf)
            self.open = x
        return self.net.flow(x, y)

    def set_residual(self, e: tuple[int, int], cap: int) -> None:
        self.net.set_capacity(self.arc_of[e], cap)


class _Packer:
    """Mutable state of Algorithm 4 (private)."""

    def __init__(self, n: int, capacity: dict[tuple[int, int], int], k: int) -> None:
        self.n = n
        self.k = k
        self.g = {e: c for e, c in sorted(capacity.items()) if c > 0}
        self.succ: list[list[int]] = [[] for _ in range(n)]
        for (u, v) in self.g:
            self.succ[u].append(v)
        self.batches: list[_Batch] = [_Batch(u, k, [u], {u}) for u in range(n)]
        # missing[y]: multiplicity of the batches whose vertex set lacks y
        self.missing = [(n - 1) * k] * n

    def grow(self, idx: int) -> None:
        """Grow batch ``idx`` to all ranks, one max-flow per candidate arc."""
        b = self.batches[idx]
        if len(b.vset) == self.n:
            return  # an image of a batch grown under symmetry
        failed: set[tuple[int, int]] = set()
        aux, count = _Auxiliary(self, idx), len(self.batches)
        scan = 0
        while len(b.vset) < self.n:
            cand, scan = self._candidate(b, failed, scan)
            if cand is None:
                raise InternalError(
                    f"tree packing: no arc can extend the batch of root {b.root} "
                    f"(capacity condition of Theorem 30 does not hold)")
            x, y = cand
            if self._covered(x, y):
                mu = min(self.g[cand], b.m)  # disjoint short paths suffice: no flow needed
            else:
                mu = max(0, min(self.g[cand], b.m, aux.flow(x, y) - aux.total))
            if mu == 0:
                failed.add(cand)  # a tight cut stays tight while this batch grows
                continue
            self._accept(b, x, y, mu)
            if len(self.batches) != count:
                aux, count = _Auxiliary(self, idx), len(self.batches)
            else:
                aux.set_residual(cand, self.g.get(cand, 0))

    def _covered(self, x: int, y: int) -> bool:
        """Whether ``F(x, y; D-bar) - sum_{i != 1} m(R_i) >= m(R_1)`` follows from short paths.

        Arc-disjoint paths ``x -> y`` give a lower bound on the flow: the
        direct arc, ``x -> s_i -> y`` for every other batch containing ``y``
        (their multiplicities add up to ``total - (missing[y] - m(R_1))``)
        and ``x -> z -> y`` over two residual arcs for every ``z``.  The
        bound minus ``total`` is at least ``m(R_1)`` exactly when the direct
        and two-arc paths carry ``missing[y]``.
        """
        need = self.missing[y] - self.g[(x, y)]
        if need <= 0:
            return True
        g = self.g
        for z in self.succ[x]:
            if z != y:
                need -= min(g.get((x, z), 0), g.get((z, y), 0))
                if need <= 0:
                    return True
        return False

    def _candidate(self, b: _Batch, failed: set[tuple[int, int]], scan: int
                   ) -> tuple[tuple[int, int] | None, int]:
        """The first untried frontier arc in breadth-first order, and the new scan start.

        Arcs only ever become ineligible while a batch grows (its vertex set
        grows, capacities shrink, failures accumulate), so ranks before
        ``scan`` never need another look.
        """
        order, vset, g = b.order, b.vset, self.g
        while scan < len(order):
            x = order[scan]
            for y in self.succ[x]:
                if y not in vset and (x, y) not in failed and g.get((x, y), 0) > 0:
                    return (x, y), scan
            scan += 1
        return None, scan

    def _accept(self, b: _Batch, x: int, y: int, mu: int) -> None:
        if mu < b.m:
            self.batches.append(b.copy(b.m - mu))
            b.m = mu
        b.edges.append((x, y))
        b.order.append(y)
        b.vset.add(y)
        self.missing[y] -= mu
        left = self.g[(x, y)] - mu
        if left:
            self.g[(x, y)] = left
        else:
            del self.g[(x, y)]


class _Symmetry:
    """Box rotations of the ranks, applied to whole batches (private).

    ``perms[s][r]`` is the image of rank ``r`` under rotation ``s + 1``.
    After the batch of an orbit's first root is grown, its images become the
    batches of the other roots of the orbit, if they fit the residual
    capacities and the completion condition still holds.  The condition
    (Theorem 31): for every rank ``v``, a max-flow from a super source with
    arcs ``s -> s_i`` (capacity ``m(R_i)``) and ``s_i -> R_i`` (infinite)
    reaches ``v`` with ``sum_i m(R_i)``.  On a rotation-invariant state one
    ``v`` per orbit of ranks suffices.
    """

    def __init__(self, n: int, capacity: dict[tuple[int, int], int],
                 perms: list[list[int]]) -> None:
        self.perms = perms
        seen: set[int] = set()
        self.reps: set[int] = set()
        for r in range(n):
            if r not in seen:
                self.reps.add(r)
                seen.add(r)
                seen.update(p[r] for p in perms)
        self.on = bool(perms) and all(sorted(p) == list(range(n)) for p in perms) and all(
            capacity.get((p[u], p[v]), 0) == c for p in perms for (u, v), c in capacity.items())

    def apply(self, packer: _Packer, idx: int) -> bool:
        """Copy batch ``idx`` (complete, multiplicity k) to its orbit; False if refused."""
        b = packer.batches[idx]
        images = [p[b.root] for p in self.perms]
        if b.m != packer.k or len(packer.batches) != packer.n or any(
                len(packer.batches[r].vset) > 1 for r in images):
            return False
        use: dict[tuple[int, int], int] = {}
        for p in self.perms:
            for x, y in b.edges:
                e = (p[x], p[y])
                use[e] = use.get(e, 0) + b.m
        if any(packer.g.get(e, 0) < u for e, u in use.items()):
            return False
        saved_g = dict(packer.g)
        saved = {r: packer.batches[r] for r in images}
        for e, u in use.items():
            packer.g[e] -= u
            if not packer.g[e]:
                del packer.g[e]
        for p, r in zip(self.perms, images, strict=True):
            order = [p[v] for v in b.order]
            packer.batches[r] = _Batch(r, b.m, order, set(order),
                                       [(p[x], p[y]) for x, y in b.edges])
        if not self._feasible(packer):
            packer.g = saved_g
            for r, old in saved.items():
                packer.batches[r] = old
            return False
        for r in images:
            for v in range(packer.n):
                if v != r:
                    packer.missing[v] -= b.m
        return True

    def _feasible(self, packer: _Packer) -> bool:
        n = packer.n
        groups: dict[frozenset[int], int] = {}
        for c in packer.batches:
            key = frozenset(c.vset)
            groups[key] = groups.get(key, 0) + c.m
        need = sum(groups.values())
        src = n + len(groups)
        net = FlowNetwork(src + 1)
        for (u, v), c in packer.g.items():
            net.add_arc(u, v, c)
        inf = sum(packer.g.values()) + need + 1
        for j, (members, m) in enumerate(sorted((sorted(key), m) for key, m in groups.items())):
            net.add_arc(src, n + j, m)
            for v in members:
                net.add_arc(n + j, v, inf)
        flows = solve_batch([net.problem(src, v) for v in sorted(self.reps)],
                            want_cut=False)
        return all(value >= need for value, _ in flows)


def pack_spanning_trees(
    num_ranks: int,
    capacity: dict[tuple[int, int], int],
    k: int,
    *,
    progress: Callable[[int, int], None] | None = None,
    symmetry: list[list[int]] | None = None,
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
    sym = _Symmetry(num_ranks, p.g, symmetry) if symmetry else None
    i = 0
    while i < len(p.batches):
        if num_ranks > 1:
            p.grow(i)
            if sym is not None and sym.on and i in sym.reps:
                sym.on = sym.apply(p, i)
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
