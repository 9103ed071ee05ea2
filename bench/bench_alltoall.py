"""All-to-all speed (issue 19; run by hand, prints tables).

    python bench/bench_alltoall.py                       # DGX A100 x2 x4 x8 portfolios
    python bench/bench_alltoall.py --boxes 2 --budget 32
    python bench/bench_alltoall.py --fabrics             # direct-connect fabrics, mcf
    python bench/bench_alltoall.py --table-3-4           # LP (A.1) at N = 1024 (minutes)
    python bench/bench_alltoall.py --hop-relay           # 1024-rank oneCCL files (minutes)

Boxes: for each box count, in a child process (its own peak memory), the
size-window portfolio ``colc TOPO --collective alltoall -o DIR/`` is built
(timed) within ``--budget`` threadblocks, and at 1M, 16M, 128M and 1G (fp32)
the file the runtime selects is simulated with colc's calibrated simulator;
beside it the ``direct`` file (every block straight to its rank, PXN-style
relays across rails: NCCL's all-to-all written as a file) at the GPU's
threadblock limit, the ratio, and the LP (A.1) bound.

Fabrics: torus 4x4 and 8x8, hypercube dim 4 and 6, a circulant and a
generalized Kautz graph (25 GB/s links): the ``mcf`` file's bandwidth-only
algbw (the throughput its traffic implies) and simulated algbw at 1 GiB
against the LP's ``N f``.

Hop-relay: the oneCCL file ``colc TOPO --collective alltoall -o F.oneccl.xml``
writes where no MSCCL file can hold a routed all-to-all (``hop-relay``; asked
for by name here, so smaller graphs get it too), for
generalized Kautz graphs of degree 4 (1024 ranks by default, 12.5 GB/s
links), each in a child process: build time and peak memory (verification
and the read-back included), the file's size, threads and instructions per
rank, the routes' bandwidth bound against LP (A.1)'s figure of Table A.1
(Pi_{4,1024}: f = 8.0106e-4 with unit links; ``--table-3-4`` solves it).

Table 3.4 (seed 001): LP (A.1) with unit links on the generalized Kautz graph
Pi_{4,1024} (4.2 million columns: HiGHS's PDLP, ``mcf.PDLP_MAX_COLUMNS``) and
on L^3(C(16,{3,4})) (32 rank classes under its automorphisms: 131k columns,
interior point, about a minute), one child process each, side by side: f, the
all-to-all time of 1 MB per node at 100 Gbps ((M/B) d / (N f)) against the
seed's 409.1 and 403.5 us, wall time and peak memory.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

SIZES = (1 << 20, 16 << 20, 128 << 20, 1 << 30)


def boxes_row(spec: dict) -> dict:
    """Build and measure one DGX A100 box count in this process."""
    from colc.compiler.alltoall.mcf import alltoall_bound
    from colc.compiler.pipeline import CompileOptions, compile_topology
    from colc.compiler.portfolio import build_portfolio
    from colc.errors import ColcError
    from colc.frontends.families import build_family
    from colc.ir.core import Collective
    from colc.ir.runtime_model import model_for
    from colc.ir.simulate import simulate

    topo = build_family({"family": spec["family"], "boxes": spec["boxes"]}, "<bench>")
    model = model_for(topo)
    out: dict = {"ranks": topo.num_ranks}
    t0 = time.perf_counter()
    try:
        port = build_portfolio(topo, CompileOptions(
            collective=Collective.ALLTOALL, max_threadblocks=spec["budget"], jobs=spec["jobs"]))
    except ColcError as err:
        out["error"] = " ".join(str(err).split())[:200]
        return out
    out["build_s"] = time.perf_counter() - t0
    out["rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    rows = []
    for size in SIZES:
        w = next(w for w in port.windows if w.lo <= size and (w.hi == 0 or size <= w.hi))
        res = simulate(w.program, topo, model, size)
        rows.append({"algbw": res.algbw if res.selected else 0.0,
                     "file": w.variant.label, "tbs": w.program.max_threadblocks})
    out["colc"] = rows
    try:
        direct = compile_topology(topo, CompileOptions(
            collective=Collective.ALLTOALL, algorithm="direct", max_threadblocks=0, jobs=1,
            rank_sizes=SIZES))
        out["direct"] = [simulate(direct.program, topo, model, s).algbw for s in SIZES]
        out["direct_tbs"] = direct.program.max_threadblocks
    except ColcError as err:
        out["direct_error"] = " ".join(str(err).split())[:120]
    out["bound"] = alltoall_bound(topo)["algbw"]
    return out


def fabric_row(spec: dict) -> dict:
    """The mcf file of one direct-connect fabric against the LP."""
    from colc.compiler.alltoall.mcf import alltoall_mcf
    from colc.compiler.pipeline import CompileOptions, compile_topology
    from colc.frontends.families import build_family
    from colc.ir.core import Collective

    topo = build_family(spec["family"], "<bench>")
    t0 = time.perf_counter()
    result = compile_topology(topo, CompileOptions(collective=Collective.ALLTOALL,
                                                   algorithm="mcf", jobs=1))
    lp = alltoall_mcf(topo).algbw()
    sim = dict(result.predicted)[1 << 30].algbw
    return {"ranks": topo.num_ranks, "lp": lp, "traffic": float(result.algbw), "sim": sim,
            "tbs": result.program.max_threadblocks, "build_s": time.perf_counter() - t0}


def table_row(spec: dict) -> dict:
    """LP (A.1), unit links, on one 1024-rank graph of Table 3.4 (in this process)."""
    from colc.compiler.alltoall.mcf import alltoall_mcf, distance_mcf
    from colc.compiler.bfb.expand_topology import line_graph
    from colc.frontends.families import circulant, generalized_kautz

    if spec["graph"] == "kautz":
        topo = generalized_kautz(1024, 4, 25)
    else:
        topo = circulant(16, [3, 4], 25)
        for _ in range(3):
            topo = line_graph(topo)
    t0 = time.perf_counter()
    res = alltoall_mcf(topo, unit=True)
    wall = time.perf_counter() - t0
    return {"ranks": topo.num_ranks, "f": res.f, "distance": distance_mcf(topo, unit=True),
            "method": res.method, "wall": wall,
            "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


#: LP (A.1)'s f with unit links where it is known (Pi_{4,1024}: ``--table-3-4``).
KNOWN_F = {(1024, 4): 8.0106e-4}


def hop_relay_row(spec: dict) -> dict:
    """One generalized Kautz hop-relay oneCCL file, built in this process."""
    from colc.compiler.pipeline import CompileOptions, compile_topology
    from colc.frontends.families import generalized_kautz
    from colc.ir.core import Collective

    topo = generalized_kautz(spec["ranks"], spec["degree"], 12.5)
    t0 = time.perf_counter()
    result = compile_topology(topo, CompileOptions(collective=Collective.ALLTOALL,
                                                   algorithm="hop-relay", backend="oneccl",
                                                   jobs=1))
    ranks = result.threads.ranks
    return {"algorithm": result.algorithm, "build_s": time.perf_counter() - t0,
            "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "mb": len(result.text) / 1e6, "algbw": float(result.algbw),
            "threads": max(len(r.threads) for r in ranks),
            "instrs": max(sum(len(t.instrs) for t in r.threads) for r in ranks)}


def hop_relay(sizes: list[int], timeout: float) -> None:
    print(f"{'graph':<22}{'file':>10}{'build s':>9}{'peak MB':>9}{'MB':>7}{'threads':>8}"
          f"{'instrs':>8}{'GB/s':>7}{'LP GB/s':>8}")
    for n in sizes:
        r = run("hoprelay", {"ranks": n, "degree": 4}, timeout)
        name = f"gen. Kautz 4-{n}"
        if "error" in r:
            print(f"{name:<22}  {r['error']}")
            continue
        f = KNOWN_F.get((n, 4))
        lp = f"{n * f * 12.5:>8.2f}" if f else f"{'-':>8}"
        print(f"{name:<22}{r['algorithm']:>10}{r['build_s']:>9.0f}{r['rss_mb']:>9.0f}"
              f"{r['mb']:>7.0f}{r['threads']:>8}{r['instrs']:>8}{r['algbw']:>7.2f}{lp}",
              flush=True)


#: Table 3.4's figures: (name, spec, all-to-all us of 1 MB per node at 100 Gbps).
TABLE_3_4 = (("Pi_{4,1024}", {"graph": "kautz"}, 409.1),
             ("L^3(C(16,{3,4}))", {"graph": "line"}, 403.5))


def table_3_4(timeout: float) -> None:
    """Both LPs at once (one child process each: 2 cores)."""
    from concurrent.futures import ThreadPoolExecutor

    start = time.perf_counter()
    with ThreadPoolExecutor(len(TABLE_3_4)) as pool:
        rows = list(pool.map(lambda t: run("table", t[1], timeout), TABLE_3_4))
    total = time.perf_counter() - start
    mb_over_b = (1 << 20) * 8 / 100e9 * 1e6  # 1 MB at 100 Gbps, us
    print(f"{'graph':<18}{'ranks':>6}{'f (LP)':>11}{'distance f':>12}{'a2a us':>9}"
          f"{'seed us':>9}{'diff %':>8}{'wall s':>8}{'peak MB':>9}")
    for (name, _, seed), r in zip(TABLE_3_4, rows, strict=True):
        if "error" in r or not r["f"] > 0:
            print(f"{name:<18}  {r.get('error', 'f = 0')}")
            continue
        us = mb_over_b * 4 / (r["ranks"] * r["f"])
        print(f"{name:<18}{r['ranks']:>6}{r['f']:>11.4e}{r['distance']:>12.4e}{us:>9.1f}"
              f"{seed:>9.1f}{100 * (us - seed) / seed:>8.2f}{r['wall']:>8.0f}"
              f"{r['rss_mb']:>9.0f}   {r['method']}")
    print(f"both in {total:.0f} s wall")


FABRICS = (
    ("torus 4x4", {"family": "torus", "dims": [4, 4], "bandwidth": 25}),
    ("torus 8x8", {"family": "torus", "dims": [8, 8], "bandwidth": 25}),
    ("hypercube 4", {"family": "hypercube", "dim": 4, "bandwidth": 25}),
    ("hypercube 6", {"family": "hypercube", "dim": 6, "bandwidth": 25}),
    ("circulant 32 {1,5}", {"family": "circulant", "ranks": 32, "offsets": [1, 5],
                            "bandwidth": 25}),
    ("gen. Kautz 2-48", {"family": "generalized-kautz", "ranks": 48, "degree": 2,
                         "bandwidth": 25}),
)


def run(kind: str, spec: dict, timeout: float) -> dict:
    try:
        proc = subprocess.run([sys.executable, __file__, "--one", kind, json.dumps(spec)],
                              capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return {"error": f"did not finish in {timeout:.0f} s"}
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or ["failed"])[-1][:200]}
    return json.loads(proc.stdout)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--boxes", type=int, nargs="*", default=[2, 4, 8])
    p.add_argument("--family", default="dgx-a100")
    p.add_argument("--budget", type=int, default=32)
    p.add_argument("--jobs", type=int, default=0)
    p.add_argument("--fabrics", action="store_true")
    p.add_argument("--table-3-4", action="store_true")
    p.add_argument("--hop-relay", type=int, nargs="*", metavar="RANKS",
                   help="generalized Kautz hop-relay oneCCL files (default 1024 ranks)")
    p.add_argument("--timeout", type=float, default=3600)
    p.add_argument("--one", nargs=2, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.one:
        kind, spec = args.one
        row = {"boxes": boxes_row, "table": table_row, "hoprelay": hop_relay_row}.get(
            kind, fabric_row)
        print(json.dumps(row(json.loads(spec))))
        return
    if args.table_3_4:
        table_3_4(args.timeout)
        return
    if args.hop_relay is not None:
        hop_relay(args.hop_relay or [1024], args.timeout)
        return
    if args.fabrics:
        print(f"{'fabric':<20}{'ranks':>6}{'LP N f':>9}{'traffic':>9}{'%':>6}{'sim 1G':>9}"
              f"{'%':>6}{'tbs':>5}{'build s':>9}")
        for name, fam in FABRICS:
            r = run("fabric", {"family": fam}, args.timeout)
            if "error" in r:
                print(f"{name:<20}  {r['error']}")
                continue
            print(f"{name:<20}{r['ranks']:>6}{r['lp']:>9.2f}{r['traffic']:>9.2f}"
                  f"{100 * r['traffic'] / r['lp']:>6.1f}{r['sim']:>9.2f}"
                  f"{100 * r['sim'] / r['lp']:>6.1f}{r['tbs']:>5}{r['build_s']:>9.1f}", flush=True)
        return
    head = "".join(f"{s >> 20:>7}M" for s in SIZES)
    print(f"all-to-all, budget {args.budget}: simulated algbw GB/s at{head}")
    for nb in args.boxes:
        r = run("boxes", {"family": args.family, "boxes": nb, "budget": args.budget,
                          "jobs": args.jobs}, args.timeout)
        name = f"{args.family} x{nb}"
        if "error" in r:
            print(f"{name:<16} {r['error']}")
            continue
        colc = "".join(f"{x['algbw']:>8.1f}" for x in r["colc"])
        tbs = max(x["tbs"] for x in r["colc"])
        print(f"{name:<16} colc  {colc}   {tbs} tbs/GPU, built in {r['build_s']:.0f} s, "
              f"{r['rss_mb']:.0f} MB; files: "
              + ", ".join(dict.fromkeys(x["file"] for x in r["colc"])))
        if "direct" in r:
            print(f"{'':<16} direct{''.join(f'{x:>8.1f}' for x in r['direct'])}   "
                  f"{r['direct_tbs']} tbs/GPU")
            ratio = "".join(f"{c['algbw'] / d:>8.2f}" for c, d in zip(r["colc"], r["direct"],
                                                                    strict=True))
            print(f"{'':<16} ratio {ratio}")
        else:
            print(f"{'':<16} direct: {r['direct_error']}")
        print(f"{'':<16} LP (A.1) bound {r['bound']:.1f} GB/s", flush=True)


if __name__ == "__main__":
    from colc.collector import fewer_collections

    with fewer_collections():  # the command's thresholds: build times as users see them
        main()
