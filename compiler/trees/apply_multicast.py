"""Pass ``apply-multicast``: in-network multicast/aggregation on ForestColl trees.

Seed 001 section 4.5.6 (Fig 4.8 (b) -> (c)), seed inventory 1.20.

Input invariant: a ``TreePacking`` made by ``pack_trees`` (every root has
``k`` tree units; every logical arc's ``routes`` carry at least the units
the trees use on it) and the ``Topology`` the collective runs on; some
switches may have ``Node.multicast``.  For reduce-scatter the packing is the
one ``tree_schedule`` uses (on the topology, or on its transpose when links
are asymmetric): the data runs every path backwards.

Output invariant: a ``MulticastForest`` whose ``PhysicalTree`` entries
cover every tree unit of the packing exactly once.  Each entry's
``after`` hops (in data direction, in an order in which each hop's data is
already present at its source) form a physical multicast tree: every rank
other than the root receives the tree's data exactly once; a multicast
switch has at most one ingress hop of the tree and that one hop feeds all
of the switch's egress hops of the tree; every other switch has as many
ingress as egress hops (it forwards one to one); no hop is dead (every
ingress into a switch feeds an egress).  ``after`` is a sub-multiset of
``before`` (the tree mapped back onto its paths, Fig 4.8(b)), so the load of
every link can only drop.  Reduce-scatter (``reverse``): the same trees with
every hop reversed, i.e. in-trees in which a multicast switch aggregates
what its ingress hops bring and sends one partial on.

Mapping a batch onto paths.  A logical arc may be routed over several
physical paths (units split by ``split_switches``).  The trees are taken in
packing order and, on every logical arc, each tree takes the units it uses
first-fit from the arc's paths in ``routes`` order (the same assignment
``TreePacking.physical_load`` uses, so the ``before`` loads times
``tree_bandwidth`` are exactly ``physical_load``).  A batch whose units
straddle a path boundary on some arc is cut, on the common refinement of
those boundaries over all its arcs, into pieces of consecutive units that
use one path per arc; each piece is one ``PhysicalTree`` with its integer
``multiplicity``.  Everything is integral (tree units); nothing is rounded.

The walk (per piece).  Ranks are visited breadth-first in the logical tree
(depth, then edge order), each rank's out-arcs in edge order, each path hop
by hop.  A hop into a multicast switch that already holds the tree's data
(an earlier hop of this walk entered it) is deleted, and the rest of its
path is fed by the switch's kept ingress: the first one in this order, so
the kept ingress is the one closest to the root in the logical tree.  Paths
may cross several switches: a deletion can leave an ingress into a switch
with nothing left to feed; such dead hops are pruned in one reverse sweep
(a hop's feeder always precedes it).  Without multicast switches ``after``
equals ``before``.

What it saves, what it does not.  The optimal allgather and reduce-scatter
throughput is unchanged (seed 001 4.5.6): the optimum is the bottleneck cut
of section 4.4, which is unaffected by what switches can do; every GPU must
still receive ``N - 1`` distinct shards through its own ingress, so the
algbw of the packing (``N k y``) stays as it is.  What drops: the data GPUs
push into the network (allgather: ``gpu_sends``; reduce-scatter: the
partials GPUs receive and reduce, ``gpu_recvs``) and the total traffic on
the links into multicast switches.  colc's runtime files do not use it: the
MSCCL XML format has no switch multicast/aggregation primitive (NVLink
SHARP needs e.g. MSCCL++), so the lowering and the XML backends still send
every hop of ``before`` unicast; this pass is analysis (``colc analyze``).

Complexity: ``O(P * H)`` for ``P <= len(packing.trees) + (number of route
paths)`` pieces and ``H`` = hops of one mapped-back tree (at most
``(N - 1)`` times the longest path), plus ``O(P * H)`` for the loads.

Example
-------
Three GPUs on one multicast switch; each root's tree is a chain through it:

>>> from fractions import Fraction
>>> from colc.ir.topology import Link, Node, Topology
>>> from colc.ir.trees import Tree, TreePacking
>>> ids = ("a", "b", "c")
>>> topo = Topology("star", tuple(Node(i, "gpu") for i in ids) + (Node("w", "switch", True),),
...                 tuple(Link(x, y, Fraction(10)) for i in ids for x, y in ((i, "w"), ("w", i))))
>>> routes = tuple(((r, (r + 1) % 3), (((ids[r], "w", ids[(r + 1) % 3]), 2),)) for r in range(3))
>>> trees = tuple(Tree(r, ((r, (r + 1) % 3), ((r + 1) % 3, (r + 2) % 3)), 1) for r in range(3))
>>> packing = TreePacking("star", 3, 1, Fraction(5), Fraction(1, 15), Fraction(1, 15),
...                       trees, routes)
>>> forest = apply_multicast(packing, topo)
>>> forest.trees[0].after
(('a', 'w'), ('w', 'b'), ('w', 'c'))
>>> forest.traffic_before, forest.traffic_after, forest.gpu_sends_before, forest.gpu_sends_after
(12, 9, 6, 3)
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction

from colc.errors import InternalError, TopologyError, UnsupportedError
from colc.ir.core import Collective
from colc.ir.topology import Topology
from colc.ir.trees import Tree, TreePacking

NAME = "apply-multicast"

#: A physical hop ``(src, dst)`` (node ids), in data direction.
Hop = tuple[str, str]
#: Per-link load in tree units, sorted by link.
Load = tuple[tuple[Hop, int], ...]


@dataclass(frozen=True, slots=True)
class PhysicalTree:
    """``multiplicity`` units of ``packing.trees[tree]``, one path per logical arc.

    Parameters
    ----------
    tree : int
        Index of the batch in ``TreePacking.trees``.
    root : int
        Root rank.
    multiplicity : int
        Tree units of this piece (a batch may be cut into several pieces).
    before : tuple of (str, str)
        The tree mapped back onto its physical paths (Fig 4.8(b)), in data
        direction and a feasible order.
    after : tuple of (str, str)
        The kept hops after in-network multicast/aggregation (Fig 4.8(c)),
        same conventions; a sub-multiset of ``before``.
    """

    tree: int
    root: int
    multiplicity: int
    before: tuple[Hop, ...]
    after: tuple[Hop, ...]


@dataclass(frozen=True, slots=True)
class MulticastForest:
    """The packing's trees on physical links, before and after multicast.

    All figures are in tree units (one unit carries ``1/k`` of a shard, i.e.
    ``1 / (N k)`` of the collective size); ``per_collective_byte`` converts.

    Parameters
    ----------
    topology : str
        Topology name.
    num_ranks : int
        N.
    k : int
        Trees per root of the packing.
    reverse : bool
        Hops reversed: reduce-scatter in-trees (in-network aggregation).
    multicast_switches : tuple of str
        The topology's multicast-capable switches, node order.
    trees : tuple of PhysicalTree
        In packing order.
    load_before, load_after : tuple of ((str, str), int)
        Tree units per physical link (data direction), sorted; links the
        trees never use are absent (``load_after`` may omit links that
        ``load_before`` has).
    traffic_before, traffic_after : int
        Sum of all link loads.
    gpu_sends_before, gpu_sends_after : int
        Units on hops that leave a rank (data a GPU pushes into the network).
    gpu_recvs_before, gpu_recvs_after : int
        Units on hops that enter a rank (for reduce-scatter: the partials
        GPUs receive and reduce).
    """

    topology: str
    num_ranks: int
    k: int
    reverse: bool
    multicast_switches: tuple[str, ...]
    trees: tuple[PhysicalTree, ...]
    load_before: Load
    load_after: Load
    traffic_before: int
    traffic_after: int
    gpu_sends_before: int
    gpu_sends_after: int
    gpu_recvs_before: int
    gpu_recvs_after: int

    def per_collective_byte(self, units: int) -> Fraction:
        """GB moved per GB of collective size for ``units`` tree-unit hops.

        Parameters
        ----------
        units : int
            A figure of this forest (tree-unit hops).

        Returns
        -------
        Fraction
            ``units / (N k)``: the collective size (allgather output,
            reduce-scatter input, nccl-tests convention) is ``N`` shards of
            ``k`` units each.
        """
        return Fraction(units, self.num_ranks * self.k)


def apply_multicast(packing: TreePacking, topo: Topology,
                    collective: Collective = Collective.ALLGATHER) -> MulticastForest:
    """Delete the hops that multicast (aggregating) switches make redundant.

    Parameters
    ----------
    packing : TreePacking
        From ``pack_trees`` (see the module docstring for reduce-scatter).
    topo : Topology
        The topology the collective runs on; its ``multicast`` switches are
        used, and every hop (data direction) must be one of its links.
    collective : Collective
        ALLGATHER (out-trees, multicast) or REDUCESCATTER (reversed trees,
        aggregation).

    Returns
    -------
    MulticastForest

    Raises
    ------
    UnsupportedError
        Another collective (allreduce runs the reduce-scatter forest, then
        the allgather one).
    TopologyError
        The packing does not belong to ``topo`` (other rank count, or a path
        over a node or link it does not have).
    InternalError
        A logical arc's routes do not carry the units its trees use.
    """
    if collective is Collective.ALLGATHER:
        reverse = False
    elif collective is Collective.REDUCESCATTER:
        reverse = True
    else:
        raise UnsupportedError(
            f"apply-multicast takes allgather or reducescatter, not {collective.value}; "
            f"allreduce is the reduce-scatter forest followed by the allgather one")
    if packing.num_ranks != topo.num_ranks:
        raise TopologyError(f"packing of {packing.topology!r} has {packing.num_ranks} ranks, "
                            f"topology {topo.name!r} has {topo.num_ranks}")
    _check_routes(packing, topo, reverse)
    multicast = frozenset(n.id for n in topo.nodes if n.multicast and not n.is_compute)
    ranks = frozenset(topo.ranks)
    out: list[PhysicalTree] = []
    for index, tree, units, path_of in _pieces(packing):
        before, after = _walk(tree, path_of, topo.ranks, multicast, ranks)
        if reverse:
            before = tuple((b, a) for a, b in reversed(before))
            after = tuple((b, a) for a, b in reversed(after))
        out.append(PhysicalTree(index, tree.root, units, before, after))
    trees = tuple(out)
    load_before = _load(trees, after=False)
    load_after = _load(trees, after=True)
    forest = MulticastForest(
        topology=topo.name,
        num_ranks=topo.num_ranks,
        k=packing.k,
        reverse=reverse,
        multicast_switches=tuple(n.id for n in topo.nodes if n.id in multicast),
        trees=trees,
        load_before=load_before,
        load_after=load_after,
        traffic_before=sum(u for _, u in load_before),
        traffic_after=sum(u for _, u in load_after),
        gpu_sends_before=sum(u for (a, _), u in load_before if a in ranks),
        gpu_sends_after=sum(u for (a, _), u in load_after if a in ranks),
        gpu_recvs_before=sum(u for (_, b), u in load_before if b in ranks),
        gpu_recvs_after=sum(u for (_, b), u in load_after if b in ranks),
    )
    problems = check_multicast_forest(forest, topo)
    if problems:
        raise InternalError("multicast forest failed its check: " + "; ".join(problems[:5]))
    return forest


def _check_routes(packing: TreePacking, topo: Topology, reverse: bool) -> None:
    """Every route is a path of ``topo``'s links (reversed for reduce-scatter)."""
    cap = topo.capacity()
    for (u, v), paths in packing.routes:
        for path, _ in paths:
            if (len(path) < 2 or path[0] != topo.ranks[u] or path[-1] != topo.ranks[v]
                    or any(topo.node.get(x) is None or topo.node[x].is_compute
                           for x in path[1:-1])):
                raise TopologyError(f"packing of {packing.topology!r}: route {path} of logical "
                                    f"arc ({u}, {v}) is not a switch path of {topo.name!r}")
            for a, b in zip(path, path[1:]):
                link = (b, a) if reverse else (a, b)
                if link not in cap:
                    raise TopologyError(f"packing of {packing.topology!r}: topology "
                                        f"{topo.name!r} has no link {link[0]} -> {link[1]}")


