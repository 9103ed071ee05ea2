"""Pass ``split-switches``: remove switches by edge splitting (ForestColl Alg. 2/3).

Input invariant: an integer-capacity Eulerian digraph ``D`` (capacities in
units of trees, ``U * beta_e``) on compute nodes and switches, and ``k`` such
that ``min_v F(s, v; D_k) >= N k`` (``s`` has an arc of capacity ``k`` to
every compute node) -- what ``find_optimal_throughput`` establishes.
Output invariant: a ``SwitchFree`` logical topology on the compute nodes
only that still satisfies ``min_v F(s, v; D*_k) >= N k`` (so ``k`` spanning
out-trees per root exist, Theorem 25), and for each logical arc the
multiset of physical paths (through switches) that carry its capacity.

Algorithm (seed 001 section 4.5.3, Algorithm 3, Theorem 28, B.5.2): for each
switch ``w``, each egress ``f = (w, t)`` is paired with ingress arcs
``e = (u, w)`` and the largest safe amount ``gamma`` (B.1) is split off into
``(u, t)``.  ``gamma`` is the minimum of both capacities and of
``F(u, w; D^_(u,w),v) - Nk`` and ``F(w, t; D^_(w,t),v) - Nk`` over compute
nodes ``v``.  Two exact shortcuts avoid most of those ``2N`` max-flows:
adding the ``v`` arc only raises the flow, so one flow without it is a
lower bound for every ``v`` (if it already leaves room for the whole
``gamma``, no other flow is needed); and for every ``v`` outside the
minimal source side of that flow's minimum cut the flow is exactly the
same, so only the ``v`` inside it need their own flow.  Ingress arcs are
tried in an order that pairs ranks not sharing another switch first (the
authors' "different boxes first" on global switches) and otherwise in ring
order; this changes only the routing, not the optimum.  Splitting
``u == t`` drops the capacity (a self-loop carries nothing).

Identical boxes (the 1024-GPU clusters of seed 001 4.6.5 are 128 equal boxes): when
the topology has a "next box" automorphism (``box_rotation``), each split
found for one port is applied to its whole orbit at once, after one
connectivity check with a max-flow to one rank per orbit (enough on a
symmetric state); if the check fails the run drops the symmetry and goes
on one split at a time.  The result is then rotation-invariant too, and a
switch's ports cost one gamma evaluation per orbit instead of one each
(DGX A100 x128: 2.7 s instead of about 5 minutes).

Complexity: O(sum over switches of deg_in * deg_out) gamma evaluations in
the worst case, each 2..2N+2 max-flows on |V|+1 nodes; typically one or two
evaluations per egress arc and two flows each.

Example
-------
>>> sf = split_switches(("a", "b", "w"), (True, True, False),
...                     {(0, 2): 1, (2, 0): 1, (1, 2): 1, (2, 1): 1}, k=1)
>>> sorted(sf.capacity.items())
[((0, 1), 1), ((1, 0), 1)]
>>> sf.routes[(0, 1)]
(((0, 2, 1), 1),)
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from colc.compiler.trees.max_flow import FlowNetwork, solve_batch
from colc.errors import InternalError

NAME = "split-switches"

#: ``progress(done, total)`` callback type.
Progress = Callable[[int, int], None]


@dataclass(frozen=True, slots=True)
class SwitchFree:
    """A switch-free logical topology with its routing.

    Parameters
    ----------
    capacity : dict
        ``(i, j) -> units`` between compute node indices.
    routes : dict
        ``(i, j) -> ((path, units), ...)``: physical paths as node-index
        tuples (``path[0] == i``, ``path[-1] == j``), units summing to the
        capacity of ``(i, j)``.
    """

    capacity: dict[tuple[int, int], int]
    routes: dict[tuple[int, int], tuple[tuple[tuple[int, ...], int], ...]]


class _Splitter:
    """Mutable state of one run of Algorithm 3 (private)."""

    def __init__(self, n: int, compute: tuple[bool, ...],
                 caps: dict[tuple[int, int], int], k: int,
                 symmetry: list[list[int]] | None = None) -> None:
        self.symmetry = symmetry
        self.orbit_reps = _orbit_representatives(n, compute, symmetry) if symmetry else []
        self.rail = _rails(n, symmetry)
        self.n = n
        self.compute = compute
        self.ranks = [i for i in range(n) if compute[i]]
        self.k = k
        self.need = len(self.ranks) * k
        self.succ: list[dict[int, int]] = [{} for _ in range(n)]
        self.pred: list[dict[int, int]] = [{} for _ in range(n)]
        self.paths: dict[tuple[int, int], list[list[object]]] = {}
        for (u, v), c in caps.items():
            if c > 0 and u != v:
                self.succ[u][v] = c
                self.pred[v][u] = c
                self.paths[(u, v)] = [[(u, v), c]]
        self.switch_nbrs = [
            frozenset(x for x in (*self.succ[i], *self.pred[i]) if not compute[x])
            for i in range(n)
        ]
        self.direct = [frozenset(x for x in self.succ[i] if compute[x]) for i in range(n)]
        self.component = _direct_components(n, compute, self.succ)

    # -- network -------------------------------------------------------
    def network(self, change: dict[tuple[int, int], int] | None = None
                ) -> tuple[FlowNetwork, int, int]:
        """``D_k`` (current capacities plus ``change``), its source and an infinity."""
        delta = dict(change or {})
        s = self.n
        net = FlowNetwork(self.n + 1)
        total = 0
        for u in range(self.n):
            for v, c in self.succ[u].items():
                c += delta.pop((u, v), 0)
                if c:
                    net.add_arc(u, v, c)
                    total += c
        for (u, v), c in delta.items():  # arcs the change creates
            net.add_arc(u, v, c)
            total += c
        for r in self.ranks:
            net.add_arc(s, r, self.k)
        return net, s, total + self.need + 1

    def gamma(self, u: int, w: int, t: int) -> int:
        """Largest safe split of ``(u, w), (w, t)`` (Theorem 28, B.1).

        Family 1: ``D^_(u,w),v`` = ``D_k`` + inf arcs ``u->s, u->t, v->w``,
        flow ``u -> w`` (``v`` not in ``{u, t}``); family 2: ``D^_(w,t),v``
        = ``D_k`` + inf arcs ``w->s, u->t, v->t``, flow ``w -> t``.
        """
        room = min(self.succ[u][w], self.succ[w][t])
        net, s, inf = self.network()
        ut = [(u, t, inf)] if u != t else []
        fams = [
            (u, w, [(u, s, inf), *ut], w, [v for v in self.ranks if v not in (u, t)]),
            (w, t, [(w, s, inf), *ut], t, list(self.ranks)),
        ]
        fams = [f for f in fams if f[4]]
        bases = solve_batch([net.problem(src, dst, base) for src, dst, base, _, _ in fams],
                            want_cut=True)
        best = room
        todo: list[tuple[int, int, list[tuple[int, int, int]]]] = []
        for (src, dst, base, head, cands), (value, side) in zip(fams, bases):
            slack = value - self.need
            if slack >= room:
                continue
            assert side is not None
            inside = [v for v in cands if v in side]
            if len(inside) < len(cands):
                best = min(best, slack)
            todo.extend((src, dst, [*base, (v, head, inf)]) for v in inside)
        if todo and best > 0:
            flows = solve_batch([net.problem(a, b, ex) for a, b, ex in todo], want_cut=False)
            for value, _ in flows:
                best = min(best, value - self.need)
        return self._checked(best)

    @staticmethod
    def _checked(g: int) -> int:
        if g < 0:
            raise InternalError("edge splitting: connectivity invariant broken (gamma < 0)")
        return g

    # -- symmetric splitting -------------------------------------------
    def split_orbit(self, u: int, w: int, t: int, amount: int) -> None:
        """Split ``(u, w, t)`` and, while the state is symmetric, all its images.

        The images are applied only when the combined split keeps
        ``min_v F(s, v) >= N k`` (checked at one rank per orbit, which
        suffices on a symmetric state); otherwise symmetry is dropped and
        the run continues one split at a time, which is always safe.
        """
        images = [(p[u], p[w], p[t]) for p in self.symmetry or ()]
        if images and not self._orbit_safe([(u, w, t), *images], amount):
            self.symmetry = None
            images = []
        self.split(u, w, t, amount)
        for a, b, c in images:
            self.split(a, b, c, amount)

    def _orbit_safe(self, triples: list[tuple[int, int, int]], amount: int) -> bool:
        change: dict[tuple[int, int], int] = {}
        for a, b, c in triples:
            for arc in ((a, b), (b, c)):
                change[arc] = change.get(arc, 0) - amount
            if a != c:
                change[(a, c)] = change.get((a, c), 0) + amount
        if any(self.succ[a].get(b, 0) + d < 0 for (a, b), d in change.items()):
            return False
        net, s, _ = self.network(change)
        flows = solve_batch([net.problem(s, v) for v in self.orbit_reps], want_cut=False)
        return all(value >= self.need for value, _ in flows)

    # -- splitting -----------------------------------------------------
    def _take(self, arc: tuple[int, int], amount: int) -> list[tuple[tuple[int, ...], int]]:
        out: list[tuple[tuple[int, ...], int]] = []
        queue = self.paths[arc]
        while amount > 0:
            path, units = queue[0]
            assert isinstance(path, tuple) and isinstance(units, int)
            used = min(units, amount)
            out.append((path, used))
            amount -= used
            if used == units:
                queue.pop(0)
            else:
                queue[0][1] = units - used
        return out

    def _dec(self, u: int, v: int, amount: int) -> None:
        c = self.succ[u][v] - amount
        if c == 0:
            del self.succ[u][v]
            del self.pred[v][u]
            del self.paths[(u, v)]
        else:
            self.succ[u][v] = c
            self.pred[v][u] = c

    def split(self, u: int, w: int, t: int, amount: int) -> None:
        first = self._take((u, w), amount)
        second = self._take((w, t), amount)
        self._dec(u, w, amount)
        self._dec(w, t, amount)
        if u == t:
            return
        merged = self.paths.setdefault((u, t), [])
        i = j = 0
        a_left, b_left = first[0][1], second[0][1]
        while i < len(first):
            used = min(a_left, b_left)
            merged.append([first[i][0] + second[j][0][1:], used])
            a_left -= used
            b_left -= used
            if a_left == 0:
                i += 1
                a_left = first[i][1] if i < len(first) else 0
            if b_left == 0:
                j += 1
                b_left = second[j][1] if j < len(second) else 0
        c = self.succ[u].get(t, 0) + amount
        self.succ[u][t] = c
        self.pred[t][u] = c

    def _spread(self, w: int, ring: list[int]) -> None:
        """First pass of a spread split: every egress takes an equal share from
        each ingress of its most preferred class (no direct link to the egress
        rank, then another box), so the logical arcs fan out to all peers
        instead of forming a ring; the trees packed on them are then shallow.
        """
        done: set[int] = set()
        for t in sorted(self.succ[w]):
            if t in done or t not in self.succ[w]:
                continue  # an image of an egress already split orbit-wise
            if self.symmetry:
                done.update(p[t] for p in self.symmetry)
            order = [u for u in self.ingress_order(w, t, ring) if u != t]
            if not order:
                continue
            first = self._class(w, t, order[0])
            peers = [u for u in order if self._class(w, t, u) == first]
            share = -(-self.succ[w][t] // len(peers))
            for u in peers:
                if t not in self.succ[w] or w not in self.succ[u]:
                    continue
                g = min(self.gamma(u, w, t), share)
                if g > 0:
                    self.split_orbit(u, w, t, g)

    def _class(self, w: int, t: int, u: int) -> tuple[bool, bool, bool]:
        return (t in self.direct[u], self.component[u] == self.component[t],
                self.rail[u] != self.rail[t])

    def ingress_order(self, w: int, t: int, ring: list[int]) -> list[int]:
        pos = {u: i for i, u in enumerate(ring)}
        t_pos = pos.get(t, 0)
        size = max(len(ring), 1)
        others = self.switch_nbrs[t] - {w}

        def key(u: int) -> tuple[bool, bool, bool, bool, int, int]:
            shares = bool(others & (self.switch_nbrs[u] - {w}))
            dist = (pos[u] - t_pos) % size if u in pos else size
            return (u == t, t in self.direct[u], self.component[u] == self.component[t],
                    shares, dist, u)

        return sorted(self.pred[w], key=key)

    def remove(self, w: int, spread: bool = False) -> None:
        ring = sorted(self.pred[w])
        if spread:
            self._spread(w, ring)
        for t in sorted(self.succ[w]):
            for u in self.ingress_order(w, t, ring):
                if t not in self.succ[w]:
                    break
                if w not in self.succ[u]:
                    continue
                g = self.gamma(u, w, t)
                if g > 0:
                    self.split_orbit(u, w, t, g)
            if t in self.succ[w]:
                raise InternalError(
                    f"edge splitting could not drain arc ({w}, {t}) (Theorem 27 violated)")
        if self.succ[w] or self.pred[w]:
            raise InternalError(f"edge splitting left switch {w} connected")


def box_rotation(nodes: tuple[str, ...], compute: tuple[bool, ...],
                 capacity: dict[tuple[int, int], int]) -> list[list[int]] | None:
    """The powers of the "next box" automorphism, if the topology has one.

    Nodes named ``b<box><suffix>`` (the families' and NCCL loaders'
    naming) are boxes; the rotation maps ``b<i><x>`` to ``b<i+1 mod B><x>``
    and fixes every other node.  It is returned only if every rank is in a
    box, every box has the same suffixes and the rotation preserves every
    capacity; then it acts freely on the ranks.

    Returns
    -------
    list of list of int or None
        ``perms[s-1][i]`` = image of node ``i`` under rotation by ``s``
        boxes, for ``s = 1..B-1``.
    """
    boxes: dict[int, dict[str, int]] = {}
    fixed: list[int] = []
    for i, name in enumerate(nodes):
        m = _BOX.match(name)
        if m is None:
            if compute[i]:
                return None
            fixed.append(i)
            continue
        boxes.setdefault(int(m.group(1)), {})[m.group(2)] = i
    count = len(boxes)
    if count < 2 or sorted(boxes) != list(range(count)):
        return None
    suffixes = set(boxes[0])
    if any(set(b) != suffixes for b in boxes.values()):
        return None
    perms = []
    for shift in range(1, count):
        perm = list(range(len(nodes)))
        for b, members in boxes.items():
            for suffix, i in members.items():
                perm[i] = boxes[(b + shift) % count][suffix]
        perms.append(perm)
    first = perms[0]
    if any(capacity.get((first[u], first[v]), 0) != c for (u, v), c in capacity.items()):
        return None
    return perms


_BOX = re.compile(r"^b(\d+)(\D.*)$")


def _rails(n: int, perms: list[list[int]] | None) -> list[int]:
    """Per node, the smallest node of its orbit under the rotations (its rail).

    Without symmetry every node is its own rail.
    """
    rail = list(range(n))
    for i in range(n):
        rail[i] = min([i, *(p[i] for p in perms or ())])
    return rail


def _orbit_representatives(n: int, compute: tuple[bool, ...],
                           perms: list[list[int]]) -> list[int]:
    """The smallest rank of each orbit of ranks under the rotations."""
    seen: set[int] = set()
    reps = []
    for i in range(n):
        if compute[i] and i not in seen:
            reps.append(i)
            seen.add(i)
            seen.update(p[i] for p in perms)
    return reps


def _direct_components(n: int, compute: tuple[bool, ...],
                       succ: list[dict[int, int]]) -> list[int]:
    """Per node, the smallest rank index of its component over rank-rank links."""
    comp = list(range(n))
    for i in range(n):
        if not compute[i] or comp[i] != i:
            continue
        stack = [i]
        while stack:
            u = stack.pop()
            for v in succ[u]:
                if compute[v] and comp[v] == v and v != i:
                    comp[v] = i
                    stack.append(v)
    return comp


def split_switches(
    nodes: tuple[str, ...],
    compute: tuple[bool, ...],
    capacity: dict[tuple[int, int], int],
    k: int,
    *,
    progress: Progress | None = None,
    symmetric: bool = True,
    spread: bool = False,
) -> SwitchFree:
    """Replace every switch by direct logical arcs, keeping ``k`` trees per root.

    Parameters
    ----------
    nodes : tuple of str
        Node ids (only the count is used, and ids for messages).
    compute : tuple of bool
        Which nodes are ranks.
    capacity : dict
        ``(i, j) -> integer units`` (Eulerian; see the module docstring).
    k : int
        Trees per root.
    progress : callable or None
        ``progress(done, total)`` after each switch.
    symmetric : bool
        Exploit identical boxes (``box_rotation``): each split is applied
        to its whole orbit at once when a connectivity check at one rank
        per orbit allows it, so a switch's ports are processed once per
        orbit instead of once each.
    spread : bool
        Split each egress evenly over the ingress ports of its preferred
        class before draining the rest (``_Splitter._spread``): logical arcs
        to every peer of a switch rather than a ring, hence shallow trees
        (what the runtime needs: every tree hop is a dependent step).  Costs
        one gamma evaluation per (ingress, egress) pair of a switch.

    Returns
    -------
    SwitchFree

    Raises
    ------
    InternalError
        If the connectivity invariant does not hold on input or breaks.
    """
    rotation = box_rotation(nodes, compute, capacity) if symmetric else None
    st = _Splitter(len(nodes), compute, capacity, k, rotation)
    switches = [i for i in range(len(nodes)) if not compute[i]]
    for done, w in enumerate(switches, 1):
        st.remove(w, spread)
        if progress is not None:
            progress(done, len(switches))
    routes: dict[tuple[int, int], tuple[tuple[tuple[int, ...], int], ...]] = {}
    cap: dict[tuple[int, int], int] = {}
    for u in range(len(nodes)):
        for v, c in sorted(st.succ[u].items()):
            if not (compute[u] and compute[v]):
                raise InternalError(f"arc {nodes[u]}->{nodes[v]} left after edge splitting")
            cap[(u, v)] = c
            merged: dict[tuple[int, ...], int] = {}
            for path, units in st.paths[(u, v)]:
                assert isinstance(path, tuple) and isinstance(units, int)
                merged[path] = merged.get(path, 0) + units
            routes[(u, v)] = tuple(merged.items())
    return SwitchFree(cap, routes)
