"""Pass ``allreduce-bound``: ForestColl's allreduce LP (seed 001 B.7, LP (B.5)).

Input invariant: a ``Topology`` accepted by ``check_tree_topology`` with at
most ``MAX_RANKS_LP`` ranks (the LP has O(N^3) variables with switches).
Output invariant: an upper bound on allreduce algbw (GB/s) as a Fraction,
or None when the topology is too large.

LP (B.5): maximise ``sum_v x_v`` subject to, for every rank ``t``, a flow
``s -> t`` of value ``>= sum x`` on capacities ``c_BC`` (source arcs
``<= x_v``) and a flow ``t -> s`` of value ``>= sum x`` on ``c_RE`` (sink
arcs ``<= x_v``), with ``c_BC + c_RE <= b'``.  Without switches ``b' = b``
on the physical arcs; with switches ``b'`` lives on every ordered rank pair
and a multi-commodity flow (one commodity per source rank) routes it
through the physical network within the link bandwidths.  Allreduce algbw
is ``sum x`` (time ``M / sum x``).

Solved with HiGHS (floating point); the value is returned as the nearest
fraction with denominator at most 10^6.  ``exact_bounds`` compares it with
the exact RS+AG tree value ``N x*/2`` (a feasible schedule, so a lower bound
on the LP optimum) and reports that exact value when they agree to 1e-7.

Complexity: O(N^2 + N |E|) variables with switches (O(N |E|) without).
"""

from __future__ import annotations

from fractions import Fraction

import highspy

from colc.compiler.highs_solver import new_highs
import numpy as np
from scipy.sparse import csc_matrix

from colc.compiler.trees.find_optimal_throughput import check_tree_topology
from colc.errors import InternalError
from colc.ir.topology import Topology

NAME = "allreduce-bound"

#: Largest rank count for which the LP is built.
MAX_RANKS_LP = 24


class _LP:
    def __init__(self) -> None:
        self.lower: list[float] = []
        self.upper: list[float] = []
        self.cost: list[float] = []
        self.rows: list[tuple[dict[int, float], float, float]] = []

    def var(self, upper: float = highspy.kHighsInf, cost: float = 0.0) -> int:
        self.lower.append(0.0)
        self.upper.append(upper)
        self.cost.append(cost)
        return len(self.cost) - 1

    def row(self, coefs: dict[int, float], lo: float, hi: float) -> None:
        self.rows.append((coefs, lo, hi))

    def solve_max(self) -> float:
        ri, ci, vals = [], [], []
        for r, (coefs, _, _) in enumerate(self.rows):
            for c, v in coefs.items():
                ri.append(r)
                ci.append(c)
                vals.append(v)
        mat = csc_matrix((vals, (ri, ci)), shape=(len(self.rows), len(self.cost)))
        lp = highspy.HighsLp()
        lp.num_col_ = len(self.cost)
        lp.num_row_ = len(self.rows)
        lp.col_cost_ = np.asarray(self.cost)
        lp.col_lower_ = np.asarray(self.lower)
        lp.col_upper_ = np.asarray(self.upper)
        lp.row_lower_ = np.asarray([lo for _, lo, _ in self.rows])
        lp.row_upper_ = np.asarray([hi for _, _, hi in self.rows])
        lp.sense_ = highspy.ObjSense.kMaximize
        lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
        lp.a_matrix_.start_ = mat.indptr
        lp.a_matrix_.index_ = mat.indices
        lp.a_matrix_.value_ = mat.data
        h = new_highs()
        h.setOptionValue("output_flag", False)
        h.passModel(lp)
        h.run()
        if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            raise InternalError(f"allreduce LP: HiGHS status {h.getModelStatus()}")
        return float(h.getInfo().objective_function_value)


def _add(d: dict[int, float], k: int, v: float) -> None:
    d[k] = d.get(k, 0.0) + v


def allreduce_bound(topo: Topology) -> Fraction | None:
    """Optimal allreduce algbw bound of LP (B.5) in GB/s.

    Parameters
    ----------
    topo : Topology

    Returns
    -------
    Fraction or None
        None when the topology has more than ``MAX_RANKS_LP`` ranks.

    Examples
    --------
    >>> from colc.frontends.families import ring
    >>> allreduce_bound(ring(4, 10))
    Fraction(40, 3)
    """
    check_tree_topology(topo)
    ranks = list(topo.ranks)
    n = len(ranks)
    if n > MAX_RANKS_LP:
        return None
    cap = {e: float(c) for e, c in topo.capacity().items() if e[0] != e[1]}
    lp = _LP()
    xs = {v: lp.var(cost=1.0) for v in ranks}
    if topo.has_switches:
        pairs = [(a, b) for a in ranks for b in ranks if a != b]
        bprime = {p: lp.var() for p in pairs}
        link_use: dict[tuple[str, str], dict[int, float]] = {e: {} for e in cap}
        for a in ranks:
            f = {e: lp.var() for e in cap}
            for e, var in f.items():
                link_use[e][var] = 1.0
            for z in (nd.id for nd in topo.nodes):
                coefs: dict[int, float] = {}
                for (u, v), var in f.items():
                    if u == z:
                        _add(coefs, var, 1.0)
                    if v == z:
                        _add(coefs, var, -1.0)
                if z == a:
                    for b in ranks:
                        if b != a:
                            _add(coefs, bprime[(a, b)], -1.0)
                elif z in xs:
                    _add(coefs, bprime[(a, z)], 1.0)
                lp.row(coefs, 0.0, 0.0)
        for e, coefs in link_use.items():
            lp.row(coefs, -highspy.kHighsInf, cap[e])
        arcs = pairs
        arc_cap = None
    else:
        arcs = list(cap)
        arc_cap = cap
    c_bc = {e: lp.var() for e in arcs}
    c_re = {e: lp.var() for e in arcs}
    for e in arcs:
        coefs = {c_bc[e]: 1.0, c_re[e]: 1.0}
        if arc_cap is None:
            coefs[bprime[e]] = -1.0
            lp.row(coefs, -highspy.kHighsInf, 0.0)
        else:
            lp.row(coefs, -highspy.kHighsInf, arc_cap[e])
    for t in ranks:
        for reverse in (False, True):
            caps = c_re if reverse else c_bc
            f = {e: lp.var() for e in arcs}
            fs = {v: lp.var() for v in ranks}  # s -> v (or v -> s when reversed)
            for e in arcs:
                lp.row({f[e]: 1.0, caps[e]: -1.0}, -highspy.kHighsInf, 0.0)
            for v in ranks:
                lp.row({fs[v]: 1.0, xs[v]: -1.0}, -highspy.kHighsInf, 0.0)
            for z in ranks:
                # net inflow (toward the sink side of the flow) at z
                coefs: dict[int, float] = {}
                for (u, v), var in f.items():
                    if v == z:
                        _add(coefs, var, -1.0 if reverse else 1.0)
                    if u == z:
                        _add(coefs, var, 1.0 if reverse else -1.0)
                _add(coefs, fs[z], 1.0)
                if z == t:
                    for x in ranks:
                        _add(coefs, xs[x], -1.0)
                lp.row(coefs, 0.0, highspy.kHighsInf)
    value = lp.solve_max()
    return Fraction(value).limit_denominator(10**6)
