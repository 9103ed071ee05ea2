"""Capacitated network topology: compute nodes (ranks) and switches.

The topology is the frontends' output and every pass's input.  It is
immutable; bandwidths are exact ``Fraction`` values in GB/s so that
optimality arguments (cut bounds, max-flow) never depend on float round-off.

Invariants (checked by ``colc.frontends.validate``):

* node ids are unique; at least one compute node;
* every link joins two known nodes, has bandwidth > 0, and is directed
  (a duplex link of the input is two ``Link`` objects);
* compute nodes are ranks ``0..N-1`` in file order.

Example
-------
>>> from fractions import Fraction
>>> t = Topology("pair", (Node("a", "gpu"), Node("b", "gpu")),
...              (Link("a", "b", Fraction(10)), Link("b", "a", Fraction(10))))
>>> t.ranks
('a', 'b')
>>> t.capacity()[("a", "b")]
Fraction(10, 1)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from functools import cached_property

import networkx as nx

#: Node kinds that are ranks (compute nodes).
COMPUTE_KINDS = frozenset({"gpu", "cpu", "npu", "compute"})
#: Node kinds that only forward data (switches, NICs).
SWITCH_KINDS = frozenset({"switch", "nic"})


@dataclass(frozen=True, slots=True)
class Node:
    """A node of the network.

    Parameters
    ----------
    id : str
        Unique name.
    kind : str
        One of ``COMPUTE_KINDS`` or ``SWITCH_KINDS``.
    multicast : bool
        A switch that can replicate (and aggregate) data in the network.
    net : bool
        A network switch (InfiniBand, Ethernet): transfers whose path crosses
        it use the runtime's NET transport, proxied through the NICs, instead
        of GPU peer-to-peer copies.  Nodes of kind ``nic`` are network nodes
        too (``is_network``).
    """

    id: str
    kind: str
    multicast: bool = False
    net: bool = False

    @property
    def is_network(self) -> bool:
        """Whether a path through this node is a NET (proxied) transfer."""
        return self.net or self.kind == "nic"

    @property
    def is_compute(self) -> bool:
        """Whether this node is a rank."""
        return self.kind in COMPUTE_KINDS


@dataclass(frozen=True, slots=True)
class Link:
    """A directed link ``src -> dst`` with bandwidth in GB/s and latency in us."""

    src: str
    dst: str
    bandwidth: Fraction
    latency: Fraction = Fraction(0)


@dataclass(frozen=True)
class Topology:
    """An immutable capacitated directed multigraph.

    Parameters
    ----------
    name : str
        Human-readable name (goes into the XML ``name`` attribute).
    nodes : tuple of Node
        In file order; compute nodes become ranks in this order.
    links : tuple of Link
        Directed links; parallel links add up.
    source : str
        Where the topology came from (file path or family), for messages.
    inputs : tuple of str
        Every file it was read from (a wrapper YAML and the NCCL dump it
        names), so that no output replaces one.
    hardware : str
        The machine when a hardware family built it (``a100``, ``h100``,
        ``mi250``; empty otherwise): it picks the runtime cost model whatever
        the topology is named.
    notes : tuple of str
        What a frontend read with a caveat (a TACCL profile measured at
        another size than 1 MB): one line each, printed as warnings.
    """

    name: str
    nodes: tuple[Node, ...]
    links: tuple[Link, ...]
    source: str = field(default="<topology>", compare=False)
    hardware: str = field(default="", compare=False)
    inputs: tuple[str, ...] = field(default=(), compare=False)
    notes: tuple[str, ...] = field(default=(), compare=False)

    @cached_property
    def ranks(self) -> tuple[str, ...]:
        """Ids of the compute nodes, rank order."""
        return tuple(n.id for n in self.nodes if n.is_compute)

    @cached_property
    def switches(self) -> tuple[str, ...]:
        """Ids of the non-compute nodes, file order."""
        return tuple(n.id for n in self.nodes if not n.is_compute)

    @cached_property
    def rank_of(self) -> dict[str, int]:
        """Map a compute node id to its rank."""
        return {node_id: r for r, node_id in enumerate(self.ranks)}

    @cached_property
    def node(self) -> dict[str, Node]:
        """Map an id to its node."""
        return {n.id: n for n in self.nodes}

    @property
    def num_ranks(self) -> int:
        """Number of ranks N."""
        return len(self.ranks)

    def capacity(self) -> dict[tuple[str, str], Fraction]:
        """Aggregate bandwidth per ordered node pair (parallel links summed)."""
        cap: dict[tuple[str, str], Fraction] = {}
        for link in self.links:
            key = (link.src, link.dst)
            cap[key] = cap.get(key, Fraction(0)) + link.bandwidth
        return cap

    def latency(self) -> dict[tuple[str, str], Fraction]:
        """Largest latency per ordered node pair (us)."""
        lat: dict[tuple[str, str], Fraction] = {}
        for link in self.links:
            key = (link.src, link.dst)
            lat[key] = max(lat.get(key, Fraction(0)), link.latency)
        return lat

    def digraph(self) -> nx.DiGraph:
        """A networkx DiGraph with ``capacity`` (Fraction) on each arc.

        Nodes carry ``kind`` and ``compute``; parallel links are summed.
        Node and edge insertion order is deterministic (file order).
        """
        g = nx.DiGraph()
        for n in self.nodes:
            g.add_node(n.id, kind=n.kind, compute=n.is_compute, multicast=n.multicast)
        for (u, v), c in self.capacity().items():
            g.add_edge(u, v, capacity=c)
        return g

    @property
    def has_switches(self) -> bool:
        """Whether any node only forwards."""
        return bool(self.switches)

    def ingress(self, node_id: str) -> Fraction:
        """Total bandwidth into a node."""
        return sum((lk.bandwidth for lk in self.links if lk.dst == node_id), Fraction(0))

    def egress(self, node_id: str) -> Fraction:
        """Total bandwidth out of a node."""
        return sum((lk.bandwidth for lk in self.links if lk.src == node_id), Fraction(0))


def rank_reach(topo: Topology) -> frozenset[tuple[int, int]]:
    """Rank pairs ``(a, b)`` such that ``a`` can send to ``b`` without a relay.

    ``a`` reaches ``b`` when a directed path ``a -> ... -> b`` exists whose
    intermediate nodes are all switches (a direct link is the empty case).
    Compute nodes never forward on their own: on direct-connect fabrics a
    schedule must relay explicitly.

    Complexity: O(N * (V + E)).

    Examples
    --------
    >>> from fractions import Fraction
    >>> t = Topology("s", (Node("a", "gpu"), Node("s", "switch"), Node("b", "gpu")),
    ...              (Link("a", "s", Fraction(1)), Link("s", "b", Fraction(1))))
    >>> sorted(rank_reach(t))
    [(0, 1)]
    """
    succ: dict[str, list[str]] = {n.id: [] for n in topo.nodes}
    for link in topo.links:
        succ[link.src].append(link.dst)
    pairs: set[tuple[int, int]] = set()
    for a, src in enumerate(topo.ranks):
        seen = {src}
        stack = list(succ[src])
        while stack:
            v = stack.pop()
            if v in seen:
                continue
            seen.add(v)
            if topo.node[v].is_compute:
                pairs.add((a, topo.rank_of[v]))
            else:
                stack.extend(succ[v])
    return frozenset(pairs)


def box_topology(topo: Topology, members: list[int]) -> Topology:
    """One box as a topology: its ranks ``members``, the non-network switches
    they link to, and the links among those nodes."""
    ids = {topo.ranks[r] for r in members}
    inside = set(ids)
    for link in topo.links:
        for a, b in ((link.src, link.dst), (link.dst, link.src)):
            if a in ids and not topo.node[b].is_compute and not topo.node[b].is_network:
                inside.add(b)
    return Topology(f"{topo.name}-box", tuple(nd for nd in topo.nodes if nd.id in inside),
                    tuple(lk for lk in topo.links if lk.src in inside and lk.dst in inside),
                    topo.source)


def boxes(topo: Topology) -> list[list[int]]:
    """Ranks grouped into boxes: joined by links or switches that are not network nodes.

    Examples
    --------
    >>> t = Topology("two", (Node("a", "gpu"), Node("b", "gpu"), Node("n", "switch", net=True)),
    ...              (Link("a", "n", Fraction(1)), Link("n", "b", Fraction(1))))
    >>> boxes(t)
    [[0], [1]]
    """
    parent = {n.id: n.id for n in topo.nodes}

    def find(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for link in topo.links:
        if not (topo.node[link.src].is_network or topo.node[link.dst].is_network):
            parent[find(link.src)] = find(link.dst)
    groups: dict[str, list[int]] = {}
    for r, node_id in enumerate(topo.ranks):
        groups.setdefault(find(node_id), []).append(r)
    return sorted(groups.values())