def _pieces(packing: TreePacking
            ) -> Iterator[tuple[int, Tree, int, dict[tuple[int, int], tuple[str, ...]]]]:
    """Yield ``(tree index, tree, units, {arc: path})`` for every piece, packing order.

    On every arc the trees take units first-fit from the arc's paths in
    ``routes`` order; a batch is cut at every path boundary of any of its
    arcs.
    """
    routes = packing.route_map()
    cursor: dict[tuple[int, int], list[int]] = {}  # arc -> [path index, units used in it]
    for index, tree in enumerate(packing.trees):
        m = tree.multiplicity
        segments: dict[tuple[int, int], list[tuple[int, tuple[str, ...]]]] = {}
        cuts = {0, m}
        for arc in tree.edges:
            paths = routes.get(arc, ())
            at = cursor.setdefault(arc, [0, 0])
            segs: list[tuple[int, tuple[str, ...]]] = []  # (first unit of the piece, path)
            need = m
            while need:
                if at[0] >= len(paths):
                    raise InternalError(f"packing of {packing.topology!r}: logical arc {arc} "
                                        f"is used by more tree units than its routes carry")
                path, units = paths[at[0]]
                take = min(units - at[1], need)
                if take > 0:
                    segs.append((m - need, path))
                    cuts.add(m - need)
                    need -= take
                    at[1] += take
                if at[1] >= units:
                    at[0] += 1
                    at[1] = 0
            segments[arc] = segs
        bounds = sorted(cuts)
        for lo, hi in zip(bounds, bounds[1:]):
            path_of = {arc: _covering(segs, lo) for arc, segs in segments.items()}
            yield index, tree, hi - lo, path_of


