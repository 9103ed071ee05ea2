"""Compile-time and XML-size table for the families at growing sizes (run by hand).

    python3 bench/bench_compile.py [--algorithm ring] [--collective allreduce] [--quick]

Each row compiles (generate, prove, lower, print, verify) one topology and
prints the wall time of the whole job, the XML size and the algbw.
"""

from __future__ import annotations

import argparse
import time

from colc.compiler.pipeline import CompileOptions, compile_topology
from colc.errors import ColcError
from colc.frontends import families as fam
from colc.ir.core import Collective


def cases(quick: bool):
    yield "ring", [fam.ring(n, 10) for n in (4, 8, 16, 32)]
    yield "torus", [fam.torus(d, 10) for d in ([3, 3], [4, 4], [4, 8], [5, 6])]
    yield "hypercube", [fam.hypercube(d, 10) for d in (2, 3, 4, 5)]
    yield "circulant", [fam.circulant(n, [2, 3], 10) for n in (7, 12, 16, 24)]
    yield "dgx-a100", [fam.dgx_a100(b) for b in ((1, 2) if quick else (1, 2, 4))]
    yield "dgx-h100", [fam.dgx_h100(b) for b in (1, 2)]
    yield "mi250", [fam.mi250(b) for b in ((1,) if quick else (1, 2))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--algorithm", default="ring")
    ap.add_argument("--collective", default="allreduce")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    opts = CompileOptions(algorithm=args.algorithm, collective=Collective(args.collective))
    print(f"{'family':<11}{'topology':<24}{'ranks':>6}{'time s':>9}{'XML KiB':>9}"
          f"{'algbw GB/s':>12}")
    for family, topos in cases(args.quick):
        for topo in topos:
            t0 = time.perf_counter()
            try:
                res = compile_topology(topo, opts)
            except ColcError as err:
                print(f"{family:<11}{topo.name:<24}{topo.num_ranks:>6}  n/a: {err}")
                continue
            dt = time.perf_counter() - t0
            print(f"{family:<11}{topo.name:<24}{topo.num_ranks:>6}{dt:>9.2f}"
                  f"{len(res.text) / 1024:>9.0f}{float(res.algbw):>12.2f}")


if __name__ == "__main__":
    from colc.collector import fewer_collections

    with fewer_collections():  # the command's thresholds: build times as users see them
        main()
