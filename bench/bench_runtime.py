"""Runtime speed of colc's files against the published measurements (run by hand).

    python bench/bench_runtime.py                     # both machines, all collectives
    python bench/bench_runtime.py --machine a100x2 --collective allgather

For each machine of seed 004's tables (two DGX A100 boxes, two MI250 boxes of
16 GCDs) and each collective, colc builds its size-window portfolio
(``colc TOPO -o DIR/``), and the calibrated simulator predicts the algbw of
the file the runtime would select at 1 MB, 16 MB, 128 MB and 1 GB (fp32).
Printed beside them: the measured ForestColl and vendor-library figures
(004 Tables 2-3), NCCL's / RCCL's ring written as a runtime program and
simulated with the same model (the calibration baseline), and the time the
portfolio took to build.  A row passes when colc's figure is at least the
best published one at every size.
"""

from __future__ import annotations

import argparse
import sys
import time

from colc.compiler.rings.nccl_baseline import nccl_ring_program
from colc.compiler.pipeline import CompileOptions
from colc.compiler.portfolio import build_portfolio
from colc.compiler.published_results import MACHINES, MEASURED, RING_CHANNELS, SIZES
from colc.frontends.families import build_family
from colc.ir.core import Collective, Protocol
from colc.ir.runtime_model import model_named
from colc.ir.simulate import simulate

COLLS = ("allgather", "reducescatter", "allreduce")


def window_for(portfolio, size: int):
    for w in portfolio.windows:
        if w.lo <= size and (w.hi == 0 or size <= w.hi):
            return w
    raise LookupError(size)


def colc_row(topo, model, portfolio) -> list[tuple[float, str]]:
    out = []
    for size in SIZES:
        w = window_for(portfolio, size)
        res = simulate(w.program, topo, model, size)
        tag = f"{w.variant.algorithm}/{w.variant.protocol.value}"
        out.append((res.algbw if res.selected else 0.0, tag))
    return out


def ring_row(topo, model, machine: str, coll: str) -> list[float]:
    progs = {p: nccl_ring_program(topo, Collective(coll), channels=RING_CHANNELS[machine],
                                  protocol=p) for p in (Protocol.SIMPLE,)}
    return [max(simulate(p, topo, model, s).algbw for p in progs.values()) for s in SIZES]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--machine", choices=sorted(MACHINES), action="append")
    ap.add_argument("--collective", choices=COLLS, action="append")
    ap.add_argument("--max-threadblocks", type=int, default=32,
                    help="threadblock budget per GPU (0 = the GPU's limit)")
    args = ap.parse_args(argv)
    failures = 0
    for machine in args.machine or sorted(MACHINES):
        family, nboxes, preset = MACHINES[machine]
        topo = build_family({"family": family, "boxes": nboxes}, f"<family {family}>")
        model = model_named(preset)
        for coll in args.collective or COLLS:
            t0 = time.time()
            portfolio = build_portfolio(topo, CompileOptions(
                collective=Collective(coll), max_threadblocks=args.max_threadblocks))
            took = time.time() - t0
            ours = colc_row(topo, model, portfolio)
            print(f"\n{machine} {coll}: portfolio of {len(portfolio.windows)} files in "
                  f"{took:.0f} s")
            print(f"{'system':<22}" + "".join(f"{s >> 20:>15}M" for s in SIZES))
            print(f"{'colc (simulated)':<22}" + "".join(f"{bw:>16.1f}" for bw, _ in ours))
            print(f"{'  file used':<22}" + "".join(f"{tag:>16}" for _, tag in ours))
            print(f"{'  threadblocks/GPU':<22}" + "".join(
                f"{window_for(portfolio, s).program.max_threadblocks:>16}" for s in SIZES))
            for (m, c, system), figs in sorted(MEASURED.items()):
                if m == machine and c == coll:
                    print(f"{system + ' (measured)':<22}" + "".join(f"{x:>16.2f}" for x in figs))
            print(f"{'vendor ring (sim.)':<22}"
                  + "".join(f"{x:>16.1f}" for x in ring_row(topo, model, machine, coll)))
            best = [max(v[i] for (m, c, _), v in MEASURED.items() if m == machine and c == coll)
                    for i in range(len(SIZES))]
            ok = all(bw >= b for (bw, _), b in zip(ours, best, strict=True))
            failures += not ok
            print("beats every published figure: " + ("yes" if ok else "NO"))
    return 1 if failures else 0


if __name__ == "__main__":
    from colc.collector import fewer_collections

    with fewer_collections():  # the command's thresholds: build times as users see them
        sys.exit(main())
