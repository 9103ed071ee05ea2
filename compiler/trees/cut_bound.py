"""Pass ``cut-bound``: the allgather cut bound of a topology, exactly.

Input invariant: a ``Topology`` (any; switches allowed).
Output invariant: ``max over S with S not containing every rank of
|S & V_c| / B+(S)`` as a Fraction in s/GB (``1/x*``), so optimal allgather
and reduce-scatter algbw is ``N / that``.

Algorithm (seed 001 section 4.4, bound (star)): ``cut_bound`` uses the exact
max-flow iteration of ``find_optimal_throughput`` (Theorem 23);
``brute_force_cut_bound`` enumerates all ``2^|V|`` node subsets and is the
test oracle for small graphs (|V| <= 16).

Example
-------
>>> from colc.frontends.families import ring
>>> cut_bound(ring(4, 10)) == brute_force_cut_bound(ring(4, 10))
True
"""

from __future__ import annotations

from fractions import Fraction

from colc.compiler.trees.find_optimal_throughput import find_optimal_throughput
from colc.errors import UnsupportedError
from colc.ir.topology import Topology

NAME = "cut-bound"


def cut_bound(topo: Topology) -> Fraction:
    """Exact ``1/x*`` (s/GB) by max-flow.

    Parameters
    ----------
    topo : Topology

    Returns
    -------
    Fraction
    """
    return find_optimal_throughput(topo).inv_x_star


def brute_force_cut_bound(topo: Topology, *, max_nodes: int = 16) -> Fraction:
    """Exact ``1/x*`` by enumerating every node subset (test oracle).

    Parameters
    ----------
    topo : Topology
    max_nodes : int
        Refuse larger graphs.

    Returns
    -------
    Fraction

    Raises
    ------
    UnsupportedError
        More than ``max_nodes`` nodes, or a cut with no outgoing capacity.
    """
    ids = [n.id for n in topo.nodes]
    if len(ids) > max_nodes:
        raise UnsupportedError(f"brute force over {len(ids)} nodes (limit {max_nodes})")
    bit = {v: 1 << i for i, v in enumerate(ids)}
    compute_mask = sum(bit[r] for r in topo.ranks)
    arcs = [(bit[u], bit[v], c) for (u, v), c in topo.capacity().items()]
    best = Fraction(0)
    for mask in range(1, 1 << len(ids)):
        if mask & compute_mask in (0, compute_mask):
            continue
        out = sum((c for bu, bv, c in arcs if mask & bu and not mask & bv), Fraction(0))
        inside = bin(mask & compute_mask).count("1")
        if out == 0:
            raise UnsupportedError("a cut with no outgoing capacity: not strongly connected")
        best = max(best, Fraction(inside) / out)
    return best
