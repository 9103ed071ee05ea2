"""Growth curve of the whole job at scale (issue 11; run by hand, prints a table).

    python bench/bench_scale.py                       # DGX A100 2..16 boxes, hier + trees
    python bench/bench_scale.py --boxes 2 4 8 16 32 --algorithm trees
    python bench/bench_scale.py --direct              # hypercube 6..10, torus 8..50: BFB,
                                                      # dimrings on tori 16..50, analyze
    python bench/bench_scale.py --cores               # the whole job by --jobs / --executor dask

Each case runs in its own process (so its peak memory is its own) and times
the stages of ``colc TOPO --algorithm A --collective C -o x.xml`` one by one:
building the schedule, lowering it, simulating it at 128 MiB and 1 GiB,
printing and verifying the file; then the XML size, the simulated algbw at
1 GiB, the bandwidth-only algbw against the exact optimum, and the peak RSS.
A case that cannot be written says why (the runtime limit it breaks).
``--direct`` also times ``colc analyze --json`` on the large direct-connect
fabrics.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

from colc.compiler.choose_variants import ONE_CHUNKING_RANKS, scale_chunks


def one(spec: dict) -> dict:
    """Run one case in this process and return its figures."""
    from colc.compiler.estimate_bandwidth import schedule_algbw
    from colc.compiler.pipeline import CompileOptions, Compiler, Variant
    from colc.errors import ColcError
    from colc.frontends.families import build_family
    from colc.ir.core import Collective, Protocol

    out: dict = {}
    t0 = time.perf_counter()
    topo = build_family(spec["family"], "<bench>")
    compiler = Compiler(topo, CompileOptions(algorithm=spec["algorithm"],
                                             collective=Collective(spec["collective"]),
                                             jobs=1))
    variant = Variant(spec["algorithm"], spec.get("chunks"), Protocol.SIMPLE)
    try:
        t = time.perf_counter()
        sched = compiler.variant_schedule(variant)  # the schedule the budget builds
        out["schedule_s"] = time.perf_counter() - t
        out["bw_only"] = float(schedule_algbw(sched, topo))
        t = time.perf_counter()
        compiler.program(variant)
        out["lower_s"] = time.perf_counter() - t
        t = time.perf_counter()
        out["algbw_1g"] = compiler.simulate(variant, 1 << 30).algbw
        compiler.simulate(variant, 128 << 20)
        out["simulate_s"] = time.perf_counter() - t
        t = time.perf_counter()
        _, text = compiler.finish(variant)
        out["verify_s"] = time.perf_counter() - t
        out["xml_mb"] = len(text.encode()) / 1e6
    except ColcError as err:
        out["error"] = " ".join(str(err).split())[:120]
    out["total_s"] = time.perf_counter() - t0
    out["ranks"] = topo.num_ranks
    out["rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def run(spec: dict, timeout: float) -> dict:
    """``one(spec)`` in a child process (its own peak memory)."""
    t0 = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, __file__, "--one", json.dumps(spec)],
                              capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return {"error": f"did not finish in {timeout:.0f} s", "total_s": timeout}
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1][:120] if proc.stderr else "failed",
                "total_s": time.perf_counter() - t0}
    return json.loads(proc.stdout)


def _ranks(family: dict) -> int:
    """Ranks of a direct-connect family spec (hypercube or torus)."""
    if family["family"] == "hypercube":
        return 1 << family["dim"]
    n = 1
    for d in family["dims"]:
        n *= d
    return n


def _fmt(row: dict, key: str, spec: str) -> str:
    return format(row[key], spec) if key in row else "-"


def table(title: str, specs: list[dict], timeout: float) -> None:
    print(f"\n{title}")
    print(f"{'case':<34}{'ranks':>6}{'sched s':>9}{'lower s':>9}{'sim s':>8}{'verify s':>10}"
          f"{'total s':>9}{'MB xml':>8}{'RSS MB':>8}{'bw-only':>9}{'sim 1G':>8}")
    for spec in specs:
        row = run(spec, timeout)
        name = spec["name"]
        print(f"{name:<34}{row.get('ranks', 0):>6}{_fmt(row, 'schedule_s', '9.1f')}"
              f"{_fmt(row, 'lower_s', '9.1f')}{_fmt(row, 'simulate_s', '8.1f')}"
              f"{_fmt(row, 'verify_s', '10.1f')}{_fmt(row, 'total_s', '9.1f')}"
              f"{_fmt(row, 'xml_mb', '8.1f')}{_fmt(row, 'rss_mb', '8.0f')}"
              f"{_fmt(row, 'bw_only', '9.2f')}{_fmt(row, 'algbw_1g', '8.1f')}", flush=True)
        if "error" in row:
            print(f"{'':<34}  {row['error']}", flush=True)


def analyze_times(timeout: float) -> None:
    print("\ncolc analyze --json (estimated rows above 128 ranks)")
    for name, fam in (("torus 50x50", {"family": "torus", "dims": [50, 50], "bandwidth": 25}),
                      ("hypercube dim 10", {"family": "hypercube", "dim": 10, "bandwidth": 25})):
        code = ("import json,sys,time,resource;from colc.frontends.families import build_family;"
                "from colc.compiler.analyze import analyze_topology;t=time.perf_counter();"
                f"r=analyze_topology(build_family({fam!r},'<b>'));"
                "print(f'{time.perf_counter()-t:.1f} s, '"
                "f'{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss/1024:.0f} MB')")
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              timeout=timeout, check=False)
        print(f"  {name:<20}{proc.stdout.strip() or proc.stderr.strip()[-200:]}", flush=True)


def cores_curve(timeout: float) -> None:
    """Time the whole job (``--algorithm auto``) by job count and executor."""
    import os

    print("\nthe whole job by cores: dgx-a100 x2 allgather, --algorithm auto")
    counts = sorted({1, 2, len(os.sched_getaffinity(0))})
    cases = [(f"--jobs {n}", {"jobs": n}) for n in counts] + [("--executor dask", {"jobs": 0,
                                                               "executor": "dask"})]
    for label, extra in cases:
        code = ("import time;from colc.frontends.families import build_family;"
                "from colc.compiler.pipeline import CompileOptions, compile_topology;"
                "from colc.ir.core import Collective;"
                "t=build_family({'family':'dgx-a100','boxes':2},'<b>');s=time.perf_counter();"
                f"r=compile_topology(t,CompileOptions(collective=Collective.ALLGATHER,**{extra!r}));"
                "print(f'{time.perf_counter()-s:.1f} s, {r.variant.label}')")
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              timeout=timeout, check=False)
        out = proc.stdout.strip() or proc.stderr.strip()[-200:]
        print(f"  {label:<20}{out}", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--boxes", type=int, nargs="*", default=[2, 4, 8, 16])
    ap.add_argument("--algorithm", action="append", choices=["hier", "trees", "ring", "rings2d"])
    ap.add_argument("--collective", default="allgather")
    ap.add_argument("--chunks", type=int, default=16,
                    help="chunks per root at 32 ranks (scaled down above, as colc does)")
    ap.add_argument("--direct", action="store_true", help="BFB on the large direct fabrics")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per case")
    ap.add_argument("--cores", action="store_true",
                    help="time of the whole job by --jobs and --executor dask")
    args = ap.parse_args(argv)
    if args.one:
        print(json.dumps(one(json.loads(args.one))))
        return 0
    if args.cores:
        cores_curve(args.timeout)
        return 0
    if args.direct:
        fabrics = [(f"hypercube dim {d}", {"family": "hypercube", "dim": d, "bandwidth": 25})
                   for d in (6, 7, 8, 9, 10)]
        fabrics += [(f"torus {k}x{k}", {"family": "torus", "dims": [k, k], "bandwidth": 25})
                    for k in (8, 16, 50)]
        # above ONE_CHUNKING_RANKS colc tries one chunk per shard only
        specs = [{"name": f"{n} bfb {args.collective}", "family": f, "algorithm": "bfb",
                  "collective": args.collective,
                  "chunks": 1 if _ranks(f) > ONE_CHUNKING_RANKS else None}
                 for n, f in fabrics]
        if args.collective == "allgather":  # dimrings: tori, allgather only
            specs += [{"name": f"torus {k}x{k} dimrings allgather",
                       "family": {"family": "torus", "dims": [k, k], "bandwidth": 25},
                       "algorithm": "dimrings", "collective": "allgather",
                       "chunks": 1 if k * k > ONE_CHUNKING_RANKS else None}
                      for k in (16, 32, 50)]
        table("large direct-connect fabrics", specs, args.timeout)
        analyze_times(args.timeout)
        return 0
    for alg in args.algorithm or ["hier", "trees"]:
        specs = [{"name": f"dgx-a100 x{b} {alg} {args.collective}",
                  "family": {"family": "dgx-a100", "boxes": b}, "algorithm": alg,
                  "collective": args.collective,
                  "chunks": None if alg == "ring" else scale_chunks((args.chunks,), 8 * b)[0]}
                 for b in args.boxes]
        table(f"{alg}: the whole job by box count", specs, args.timeout)
    return 0


if __name__ == "__main__":
    from colc.collector import fewer_collections

    with fewer_collections():  # the command's thresholds: build times as users see them
        sys.exit(main())
