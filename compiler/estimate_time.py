"""Closed-form time of a chunk schedule per protocol (an alpha-beta estimate).

Input: a proved ``Schedule``, its ``Topology``, a ``RuntimeModel`` and a
threadblock budget.  Output: ``TimeEstimate``, from which ``time_us(protocol,
size)`` is ``latency + size / bandwidth``:

* latency: the protocol's base cost plus, along the schedule's longest
  dependency chain, each transfer's hop latency (NET when its switch path
  crosses a network node, P2P otherwise) and per-call cost;
* bandwidth: the smallest of every link's capacity times the runtime's
  efficiency for that kind of link over its load (``link_loads``) times the
  protocol's wire factor, and every rank's P2P (NET) sends over the budget's
  threadblocks (connections) at the protocol's per-threadblock rate.

It ignores the pipeline's fill and the FIFO credits, so it is optimistic
(DGX-style boxes: within about 20% of the simulator at 1 GiB, up to 3x at
1 MiB); ``colc analyze`` uses it only to choose which protocol to simulate
at each size, never as a figure.

Complexity: O(#ops + #transfers * path length) for the estimate, O(#links +
#ranks) per (protocol, size).
"""

from __future__ import annotations

from dataclasses import dataclass

from colc.compiler.estimate_bandwidth import link_loads
from colc.compiler.route_paths import Router
from colc.ir.chunks import Schedule
from colc.ir.core import Protocol
from colc.ir.runtime_model import RuntimeModel
from colc.ir.topology import Topology


@dataclass(frozen=True, slots=True)
class TimeEstimate:
    """What the closed form needs of one schedule (see module docstring)."""

    model: RuntimeModel
    budget: int
    #: (load in units of the collective size, capacity GB/s, is a network link)
    links: tuple[tuple[float, float, bool], ...]
    p2p_sends: float  # the most P2P data one rank sends, in units of the size
    net_sends: float  # the same for NET transfers
    chain: tuple[int, int]  # P2P and NET transfers on the longest chain

    def time_us(self, protocol: Protocol, size: int) -> float:
        """Estimated us of one call of ``size`` bytes under ``protocol``."""
        lat = self.model.latency(protocol)
        costs = self.model.costs(protocol)
        wire = self.model.geometry[protocol].wire_factor
        per_byte = 0.0  # us per byte of the collective size, /1000 as GB/s
        for load, cap, net in self.links:
            eff = self.model.net_efficiency if net else self.model.p2p_efficiency
            per_byte = max(per_byte, load * wire / (cap * eff))
        per_byte = max(per_byte, self.p2p_sends / (self.budget * costs.tb_p2p),
                       self.net_sends / (self.budget * costs.conn_net))
        p2p, net = self.chain
        latency = lat.base + p2p * (lat.hop_p2p + lat.call) + net * (lat.hop_net + lat.call)
        return latency + size / 1000 * per_byte

    def fastest(self, size: int) -> Protocol:
        """The protocol of the machine with the least estimated time at ``size``."""
        return min(self.model.protocols, key=lambda p: (self.time_us(p, size), p.value))


def estimate_time(sched: Schedule, topo: Topology, model: RuntimeModel,
                  budget: int) -> TimeEstimate:
    """The closed form of ``sched`` (see module docstring).

    Parameters
    ----------
    sched : Schedule
    topo : Topology
    model : RuntimeModel
    budget : int
        Threadblocks per rank (at least 1).

    Returns
    -------
    TimeEstimate
    """
    router = Router(topo)
    node = topo.node
    links = tuple((float(load), float(router.cap[e]),
                   node[e[0]].is_network or node[e[1]].is_network)
                  for e, load in sorted(link_loads(sched, router).items()))
    net_pair: dict[tuple[int, int], bool] = {}
    sends: dict[tuple[int, bool], float] = {}
    depth = [(0, 0)] * len(sched.ops)
    for op in sched.ops:
        p2p, net = max((depth[d] for d in op.deps), default=(0, 0), key=sum)
        if op.is_transfer:
            pair = (op.src.rank, op.dst.rank)
            if pair not in net_pair:
                path = router.switch_paths(pair[0])[pair[1]]
                net_pair[pair] = any(node[x].is_network for x in path)
            is_net = net_pair[pair]
            key = (op.src.rank, is_net)
            sends[key] = sends.get(key, 0.0) + op.count / sched.nchunks
            p2p, net = (p2p, net + 1) if is_net else (p2p + 1, net)
        depth[op.op_id] = (p2p, net)
    return TimeEstimate(
        model=model, budget=max(1, budget), links=links,
        p2p_sends=max((v for (_, n), v in sends.items() if not n), default=0.0),
        net_sends=max((v for (_, n), v in sends.items() if n), default=0.0),
        chain=max(depth, default=(0, 0), key=sum))
