"""Data of the HTML report (``colc report TOPO -o report.html``).

Input: a validated ``Topology``, the collective whose size-window portfolio
is shown, the message sizes of the curves, an optional cost-model preset.
Output: a JSON-ready dict that ``colc.backends.report_html`` prints as it
is (every choice of what the page shows is made here)::

    {"title": str,
     "topology": {"name", "ranks", "nodes", "switches", "links", "boxes",
                  "box_ranks", "machine"},
     "collective": str, "sizes": [bytes], "simulated": bool,
     "bounds": [{"collective", "algbw", "method", "latency_us"}],
     "schedules": [{"algorithm", "collective", "steps", "algbw", "variant",
                    "nchunks", "note"}],
     "plots": [{"collective", "title",
                "series": [{"label", "kind",
                            "points": [[bytes, GB/s, selected], ...]}]}],
     "portfolio": None | {"collective", "error", "windows": [{"span", "lo", "hi",
                  "algorithm", "protocol", "nchunks",
                  "predicted": [[bytes, GB/s], ...]}], "notes": [str]},
     "notes": [str]}

Curves (``plots``, one per collective, algbw against message size): one
series per algorithm whose representative file was simulated (``kind``
"algorithm", from ``colc.compiler.analyze.analyze_topology``: its first
chunking that fits, the protocol estimated fastest at each size), the bound at each size
(``kind`` "bound": cut/LP bandwidth bound and hop-latency bound), and, for
the chosen collective, the portfolio (``kind`` "portfolio": each window's
verified program simulated at the sizes of the report it covers).  Only
positive figures are kept (the page plots them on log axes).  ``selected``
is False where the runtime would not pick the file at that size (the
element count is not a multiple of its ``nchunksperloop``, e.g. allreduce
on 3 ranks at power-of-two sizes: NCCL's own algorithm runs instead); such
points are counted in ``notes``.  Bound points are always True.  A
collective without any point gets no plot, only a note.

The same input gives the same dict (no clocks, no paths, fixed order).
"""

from __future__ import annotations

from colc.compiler.analyze import DEFAULT_COLLECTIVES, analyze_topology
from colc.compiler.pipeline import DEFAULT_THREADBLOCKS, threadblock_budget
from colc.errors import ColcError
from colc.ir.core import Collective
from colc.ir.runtime_model import model_named
from colc.ir.topology import Topology, boxes

#: Default sizes of the report's curves (bytes): 1 KiB .. 1 GiB by factors of 2.
REPORT_SIZES = tuple(1 << k for k in range(10, 31))


def gather_report(topo: Topology, *, collective: Collective = Collective.ALLREDUCE,
                  sizes: tuple[int, ...] = REPORT_SIZES, machine: str | None = None,
                  portfolio: bool = True,
                  max_threadblocks: int = DEFAULT_THREADBLOCKS) -> dict:
    """Collect everything the report shows (see module docstring).

    Parameters
    ----------
    topo : Topology
    collective : Collective
        The collective whose portfolio is built (ignored without ``portfolio``).
    sizes : tuple of int
        Message sizes (bytes, positive) of the curves.
    machine : str or None
        Cost-model preset (None: from the topology's name).
    portfolio : bool
        Build the size-window portfolio (the slow part: up to minutes on a
        16-GPU box).
    max_threadblocks : int
        Threadblocks per GPU every simulated file may take (0: the GPU's limit).

    Returns
    -------
    dict
        JSON-ready; see the module docstring.

    Raises
    ------
    ColcError
        Unknown machine, or no size given.
    """
    sizes = tuple(sorted(set(sizes)))
    if not sizes or sizes[0] <= 0:
        raise ColcError("colc report: error: sizes must be positive and at least one is needed")
    # the default collectives, and the portfolio's when it is all-to-all
    colls = tuple(dict.fromkeys((*DEFAULT_COLLECTIVES, collective)))
    analysis = analyze_topology(topo, sizes=sizes, machine=machine, collectives=colls,
                                max_threadblocks=max_threadblocks)
    notes: list[str] = []
    if analysis.get("simulated", True):
        notes.append("algorithm curves: one representative file per algorithm (colc analyze's "
                     "default: its first chunking, at each size the protocol a closed form "
                     "ranks fastest); the portfolio curve and windows come from the full "
                     "search (every chunking and protocol, verified files)")
    if not analysis.get("simulated", True):
        notes.append("simulation skipped (more ranks than colc analyze simulates by default): "
                     "the plots show the bounds only")
    port = (_portfolio(topo, collective, sizes, machine, notes, max_threadblocks)
            if portfolio else None)
    plots = []
    for coll in colls:
        plot = _plot(coll.value, analysis, port if coll is collective else None, notes)
        if plot["series"]:
            plots.append(plot)
        else:
            notes.append(f"{coll.value}: nothing to plot (no simulated file, no positive bound)")
    if port is not None:
        port = {k: v for k, v in port.items() if k != "curve"}
    groups = boxes(topo)
    return {
        "title": f"colc report: {topo.name}",
        "topology": {"name": topo.name, "ranks": topo.num_ranks, "nodes": len(topo.nodes),
                     "switches": len(topo.switches), "links": len(topo.links),
                     "boxes": len(groups), "box_ranks": _box_ranks(groups),
                     "machine": analysis["machine"],
                     "budget": threadblock_budget(max_threadblocks, model_named(
                         analysis["machine"]))},
        "collective": collective.value,
        "sizes": list(sizes),
        "simulated": bool(analysis.get("simulated", True)),
        "bounds": [{"collective": c, "algbw": b["algbw"], "method": b["method"],
                    "latency_us": b.get("latency_us")}
                   for c, b in analysis["bounds"].items() if c in {x.value for x in colls}],
        "schedules": [_schedule_row(s) for s in analysis["schedules"]],
        "plots": plots,
        "portfolio": port,
        "notes": notes,
    }


