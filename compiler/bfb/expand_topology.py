"""Pass ``expand-topology``: expansions with their schedules (seed 001 section 3.5, A.4).

Input invariant: direct-connect base topologies (no switches) and, for the
schedule constructions, an allgather ``StepSchedule`` of the base.
Output invariant: the expanded ``Topology`` (node ids derived from the
base ids; link bandwidth from the base link) and, where the seed gives one,
the expanded allgather ``StepSchedule`` on its ranks:

=====================  ===================  ====================================
expansion              topology             schedule and cost (tau = T_B/(M/B))
=====================  ===================  ====================================
line graph L(G)        Def 12, ``u>v``      Def 1; T_L + 1, tau + 1/N (Thm 7, 10)
degree G*n             Def 13, ``v.i``      Def 2; T_L + 1, tau + (n-1)/(nN) (Thm 11)
Cartesian power G^n    Def 3, ``a,b,..``    Def 14; n T_L, tau N/(N-1) (N^n-1)/N^n
Cartesian product      Def 3, ``a,b,..``    none: run BFB on the product (Thm 13)
=====================  ===================  ====================================

Rank order: line graph = base link order; degree = base rank major, copy
minor; products = row-major over the factors (last factor fastest).

Complexity: linear in the output (number of sends or links).
"""

from __future__ import annotations

import itertools
from fractions import Fraction

from colc.errors import SpecError, TopologyError, UnsupportedError
from colc.ir.bfb import Send, StepSchedule
from colc.ir.topology import Link, Node, Topology

NAME = "expand-topology"


def _check_direct(topo: Topology, what: str) -> None:
    if topo.switches:
        raise UnsupportedError(f"{what} needs a direct-connect topology; {topo.name!r} has switches")


def _links(topo: Topology) -> list[Link]:
    return [lk for lk in topo.links if lk.src != lk.dst]


# --------------------------------------------------------------------------- line graph


def line_graph(topo: Topology) -> Topology:
    """Line graph L(G) (Def 12): one rank per link ``u>v``, arcs ``(uv, vw)``.

    Parallel links give distinct ranks ``u>v~k``; the arc ``(uv, vw)`` takes
    the bandwidth of the base link ``vw``.  Back-tracking arcs ``(uv, vu)``
    are kept (the base is treated as a digraph).

    Examples
    --------
    >>> from colc.frontends.families import ring
    >>> line_graph(ring(4, 1, bidirectional=False)).num_ranks
    4
    """
    _check_direct(topo, "line graph expansion")
    arcs = _links(topo)
    ids = _arc_ids(arcs)
    out_of: dict[str, list[int]] = {}
    for i, lk in enumerate(arcs):
        out_of.setdefault(lk.src, []).append(i)
    links = [
        Link(ids[i], ids[j], arcs[j].bandwidth, arcs[j].latency)
        for i, lk in enumerate(arcs) for j in out_of.get(lk.dst, []) if i != j
    ]
    return Topology(f"L({topo.name})", tuple(Node(x, "gpu") for x in ids), tuple(links),
                    source=f"line graph of {topo.source}")


def _arc_ids(arcs: list[Link]) -> list[str]:
    seen: dict[tuple[str, str], int] = {}
    ids = []
    for lk in arcs:
        k = seen.get((lk.src, lk.dst), 0)
        seen[(lk.src, lk.dst)] = k + 1
        ids.append(f"{lk.src}>{lk.dst}" + (f"~{k}" if k else ""))
    return ids


def line_graph_schedule(topo: Topology, base: StepSchedule) -> StepSchedule:
    """Def 1: the line-graph allgather built from the base schedule.

    Raises
    ------
    UnsupportedError
        Parallel links in the base (the base schedule does not say which copy
        carries a send).
    """
    arcs = _links(topo)
    idx = topo.rank_of
    pairs = [(idx[lk.src], idx[lk.dst]) for lk in arcs]
    if len(set(pairs)) != len(pairs):
        raise UnsupportedError(f"line graph schedule of {topo.name!r}: parallel links")
    vid = {p: i for i, p in enumerate(pairs)}
    into: dict[int, list[int]] = {}
    out_of: dict[int, list[int]] = {}
    for i, (a, b) in enumerate(pairs):
        into.setdefault(b, []).append(i)
        out_of.setdefault(a, []).append(i)
    one, zero = Fraction(1), Fraction(0)
    sends: list[Send] = []
    for i, (_, v) in enumerate(pairs):
        for j in out_of.get(v, []):
            if j != i:
                sends.append(Send(1, j, i, i, zero, one))
    for s in base.sends:
        uw = vid.get((s.src, s.dst))
        if uw is None:
            raise TopologyError(f"base schedule uses a missing link {s.src}->{s.dst}")
        for vv in into.get(s.shard, []):
            for ww in out_of.get(s.dst, []):
                if vv != ww:
                    sends.append(Send(s.step + 1, ww, vv, uw, s.lo, s.hi))
    return StepSchedule(len(pairs), base.num_steps + 1, tuple(sorted(sends)),
                        f"line-graph({base.name})")


# --------------------------------------------------------------------------- degree


