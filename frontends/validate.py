"""Semantic checks of a ``Topology``.

``validate_topology`` enforces the invariants listed in
``colc.ir.topology``: unique ids, known kinds, at least two compute nodes
(a collective needs two ranks), links between known nodes with bandwidth > 0
and latency >= 0, no link from a node to itself, ``multicast`` only on
switches, and that every rank can reach every other rank along directed
links (switches may forward).  It also enforces the limits of
``colc.frontends.limits`` (ranks, nodes, links, the range of bandwidths and
latencies, and the bandwidths' scale), so a topology that passes can be
compiled without overflow.  The frontends call it on every topology they
produce.

``check_switch_balance`` is separate: algorithms that split switches off
(ForestColl's edge splitting needs Eulerian nodes) call it themselves.

Algorithm: reachability is two breadth-first searches from rank 0, one on
the graph and one on its reverse; every rank reaches every other rank iff
all ranks are in both.  O(V + E).

Example
-------
>>> from fractions import Fraction
>>> from colc.ir.topology import Link, Node, Topology
>>> t = Topology("one-way", (Node("a", "gpu"), Node("b", "gpu")),
...              (Link("a", "b", Fraction(1)),))
>>> validate_topology(t, "x.yaml")
Traceback (most recent call last):
...
colc.errors.TopologyError: x.yaml: error: rank 1 ('b') cannot reach rank 0 ('a')
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping, Sequence
from fractions import Fraction

import networkx as nx

from colc.errors import SpecError, TopologyError
from colc.ir.topology import COMPUTE_KINDS, SWITCH_KINDS, Link, Topology

from .limits import (
    MAX_BANDWIDTH,
    MAX_LATENCY,
    MIN_BANDWIDTH,
    MIN_LATENCY,
    approx,
    check_bandwidth_scale,
    check_links,
    check_nodes,
    check_ranks,
)


#: Node id -> line, remembered per topology by the YAML frontend so that a
#: later ``check_switch_balance`` (called by an algorithm) can still cite lines.
_NODE_LINES: weakref.WeakKeyDictionary[Topology, dict[str, int]] = weakref.WeakKeyDictionary()


def remember_node_lines(topo: Topology, node_lines: Mapping[str, int]) -> None:
    """Record where each node of ``topo`` was defined (used in later messages).

    Parameters
    ----------
    topo : Topology
        A topology produced by a frontend.
    node_lines : mapping of str to int
        1-based line of each node id.
    """
    _NODE_LINES[topo] = dict(node_lines)


def _where(path: str, line: int | None) -> str:
    return f"{path}:{line}" if line is not None else path


#: Where colc YAML lists its ranks (``validate_topology``'s default ``ranks_from``).
NODES_FIELD = "field 'nodes'"


def validate_topology(
    topo: Topology,
    path: str,
    *,
    node_lines: Mapping[str, int] | None = None,
    link_where: Sequence[tuple[str, int | None]] | None = None,
    ranks_from: str = NODES_FIELD,
    fewer: str = "",
) -> None:
    """Check that ``topo`` is usable; raise on the first problem.

    Parameters
    ----------
    topo : Topology
        The topology to check.
    path : str
        File it came from, for messages.
    node_lines : mapping of str to int, optional
        1-based line where each node id is defined, so errors about a node
        point at it.
    link_where : sequence of (str, int or None), optional
        For each link of ``topo.links``, how to name it in a message and its
        line (``("field 'links[3].bandwidth'", 7)``), for messages about the
        bandwidths' scale.
    ranks_from : str
        Where the input gives its ranks, for messages about too few: colc
        YAML's ``field 'nodes'``, an NCCL dump's ``<gpu>`` elements (with a
        hint: ``--boxes`` joins copies of the box).
    fewer : str
        Appended to the message about a single rank: how to have more.

    Raises
    ------
    SpecError
        Structural problems: duplicate id, unknown kind, fewer than two
        compute nodes, a link naming an unknown node or itself, a bandwidth
        or latency out of range, ``multicast`` on a non-switch; more ranks,
        nodes or links than colc handles; bandwidths too far apart.
    TopologyError
        Some rank cannot reach another rank.  The message names both.
    """
    lines = node_lines or _NODE_LINES.get(topo, {})
    _check_sizes(topo, path)
    seen: set[str] = set()
    for node in topo.nodes:
        if node.id in seen:
            raise SpecError(path, f"duplicate node id '{node.id}'", lines.get(node.id))
        seen.add(node.id)
        if node.kind not in COMPUTE_KINDS | SWITCH_KINDS:
            allowed = ", ".join(sorted(COMPUTE_KINDS | SWITCH_KINDS))
            raise SpecError(
                path, f"node '{node.id}': unknown kind '{node.kind}'; allowed: {allowed}",
                lines.get(node.id),
            )
        if node.multicast and node.kind != "switch":
            raise SpecError(
                path, f"node '{node.id}': multicast is only allowed on switches",
                lines.get(node.id),
            )
    if not topo.ranks:
        kinds = ", ".join(sorted(COMPUTE_KINDS))
        what = f"compute node (kind {kinds})" if ranks_from == NODES_FIELD else "rank"
        raise SpecError(path, f"{ranks_from}: no {what}")
    if len(topo.ranks) < 2:
        only = topo.ranks[0]
        raise SpecError(path, f"{ranks_from}: only one rank ('{only}'); a collective needs at "
                        f"least 2 ranks{fewer}", lines.get(only))
    for i, link in enumerate(topo.links):
        for end in (link.src, link.dst):
            if end not in seen:
                raise SpecError(path, f"link {i} ({link.src} -> {link.dst}): unknown node '{end}'")
        if link.src == link.dst:
            raise SpecError(path, f"link {i}: a link from '{link.src}' to itself")
        _check_link_numbers(i, link, path)
    where = link_where or [(f"link {i} ({lk.src} -> {lk.dst})", None)
                           for i, lk in enumerate(topo.links)]
    check_bandwidth_scale([lk.bandwidth for lk in topo.links], path=path, where=where)
    _check_reachability(topo, path, lines)


def _check_sizes(topo: Topology, path: str) -> None:
    check_nodes(len(topo.nodes), path=path, field="nodes")
    check_ranks(sum(n.is_compute for n in topo.nodes), path=path, field="nodes")
    check_links(len(topo.links), path=path, field="links")


def _check_link_numbers(i: int, link: Link, path: str) -> None:
    """Bandwidth and latency of link ``i`` within the ranges of ``colc.frontends.limits``."""
    name = f"link {i} ({link.src} -> {link.dst})"
    if link.bandwidth <= 0:
        raise SpecError(path, f"{name}: bandwidth must be > 0, got {link.bandwidth}")
    if not MIN_BANDWIDTH <= link.bandwidth <= MAX_BANDWIDTH:
        raise SpecError(path, f"{name}: bandwidth must be between {approx(MIN_BANDWIDTH)} and "
                        f"{approx(MAX_BANDWIDTH)} GB/s, got {approx(link.bandwidth)}")
    if link.latency < 0:
        raise SpecError(path, f"{name}: latency must be >= 0, got {link.latency}")
    if link.latency and not MIN_LATENCY <= link.latency <= MAX_LATENCY:
        raise SpecError(path, f"{name}: latency must be 0 or between {approx(MIN_LATENCY)} and "
                        f"{approx(MAX_LATENCY)} us, got {approx(link.latency)}")


def _check_reachability(topo: Topology, path: str, lines: Mapping[str, int]) -> None:
    ranks = topo.ranks
    if len(ranks) < 2:
        return
    g = nx.DiGraph()
    g.add_nodes_from(n.id for n in topo.nodes)
    g.add_edges_from((lk.src, lk.dst) for lk in topo.links)
    root = ranks[0]
    forward = nx.descendants(g, root)
    backward = nx.ancestors(g, root)
    for r, node_id in enumerate(ranks[1:], start=1):
        if node_id not in forward:
            raise TopologyError(
                f"{_where(path, lines.get(node_id))}: error: rank {r} ('{node_id}') "
                f"cannot be reached from rank 0 ('{root}')"
            )
        if node_id not in backward:
            raise TopologyError(
                f"{_where(path, lines.get(node_id))}: error: rank {r} ('{node_id}') "
                f"cannot reach rank 0 ('{root}')"
            )


def check_switch_balance(
    topo: Topology,
    path: str | None = None,
    *,
    all_nodes: bool = False,
    node_lines: Mapping[str, int] | None = None,
) -> None:
    """Require ingress == egress bandwidth at every switch (Eulerian switches).

    Parameters
    ----------
    topo : Topology
        The topology to check.
    path : str, optional
        File it came from, for messages (default ``topo.source``).
    all_nodes : bool
        Check compute nodes as well (ForestColl needs every node Eulerian).
    node_lines : mapping of str to int, optional
        1-based line of each node id (default: the lines the YAML frontend
        recorded for this topology, if any).

    Raises
    ------
    TopologyError
        Naming the first unbalanced node in file order, with both totals.
    """
    path = topo.source if path is None else path
    lines = node_lines or _NODE_LINES.get(topo, {})
    ingress: dict[str, Fraction] = {n.id: Fraction(0) for n in topo.nodes}
    egress: dict[str, Fraction] = {n.id: Fraction(0) for n in topo.nodes}
    for link in topo.links:
        egress[link.src] += link.bandwidth
        ingress[link.dst] += link.bandwidth
    for node in topo.nodes:
        if not all_nodes and node.is_compute:
            continue
        if ingress[node.id] != egress[node.id]:
            what = "node" if node.is_compute else "switch"
            raise TopologyError(
                f"{_where(path, lines.get(node.id))}: error: {what} '{node.id}' has ingress "
                f"bandwidth {ingress[node.id]} GB/s but egress {egress[node.id]} GB/s; "
                f"this algorithm needs them equal"
            )
