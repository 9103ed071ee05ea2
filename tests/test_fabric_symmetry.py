"""Rank classes under automorphisms (``compiler/alltoall/fabric_symmetry.py``)
and LP (A.1) solved with one source per class."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from colc.compiler.alltoall import mcf
from colc.compiler.alltoall.fabric_symmetry import rank_classes
from colc.compiler.bfb.expand_topology import line_graph
from colc.frontends.families import circulant, generalized_kautz, torus


def _line(k: int, n: int, gens: list[int]):
    topo = circulant(n, gens, 1)
    for _ in range(k):
        topo = line_graph(topo)
    return topo


def _classes(topo):
    _, edges, cap = mcf.fabric(topo, unit=False)
    return rank_classes(topo.num_ranks, list(edges), list(cap)), edges


def _is_automorphism(perm, edges) -> bool:
    links = set(edges)
    return {(int(perm[u]), int(perm[v])) for u, v in edges} == links


@pytest.mark.parametrize("topo", [_line(2, 16, [3, 4]), generalized_kautz(64, 4, 1),
                                  torus([3, 4], 1), _line(1, 8, [1, 3])],
                         ids=["L2C16", "kautz64", "torus3x4", "L1C8"])
def test_every_class_permutation_is_an_automorphism_from_the_representative(topo):
    classes, edges = _classes(topo)
    n = topo.num_ranks
    assert sorted(set(classes.rep)) == list(classes.reps)
    for s in range(n):
        perm = classes.perm[s]
        assert perm[classes.rep[s]] == s
        assert sorted(perm.tolist()) == list(range(n))
        assert _is_automorphism(perm, edges)


def test_classes_are_the_orbits_of_the_automorphism_group():
    """Exactly the orbits of the whole automorphism group (decided here by
    networkx's VF2 with two ranks marked): no class could be merged."""
    for topo in (_line(1, 6, [1, 2]), generalized_kautz(12, 3, 1)):
        classes, edges = _classes(topo)
        n = topo.num_ranks
        for a in classes.reps:
            for b in range(n):
                same = _joined(edges, n, a, b)
                assert same == (classes.rep[a] == classes.rep[b]), (topo.name, a, b)


def _joined(edges, n: int, a: int, b: int) -> bool:
    """Whether some automorphism takes rank ``a`` to rank ``b``."""
    g1, g2 = nx.DiGraph(), nx.DiGraph()
    for g, mark in ((g1, a), (g2, b)):
        g.add_nodes_from(range(n), mark=False)
        g.nodes[mark]["mark"] = True
        g.add_edges_from(edges)
    return nx.is_isomorphic(g1, g2, node_match=lambda x, y: x["mark"] == y["mark"])


def test_a_fabric_without_symmetry_keeps_every_rank_apart():
    """A random digraph (no nontrivial automorphism): n classes, identities."""
    rng = np.random.default_rng(7)
    n = 40
    edges = sorted({(int(u), int(v)) for u, v in rng.integers(0, n, (160, 2)) if u != v})
    classes = rank_classes(n, edges, [1.0] * len(edges))
    assert classes.reps == tuple(range(n))
    assert all((classes.perm[s] == np.arange(n)).all() for s in range(n))


def test_capacities_are_respected():
    """A directed ring with one slower link: no rotation keeps the slow link
    in place, so no two ranks share a class."""
    n = 8
    edges = [(i, (i + 1) % n) for i in range(n)]
    caps = [1.0] * n
    caps[0] = 0.5
    classes = rank_classes(n, edges, caps)
    assert classes.reps == tuple(range(n))


@pytest.mark.parametrize("topo", [_line(1, 16, [3, 4]), generalized_kautz(64, 4, 1),
                                  _line(1, 10, [1, 4])], ids=["L1C16", "kautz64", "L1C10"])
def test_class_lp_equals_the_full_lp(topo, monkeypatch):
    """One source per class gives the whole LP's optimum, and the translated
    flows of every source meet the capacity rows (the generalized Kautz
    graph's classes are uneven: its capacity rows do not collapse)."""
    monkeypatch.setattr(mcf, "SYMMETRY_COLUMNS", 0)
    monkeypatch.setattr(mcf, "CLASS_ROWS_PER_LINK", 0)
    mcf.fabric_classes.cache_clear()
    res = mcf.alltoall_mcf(topo, unit=True)
    mcf.fabric_classes.cache_clear()
    assert res.method.startswith("LP over ")
    assert len(res.flows) == len(set(res.reps)) < topo.num_ranks
    full = mcf._full(*mcf.fabric(topo, True), topo.num_ranks)
    assert res.f == pytest.approx(full.f, rel=1e-7)
    total = sum(res.flow(s) for s in range(topo.num_ranks))
    assert (total <= np.asarray(res.capacity) * (1 + 1e-7)).all()


def test_class_lp_routes_a_verified_alltoall(monkeypatch):
    """The mcf generator over a class LP: every source's paths are its
    representative's carried by the automorphism; the schedule proves."""
    from colc.compiler.alltoall.routed import mcf_schedule
    from colc.ir.check_chunks import check_schedule
    from colc.ir.core import Collective

    monkeypatch.setattr(mcf, "SYMMETRY_COLUMNS", 0)
    mcf.fabric_classes.cache_clear()
    topo = _line(1, 8, [1, 3])
    assert mcf.fabric_classes(topo) is not None  # 32 ranks in 2 classes, 16 link rows
    sched = mcf_schedule(topo, Collective.ALLTOALL, 4)
    mcf.fabric_classes.cache_clear()
    assert check_schedule(sched, topo) == []