def _box_ranks(groups: list[list[int]]) -> str:
    """``"2 x 8"`` when all boxes hold the same number of ranks, else the sizes."""
    counts = [len(g) for g in groups]
    if counts and len(set(counts)) == 1:
        return f"{len(counts)} x {counts[0]}"
    return ", ".join(str(c) for c in counts)


def _schedule_row(entry: dict) -> dict:
    """One row of the schedules table from an ``analyze_topology`` entry."""
    row = {"algorithm": entry["algorithm"], "collective": entry["collective"],
           "steps": entry.get("steps"), "algbw": entry.get("algbw"),
           "variant": entry.get("variant", ""), "nchunks": entry.get("nchunks"),
           "threadblocks": entry.get("threadblocks"), "note": ""}
    if "error" in entry:
        row["note"] = f"n/a: {entry['error']}"
    elif entry.get("emittable") is False:
        row["note"] = f"not emittable within the runtime's limits: {entry.get('why', '')}"
    return row


def _positive(points: list[tuple[int, float, bool]]) -> list[list]:
    return [[int(s), float(v), bool(sel)] for s, v, sel in points if v is not None and v > 0]


def _plot(coll: str, analysis: dict, port: dict | None, notes: list[str]) -> dict:
    """The series of one collective's plot: algorithms, bound, portfolio."""
    series = []
    for s in analysis["schedules"]:
        if s["collective"] != coll or "simulated" not in s:
            continue
        points = _positive([(r["size"], r["algbw"], r.get("selected", True))
                            for r in s["simulated"]])
        if points:
            series.append({"label": f"{s['algorithm']} ({s['variant']})", "kind": "algorithm",
                           "points": points})
            unselected = sum(1 for p in points if not p[2])
            if unselected:
                notes.append(f"{coll}: the runtime would not select the {s['variant']} file "
                             f"at {unselected} of {len(points)} sizes (open markers)")
    bound = analysis["bounds"].get(coll)
    if bound is not None:
        points = _positive([(r["size"], r["algbw"], True) for r in bound.get("by_size", [])])
        if points:
            series.append({"label": "bound", "kind": "bound", "points": points})
    if port is not None and port.get("curve"):
        series.append({"label": "portfolio", "kind": "portfolio", "points": port["curve"]})
    return {"collective": coll, "title": f"{coll}: algbw (GB/s) against message size",
            "series": series}


def _portfolio(topo: Topology, collective: Collective, sizes: tuple[int, ...],
               machine: str | None, notes: list[str], max_threadblocks: int) -> dict:
    """The portfolio's windows and its curve at ``sizes`` (``error`` if there is none)."""
    from colc.compiler.pipeline import CompileOptions
    from colc.compiler.portfolio import build_portfolio
    from colc.ir.load_checks import load_program
    from colc.ir.runtime_model import model_for, model_named
    from colc.ir.simulate import simulate

    opts = CompileOptions(collective=collective, machine=machine,
                          max_threadblocks=max_threadblocks)
    out: dict = {"collective": collective.value, "error": "", "windows": [], "notes": [],
                 "curve": []}
    try:
        port = build_portfolio(topo, opts)
    except ColcError as err:
        out["error"] = " ".join(str(err).split())
        notes.append(f"portfolio of {collective.value}: {out['error']}")
        return out
    out["notes"] = list(port.notes)
    out["windows"] = [{"span": w.span(), "lo": w.lo, "hi": w.hi,
                       "algorithm": w.variant.algorithm, "protocol": w.variant.protocol.value,
                       "nchunks": w.program.nchunks,
                       "threadblocks": w.program.max_threadblocks,
                       "predicted": [[r.nbytes, float(r.algbw)] for r in w.results]}
                      for w in port.windows]
    model = model_named(machine) if machine else model_for(topo)
    loaded: dict[int, object] = {}
    skipped = unselected = 0
    for size in sizes:
        index = next((i for i, w in enumerate(port.windows)
                      if w.lo <= size and (w.hi == 0 or size <= w.hi)), None)
        if index is None:
            skipped += 1
            continue
        w = port.windows[index]
        if index not in loaded:
            loaded[index] = load_program(w.program)
        try:
            res = simulate(w.program, topo, model, size, opts.dtype_bytes, loaded=loaded[index])
        except ColcError as err:
            notes.append(f"portfolio at {size} bytes: {' '.join(str(err).split())}")
            skipped += 1
            continue
        if res.algbw <= 0:
            skipped += 1
            continue
        unselected += not res.selected
        out["curve"].append([size, float(res.algbw), bool(res.selected)])
    if unselected:
        notes.append(f"portfolio of {collective.value}: the runtime would not select the "
                     f"window's file at {unselected} of {len(sizes)} sizes (open markers; "
                     "NCCL runs instead there)")
    if skipped:
        notes.append(f"portfolio of {collective.value}: {skipped} of {len(sizes)} sizes are "
                     "not plotted (not simulated)")
    return out


__all__ = ["REPORT_SIZES", "gather_report"]
