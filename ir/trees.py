"""Tree-packing IR: spanning out-trees per root rank (ForestColl's output).

A ``TreePacking`` says, for each root rank, which batches of identical
spanning out-trees broadcast its shard: ``Tree(root, edges, multiplicity)``
stands for ``multiplicity`` trees with the same edges; every root has ``k``
trees in total and each tree carries ``1/k`` of the root's shard at
``tree_bandwidth`` GB/s.  Edges are *logical* rank pairs (parent, child) in
breadth-first order (a parent is reached before its children); ``routes``
maps each logical edge to the physical paths (node ids, through switches)
that carry it, with the number of tree units each path carries.

Invariants (checked by ``compiler.trees.pack_spanning_trees.verify_packing``):
every tree spans all ranks; each root's multiplicities add up to ``k``;
on each logical edge the trees using it fit its routed capacity.

Reduce-scatter uses the same trees reversed (in-trees); allreduce uses
them twice (reduce-scatter then allgather).

Example
-------
>>> from fractions import Fraction
>>> p = TreePacking("pair", 2, 1, Fraction(10), Fraction(1, 10), Fraction(1, 10),
...                 (Tree(0, ((0, 1),), 1), Tree(1, ((1, 0),), 1)), ())
>>> p.algbw, p.optimal
(Fraction(20, 1), True)
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction


@dataclass(frozen=True, slots=True)
class Tree:
    """``multiplicity`` identical out-trees rooted at rank ``root``."""

    root: int
    edges: tuple[tuple[int, int], ...]
    multiplicity: int

    def children(self) -> dict[int, tuple[int, ...]]:
        """Children of each rank in this tree, in edge order."""
        out: dict[int, list[int]] = {}
        for parent, child in self.edges:
            out.setdefault(parent, []).append(child)
        return {r: tuple(c) for r, c in out.items()}

    def depth(self) -> int:
        """Number of edges on the longest root-to-leaf path."""
        level = {self.root: 0}
        for parent, child in self.edges:
            level[child] = level[parent] + 1
        return max(level.values())


@dataclass(frozen=True, slots=True)
class TreePacking:
    """Spanning out-trees for allgather on a topology.

    Parameters
    ----------
    topology : str
        Topology name.
    num_ranks : int
        N.
    k : int
        Trees per root.
    tree_bandwidth : Fraction
        ``y``: GB/s each tree uses on each of its edges.
    inv_x_star : Fraction
        The exact optimum ``1/x*`` (s/GB) of the topology, for comparison.
    inv_rate : Fraction
        ``1 / (k y)`` (s/GB): the time per GB of shard this packing needs;
        equal to ``inv_x_star`` when the packing is optimal.
    trees : tuple of Tree
        Sorted by root, then creation order.
    routes : tuple of ((int, int), tuple of (tuple of str, int))
        Logical edge -> physical paths (node ids) and tree units per path.
    """

    topology: str
    num_ranks: int
    k: int
    tree_bandwidth: Fraction
    inv_x_star: Fraction
    inv_rate: Fraction
    trees: tuple[Tree, ...]
    routes: tuple[tuple[tuple[int, int], tuple[tuple[tuple[str, ...], int], ...]], ...]

    @property
    def algbw(self) -> Fraction:
        """Allgather algbw of this packing (GB/s): ``N k y``."""
        return self.num_ranks / self.inv_rate

    @property
    def optimal_algbw(self) -> Fraction:
        """The topology's optimal allgather algbw ``N x*`` (GB/s)."""
        return self.num_ranks / self.inv_x_star

    @property
    def optimal(self) -> bool:
        """Whether this packing reaches the cut bound."""
        return self.inv_rate == self.inv_x_star

    def by_root(self) -> dict[int, tuple[Tree, ...]]:
        """Trees grouped by root rank."""
        out: dict[int, list[Tree]] = {}
        for t in self.trees:
            out.setdefault(t.root, []).append(t)
        return {r: tuple(ts) for r, ts in out.items()}

    def edge_load(self) -> dict[tuple[int, int], int]:
        """Trees using each logical edge."""
        load: dict[tuple[int, int], int] = {}
        for t in self.trees:
            for e in t.edges:
                load[e] = load.get(e, 0) + t.multiplicity
        return load

    def route_map(self) -> dict[tuple[int, int], tuple[tuple[tuple[str, ...], int], ...]]:
        """``routes`` as a dict."""
        return dict(self.routes)

    def physical_load(self) -> dict[tuple[str, str], Fraction]:
        """GB/s each physical link carries (paths weighted by tree units used)."""
        load: dict[tuple[str, str], Fraction] = {}
        used = self.edge_load()
        for edge, paths in self.routes:
            need = used.get(edge, 0)
            for path, units in paths:
                take = min(units, need)
                need -= take
                for a, b in zip(path, path[1:]):
                    load[(a, b)] = load.get((a, b), Fraction(0)) + take * self.tree_bandwidth
        return load
