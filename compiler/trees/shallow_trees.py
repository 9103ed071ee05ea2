"""Pass ``shallow-trees``: hierarchical broadcast trees, at most one network hop deep.

ForestColl's packing (``generate_trees``) reaches the cut bound, but on
boxes behind a switch its trees are deep (up to a dozen hops on two DGX A100
boxes), and on the runtime every tree hop is a dependent step: the time to
fill and drain that pipeline costs more than the last percent of bandwidth.
This pass builds the trees a hierarchical library would use instead
(``--algorithm hier``):

* every rank ``s`` has *box trees* that reach every rank of its box over
  the links and switches inside it (not through network switches): a star
  when ``s`` reaches every box peer directly (behind an NVSwitch), else the
  ForestColl trees of the box alone (bandwidth-optimal inside the box,
  e.g. over the xGMI links of an MI250 box; ``pack_trees`` on the box's
  sub-topology), used in turn by the trees of ``s``;
* tree ``i`` of root ``r`` broadcasts within ``r``'s box along a box tree of
  ``r``, crosses to every other box ``B`` once, from ``r`` itself to an
  *entry* ``e`` of ``B`` it reaches through the network (or, when ``r``
  reaches no rank of ``B``, from the box peer of ``r`` that reaches the
  entry), and ``e`` broadcasts within ``B`` along one of its box trees;
* entries rotate over the candidates with the tree index and the root's
  place in its box, so every rank is the entry of the same number of trees.

Input invariant: a validated ``Topology`` in which every box can reach
every other box through the network.
Output invariant: a ``TreePacking`` (``k`` trees of multiplicity 1 per
root, each a spanning out-tree over rank pairs joined by a switch path),
with ``tree_bandwidth`` the largest ``y`` the links allow and
``inv_x_star`` the exact optimum, so ``algbw / optimal_algbw`` says what
the shallowness costs.  It is not optimal in general.

Complexity: O(N * k * boxes + N * V * E_box) for ``V`` box-tree variants.
"""

from __future__ import annotations

from collections import deque
from fractions import Fraction

from colc.errors import UnsupportedError
from colc.ir.routing import Router
from colc.ir.topology import Topology, box_topology, boxes
from colc.ir.trees import Tree, TreePacking

NAME = "shallow-trees"
#: Most trees per root (entries tried per other box).
MAX_K = 16


class _Fabric:
    """Reach, capacities and link loads used to balance the trees."""

    def __init__(self, topo: Topology) -> None:
        self.topo = topo
        self.router = Router(topo)
        self.groups = boxes(topo)
        self.box_of = {r: i for i, g in enumerate(self.groups) for r in g}
        self.load: dict[tuple[str, str], int] = {}
        n = topo.num_ranks
        self.paths = [self.router.switch_paths(a) for a in range(n)]

    def internal(self, a: int, b: int) -> bool:
        path = self.paths[a].get(b)
        return path is not None and not any(self.topo.node[v].is_network for v in path)

    def cost(self, a: int, b: int) -> float:
        path = self.paths[a][b]
        return max((self.load.get(e, 0) + 1) / float(self.router.cap[e])
                   for e in zip(path, path[1:], strict=False))

    def use(self, a: int, b: int) -> None:
        path = self.paths[a][b]
        for e in zip(path, path[1:], strict=False):
            self.load[e] = self.load.get(e, 0) + 1


def _box_tree(fab: _Fabric, src: int) -> list[tuple[int, int]]:
    """A breadth-first tree of ``src``'s box, parents chosen on the least loaded links."""
    members = fab.groups[fab.box_of[src]]
    level = {src: 0}
    queue = deque([src])
    while queue:
        u = queue.popleft()
        for v in members:
            if v not in level and fab.internal(u, v):
                level[v] = level[u] + 1
                queue.append(v)
    if len(level) != len(members):
        raise UnsupportedError(f"rank {src} cannot reach its whole box without the network")
    edges = []
    for v in sorted(members, key=lambda x: (level[x], x)):
        if v == src:
            continue
        parents = [u for u in members if level.get(u) == level[v] - 1 and fab.internal(u, v)]
        best = min(parents, key=lambda u: (fab.cost(u, v), u))
        fab.use(best, v)
        edges.append((best, v))
    return edges


