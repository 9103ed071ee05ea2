"""Benchmark BFB schedule generation (seed 001 Table 3.6).

Prints topology, N, steps, T_B (tau = T_B/(M/B)), and generation time for
2D tori n x n (n up to 50, N = 2500) and hypercubes (dim up to 10,
N = 1024).  The paper needs 61.1 s (torus 50x50) and 52.7 s (hypercube
1024).  ``--small`` skips N > 300; ``--solver flow`` uses exact max-flow
instead of batched HiGHS.  Progress of long runs goes to stderr.

Usage: python bench/bench_bfb.py [--small] [--solver highs|flow]
"""

from __future__ import annotations

import argparse
import sys
import time

from colc.compiler.bfb.schedule import generate_bfb
from colc.frontends.families import hypercube, torus


def _progress(phase: str, done: int, total: int) -> None:
    print(f"\r  {phase}: {done}/{total}", end="", file=sys.stderr, flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", action="store_true", help="skip topologies with N > 300")
    ap.add_argument("--solver", default="highs", choices=("highs", "flow"))
    args = ap.parse_args()
    cases = [(f"torus {n}x{n}", torus([n, n], 1), 0) for n in (2, 3, 4, 5, 6, 10, 20, 30, 40, 50)]
    cases += [(f"hypercube {d}", hypercube(d, 1), 0) for d in (2, 3, 4, 5, 6, 8, 10)]
    print(f"{'topology':16} {'N':>5} {'steps':>5} {'T_B(M/B)':>10} {'LPs':>6} {'time_s':>8}")
    for name, topo, _ in cases:
        degree = sum(1 for lk in topo.links if lk.src == topo.ranks[0])
        if args.small and topo.num_ranks > 300:
            continue
        start = time.perf_counter()
        big = topo.num_ranks >= 1000
        sol = generate_bfb(topo, solver=args.solver, progress=_progress if big else None)
        elapsed = time.perf_counter() - start
        if big:
            print("\r" + " " * 40 + "\r", end="", file=sys.stderr)
        print(f"{name:16} {topo.num_ranks:>5} {sol.num_steps:>5} {float(sol.tau(degree)):>10.4f} "
              f"{len(sol.patterns):>6} {elapsed:>8.2f}", flush=True)
    return 0


if __name__ == "__main__":
    from colc.collector import fewer_collections

    with fewer_collections():  # the command's thresholds: build times as users see them
        raise SystemExit(main())
