"""Speed under a threadblock budget, by box count (issue 18; run by hand, prints a table).

    python bench/bench_budget.py                                  # DGX A100 x2 x4 x8, allgather
    python bench/bench_budget.py --family mi250 --boxes 2 4 --collective allreduce
    python bench/bench_budget.py --boxes 2 --max-threadblocks 25 --collective allgather

For each box count and collective, in a child process (its own peak memory):
the size-window portfolio ``colc TOPO -o DIR/ --max-threadblocks B`` is built
(timed, ``--jobs 1``), and at 1M, 16M, 128M and 1G (fp32) the file the
runtime selects is simulated with colc's calibrated simulator.  Printed
beside it: the threadblocks per GPU of that file, NCCL's / RCCL's ring
written as the same kind of file (16 NIC-aligned channels, Simple; what the
vendor library runs, re-expressed as MSCCL XML) under the same simulator,
and the cut bound (ForestColl's exact bound up to 1024 ranks, else the
per-rank bound; allreduce: the allreduce bound), and that bound times the
model's NIC efficiency: across boxes the NIC cut binds, and no file the
simulator runs goes faster than the NICs' modelled rate (issue 18's 80% of
the cut bound is 90% of it on DGX A100, 139% on MI250).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

SIZES = (1 << 20, 16 << 20, 128 << 20, 1 << 30)


def one(spec: dict) -> dict:
    """Build and measure one (family, boxes, collective) in this process."""
    from colc.compiler.analyze import _bounds
    from colc.compiler.rings.nccl_baseline import nccl_ring_program
    from colc.compiler.pipeline import CompileOptions
    from colc.compiler.portfolio import build_portfolio
    from colc.errors import ColcError
    from colc.frontends.families import build_family
    from colc.ir.core import Collective
    from colc.ir.runtime_model import model_for
    from colc.ir.simulate import simulate

    topo = build_family({"family": spec["family"], "boxes": spec["boxes"]}, "<bench>")
    coll = Collective(spec["collective"])
    model = model_for(topo)
    out: dict = {"ranks": topo.num_ranks}
    t0 = time.perf_counter()
    try:
        port = build_portfolio(topo, CompileOptions(
            collective=coll, max_threadblocks=spec["budget"], jobs=1))
    except ColcError as err:
        out["error"] = " ".join(str(err).split())[:160]
        return out
    out["build_s"] = time.perf_counter() - t0
    out["rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    rows = []
    for size in SIZES:
        w = next(w for w in port.windows if w.lo <= size and (w.hi == 0 or size <= w.hi))
        res = simulate(w.program, topo, model, size)
        rows.append({"algbw": res.algbw if res.selected else 0.0,
                     "file": f"{w.variant.algorithm}/{w.variant.protocol.value}",
                     "tbs": w.program.max_threadblocks})
    out["colc"] = rows
    try:
        ring = nccl_ring_program(topo, coll, channels=16)
        out["ring"] = [simulate(ring, topo, model, s).algbw for s in SIZES]
        out["ring_tbs"] = ring.max_threadblocks
    except ColcError as err:
        out["ring_error"] = " ".join(str(err).split())[:100]
    out["bound"] = _bounds(topo)[coll.value]["algbw"]
    out["net_efficiency"] = model.net_efficiency
    return out


def run(spec: dict, timeout: float) -> dict:
    try:
        proc = subprocess.run([sys.executable, __file__, "--one", json.dumps(spec)],
                              capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return {"error": f"did not finish in {timeout:.0f} s"}
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or ["failed"])[-1][:160]}
    return json.loads(proc.stdout)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--family", default="dgx-a100", choices=["dgx-a100", "dgx-h100", "mi250"])
    ap.add_argument("--boxes", type=int, nargs="+", default=[2, 4, 8])
    ap.add_argument("--collective", action="append",
                    choices=["allgather", "reducescatter", "allreduce"])
    ap.add_argument("--max-threadblocks", type=int, default=32)
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one:
        print(json.dumps(one(json.loads(args.one))))
        return 0
    head = "".join(f"{s >> 20:>9}M" for s in SIZES)
    print(f"{args.family}, budget {args.max_threadblocks} threadblocks per GPU; algbw GB/s "
          f"(simulated); tbs = threadblocks per GPU of the file used")
    for coll in args.collective or ["allgather"]:
        for boxes in args.boxes:
            spec = {"family": args.family, "boxes": boxes, "collective": coll,
                    "budget": args.max_threadblocks}
            r = run(spec, args.timeout)
            print(f"\n{coll} x{boxes}" + (f" ({r['ranks']} GPUs)" if "ranks" in r else ""))
            if "error" in r:
                print(f"  not built: {r['error']}")
                continue
            print(f"  {'':<14}{head}")
            print(f"  {'colc':<14}" + "".join(f"{x['algbw']:>10.1f}" for x in r["colc"]))
            print(f"  {'  tbs':<14}" + "".join(f"{x['tbs']:>10}" for x in r["colc"]))
            print(f"  {'  file':<14}" + "".join(f"{x['file'][:9]:>10}" for x in r["colc"]))
            if "ring" in r:
                print(f"  {'ring file':<14}" + "".join(f"{x:>10.1f}" for x in r["ring"])
                      + f"   ({r['ring_tbs']} tbs)")
            else:
                print(f"  ring file: {r.get('ring_error')}")
            eff = r["net_efficiency"]
            print(f"  cut bound {r['bound']:.1f} GB/s (times the model's NIC efficiency "
                  f"{eff}: {r['bound'] * eff:.1f}); built in {r['build_s']:.0f} s, "
                  f"peak {r['rss_mb']:.0f} MB")
    return 0


if __name__ == "__main__":
    from colc.collector import fewer_collections

    with fewer_collections():  # the command's thresholds: build times as users see them
        sys.exit(main())
