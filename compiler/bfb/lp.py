"""Solve batches of BFB linear programs (LP 3.1) exactly.

Input: *problems* ``(capacity, masks, counts)``: ``k`` in-links of one
receiver with capacities (GB/s), and classes of sources, class ``c`` holding
``counts[c]`` sources that may only be sent by the links in bit mask
``masks[c]``.  LP (3.1), with identical sources merged (an optimum treats
them alike, by convexity)::

    minimize U  s.t.  sum_c y[c, j] <= U * capacity[j]   for every link j
                      sum_j y[c, j]  = counts[c]         for every class c
                      y >= 0,  y[c, j] = 0 unless j in masks[c]

Output: per problem the exact optimum ``U`` (``Fraction``) and an exact
optimal ``y``.

Two solvers, which the tests check agree:

``"highs"``
    All problems of a batch go into one block-diagonal HiGHS model (one
    ``run`` call, no per-LP Python model building).  Each block's vertex
    solution is rationalised and *certified* exactly: ``y`` must be feasible
    for the rational ``U`` and a set ``S`` of links must exist with
    ``U = counts(classes inside S) / capacity(S)`` (a Hall bound, so no
    smaller ``U`` is feasible).  A block that fails certification falls back
    to the flow solver.  The optimal ``y`` is then colc's own: one max-flow
    at the certified ``U`` (HiGHS picks among many optimal vertices, and
    its pick changes between releases; the files must not).
``"flow"``
    Newton's method on Hall ratios (Thm 19 made quantitative):
    ``U* = max_J counts(J) / capacity(N(J))``.  Start at a lower bound, run an
    exact integer max-flow with link capacities ``U * capacity``; if it does
    not saturate, the source side of the min cut is a set ``J`` with a larger
    ratio; repeat.  Terminates after at most ``2**k`` rounds, in practice 1-3.

Complexity: ``flow`` is O(rounds * Dinic(C + k, C * k)) per problem;
``highs`` is one LP with ``sum (1 + C k)`` columns per batch.
Seed: 001 section 3.6.1, LP (3.1), A.5, Thm 16 and 19.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from fractions import Fraction

import highspy

from colc.compiler.highs_solver import new_highs
import numpy as np

from colc.errors import InternalError

Problem = tuple[tuple[Fraction, ...], tuple[int, ...], tuple[int, ...]]
Solution = tuple[Fraction, tuple[tuple[tuple[int, Fraction], ...], ...]]

SOLVERS = ("highs", "flow")
_MAX_DEN = 1 << 24


def solve_problems(problems: Sequence[Problem], solver: str = "highs") -> list[Solution]:
    """Solve every problem exactly.

    Parameters
    ----------
    problems : sequence of (capacity, masks, counts)
    solver : {"highs", "flow"}

    Returns
    -------
    list of (U, amounts)
        ``amounts[c]`` lists ``(link, shards)`` with positive shards.

    Examples
    --------
    The worked example of seed Fig 3.5 / A.5 (three links, two sources):

    >>> one = Fraction(1)
    >>> solve_problems([((one, one, one), (0b011, 0b110), (1, 1))], "flow")[0][0]
    Fraction(2, 3)
    """
    if solver == "flow":
        return [solve_flow(*p) for p in problems]
    if solver != "highs":
        raise InternalError(f"unknown BFB LP solver {solver!r}")
    out: list[Solution] = []
    batch = 4000
    for start in range(0, len(problems), batch):
        chunk = problems[start:start + batch]
        for p, guess in zip(chunk, _highs_batch(chunk), strict=True):
            sol = _certify(p, *guess)
            out.append(_canonical(p, sol[0]) if sol is not None else solve_flow(*p))
    return out


def _canonical(problem: Problem, u: Fraction) -> Solution:
    """colc's own optimal ``y`` at the certified optimum ``u``.

    The LP has many optimal vertices and which one HiGHS returns changes
    between its releases; one exact max-flow at ``u`` (colc's Dinic, a fixed
    arc order) gives the same answer whatever solver found ``u``.
    """
    capacity, masks, counts = problem
    if not masks:
        return Fraction(0), ()
    flows, cut = _max_flow(capacity, [_members(m, len(capacity)) for m in masks], counts, u)
    if cut is not None:
        raise InternalError("a certified BFB LP optimum is not feasible for the flow")
    return u, flows


# --------------------------------------------------------------------------- exact flow


def _members(mask: int, k: int) -> list[int]:
    return [j for j in range(k) if mask >> j & 1]


def solve_flow(capacity: tuple[Fraction, ...], masks: tuple[int, ...],
               counts: tuple[int, ...]) -> Solution:
    """Exact LP optimum by Newton iterations on Hall ratios (see module doc)."""
    k = len(capacity)
    if not masks:
        return Fraction(0), ()
    slots = [_members(m, k) for m in masks]
    for c, s in enumerate(slots):
        if not s:
            raise InternalError(f"BFB LP class {c} has no admissible in-link")
    total = sum(counts)
    used = sorted({j for s in slots for j in s})
    u = max(
        [Fraction(total) / sum(capacity[j] for j in used)]
        + [Fraction(n) / sum(capacity[j] for j in s) for n, s in zip(counts, slots, strict=True)]
    )
    for _ in range(1 << min(k, 30)):
        flows, cut = _max_flow(capacity, slots, counts, u)
        if cut is None:
            return u, flows
        jset, sset = cut
        u = Fraction(sum(counts[c] for c in jset)) / sum(capacity[j] for j in sset)
    raise InternalError("BFB LP Newton iteration did not converge")


def _max_flow(capacity: tuple[Fraction, ...], slots: list[list[int]],
              counts: tuple[int, ...], u: Fraction):
    """Dinic max-flow, integer-scaled; returns flows or the min-cut classes/links."""
    k, nc = len(capacity), len(slots)
    scale = u.denominator * math.lcm(*(c.denominator for c in capacity))
    src, snk = nc + k, nc + k + 1
    n = nc + k + 2
    head: list[list[int]] = [[] for _ in range(n)]
    to: list[int] = []
    cap: list[int] = []

    def arc(a: int, b: int, c: int) -> None:
        head[a].append(len(to)); to.append(b); cap.append(c)
        head[b].append(len(to)); to.append(a); cap.append(0)

    big = sum(counts) * scale + 1
    for c, s in enumerate(slots):
        arc(src, c, counts[c] * scale)
    mid: list[tuple[int, int, int]] = []
    for c, s in enumerate(slots):
        for j in s:
            mid.append((c, j, len(to)))
            arc(c, nc + j, big)
    for j in range(k):
        arc(nc + j, snk, int(u * capacity[j] * scale))
    flow = _dinic(n, head, to, cap, src, snk)
    total = sum(counts) * scale
    if flow == total:
        amounts: list[list[tuple[int, Fraction]]] = [[] for _ in range(nc)]
        for c, j, e in mid:
            f = cap[e ^ 1]
            if f:
                amounts[c].append((j, Fraction(f, scale)))
        return tuple(tuple(a) for a in amounts), None
    seen = _reach(n, head, to, cap, src)
    jset = [c for c in range(nc) if seen[c]]
    sset = [j for j in range(k) if seen[nc + j]]
    return None, (jset, sset)


def _reach(n: int, head, to, cap, src: int) -> list[bool]:
    seen = [False] * n
    seen[src] = True
    dq = deque([src])
    while dq:
        a = dq.popleft()
        for e in head[a]:
            if cap[e] > 0 and not seen[to[e]]:
                seen[to[e]] = True
                dq.append(to[e])
    return seen


def _dinic(n: int, head, to, cap, src: int, snk: int) -> int:
    flow = 0
    while True:
        level = [-1] * n
        level[src] = 0
        dq = deque([src])
        while dq:
            a = dq.popleft()
            for e in head[a]:
                if cap[e] > 0 and level[to[e]] < 0:
                    level[to[e]] = level[a] + 1
                    dq.append(to[e])
        if level[snk] < 0:
            return flow
        it = [0] * n
        while True:
            pushed = _augment(head, to, cap, level, it, src, snk)
            if not pushed:
                break
            flow += pushed


def _augment(head, to, cap, level, it, src: int, snk: int) -> int:
    """One blocking-flow path found iteratively (graphs are 3 layers deep)."""
    path: list[int] = []
    a = src
    while True:
        if a == snk:
            f = min(cap[e] for e in path)
            for e in path:
                cap[e] -= f
                cap[e ^ 1] += f
            return f
        advanced = False
        while it[a] < len(head[a]):
            e = head[a][it[a]]
            b = to[e]
            if cap[e] > 0 and level[b] == level[a] + 1:
                path.append(e)
                a = b
                advanced = True
                break
            it[a] += 1
        if not advanced:
            if a == src:
                return 0
            level[a] = -1
            e = path.pop()
            a = to[e ^ 1]
            it[a] += 1


# --------------------------------------------------------------------------- HiGHS


def _highs_batch(problems: Sequence[Problem]) -> list[tuple[float, list[tuple[int, int, float]]]]:
    """One block-diagonal LP; per problem ``(U, [(class, link, y)])`` as floats."""
    col_cost: list[np.ndarray] = []
    starts: list[np.ndarray] = []
    index: list[np.ndarray] = []
    value: list[np.ndarray] = []
    row_lo: list[np.ndarray] = []
    row_hi: list[np.ndarray] = []
    meta: list[tuple[int, np.ndarray, np.ndarray, float]] = []
    ncol = nrow = nnz = 0
    for cap_t, masks, counts in problems:
        k, nc = len(cap_t), len(masks)
        scale = float(max(cap_t)) if cap_t else 1.0
        capf = np.array([float(c) for c in cap_t]) / scale
        cls, lnk = _pairs(masks, k)
        # column U: -cap on the k link rows (rows nrow+nc .. nrow+nc+k-1)
        u_col = ncol
        starts.append(np.array([nnz], dtype=np.int64))
        index.append(nrow + nc + np.arange(k, dtype=np.int32))
        value.append(-capf)
        nnz += k
        # y columns: +1 in class row, +1 in link row
        m = cls.shape[0]
        starts.append(nnz + 2 * np.arange(m, dtype=np.int64))
        idx = np.empty(2 * m, dtype=np.int32)
        idx[0::2] = nrow + cls
        idx[1::2] = nrow + nc + lnk
        index.append(idx)
        value.append(np.ones(2 * m))
        nnz += 2 * m
        col_cost.append(np.concatenate(([1.0], np.zeros(m))))
        cnt = np.array(counts, dtype=float)
        row_lo.append(np.concatenate((cnt, np.full(k, -highspy.kHighsInf))))
        row_hi.append(np.concatenate((cnt, np.zeros(k))))
        meta.append((u_col, cls, lnk, scale))
        ncol += 1 + m
        nrow += nc + k
    lp = highspy.HighsLp()
    lp.num_col_ = ncol
    lp.num_row_ = nrow
    lp.col_cost_ = np.concatenate(col_cost) if col_cost else np.zeros(0)
    lp.col_lower_ = np.zeros(ncol)
    lp.col_upper_ = np.full(ncol, highspy.kHighsInf)
    lp.row_lower_ = np.concatenate(row_lo) if row_lo else np.zeros(0)
    lp.row_upper_ = np.concatenate(row_hi) if row_hi else np.zeros(0)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = np.concatenate([*starts, np.array([nnz], dtype=np.int64)]).astype(np.int32)
    lp.a_matrix_.index_ = np.concatenate(index) if index else np.zeros(0, dtype=np.int32)
    lp.a_matrix_.value_ = np.concatenate(value) if value else np.zeros(0)
    h = new_highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("solver", "simplex")
    h.passModel(lp)
    h.run()
    if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        return [(float("nan"), [])] * len(problems)
    x = np.asarray(h.getSolution().col_value)
    out = []
    for u_col, cls, lnk, scale in meta:
        ys = x[u_col + 1: u_col + 1 + cls.shape[0]]
        keep = ys > 1e-12
        out.append((x[u_col] / scale,
                    list(zip(cls[keep].tolist(), lnk[keep].tolist(), ys[keep].tolist(), strict=True))))
    return out


def _pairs(masks: tuple[int, ...], k: int) -> tuple[np.ndarray, np.ndarray]:
    """(class, link) index pairs of the admissible variables, class-major."""
    if k <= 62:
        arr = np.array(masks, dtype=np.int64)
        bits = (arr[:, None] >> np.arange(k, dtype=np.int64)[None, :]) & 1
        cls, lnk = np.nonzero(bits)
        return cls.astype(np.int32), lnk.astype(np.int32)
    pairs = [(c, j) for c, m in enumerate(masks) for j in _members(m, k)]
    return (np.array([p[0] for p in pairs], dtype=np.int32),
            np.array([p[1] for p in pairs], dtype=np.int32))


def _certify(problem: Problem, u_f: float,
             ys: list[tuple[int, int, float]]) -> Solution | None:
    """Rationalise a HiGHS solution; return it only if provably optimal."""
    capacity, masks, counts = problem
    if not masks:
        return Fraction(0), ()
    if not math.isfinite(u_f):
        return None
    k, nc = len(capacity), len(masks)
    rows: list[dict[int, Fraction]] = [{} for _ in range(nc)]
    for c, j, y in ys:
        rows[c][j] = Fraction(y).limit_denominator(_MAX_DEN)
    for c, row in enumerate(rows):
        if not row:
            return None
        big = max(row, key=lambda j: (row[j], -j))
        row[big] += counts[c] - sum(row.values())
        if row[big] < 0:
            return None
    load = [Fraction(0)] * k
    for row in rows:
        for j, y in row.items():
            load[j] += y
    u = max(load[j] / capacity[j] for j in range(k))
    if abs(float(u) - u_f) > 1e-6 * max(1.0, abs(u_f)):
        return None
    if _hall_ratio(capacity, masks, counts, rows, load, u) != u:
        return None
    amounts = tuple(tuple(sorted((j, y) for j, y in row.items() if y > 0)) for row in rows)
    return u, amounts


def _hall_ratio(capacity, masks, counts, rows, load, u) -> Fraction | None:
    """Ratio of the bottleneck set of a feasible solution (None if none)."""
    k = len(capacity)
    bad = [load[j] != u * capacity[j] for j in range(k)]
    changed = True
    while changed:
        changed = False
        for c, row in enumerate(rows):
            if any(bad[j] for j in _members(masks[c], k)):
                for j, y in row.items():
                    if y > 0 and not bad[j]:
                        bad[j] = True
                        changed = True
    sset = [j for j in range(k) if not bad[j]]
    if not sset:
        return None
    inside = sum(counts[c] for c, m in enumerate(masks)
                 if all(not bad[j] for j in _members(m, k)))
    return Fraction(inside) / sum(capacity[j] for j in sset)
