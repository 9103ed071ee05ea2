"""In-network multicast/aggregation post-processing (seed 001 4.5.6, Fig 4.8)."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from fractions import Fraction

import pytest

from colc.cli import main
from colc.compiler.analyze import analyze_topology, format_table
from colc.compiler.trees.apply_multicast import apply_multicast, check_physical_tree
from colc.compiler.trees.generate_trees import is_symmetric, pack_trees, transpose
from colc.errors import InternalError, TopologyError, UnsupportedError
from colc.frontends.families import dgx_h100
from colc.ir.core import Collective
from colc.ir.topology import Link, Node, Topology
from colc.ir.trees import Tree, TreePacking

from test_trees import random_topology

AG, RS = Collective.ALLGATHER, Collective.REDUCESCATTER


def _topo(name: str, gpus: list[str], switches: dict[str, bool],
          duplex: list[tuple[str, str]]) -> Topology:
    nodes = tuple(Node(g, "gpu") for g in gpus) + tuple(
        Node(w, "switch", mc) for w, mc in switches.items())
    links = tuple(Link(x, y, Fraction(10)) for a, b in duplex for x, y in ((a, b), (b, a)))
    return Topology(name, nodes, links)


def _packing(topo: Topology, trees: list[Tree],
             routes: dict[tuple[int, int], list[tuple[tuple[str, ...], int]]]) -> TreePacking:
    return TreePacking(topo.name, topo.num_ranks, 1, Fraction(1), Fraction(1), Fraction(1),
                       tuple(trees), tuple((e, tuple(p)) for e, p in sorted(routes.items())))


# Fig 4.8: two boxes, each a multicast switch; c11 -- c21 joined directly.
FIG_GPUS = ["c11", "c12", "c13", "c21", "c22", "c23"]
FIG_LINKS = [("c11", "w1"), ("c12", "w1"), ("c13", "w1"),
             ("c21", "w2"), ("c22", "w2"), ("c23", "w2"), ("c11", "c21")]
# Logical tree of root c11 (Fig 4.8(a)): chains through each box's switch.
FIG_TREE = Tree(0, ((0, 1), (0, 3), (1, 2), (3, 4), (4, 5)), 1)
FIG_ROUTES = {(0, 1): [(("c11", "w1", "c12"), 1)], (1, 2): [(("c12", "w1", "c13"), 1)],
              (0, 3): [(("c11", "c21"), 1)], (3, 4): [(("c21", "w2", "c22"), 1)],
              (4, 5): [(("c22", "w2", "c23"), 1)]}
FIG_BEFORE = (("c11", "w1"), ("w1", "c12"), ("c11", "c21"), ("c12", "w1"), ("w1", "c13"),
              ("c21", "w2"), ("w2", "c22"), ("c22", "w2"), ("w2", "c23"))
FIG_AFTER = (("c11", "w1"), ("w1", "c12"), ("c11", "c21"), ("w1", "c13"),
             ("c21", "w2"), ("w2", "c22"), ("w2", "c23"))


def _fig(multicast: bool = True) -> tuple[Topology, TreePacking]:
    topo = _topo("fig48", FIG_GPUS, {"w1": multicast, "w2": multicast}, FIG_LINKS)
    return topo, _packing(topo, [FIG_TREE], FIG_ROUTES)


def _reversed(hops):
    return tuple((b, a) for a, b in reversed(hops))


def test_fig_4_8_allgather_multicast() -> None:
    topo, packing = _fig()
    forest = apply_multicast(packing, topo, AG)
    (t,) = forest.trees
    assert (t.tree, t.root, t.multiplicity) == (0, 0, 1)
    assert t.before == FIG_BEFORE  # Fig 4.8(b)
    assert t.after == FIG_AFTER  # Fig 4.8(c): c12 -> w1 and c22 -> w2 are gone
    assert (forest.traffic_before, forest.traffic_after) == (9, 7)
    assert (forest.gpu_sends_before, forest.gpu_sends_after) == (5, 3)
    assert (forest.gpu_recvs_before, forest.gpu_recvs_after) == (5, 5)
    assert dict(forest.load_before)[("c12", "w1")] == 1
    assert ("c12", "w1") not in dict(forest.load_after)
    assert forest.multicast_switches == ("w1", "w2")
    assert forest.per_collective_byte(forest.traffic_after) == Fraction(7, 6)


def test_fig_4_8_reducescatter_aggregation() -> None:
    topo, packing = _fig()
    forest = apply_multicast(packing, topo, RS)
    (t,) = forest.trees
    assert t.before == _reversed(FIG_BEFORE)
    assert t.after == _reversed(FIG_AFTER)  # w1 sums c12's and c13's partials for c11
    assert (forest.traffic_before, forest.traffic_after) == (9, 7)
    assert (forest.gpu_sends_before, forest.gpu_sends_after) == (5, 5)
    assert (forest.gpu_recvs_before, forest.gpu_recvs_after) == (5, 3)


def test_no_multicast_switch_changes_nothing() -> None:
    topo, packing = _fig(multicast=False)
    for coll in (AG, RS):
        forest = apply_multicast(packing, topo, coll)
        assert all(t.after == t.before for t in forest.trees)
        assert forest.load_after == forest.load_before
        assert forest.multicast_switches == ()


def test_dead_ingress_through_plain_switch_is_pruned() -> None:
    # b reaches c over b -> s -> w1 -> c; w1 already has the data from a.
    topo = _topo("dead", ["a", "b", "c"], {"w1": True, "s": False},
                 [("a", "w1"), ("b", "w1"), ("c", "w1"), ("b", "s"), ("s", "w1")])
    packing = _packing(topo, [Tree(0, ((0, 1), (1, 2)), 1)],
                       {(0, 1): [(("a", "w1", "b"), 1)], (1, 2): [(("b", "s", "w1", "c"), 1)]})
    (t,) = apply_multicast(packing, topo).trees
    assert t.before == (("a", "w1"), ("w1", "b"), ("b", "s"), ("s", "w1"), ("w1", "c"))
    assert t.after == (("a", "w1"), ("w1", "b"), ("w1", "c"))


@pytest.mark.parametrize("w2_multicast, after", [
    (True, (("a", "w1"), ("w1", "w2"), ("w2", "b"), ("w1", "c"), ("w2", "d"))),
    (False, (("a", "w1"), ("w1", "w2"), ("w2", "b"), ("w1", "c"), ("b", "w2"), ("w2", "d"))),
])
def test_switch_to_switch_paths(w2_multicast: bool, after) -> None:
    topo = _topo("two-switch", ["a", "b", "c", "d"], {"w1": True, "w2": w2_multicast},
                 [("a", "w1"), ("c", "w1"), ("b", "w2"), ("d", "w2"), ("w1", "w2")])
    packing = _packing(topo, [Tree(0, ((0, 1), (0, 2), (1, 3)), 1)],
                       {(0, 1): [(("a", "w1", "w2", "b"), 1)], (0, 2): [(("a", "w1", "c"), 1)],
                        (1, 3): [(("b", "w2", "d"), 1)]})
    forest = apply_multicast(packing, topo)
    assert forest.trees[0].after == after
    assert forest.traffic_before == 7


def test_replicated_hop_into_plain_switch() -> None:
    # c's path re-enters w1 (deleted) and then crosses the plain switch w2 again:
    # w1 replicates the data twice onto w1 -> w2, and w2 forwards each copy.
    topo = _topo("replicate", ["a", "b", "c", "d"], {"w1": True, "w2": False},
                 [("a", "w1"), ("c", "w1"), ("b", "w2"), ("d", "w2"), ("w1", "w2")])
    packing = _packing(topo, [Tree(0, ((0, 1), (0, 2), (2, 3)), 1)],
                       {(0, 1): [(("a", "w1", "w2", "b"), 1)], (0, 2): [(("a", "w1", "c"), 1)],
                        (2, 3): [(("c", "w1", "w2", "d"), 1)]})
    forest = apply_multicast(packing, topo)
    assert forest.trees[0].after == (("a", "w1"), ("w1", "w2"), ("w2", "b"), ("w1", "c"),
                                     ("w1", "w2"), ("w2", "d"))
    assert dict(forest.load_after)[("w1", "w2")] == 2


def test_batch_units_split_over_paths_first_fit() -> None:
    # Arc (a, b) has two paths: 2 units via the multicast switch w, 1 via the direct link.
    # Tree 0 (1 unit) takes one via w; tree 1 (2 units) takes one via w, one direct.
    topo = _topo("split", ["a", "b", "c"], {"w": True},
                 [("a", "w"), ("b", "w"), ("c", "w"), ("a", "b")])
    routes = {(0, 1): [(("a", "w", "b"), 2), (("a", "b"), 1)], (1, 2): [(("b", "w", "c"), 3)]}
    trees = [Tree(0, ((0, 1), (1, 2)), 1), Tree(0, ((0, 1), (1, 2)), 2)]
    forest = apply_multicast(_packing(topo, trees, routes), topo)
    assert [(t.tree, t.multiplicity) for t in forest.trees] == [(0, 1), (1, 1), (1, 1)]
    via_w = (("a", "w"), ("w", "b"), ("w", "c"))
    direct = (("a", "b"), ("b", "w"), ("w", "c"))
    assert [t.after for t in forest.trees] == [via_w, via_w, direct]
    assert forest.traffic_before == 4 + 4 + 3
    assert forest.traffic_after == 3 + 3 + 3


def test_errors() -> None:
    topo, packing = _fig()
    with pytest.raises(UnsupportedError):
        apply_multicast(packing, topo, Collective.ALLREDUCE)
    other = _topo("other", FIG_GPUS, {"w1": True, "w2": True}, FIG_LINKS[:-1])
    with pytest.raises(TopologyError):  # no c11 -- c21 link
        apply_multicast(packing, other)
    with pytest.raises(TopologyError):
        apply_multicast(packing, _topo("small", FIG_GPUS[:3], {"w1": True}, FIG_LINKS[:3]))
    short = _packing(topo, [replace(FIG_TREE, multiplicity=2)], FIG_ROUTES)
    with pytest.raises(InternalError):  # routes carry 1 unit, the batch needs 2
        apply_multicast(short, topo)


# --------------------------------------------------------------------------- properties


def _with_multicast(topo: Topology, rng: random.Random) -> Topology:
    nodes = tuple(replace(n, multicast=not n.is_compute and rng.random() < 0.7)
                  for n in topo.nodes)
    return replace(topo, nodes=nodes)


def _reaches_each_rank_once(topo: Topology, root: str, hops) -> None:
    """Independent check of a forward tree: one ingress per rank/multicast switch, all reached."""
    ranks = set(topo.ranks)
    into: dict[str, int] = {}
    for _, b in hops:
        into[b] = into.get(b, 0) + 1
    assert all(into.get(r, 0) == (0 if r == root else 1) for r in ranks)
    assert all(into.get(w, 0) <= 1 for w in topo.switches if topo.node[w].multicast)
    reached, frontier = {root}, [root]
    while frontier:
        x = frontier.pop()
        for a, b in hops:
            if a == x and b not in reached:
                reached.add(b)
                frontier.append(b)
    assert ranks <= reached


def _switch_topology(seed: int) -> Topology:
    """Ranks on 1-2 of 1-3 chained switches (switch-to-switch paths), some direct links."""
    rng = random.Random(seed)
    n, s = rng.randint(3, 6), rng.randint(1, 3)
    ranks, switches = [f"r{i}" for i in range(n)], [f"w{i}" for i in range(s)]
    arcs: dict[tuple[str, str], int] = {}

    def duplex(a: str, b: str, c: int) -> None:
        for x, y in ((a, b), (b, a)):
            arcs[(x, y)] = arcs.get((x, y), 0) + c

    for a, b in zip(switches, switches[1:]):
        duplex(a, b, rng.randint(2, 8))
    for r in ranks:
        for w in rng.sample(switches, rng.randint(1, min(2, s))):
            duplex(r, w, rng.randint(1, 4))
    for _ in range(rng.randint(0, n)):
        a, b = rng.sample(ranks, 2)
        duplex(a, b, rng.randint(1, 3))
    nodes = tuple(Node(r, "gpu") for r in ranks) + tuple(Node(w, "switch") for w in switches)
    links = tuple(Link(a, b, Fraction(c)) for (a, b), c in arcs.items())
    return _with_multicast(Topology(f"switches-{seed}", nodes, links), rng)


@pytest.mark.parametrize("seed", range(120))
def test_random_topologies(seed: int) -> None:
    _check_forests(_with_multicast(random_topology(seed), random.Random(1000 + seed)))


@pytest.mark.parametrize("seed", range(60))
def test_random_switch_topologies(seed: int) -> None:
    _check_forests(_switch_topology(seed))


def _check_forests(topo: Topology) -> None:
    """Both collectives: physical multicast trees, loads only drop, drops iff redundant."""
    mc = frozenset(w for w in topo.switches if topo.node[w].multicast)
    n = topo.num_ranks
    for coll in (AG, RS):
        flip = coll is RS and not is_symmetric(topo)
        packing = pack_trees(transpose(topo) if flip else topo, max_k=4)
        forest = apply_multicast(packing, topo, coll)
        units: dict[int, int] = {}
        for t in forest.trees:
            units[t.tree] = units.get(t.tree, 0) + t.multiplicity
            root = topo.ranks[t.root]
            fwd = _reversed(t.after) if forest.reverse else t.after
            assert check_physical_tree(fwd, root, topo, mc) == []
            _reaches_each_rank_once(topo, root, fwd)
        assert units == {i: t.multiplicity for i, t in enumerate(packing.trees)}
        before, after = dict(forest.load_before), dict(forest.load_after)
        assert all(after.get(link, 0) <= load for link, load in before.items())
        assert set(after) <= set(before)
        if coll is AG:
            physical = {lk: gbs for lk, gbs in packing.physical_load().items() if gbs}
            assert {lk: u * packing.tree_bandwidth for lk, u in before.items()} == physical
        sends = forest.gpu_sends_before if coll is AG else forest.gpu_recvs_before
        assert forest.per_collective_byte(sends) == n - 1
        twice = any(
            sum(1 for _, b in (_reversed(t.before) if forest.reverse else t.before) if b == w) > 1
            for t in forest.trees for w in mc)
        if twice:
            assert forest.traffic_after < forest.traffic_before
        else:
            assert forest.load_after == forest.load_before
            assert all(t.after == t.before for t in forest.trees)


def test_dgx_h100_two_boxes() -> None:
    topo = dgx_h100(2, multicast=True)
    plain = dgx_h100(2)
    packing = pack_trees(topo)
    ag = apply_multicast(packing, topo, AG)
    rs = apply_multicast(packing, topo, RS)
    assert ag.multicast_switches == ("b0nvs", "b1nvs")
    per = ag.per_collective_byte
    assert per(ag.gpu_sends_before) == 15 and per(ag.gpu_sends_after) < 15
    assert per(ag.traffic_after) < per(ag.traffic_before)
    assert per(rs.gpu_recvs_after) == per(ag.gpu_sends_after)  # the mirror image
    assert rs.traffic_after == ag.traffic_after
    untouched = apply_multicast(packing, plain, AG)
    assert untouched.traffic_after == untouched.traffic_before == ag.traffic_before


# --------------------------------------------------------------------------- colc analyze


def test_analyze_reports_multicast(tmp_path, capsys) -> None:
    path = tmp_path / "h100.yaml"
    path.write_text("family: dgx-h100\nboxes: 2\nmulticast: true\n")
    assert main(["analyze", str(path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    rows = {(s["algorithm"], s["collective"]): s for s in report["schedules"]}
    for coll, gpu in (("allgather", "sends"), ("reducescatter", "recvs")):
        m = rows[("trees", coll)]["multicast"]
        assert m["switches"] == ["b0nvs", "b1nvs"]
        assert m["traffic_after"] < m["traffic_before"]
        assert m[f"gpu_{gpu}_before"] == 15.0 and m[f"gpu_{gpu}_after"] < 15.0
        assert "unicast" in m["runtime"]
    assert "multicast" not in rows[("trees", "allreduce")]
    assert all("multicast" not in s for s in report["schedules"] if s["algorithm"] != "trees")
    text = format_table(report)
    assert "in-network multicast: traffic" in text
    assert "in-network aggregation: traffic" in text


def test_analyze_without_multicast_switch_has_no_field() -> None:
    topo = _topo("star", ["a", "b", "c"], {"w": False}, [("a", "w"), ("b", "w"), ("c", "w")])
    report = analyze_topology(topo)
    assert all("multicast" not in s for s in report["schedules"])
    star = replace(topo, nodes=tuple(replace(n, multicast=not n.is_compute)
                                     for n in topo.nodes))
    rows = {(s["algorithm"], s["collective"]): s for s in analyze_topology(star)["schedules"]}
    assert rows[("trees", "allgather")]["multicast"]["gpu_sends_after"] < 2.0