def degree_expansion(topo: Topology, copies: int) -> Topology:
    """Degree expansion G*n (Def 13): ranks ``v.1..v.n``, arcs ``(u.i, v.j)`` for all i, j.

    Raises
    ------
    SpecError
        ``copies < 1``.
    TopologyError
        Self-loops in the base (Def 13 needs none).
    """
    _check_direct(topo, "degree expansion")
    if copies < 1:
        raise SpecError("<expansion>", f"degree expansion: copies must be >= 1, got {copies}")
    if any(lk.src == lk.dst for lk in topo.links):
        raise TopologyError(f"degree expansion of {topo.name!r}: the base has self-loops")
    nodes = tuple(Node(f"{r}.{i}", "gpu") for r in topo.ranks for i in range(1, copies + 1))
    links = tuple(
        Link(f"{lk.src}.{i}", f"{lk.dst}.{j}", lk.bandwidth, lk.latency)
        for lk in topo.links for i in range(1, copies + 1) for j in range(1, copies + 1)
    )
    return Topology(f"{topo.name}*{copies}", nodes, links, source=f"degree expansion of {topo.source}")


def degree_schedule(topo: Topology, base: StepSchedule, copies: int) -> StepSchedule:
    """Def 2: copy ``j`` relays its own shards to every copy, then one extra step."""
    n = copies
    sends: list[Send] = []
    for s in base.sends:
        for i in range(n):
            for j in range(n):
                sends.append(Send(s.step, s.dst * n + i, s.shard * n + j, s.src * n + j, s.lo, s.hi))
    idx = topo.rank_of
    in_nbrs: dict[int, list[int]] = {}
    for lk in topo.links:
        in_nbrs.setdefault(idx[lk.dst], []).extend(idx[lk.src] * n + a for a in range(n))
    t = base.num_steps + 1
    for u in range(topo.num_ranks):
        senders = in_nbrs.get(u, [])
        m = len(senders)
        for j in range(n):
            for i in range(n):
                if i == j:
                    continue
                for a, w in enumerate(senders):
                    sends.append(Send(t, u * n + j, u * n + i, w, Fraction(a, m), Fraction(a + 1, m)))
    return StepSchedule(topo.num_ranks * n, t, tuple(sorted(sends)), f"degree({base.name})")


# --------------------------------------------------------------------------- products


def cartesian_product(*factors: Topology) -> Topology:
    """Cartesian product (Def 3); ranks row-major, ids ``a,b,...``.

    Raises
    ------
    SpecError
        Fewer than one factor.
    """
    if not factors:
        raise SpecError("<expansion>", "Cartesian product needs at least one factor")
    for f in factors:
        _check_direct(f, "Cartesian product")
    ranks = [f.ranks for f in factors]
    coords = list(itertools.product(*ranks))
    links: list[Link] = []
    for c in coords:
        for k, f in enumerate(factors):
            for lk in f.links:
                if lk.src == c[k] and lk.src != lk.dst:
                    d = c[:k] + (lk.dst,) + c[k + 1:]
                    links.append(Link(",".join(c), ",".join(d), lk.bandwidth, lk.latency))
    name = " x ".join(f.name for f in factors)
    return Topology(name, tuple(Node(",".join(c), "gpu") for c in coords), tuple(links),
                    source="Cartesian product")


def cartesian_power(topo: Topology, power: int) -> Topology:
    """``G^{box n}``: the Cartesian product of ``power`` copies.

    Raises
    ------
    SpecError
        ``power < 1``.
    """
    if power < 1:
        raise SpecError("<expansion>", f"Cartesian power must be >= 1, got {power}")
    out = cartesian_product(*([topo] * power))
    return Topology(f"{topo.name}^{power}", out.nodes, out.links, source=out.source)


def power_schedule(base: StepSchedule, power: int) -> StepSchedule:
    """Def 14: sub-shard ``i`` runs the base schedule dimension by dimension.

    Sub-shard ``i`` (``[i/n, (i+1)/n)``) handles dimension ``(i + j) mod n``
    in phase ``j``, so in every phase each dimension carries one sub-shard.
    """
    n, size, tmax = power, base.num_ranks, base.num_steps
    strides = [size ** (n - 1 - k) for k in range(n)]
    sends: list[Send] = []
    for i in range(n):
        for j in range(n):
            dim = (i + j) % n
            done = [(i + q) % n for q in range(j)]
            rest = [x for x in range(n) if x != dim and x not in done]
            for s in base.sends:
                lo, hi = (i + s.lo) / n, (i + s.hi) / n
                for own in itertools.product(range(size), repeat=len(done)):
                    for hold in itertools.product(range(size), repeat=len(done)):
                        for z in itertools.product(range(size), repeat=len(rest)):
                            shard = _rank(strides, done, own, rest, z, dim, s.shard)
                            base_r = _rank(strides, done, hold, rest, z, dim, 0)
                            src = base_r + s.src * strides[dim]
                            dst = base_r + s.dst * strides[dim]
                            sends.append(Send(s.step + j * tmax, dst, shard, src, lo, hi))
    return StepSchedule(size ** n, n * tmax, tuple(sorted(sends)), f"power({base.name})")


def _rank(strides, dims_a, vals_a, dims_b, vals_b, dim, val) -> int:
    r = strides[dim] * val
    r += sum(strides[d] * x for d, x in zip(dims_a, vals_a, strict=True))
    r += sum(strides[d] * x for d, x in zip(dims_b, vals_b, strict=True))
    return r