def _covering(segs: list[tuple[int, tuple[str, ...]]], unit: int) -> tuple[str, ...]:
    """The path of the segment that contains ``unit`` (segments sorted by start)."""
    found = segs[0][1]
    for start, path in segs:
        if start > unit:
            break
        found = path
    return found


def _walk(tree: Tree, path_of: dict[tuple[int, int], tuple[str, ...]],
          rank_ids: tuple[str, ...], multicast: frozenset[str],
          ranks: frozenset[str]) -> tuple[tuple[Hop, ...], tuple[Hop, ...]]:
    """``(before, after)`` hops of one piece, forward (broadcast) direction."""
    children = tree.children()
    order: list[int] = []
    queue = deque([tree.root])
    while queue:  # breadth-first over ranks: depth, then edge order
        r = queue.popleft()
        order.append(r)
        queue.extend(children.get(r, ()))
    before: list[Hop] = []
    kept: list[tuple[str, str, int | None]] = []  # (src, dst, index of the feeding hop)
    fed: dict[str, int] = {}  # multicast switch -> its kept ingress
    for u in order:
        for v in children.get(u, ()):
            path = path_of[(u, v)]
            feeder: int | None = None  # None: the path's source rank holds the data
            for a, b in zip(path, path[1:]):
                before.append((a, b))
                if b in fed:  # redundant ingress: the switch already replicates
                    feeder = fed[b]
                    continue
                kept.append((a, b, feeder))
                feeder = len(kept) - 1
                if b in multicast:
                    fed[b] = feeder
    live = [False] * len(kept)
    needed: set[int] = set()
    for i in range(len(kept) - 1, -1, -1):  # prune ingress hops that feed nothing
        a, b, f = kept[i]
        if b in ranks or i in needed:
            live[i] = True
            if f is not None:
                needed.add(f)
    after = tuple((a, b) for i, (a, b, _) in enumerate(kept) if live[i])
    if len(order) != len(rank_ids):
        raise InternalError(f"tree of root {tree.root} spans {len(order)} of "
                            f"{len(rank_ids)} ranks")
    return tuple(before), after


