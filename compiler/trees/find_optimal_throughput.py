"""Pass ``find-optimal-throughput``: ForestColl's exact allgather optimum.

Input invariant: a ``Topology`` with at least two ranks in which every rank
reaches every other rank; with switches, every node is Eulerian (ingress
equals egress bandwidth).  Both are checked here (``TopologyError`` names
the node).
Output invariant: an ``Optimum`` holding the exact ``1/x*`` as a Fraction
(``x*`` = per-rank broadcast rate of the throughput bottleneck cut, in
GB/s), the number of trees per root ``k``, the scale ``U`` turning
bandwidths into integer tree capacities, and a bottleneck cut.

Algorithm (seed 001 section 4.5.2, Algorithm 1, Theorem 23, B.5.1): the
auxiliary network adds a source ``s`` with an arc ``s -> c`` of capacity
``x`` to every rank; ``min_v F(s, v) >= N x`` iff ``1/x >= 1/x*``.  Instead
of bisecting on ``x`` and recovering the fraction at the end, the test is
used as a Newton (Dinkelbach) iteration: start from the ratio of the cut
"all but the weakest rank", and while some max-flow is below ``N x``, its
minimum cut ``T`` is a strictly worse bottleneck, so continue from
``x = B+(T) / |T & V_c|``.  Every iterate is the exact ratio of a real cut,
so the loop ends on ``x*`` itself -- no tolerance, no rounding.  ``x = a/b``
is tested on integer capacities (``b * beta_e`` and ``a`` on source arcs).

k and y (B.5.1 proposition): bandwidths are first written as
``b_e = beta_e * unit`` with integers ``beta_e`` of gcd 1; with
``1/x* = p/q`` in beta units (lowest terms), ``U = p``, ``k = q`` and every
tree gets ``y = unit / U`` GB/s.  Tree capacities are ``U * beta_e``.

Complexity: each iteration runs N max-flows on |V|+1 nodes; the number of
iterations is small in practice (at most the number of distinct cut
ratios, typically < 10).

Example
-------
>>> from colc.frontends.families import ring
>>> opt = find_optimal_throughput(ring(4, 10))
>>> opt.inv_x_star, opt.k, opt.allgather_algbw
(Fraction(3, 20), 2, Fraction(80, 3))
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import networkx as nx

from colc.compiler.trees.max_flow import FlowNetwork, solve_batch
from colc.errors import TopologyError, UnsupportedError
from colc.ir.topology import Topology

NAME = "find-optimal-throughput"


@dataclass(frozen=True, slots=True)
class IntegerGraph:
    """A topology with integer capacities ``beta`` (``b_e = beta_e * unit``).

    ``nodes`` is file order; ``compute[i]`` says whether ``nodes[i]`` is a rank.
    ``arcs`` maps ``(i, j)`` node indices to the integer capacity.
    """

    nodes: tuple[str, ...]
    compute: tuple[bool, ...]
    arcs: dict[tuple[int, int], int]
    unit: Fraction

    @property
    def ranks(self) -> tuple[int, ...]:
        """Indices of the compute nodes, rank order."""
        return tuple(i for i, c in enumerate(self.compute) if c)


@dataclass(frozen=True, slots=True)
class Optimum:
    """Exact allgather optimum of a topology (seed 001 Theorem 23, B.5.1).

    Parameters
    ----------
    inv_x_star : Fraction
        ``1/x*`` in s/GB: the max over cuts of ``|S & V_c| / B+(S)``.
    k : int
        Trees per root.
    scale : Fraction
        ``U`` in trees per beta unit: tree capacity of arc e is ``U*beta_e``.
    tree_bandwidth : Fraction
        ``y`` in GB/s: bandwidth used by each tree.
    num_ranks : int
    bottleneck : tuple of str
        Node ids of a bottleneck cut's source side ``S*``.
    """

    inv_x_star: Fraction
    k: int
    scale: Fraction
    tree_bandwidth: Fraction
    num_ranks: int
    bottleneck: tuple[str, ...]

    @property
    def x_star(self) -> Fraction:
        """Per-rank broadcast rate (GB/s)."""
        return 1 / self.inv_x_star

    @property
    def allgather_algbw(self) -> Fraction:
        """Optimal allgather (and reduce-scatter) algbw ``N x*`` in GB/s."""
        return self.num_ranks * self.x_star


def integer_graph(topo: Topology) -> IntegerGraph:
    """Scale bandwidths to coprime integers.

    Parameters
    ----------
    topo : Topology

    Returns
    -------
    IntegerGraph
        ``beta_e = b_e / unit`` with ``gcd(beta) == 1``.

    Examples
    --------
    >>> from colc.frontends.families import dgx_a100
    >>> g = integer_graph(dgx_a100(2))
    >>> g.unit, sorted(set(g.arcs.values()))
    (Fraction(25, 1), [1, 12])
    """
    cap = topo.capacity()
    index = {n.id: i for i, n in enumerate(topo.nodes)}
    lcm = 1
    for c in cap.values():
        lcm = lcm * c.denominator // math.gcd(lcm, c.denominator)
    ints = {(index[u], index[v]): int(c * lcm) for (u, v), c in cap.items() if u != v and c > 0}
    g = 0
    for c in ints.values():
        g = math.gcd(g, c)
    g = g or 1
    return IntegerGraph(
        nodes=tuple(n.id for n in topo.nodes),
        compute=tuple(n.is_compute for n in topo.nodes),
        arcs={e: c // g for e, c in ints.items()},
        unit=Fraction(g, lcm),
    )


def check_tree_topology(topo: Topology) -> None:
    """Reject topologies the tree passes cannot handle, naming the node.

    Parameters
    ----------
    topo : Topology

    Raises
    ------
    UnsupportedError
        Fewer than two ranks.
    TopologyError
        A rank that cannot reach, or be reached from, rank 0; or, when the
        topology has switches, a node whose ingress and egress differ.
    """
    if topo.num_ranks < 2:
        raise UnsupportedError(f"topology {topo.name!r}: tree packing needs at least 2 ranks")
    cap = topo.capacity()
    ingress: dict[str, Fraction] = {n.id: Fraction(0) for n in topo.nodes}
    egress: dict[str, Fraction] = {n.id: Fraction(0) for n in topo.nodes}
    for (u, v), c in cap.items():
        egress[u] += c
        ingress[v] += c
    if topo.has_switches:
        # switches first: an unbalanced switch is the likelier input mistake
        for n in sorted(topo.nodes, key=lambda nd: nd.is_compute):
            if ingress[n.id] != egress[n.id]:
                what = "switch" if not n.is_compute else "node"
                raise TopologyError(
                    f"topology {topo.name!r}: {what} {n.id!r} has ingress {ingress[n.id]} GB/s "
                    f"but egress {egress[n.id]} GB/s; tree packing through switches needs "
                    f"equal ingress and egress at every node"
                )
    g = nx.DiGraph()
    g.add_nodes_from(n.id for n in topo.nodes)
    g.add_edges_from(e for e, c in cap.items() if c > 0)
    root = topo.ranks[0]
    fwd = nx.descendants(g, root)
    bwd = nx.ancestors(g, root)
    for r in topo.ranks[1:]:
        if r not in fwd:
            raise TopologyError(
                f"topology {topo.name!r} is not strongly connected: rank {r!r} "
                f"cannot be reached from rank {root!r}")
        if r not in bwd:
            raise TopologyError(
                f"topology {topo.name!r} is not strongly connected: rank {r!r} "
                f"cannot reach rank {root!r}")


def _auxiliary(graph: IntegerGraph, mult: int) -> tuple[FlowNetwork, int]:
    """Network ``G`` with arcs scaled by ``mult`` plus a source node (last index)."""
    n = len(graph.nodes)
    net = FlowNetwork(n + 1)
    for (u, v), c in graph.arcs.items():
        net.add_arc(u, v, c * mult)
    return net, n


def worst_cut(graph: IntegerGraph, x: Fraction) -> tuple[Fraction, frozenset[int]] | None:
    """Test Theorem 23 at rate ``x`` (beta units); return a worse cut if any.

    Returns
    -------
    None if ``min_v F(s, v; G_x) >= N x``; otherwise ``(ratio, T)`` where
    ``T`` (node indices) has the smallest ``B+(T)/|T & V_c|`` among the
    minimum cuts found, and that ratio is ``< x``.
    """
    ranks = graph.ranks
    n_ranks = len(ranks)
    net, s = _auxiliary(graph, x.denominator)
    src_arcs = [(s, r, x.numerator) for r in ranks]
    need = n_ranks * x.numerator
    best: tuple[Fraction, frozenset[int]] | None = None
    results = solve_batch([net.problem(s, v, src_arcs) for v in ranks], want_cut=True)
    for value, side in results:
        if value >= need or side is None:
            continue
        t_set = frozenset(side - {s})
        ratio = cut_ratio(graph, t_set)
        if best is None or ratio < best[0]:
            best = (ratio, t_set)
    return best


def cut_ratio(graph: IntegerGraph, t_set: frozenset[int]) -> Fraction:
    """``B+(T) / |T & V_c|`` in beta units."""
    out = sum(c for (u, v), c in graph.arcs.items() if u in t_set and v not in t_set)
    count = sum(1 for i in t_set if graph.compute[i])
    return Fraction(out, count)


def find_optimal_throughput(topo: Topology) -> Optimum:
    """Exact optimal allgather throughput, k and per-tree bandwidth.

    Parameters
    ----------
    topo : Topology

    Returns
    -------
    Optimum

    Raises
    ------
    TopologyError
        Not strongly connected, or a non-Eulerian node with switches.

    Examples
    --------
    >>> from colc.frontends.families import dgx_a100
    >>> opt = find_optimal_throughput(dgx_a100(2))
    >>> opt.allgather_algbw, opt.k
    (Fraction(1040, 3), 13)
    """
    check_tree_topology(topo)
    graph = integer_graph(topo)
    return optimum_of(graph, topo.num_ranks)


def optimum_of(graph: IntegerGraph, num_ranks: int) -> Optimum:
    """``find_optimal_throughput`` on an already scaled graph (no checks)."""
    ranks = graph.ranks
    ingress = {r: 0 for r in ranks}
    for (_, v), c in graph.arcs.items():
        if v in ingress:
            ingress[v] += c
    weakest = min(ranks, key=lambda r: (ingress[r], r))
    t_set = frozenset(range(len(graph.nodes))) - {weakest}
    x = cut_ratio(graph, t_set)
    while True:
        worse = worst_cut(graph, x)
        if worse is None:
            break
        x, t_set = worse
    inv = 1 / x  # beta units: |T & V_c| / B+(T)
    p, q = inv.numerator, inv.denominator
    return Optimum(
        inv_x_star=inv / graph.unit,
        k=q,
        scale=Fraction(p),
        tree_bandwidth=graph.unit / p,
        num_ranks=num_ranks,
        bottleneck=tuple(graph.nodes[i] for i in sorted(t_set)),
    )
