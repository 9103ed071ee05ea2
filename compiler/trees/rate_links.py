"""Pass ``rate-links``: a topology whose links carry what the runtime reaches on them.

ForestColl's packing (``generate_trees``) is optimal for the links' nominal
bandwidths.  The runtime does not reach the same share of every link: on an
MI250 box the calibrated model (``ir/runtime_model.py``) runs a GCD's xGMI
links at 85.9% of nominal and its NIC at 57.7%.  Trees packed for the
nominal figures put as much on a NIC as its 16 GB/s allow, so on the
runtime the NICs finish last while the xGMI links idle half the time (MI250
x2 allgather, 1 GiB: NICs 80% busy, box links 52%).  Packed on the rated
links instead (``--algorithm trees-rated``), the trees send less over the
NICs and more over the box: 158.3 -> 180.6 GB/s simulated at 1 GiB (c16
Simple, 29 threadblocks per GCD).  The packing is then optimal for the
rated capacities, not the nominal ones (its bandwidth bound is the nominal
topology's, as for every schedule).

Input invariant: a validated ``Topology`` and the ``RuntimeModel`` it runs on.
Output invariant: the same nodes and links, each link's bandwidth times the
model's ``net_efficiency`` when an end is a network node, else times its
``p2p_efficiency`` (as exact fractions of the decimals); latencies kept.

Complexity: O(V + E).  Seed: ForestColl's packing (001 4.5, B.5) on the
capacities of 001 4.6's runtime measurements.
"""

from __future__ import annotations

import dataclasses
from fractions import Fraction

from colc.ir.runtime_model import RuntimeModel
from colc.ir.topology import Link, Topology

NAME = "rate-links"


def rate_links(topo: Topology, model: RuntimeModel) -> Topology:
    """``topo`` with every link at the bandwidth the runtime reaches on it.

    Parameters
    ----------
    topo : Topology
    model : RuntimeModel

    Returns
    -------
    Topology

    Examples
    --------
    >>> from colc.frontends.families import mi250
    >>> from colc.ir.runtime_model import MI250
    >>> t = mi250(2)
    >>> rated = rate_links(t, MI250)
    >>> [(l.src, l.dst, l.bandwidth) for l in rated.links if l.src == "b0g0"][-2:]
    [('b0g0', 'b0g8', Fraction(859, 20)), ('b0g0', 'ib', Fraction(1154, 125))]
    """
    net = Fraction(str(model.net_efficiency))
    p2p = Fraction(str(model.p2p_efficiency))
    node = topo.node
    links = tuple(Link(link.src, link.dst, link.bandwidth * (
        net if node[link.src].is_network or node[link.dst].is_network else p2p),
        link.latency) for link in topo.links)
    return dataclasses.replace(topo, links=links)


def rating_differs(topo: Topology, model: RuntimeModel, below: float) -> bool:
    """Whether some link of ``topo`` touches a network node and the runtime
    reaches a NIC's bandwidth less than ``below`` times as well as a GPU
    link's (then rated trees differ from the nominal ones and may win).

    >>> from colc.frontends.families import dgx_a100, mi250
    >>> from colc.ir.runtime_model import A100, MI250
    >>> rating_differs(mi250(2), MI250, 0.75), rating_differs(dgx_a100(2), A100, 0.75)
    (True, False)
    """
    if model.net_efficiency >= below * model.p2p_efficiency:
        return False
    return any(n.is_network for n in topo.nodes)


__all__ = ["NAME", "rate_links", "rating_differs"]
