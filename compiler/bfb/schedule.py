"""Pass ``bfb-schedule``: the optimal BFB allgather schedule of a direct-connect graph.

Input invariant: a ``Topology`` without switches whose rank graph is
strongly connected (self-loops are ignored; parallel links add capacity).
Output invariant: a ``BfbSolution`` whose every send ``((v, C), (w, u), t)``
has ``d(v, u) = d(v, w) + 1 = t`` (Def 15), whose sends into ``u`` of shard
``v`` partition ``[0, 1)`` (Thm 14, so it is an allgather), and whose
per-step time ``max_u U_{u,t}`` is the optimum of LP (3.1), weighted by link
capacity, for every ``(u, t)`` (Thm 16).

Algorithm (seed 001 section 3.6.1, A.5):

1. all-pairs hop distances by BFS (scipy, C speed);
2. for every receiver ``u`` the in-neighbour *mask* of every source ``v``
   (which in-neighbours are one hop closer to ``v``);
3. the LP of ``(u, t)`` depends only on the in-link capacities and the
   multiset of masks of the sources at distance ``t``; equal LPs are solved
   once (on vertex-transitive graphs such as tori, circulants and hypercubes
   this leaves a handful per step instead of ``N`` per step);
4. the distinct LPs are solved in one batched HiGHS model (or by exact
   max-flow, ``solver="flow"``) and certified exactly (``colc.compiler.bfb.lp``).

Reduce-scatter is the reversed schedule (Thm 1): on graphs whose capacity is
symmetric it is the reversed allgather schedule; otherwise BFB runs on the
transpose graph (``transpose=True``) and is reversed (Cor 1.1).

Complexity: BFS O(N (N + E)); masks O(N^2 k) vectorised; LP count at most
``N * D`` (far fewer with symmetry).

Example: the 4-node ``K_{2,2}`` (seed Fig 3.1) has 2 steps and
``tau = 3/4``.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import shortest_path

from colc.compiler.bfb.lp import solve_problems
from colc.errors import TopologyError, UnsupportedError
from colc.ir.bfb import BfbPattern, BfbSolution, source_masks
from colc.ir.core import Collective
from colc.ir.topology import Topology

NAME = "bfb-schedule"

Progress = Callable[[str, int, int], None]


def rank_capacity(topo: Topology, *, transpose: bool = False) -> dict[tuple[int, int], Fraction]:
    """Capacity per ordered rank pair, self-loops dropped.

    Raises
    ------
    UnsupportedError
        If the topology has switches (BFB schedules direct-connect graphs).
    """
    if topo.switches:
        raise UnsupportedError(
            f"BFB needs a direct-connect topology; {topo.name!r} has switch {topo.switches[0]!r}"
        )
    idx = topo.rank_of
    cap: dict[tuple[int, int], Fraction] = {}
    for (a, b), c in topo.capacity().items():
        if a == b:
            continue
        key = (idx[b], idx[a]) if transpose else (idx[a], idx[b])
        cap[key] = cap.get(key, Fraction(0)) + c
    return cap


def hop_distances(topo: Topology, cap: dict[tuple[int, int], Fraction]) -> np.ndarray:
    """``D[v, u]`` = hops from rank ``v`` to rank ``u`` (int32, read-only).

    Raises
    ------
    TopologyError
        If some rank cannot reach another (names both).
    """
    n = topo.num_ranks
    if cap:
        src, dst = zip(*sorted(cap), strict=True)
        mat = csr_matrix((np.ones(len(src)), (src, dst)), shape=(n, n))
    else:
        mat = csr_matrix((n, n))
    dist = shortest_path(mat, method="D", unweighted=True, directed=True)
    if not np.all(np.isfinite(dist)):
        v, u = (int(i) for i in np.argwhere(~np.isfinite(dist))[0])
        raise TopologyError(
            f"topology {topo.name!r} is not strongly connected: no path from "
            f"{topo.ranks[v]!r} to {topo.ranks[u]!r}"
        )
    out = dist.astype(np.int32)
    out.flags.writeable = False
    return out


def generate_bfb(
    topo: Topology,
    *,
    solver: str = "highs",
    transpose: bool = False,
    progress: Progress | None = None,
) -> BfbSolution:
    """Optimal BFB allgather schedule (LP 3.1 for every receiver and step).

    Parameters
    ----------
    topo : Topology
        Direct-connect; ranks are indexed in ``topo.ranks`` order.
    solver : {"highs", "flow"}
        Batched HiGHS with exact certification, or exact max-flow.
    transpose : bool
        Schedule the transpose graph (for reduce-scatter on digraphs).
    progress : callable or None
        ``progress(phase, done, total)``, called a few times per phase.

    Returns
    -------
    BfbSolution

    Raises
    ------
    UnsupportedError
        Switches in the topology.
    TopologyError
        Not strongly connected.

    Examples
    --------
    >>> from colc.frontends.families import complete_bipartite
    >>> s = generate_bfb(complete_bipartite(4, 1))
    >>> s.num_steps, s.tau(2)
    (2, Fraction(3, 4))
    """
    cap = rank_capacity(topo, transpose=transpose)
    dist = hop_distances(topo, cap)
    n = topo.num_ranks
    steps = int(dist.max()) if n > 1 else 0
    in_nbrs, pattern_of, problems = group_lps(cap, dist, steps, progress)
    if progress is not None:
        progress("lp-solve", 0, len(problems))
    solved = solve_problems(problems, solver)
    if progress is not None:
        progress("lp-solve", len(problems), len(problems))
    patterns = tuple(
        BfbPattern(p[0], p[1], p[2], amounts, load)
        for p, (load, amounts) in zip(problems, solved, strict=True)
    )
    step_times = tuple(
        max((patterns[p].load for p in {row[t] for row in pattern_of} if p >= 0),
            default=Fraction(0))
        for t in range(steps)
    )
    return BfbSolution(
        num_ranks=n,
        num_steps=steps,
        in_neighbours=tuple(in_nbrs),
        pattern_of=tuple(pattern_of),
        patterns=patterns,
        step_times=step_times,
        distance=dist,
        name="bfb-transpose" if transpose else "bfb",
    )


def group_lps(cap: dict[tuple[int, int], Fraction], dist: np.ndarray, steps: int,
              progress: Progress | None = None,
              link_key: Callable[[int, int], object] | None = None):
    """Group the ``(u, t)`` LPs by signature (capacities, extra link key, masks).

    Returns ``(in_nbrs, pattern_of, problems)``; ``problems[i]`` is
    ``(capacities, masks, counts)`` and ``pattern_of[u][t-1]`` indexes it.
    ``link_key(w, u)`` adds per-link data (e.g. latency) to the signature.
    """
    n = dist.shape[0]
    in_nbrs: list[list[int]] = [[] for _ in range(n)]
    for a, b in sorted(cap):
        in_nbrs[b].append(a)
    keys: dict[object, int] = {}
    cap_ids: dict[object, int] = {}
    problems: list[tuple[tuple[Fraction, ...], tuple[int, ...], tuple[int, ...]]] = []
    pattern_of: list[tuple[int, ...]] = []
    report = max(1, n // 20)
    for u in range(n):
        if progress is not None and u % report == 0:
            progress("lp-signatures", u, n)
        nbrs = tuple(in_nbrs[u])
        caps = tuple(cap[(w, u)] for w in nbrs)
        extra = tuple(link_key(w, u) for w in nbrs) if link_key is not None else ()
        cap_id = cap_ids.setdefault((caps, extra), len(cap_ids))
        du, mask = source_masks(dist, u, nbrs)
        order = np.lexsort((mask, du)) if mask.dtype != object else _object_order(du, mask)
        du_s, mask_s = du[order], mask[order]
        bounds = np.searchsorted(du_s, np.arange(1, steps + 2))
        row: list[int] = []
        for t in range(1, steps + 1):
            seg = mask_s[bounds[t - 1]:bounds[t]]
            if seg.shape[0] == 0:
                row.append(-1)
                continue
            body = seg.tobytes() if seg.dtype != object else tuple(seg.tolist())
            key = (cap_id, body)
            pid = keys.get(key)
            if pid is None:
                pid = keys[key] = len(problems)
                problems.append(_problem(caps, seg))
            row.append(pid)
        pattern_of.append(tuple(row))
    return [tuple(x) for x in in_nbrs], pattern_of, problems


def _object_order(du: np.ndarray, mask: np.ndarray) -> np.ndarray:
    keys = sorted(range(du.shape[0]), key=lambda i: (int(du[i]), int(mask[i])))
    return np.array(keys, dtype=np.int64)


def _problem(caps: tuple[Fraction, ...], seg: np.ndarray):
    if seg.dtype != object:
        vals, counts = np.unique(seg, return_counts=True)
        return caps, tuple(int(v) for v in vals), tuple(int(c) for c in counts)
    tally: dict[int, int] = {}
    for m in seg.tolist():
        tally[int(m)] = tally.get(int(m), 0) + 1
    ms = sorted(tally)
    return caps, tuple(ms), tuple(tally[m] for m in ms)


def is_capacity_symmetric(topo: Topology) -> bool:
    """Whether every rank pair has the same capacity both ways (G equals G^T)."""
    cap = rank_capacity(topo)
    return all(cap.get((b, a)) == c for (a, b), c in cap.items())


def bfb_report(topo: Topology, collective: Collective, *, solver: str = "highs") -> tuple[int, Fraction]:
    """Steps and algbw (GB/s, nccl-tests: ``M / T_B``) of the BFB schedule.

    Reduce-scatter uses the transpose graph on asymmetric topologies (Cor 1.1);
    allreduce is reduce-scatter followed by allgather.

    Parameters
    ----------
    topo : Topology
    collective : Collective
        ALLGATHER, REDUCESCATTER or ALLREDUCE.

    Returns
    -------
    (int, Fraction)

    Raises
    ------
    UnsupportedError
        Other collectives, or switches.

    Examples
    --------
    >>> from colc.frontends.families import ring
    >>> bfb_report(ring(8, 10), Collective.ALLGATHER)
    (4, Fraction(160, 7))
    """
    if collective not in (Collective.ALLGATHER, Collective.REDUCESCATTER, Collective.ALLREDUCE):
        raise UnsupportedError(f"BFB has no {collective.value} schedule")
    ag = generate_bfb(topo, solver=solver)
    if collective is Collective.ALLGATHER:
        return ag.num_steps, ag.algbw()
    rs = ag if is_capacity_symmetric(topo) else generate_bfb(topo, solver=solver, transpose=True)
    if collective is Collective.REDUCESCATTER:
        return rs.num_steps, rs.algbw()
    total = ag.bandwidth_time + rs.bandwidth_time
    return ag.num_steps + rs.num_steps, Fraction(topo.num_ranks) / total
