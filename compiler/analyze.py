"""Analysis report: bounds and schedule figures of a topology (``colc analyze``).

Input: a validated ``Topology``.  Output: a JSON-ready dict
``{"topology", "ranks", "bounds": {coll: {"algbw": GB/s, "method": ...}},
"schedules": [{"algorithm", "collective", "steps", "algbw", ...}]}``.

algbw follows nccl-tests (collective size over time, bandwidth-only time).
Bounds: the exact cut bound and the allreduce LP bound when the tree
analysis is available (``colc.compiler.exact_bounds``); otherwise the
per-rank ingress/egress bound.

In-network multicast (seed 001 section 4.5.6): when the topology has a
multicast switch, the ``trees`` entries of allgather and reducescatter get
``"multicast": {"switches", "traffic_before", "traffic_after",
"gpu_sends_before", "gpu_sends_after", "gpu_recvs_before",
"gpu_recvs_after", "runtime"}`` from ``compiler/apply_multicast.py`` on the
same packing ``tree_schedule`` makes.  Figures are GB moved per GB of
collective size (summed over links, over hops leaving a rank, over hops
entering a rank); algbw is unchanged by multicast.  Allgather saves GPU
sends (switches replicate), reduce-scatter saves GPU receives/reductions
(switches aggregate).  ``runtime`` says that the written XML files do not
use it: MSCCL XML has no switch multicast primitive, so they send unicast.
"""

from __future__ import annotations

from fractions import Fraction

from colc.compiler.estimate_bandwidth import schedule_algbw, schedule_steps
from colc.compiler.pipeline import ALGORITHMS, _load_optional_algorithms
from colc.errors import ColcError
from colc.ir.core import Collective
from colc.ir.topology import Topology
from colc.ir.trees import TreePacking

#: ``runtime`` note of the ``multicast`` entry.
MULTICAST_RUNTIME = ("analysis only: MSCCL XML has no switch multicast/aggregation "
                     "primitive, compiled files send unicast")

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
    packings: dict[bool, TreePacking] = {}
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
                multicast = _multicast(topo, coll, packings)
                if multicast is not None:
                    entry["multicast"] = multicast
            schedules.append(entry)
    return {"topology": topo.name, "ranks": topo.num_ranks, "bounds": _bounds(topo),
            "schedules": schedules}


def _multicast(topo: Topology, coll: Collective,
               packings: dict[bool, TreePacking]) -> dict | None:
    """The ``multicast`` entry of a trees row (None: no multicast switch or n/a).

    ``packings`` caches the packing by "made on the transpose" so that
    allgather and reduce-scatter on a symmetric topology pack once.
    """
    if coll is Collective.ALLREDUCE or not any(n.multicast for n in topo.nodes):
        return None
    try:
        from colc.compiler.apply_multicast import apply_multicast
        from colc.compiler.generate_trees import is_symmetric, pack_trees, transpose

        flip = coll is Collective.REDUCESCATTER and not is_symmetric(topo)
        if flip not in packings:
            packings[flip] = pack_trees(transpose(topo) if flip else topo)
        forest = apply_multicast(packings[flip], topo, coll)
    except (ImportError, ColcError):
        return None
    per = forest.per_collective_byte
    return {"switches": list(forest.multicast_switches),
            "traffic_before": _num(per(forest.traffic_before)),
            "traffic_after": _num(per(forest.traffic_after)),
            "gpu_sends_before": _num(per(forest.gpu_sends_before)),
            "gpu_sends_after": _num(per(forest.gpu_sends_after)),
            "gpu_recvs_before": _num(per(forest.gpu_recvs_before)),
            "gpu_recvs_after": _num(per(forest.gpu_recvs_after)),
            "runtime": MULTICAST_RUNTIME}


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
        if "multicast" in s:
            m = s["multicast"]
            gpu, what = (("sends", "multicast") if s["collective"] == "allgather"
                         else ("recvs", "aggregation"))
            lines.append(f"{'':<10}  in-network {what}: traffic {m['traffic_before']:g} -> "
                         f"{m['traffic_after']:g}, GPU {gpu} {m[f'gpu_{gpu}_before']:g} -> "
                         f"{m[f'gpu_{gpu}_after']:g} GB per GB (analysis only; "
                         f"files send unicast)")
    return "\n".join(lines)
