"""Semantic checks of a ``Topology``.

``validate_topology`` enforces the invariants listed in
``colc.ir.topology``: unique ids, known kinds, at least one compute node,
links between known nodes with bandwidth > 0 and latency >= 0, no link from
a node to itself, ``multicast`` only on switches, and that every rank can
reach every other rank along directed links (switches may forward).  The
frontends call it on every topology they produce.

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
from collections.abc import Mapping
from fractions import Fraction

import networkx as nx

from colc.errors import SpecError, TopologyError
from colc.ir.topology import COMPUTE_KINDS, SWITCH_KINDS, Topology


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


def validate_topology(
    topo: Topology,
    path: str,
    *,
    node_lines: Mapping[str, int] | None = None,
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

    Raises
    ------
    SpecError
        Structural problems: duplicate id, unknown kind, no compute node,
        a link naming an unknown node or itself, a bandwidth <= 0, a
        negative latency, ``multicast`` on a non-switch.
    TopologyError
        Some rank cannot reach another rank.  The message names both.
    """
    lines = node_lines or _NODE_LINES.get(topo, {})
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
        raise SpecError(path, f"field 'nodes': no compute node (kind {kinds})")
    for i, link in enumerate(topo.links):
        for end in (link.src, link.dst):
            if end not in seen:
                raise SpecError(path, f"link {i} ({link.src} -> {link.dst}): unknown node '{end}'")
        if link.src == link.dst:
            raise SpecError(path, f"link {i}: a link from '{link.src}' to itself")
        if link.bandwidth <= 0:
            raise SpecError(
                path, f"link {i} ({link.src} -> {link.dst}): bandwidth must be > 0, "
                f"got {link.bandwidth}",
            )
        if link.latency < 0:
            raise SpecError(
                path, f"link {i} ({link.src} -> {link.dst}): latency must be >= 0, "
                f"got {link.latency}",
            )
    _check_reachability(topo, path, lines)


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