def _all_box_trees(topo: Topology, fab: _Fabric) -> dict[int, list[list[tuple[int, int]]]]:
    """Box trees of every rank: one star, or the box's ForestColl trees (one per unit)."""
    out: dict[int, list[list[tuple[int, int]]]] = {}
    for members in fab.groups:
        if all(fab.internal(a, b) for a in members for b in members if a != b):
            for s in members:
                out[s] = [_box_tree(fab, s)]
            continue
        for root, trees in _box_packing(topo, members).items():
            out[root] = trees
    return out


def _box_packing(topo: Topology, members: list[int]) -> dict[int, list[list[tuple[int, int]]]]:
    """ForestColl trees of one box (its ranks, internal switches and links)."""
    from colc.compiler.trees.generate_trees import pack_trees

    sub = box_topology(topo, members)
    local = [topo.rank_of[i] for i in sub.ranks]
    packing = pack_trees(sub)
    out: dict[int, list[list[tuple[int, int]]]] = {}
    for t in packing.trees:
        edges = [(local[a], local[b]) for a, b in t.edges]
        out.setdefault(local[t.root], []).extend([edges] * t.multiplicity)
    return out


def _pick(trees: list[list[tuple[int, int]]], i: int) -> list[tuple[int, int]]:
    return trees[i % len(trees)]


def _entries(fab: _Fabric, root: int, box: int) -> list[tuple[int | None, int]]:
    """``(relay, entry)`` ways into ``box``: direct (relay None) if any, else via a box peer."""
    topo = fab.topo
    direct = [e for e in fab.groups[box] if e in fab.paths[root] and not fab.internal(root, e)]
    if direct:
        return [(None, e) for e in direct]
    home = fab.groups[fab.box_of[root]]
    out = [(x, e) for x in home if x != root for e in fab.groups[box] if e in fab.paths[x]]
    if not out:
        raise UnsupportedError(
            f"no rank of the box of {topo.ranks[root]} reaches box {box} through the network")
    return out


def shallow_packing(topo: Topology, max_k: int = MAX_K) -> TreePacking:
    """Hierarchical shallow trees of ``topo`` (see module docstring).

    Parameters
    ----------
    topo : Topology
    max_k : int
        Most trees per root: fewer trees give each more chunks, so a tree's
        chunks pipeline through it (what reductions need: their network hop
        comes last); entries still rotate over all candidates across roots.

    Returns
    -------
    TreePacking

    Raises
    ------
    UnsupportedError
        One box only, or a box that cannot be entered.
    """
    fab = _Fabric(topo)
    if len(fab.groups) < 2:
        raise UnsupportedError("hierarchical trees need at least two boxes; use trees")
    n = topo.num_ranks
    ways = {(r, b): _entries(fab, r, b) for r in range(n) for b in range(len(fab.groups))
            if b != fab.box_of[r]}
    k = max(1, min(max_k, max(len(w) for w in ways.values())))
    trees_of = _all_box_trees(topo, fab)
    trees = []
    for r in range(n):
        place = fab.groups[fab.box_of[r]].index(r)
        for i in range(k):
            edges = list(_pick(trees_of[r], i))
            for b in range(len(fab.groups)):
                if b == fab.box_of[r]:
                    continue
                opts = ways[(r, b)]
                shift = place * k if k < len(opts) else place
                relay, entry = opts[(i + shift) % len(opts)]
                edges.append((r if relay is None else relay, entry))
                edges.extend(_pick(trees_of[entry], i))
            trees.append(Tree(r, tuple(edges), 1))
    return _packing(topo, fab, k, tuple(trees))


def _packing(topo: Topology, fab: _Fabric, k: int, trees: tuple[Tree, ...]) -> TreePacking:
    """Wrap the trees with their bandwidth figures."""
    from colc.compiler.trees.find_optimal_throughput import integer_graph, optimum_of

    load: dict[tuple[str, str], int] = {}
    for t in trees:
        for a, b in t.edges:
            path = fab.paths[a][b]
            for e in zip(path, path[1:], strict=False):
                load[e] = load.get(e, 0) + 1
    y = min(fab.router.cap[e] / u for e, u in load.items())
    opt = optimum_of(integer_graph(topo), topo.num_ranks)
    return TreePacking(topology=topo.name, num_ranks=topo.num_ranks, k=k,
                       tree_bandwidth=Fraction(y), inv_x_star=opt.inv_x_star,
                       inv_rate=1 / (k * Fraction(y)), trees=trees, routes=())


__all__ = ["NAME", "shallow_packing"]
