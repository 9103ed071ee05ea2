"""Pass ``bfb-heterogeneous``: BFB with per-link latency and bandwidth (seed 001 A.5.3).

Input invariant: a direct-connect, strongly connected ``Topology`` whose
links may differ in bandwidth (GB/s) and latency (us), and the shard size in
bytes (``M / N``).
Output invariant: a ``BfbSolution`` whose pattern ``load`` is the time in
us of step ``t`` at receiver ``u``, LP (A.12)::

    minimize U  s.t.  alpha_{w,u} + (M/N)/B_{w,u} * sum_v x_{v,(w,u),t} <= U   (used links)
                      sum_w x_{v,(w,u),t} = 1,  0 <= x <= 1

and ``step_times[t-1] = max_u U_{u,t}``; the total ``sum_t step_times``
mixes latency and bandwidth (the ``T_L``/``T_B`` split no longer holds,
inventory 5.14).  After solving, an *unused* link whose ``alpha`` alone
sets ``U`` is removed from that LP and the LP is solved again, so no step
pays the latency of a link it does not use.

Algorithm: the LPs are grouped by signature (masks, capacities and
latencies) like ``bfb_schedule`` and solved in one batched HiGHS model; the
rationalised solution is repaired to satisfy the equalities exactly and its
exact ``U`` is recomputed from the loads (feasible by construction; optimal
to HiGHS tolerance).  Complexity as ``bfb_schedule`` plus one re-solve
round per removed link.
"""

from __future__ import annotations

from fractions import Fraction

import highspy

from colc.compiler.highs_solver import new_highs
import numpy as np

from colc.compiler.bfb.lp import _pairs
from colc.compiler.bfb.schedule import Progress, group_lps, hop_distances, rank_capacity
from colc.errors import InternalError, SpecError
from colc.ir.bfb import BfbPattern, BfbSolution
from colc.ir.topology import Topology

NAME = "bfb-heterogeneous"


def generate_bfb_heterogeneous(
    topo: Topology, shard_bytes: int, *, progress: Progress | None = None
) -> BfbSolution:
    """Heterogeneous BFB allgather (LP A.12); loads are step times in us.

    Parameters
    ----------
    topo : Topology
    shard_bytes : int
        ``M / N`` in bytes, > 0.
    progress : callable or None

    Returns
    -------
    BfbSolution
        ``step_times`` in us.

    Raises
    ------
    SpecError
        ``shard_bytes <= 0``.

    Examples
    --------
    >>> from colc.frontends.families import ring
    >>> s = generate_bfb_heterogeneous(ring(4, 10, latency=2), 1000)
    >>> s.step_times
    (Fraction(21, 10), Fraction(41, 20))
    """
    if shard_bytes <= 0:
        raise SpecError("<options>", f"shard size must be > 0 bytes, got {shard_bytes}")
    cap = rank_capacity(topo)
    idx = topo.rank_of
    lat: dict[tuple[int, int], Fraction] = {}
    for (a, b), v in topo.latency().items():
        if a != b:
            lat[(idx[a], idx[b])] = v
    dist = hop_distances(topo, cap)
    n = topo.num_ranks
    steps = int(dist.max()) if n > 1 else 0
    in_nbrs, pattern_of, problems = group_lps(cap, dist, steps, progress,
                                              link_key=lambda w, u: lat.get((w, u), Fraction(0)))
    first_u = {}
    for u, row in enumerate(pattern_of):
        for p in row:
            if p >= 0:
                first_u.setdefault(p, u)
    patterns = []
    for pid, (caps, masks, counts) in enumerate(problems):
        u = first_u[pid]
        alphas = tuple(lat.get((w, u), Fraction(0)) for w in in_nbrs[u])
        coef = tuple(Fraction(shard_bytes) / (c * 1000) for c in caps)
        patterns.append(_solve_dropping(caps, alphas, coef, masks, counts))
    step_times = tuple(
        max((patterns[p].load for p in {row[t] for row in pattern_of} if p >= 0), default=Fraction(0))
        for t in range(steps)
    )
    return BfbSolution(n, steps, tuple(in_nbrs), tuple(pattern_of), tuple(patterns), step_times,
                       dist, "bfb-heterogeneous")


def _solve_dropping(caps, alphas, coef, masks, counts) -> BfbPattern:
    k = len(caps)
    allowed = (1 << k) - 1
    for _ in range(k + 1):
        use = tuple(m & allowed for m in masks)
        if any(m == 0 for m in use):
            raise InternalError("heterogeneous BFB dropped every link of a source class")
        amounts, u_time = _solve_one(alphas, coef, use, counts, allowed)
        used = {j for row in amounts for j, _ in row}
        idle = [j for j in range(k) if allowed >> j & 1 and j not in used and alphas[j] >= u_time]
        if not idle:
            return BfbPattern(caps, masks, counts, amounts, u_time)
        for j in idle:
            allowed &= ~(1 << j)
    raise InternalError("heterogeneous BFB re-solve did not settle")


def _solve_one(alphas, coef, masks, counts, allowed):
    """One LP (A.12) with HiGHS; exact amounts and the exact time of used links."""
    k, nc = len(alphas), len(masks)
    cls, lnk = _pairs(masks, k)
    m = cls.shape[0]
    links = [j for j in range(k) if allowed >> j & 1]
    h = new_highs()
    h.setOptionValue("output_flag", False)
    inf = highspy.kHighsInf
    h.addVars(1 + m, np.zeros(1 + m), np.full(1 + m, inf))
    h.changeColsCost(1 + m, np.arange(1 + m, dtype=np.int32), np.concatenate(([1.0], np.zeros(m))))
    for c in range(nc):
        cols = np.flatnonzero(cls == c) + 1
        h.addRow(float(counts[c]), float(counts[c]), len(cols), cols.astype(np.int32), np.ones(len(cols)))
    for j in links:
        cols = np.flatnonzero(lnk == j) + 1
        idx = np.concatenate(([0], cols)).astype(np.int32)
        val = np.concatenate(([-1.0], np.full(len(cols), float(coef[j]))))
        h.addRow(-inf, -float(alphas[j]), len(idx), idx, val)
    h.run()
    x = np.asarray(h.getSolution().col_value)
    rows: list[dict[int, Fraction]] = [{} for _ in range(nc)]
    for i in range(m):
        if x[1 + i] > 1e-12:
            rows[int(cls[i])][int(lnk[i])] = Fraction(float(x[1 + i])).limit_denominator(1 << 20)
    for c, row in enumerate(rows):
        if not row:
            j = next(j for j in range(k) if masks[c] >> j & 1)
            row[j] = Fraction(0)
        big = max(row, key=lambda j: (row[j], -j))
        row[big] += counts[c] - sum(row.values())
        if row[big] < 0:
            raise InternalError("heterogeneous BFB: HiGHS solution not repairable")
    load = [Fraction(0)] * k
    for row in rows:
        for j, y in row.items():
            load[j] += y
    used = [j for j in range(k) if load[j] > 0]
    u_time = max(alphas[j] + coef[j] * load[j] for j in used)
    amounts = tuple(tuple(sorted((j, y) for j, y in row.items() if y > 0)) for row in rows)
    return amounts, u_time
