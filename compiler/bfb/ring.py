"""Pass ``bfb-ring``: the BFB ring allgather with ``floor(N/2)`` steps (seed 001 A.6.1).

Input invariant: a bidirectional ring (every rank has exactly two distinct
neighbours, both ways; ``N = 2``: one duplex link).
Output invariant: a ``StepSchedule`` in which every rank broadcasts its
whole shard both ways around the ring, half a circle each:
for ``t = 1 .. floor((N-1)/2)`` rank ``v``'s shard goes ``v+t-1 -> v+t`` and
``v-t+1 -> v-t``; for even ``N`` the opposite rank ``v + N/2`` gets the first
half from ``v + N/2 - 1`` and the second half from ``v - N/2 + 1`` in step
``N/2``.  ``T_L = floor(N/2) alpha`` and each link carries one shard per step
(half in the last step of an even ring), so ``T_B = (M/B)(N-1)/N``:
bandwidth-optimal with half the steps of the classic ring.

Complexity: O(N^2) sends.
"""

from __future__ import annotations

from fractions import Fraction

from colc.compiler.bfb.schedule import rank_capacity
from colc.errors import TopologyError
from colc.ir.bfb import Send, StepSchedule
from colc.ir.topology import Topology

NAME = "bfb-ring"


def ring_order(topo: Topology) -> list[int]:
    """Ranks in cyclic order starting at rank 0, towards its smaller neighbour.

    Raises
    ------
    TopologyError
        If the ranks do not form one bidirectional cycle.
    """
    cap = rank_capacity(topo)
    n = topo.num_ranks
    nbrs: dict[int, set[int]] = {r: set() for r in range(n)}
    for a, b in cap:
        if (b, a) not in cap:
            raise TopologyError(
                f"{topo.name!r} is not a bidirectional ring: link "
                f"{topo.ranks[a]!r}->{topo.ranks[b]!r} has no reverse"
            )
        nbrs[a].add(b)
    want = 1 if n == 2 else 2
    for r, s in nbrs.items():
        if len(s) != want:
            raise TopologyError(
                f"{topo.name!r} is not a ring: rank {topo.ranks[r]!r} has {len(s)} neighbours"
            )
    order, prev = [0], None
    while len(order) < n:
        cur = order[-1]
        nxt = min(x for x in nbrs[cur] if x != prev)
        if nxt == 0:
            break
        order.append(nxt)
        prev = cur
    if len(order) != n:
        raise TopologyError(f"{topo.name!r} is not one ring: it splits into several cycles")
    return order


def bfb_ring_schedule(topo: Topology) -> StepSchedule:
    """The A.6.1 ring allgather schedule on a bidirectional ring.

    Examples
    --------
    >>> from colc.frontends.families import ring
    >>> s = bfb_ring_schedule(ring(8, 1))
    >>> s.num_steps, len(s.sends)
    (4, 64)
    """
    order = ring_order(topo)
    n = len(order)
    one, half = Fraction(1), Fraction(1, 2)
    sends: list[Send] = []
    for i, v in enumerate(order):
        def at(k: int, i: int = i) -> int:
            return order[(i + k) % n]

        for t in range(1, (n - 1) // 2 + 1):
            sends.append(Send(t, at(t), v, at(t - 1), Fraction(0), one))
            sends.append(Send(t, at(-t), v, at(-t + 1), Fraction(0), one))
        if n % 2 == 0:
            t = n // 2
            sends.append(Send(t, at(t), v, at(t - 1), Fraction(0), half))
            sends.append(Send(t, at(t), v, at(-t + 1), half, one))
    return StepSchedule(n, n // 2, tuple(sorted(sends)), "bfb-ring")