def _load(trees: tuple[PhysicalTree, ...], *, after: bool) -> Load:
    load: dict[Hop, int] = {}
    for t in trees:
        for hop in (t.after if after else t.before):
            load[hop] = load.get(hop, 0) + t.multiplicity
    return tuple(sorted(load.items()))


def check_physical_tree(hops: tuple[Hop, ...], root: str, topo: Topology,
                        multicast: frozenset[str]) -> list[str]:
    """Problems of one forward-direction physical tree (empty: it is sound).

    Parameters
    ----------
    hops : tuple of (str, str)
        Broadcast direction, in the order the data moves.
    root : str
        Root rank id.
    topo : Topology
        For its ranks (links are checked by ``check_multicast_forest``).
    multicast : frozenset of str
        Switches that replicate: at most one ingress, feeding every egress;
        other switches forward one ingress to one egress.

    Returns
    -------
    list of str
        Every rank but the root receives exactly once and only sends after
        it has the data; the switch rules above; no ingress left unused.
    """
    problems: list[str] = []
    ranks = set(topo.ranks)
    have = {root}
    avail: dict[str, int] = {}  # unicast switch -> ingress not yet forwarded
    mc_in: dict[str, int] = {}
    mc_out: dict[str, int] = {}
    for a, b in hops:
        if a in ranks:
            if a not in have:
                problems.append(f"{a} sends {a}->{b} before it has the data")
        elif a in multicast:
            if not mc_in.get(a):
                problems.append(f"{a}->{b} leaves multicast switch {a} before data entered it")
            mc_out[a] = mc_out.get(a, 0) + 1
        else:
            if avail.get(a, 0) <= 0:
                problems.append(f"{a}->{b} leaves switch {a} without an ingress to forward")
            avail[a] = avail.get(a, 0) - 1
        if b in ranks:
            if b in have:
                problems.append(f"{b} receives twice (or is the root)")
            have.add(b)
        elif b in multicast:
            mc_in[b] = mc_in.get(b, 0) + 1
            if mc_in[b] > 1:
                problems.append(f"multicast switch {b} has {mc_in[b]} ingress hops")
        else:
            avail[b] = avail.get(b, 0) + 1
    missing = ranks - have
    if missing:
        problems.append(f"ranks never reached: {sorted(missing)}")
    for w, n in avail.items():
        if n > 0:
            problems.append(f"switch {w}: {n} ingress hop(s) feed nothing")
    for w in mc_in:
        if not mc_out.get(w):
            problems.append(f"multicast switch {w}: ingress feeds nothing")
    return problems


