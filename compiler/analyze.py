"""Analysis report: bounds and schedule figures of a topology (``colc analyze``).

Input: a validated ``Topology``.  Output: a JSON-ready dict
``{"topology", "ranks", "bounds": {coll: {"algbw": GB/s, "method": ...}},
"schedules": [{"algorithm", "collective", "steps", "algbw", ...}]}``.

algbw follows nccl-tests (collective size over time, bandwidth-only time).
Bounds: the exact cut bound and the allreduce LP bound when the tree
analysis is available (``colc.compiler.exact_bounds``); otherwise the
per-rank ingress/egress bound.
"""

from __future__ import annotations

from fractions import Fraction

from colc.compiler.estimate_bandwidth import schedule_algbw, schedule_steps
from colc.compiler.pipeline import ALGORITHMS, _load_optional_algorithms
from colc.errors import ColcError
from colc.ir.core import Collective
from colc.ir.topology import Topology

COLLECTIVES = (Collective.ALLGATHER, Collective.REDUCESCATTER, Collective.ALLREDUCE)


def per_rank_bounds(topo: Topology) -> dict[str, Fraction]:
    """Simple bounds: every rank must receive (send) (N-1)/N of the data.

    Examples
    --------
    A 4-rank bidirectional ring at 10 GB/s: each rank has 20 GB/s in, so
    allgather algbw <= 20 * 4/3.
    """
    n = topo.num_ranks
    if n < 2:
        return {c.value: Fraction(0) for c in COLLECTIVES}
    factor = Fraction(n, n - 1)
    ingress = min(topo.ingress(r) for r in topo.ranks)
    egress = min(topo.egress(r) for r in topo.ranks)
    return {"allgather": ingress * factor, "reducescatter": egress * factor,
            "allreduce": min(ingress, egress) * factor / 2}


def _bounds(topo: Topology) -> dict[str, dict]:
    """Exact bounds (ForestColl cut bound, B.7 LP) when they apply, else per-rank."""
    simple = per_rank_bounds(topo)
    out = {c: {"algbw": _num(v), "method": "per-rank ingress/egress"} for c, v in simple.items()}
    if topo.num_ranks < 2:
        return out
    try:
        from colc.compiler.generate_trees import exact_bounds

        exact = exact_bounds(topo)
    except (ImportError, ColcError):
        return out
    for coll in ("allgather", "reducescatter"):
        out[coll] = {"algbw": _num(exact[coll]), "method": "exact cut bound"}
    lp = exact.get("allreduce_lp")
    out["allreduce"] = {"algbw": _num(lp if lp is not None else exact["allreduce_trees"]),
                        "method": "allreduce LP (B.7)" if lp is not None
                        else "reducescatter + allgather cut bounds",
                        "trees": _num(exact["allreduce_trees"])}
    return out


def _num(x: Fraction) -> float:
    return round(float(x), 3)


def analyze_topology(topo: Topology) -> dict:
    """Build the analysis report (see module docstring)."""
    _load_optional_algorithms()
    schedules = []
    for name in sorted(ALGORITHMS):
        for coll in COLLECTIVES:
            try:
                sched = ALGORITHMS[name](topo, coll)
            except ColcError as err:
                schedules.append({"algorithm": name, "collective": coll.value,
                                  "error": str(err)})
                continue
            entry = {"algorithm": name, "collective": coll.value,
                     "steps": _steps(name, topo, coll, sched),
                     "algbw": _num(schedule_algbw(sched, topo))}
            if name == "trees":
                entry["k"] = sched.chunks_per_rank
            schedules.append(entry)
    return {"topology": topo.name, "ranks": topo.num_ranks, "bounds": _bounds(topo),
            "schedules": schedules}


def _steps(name: str, topo: Topology, coll: Collective, sched) -> int:
    """Hop count: the algorithm's own rounds when it has them (BFB), else the
    longest chain of transfers in the schedule."""
    if name == "bfb":
        from colc.compiler.bfb_schedule import bfb_report

        return bfb_report(topo, coll)[0]
    return schedule_steps(sched)


def format_table(report: dict) -> str:
    """A readable table of the report."""
    lines = [f"topology {report['topology']}: {report['ranks']} ranks", "",
             f"{'bound':<16}{'algbw GB/s':>12}  method"]
    for coll, b in report["bounds"].items():
        lines.append(f"{coll:<16}{b['algbw']:>12.3f}  {b['method']}")
    lines += ["", f"{'algorithm':<10}{'collective':<16}{'steps':>6}{'algbw GB/s':>12}"]
    for s in report["schedules"]:
        if "error" in s:
            lines.append(f"{s['algorithm']:<10}{s['collective']:<16}  n/a: {s['error']}")
        else:
            lines.append(f"{s['algorithm']:<10}{s['collective']:<16}{s['steps']:>6}"
                         f"{s['algbw']:>12.3f}")
    return "\n".join(lines)