def check_multicast_forest(forest: MulticastForest, topo: Topology) -> list[str]:
    """Problems of a forest (empty: sound); see the module's output invariant.

    Parameters
    ----------
    forest : MulticastForest
    topo : Topology
        The topology the forest was made for.

    Returns
    -------
    list of str
        One line per problem, naming the tree index and root.
    """
    problems: list[str] = []
    cap = topo.capacity()
    multicast = frozenset(forest.multicast_switches)
    root_ids = topo.ranks
    for t in forest.trees:
        if t.multiplicity < 1:
            problems.append(f"tree {t.tree}: multiplicity {t.multiplicity}")
        where = f"tree {t.tree} (root {t.root})"
        for hop in t.before:
            if hop not in cap:
                problems.append(f"{where}: no link {hop[0]} -> {hop[1]}")
        fwd_before = _forward(t.before, forest.reverse)
        fwd_after = _forward(t.after, forest.reverse)
        problems += [f"{where} before: {p}"
                     for p in check_physical_tree(fwd_before, root_ids[t.root], topo, frozenset())]
        problems += [f"{where} after: {p}"
                     for p in check_physical_tree(fwd_after, root_ids[t.root], topo, multicast)]
        left = {}
        for hop in t.before:
            left[hop] = left.get(hop, 0) + 1
        for hop in t.after:
            left[hop] = left.get(hop, 0) - 1
            if left[hop] < 0:
                problems.append(f"{where}: kept hop {hop} is not in the mapped-back tree")
    return problems


def _forward(hops: tuple[Hop, ...], reverse: bool) -> tuple[Hop, ...]:
    if not reverse:
        return hops
    return tuple((b, a) for a, b in reversed(hops))


__all__ = ["MulticastForest", "PhysicalTree", "apply_multicast", "check_multicast_forest",
           "check_physical_tree"]
