"""Calibrate the runtime cost model against published NCCL/RCCL measurements.

Run by hand::

    python bench/calibrate.py            # fit, then print the error table
    python bench/calibrate.py --check    # only the error table of the presets

NCCL's (RCCL's) ring is written as a runtime program
(``colc.compiler.rings.nccl_baseline``: 16 NIC-aligned rings, Simple protocol, as
in the measured runs; see docs/cost-model.md for why Simple) and simulated at
the published sizes.  Three numbers per machine are fitted, everything else
comes from the runtime's sources: ``latency_scale`` (factor on the tuning
tables' latencies), ``net_efficiency`` (share of the NIC bandwidth reached)
and ``p2p_efficiency`` (share of the GPU links' bandwidth reached).  The
objective is the mean squared log error over the 12 ring
rows of the machine (allgather, reducescatter, allreduce at 1M/16M/128M/1G).
Fitting is a coordinate search (golden section per parameter, 3 rounds).

The fitted numbers are then written by hand into ``colc/ir/runtime_model.py``;
``tests/test_simulate.py`` checks that the presets keep the mean error of the
table in docs/cost-model.md.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import replace

from colc.compiler.published_results import MACHINES, SIZES, ring_predictions, ring_rows
from colc.ir.runtime_model import model_named


def loss(topo, rows, model) -> float:
    errs = [math.log(p / m) ** 2 for _, _, meas, pred in ring_predictions(topo, rows, model)
            for m, p in zip(meas, pred, strict=True)]
    return sum(errs) / len(errs)


def golden(f, lo: float, hi: float, steps: int = 12) -> float:
    phi = (math.sqrt(5) - 1) / 2
    a, b = lo, hi
    c, d = b - phi * (b - a), a + phi * (b - a)
    fc, fd = f(c), f(d)
    for _ in range(steps):
        if fc < fd:
            b, d, fd = d, c, fc
            c = b - phi * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, d, fd
            d = a + phi * (b - a)
            fd = f(d)
    return (a + b) / 2


def fit(machine: str, split: bool = False):
    topo, rows = ring_rows(machine)
    model = model_named(MACHINES[machine][2])
    for _ in range(3):
        if split:
            n = golden(lambda x: loss(topo, rows, replace(model, net_latency_scale=math.exp(x))),
                       math.log(0.05), math.log(20.0))
            model = replace(model, net_latency_scale=math.exp(n))
        s = golden(lambda x: loss(topo, rows, replace(model, latency_scale=math.exp(x))),
                   math.log(0.1), math.log(10.0))
        model = replace(model, latency_scale=math.exp(s))
        e = golden(lambda x: loss(topo, rows, replace(model, net_efficiency=x)), 0.4, 1.0)
        model = replace(model, net_efficiency=e)
        g = golden(lambda x: loss(topo, rows, replace(model, p2p_efficiency=x)), 0.4, 1.0)
        model = replace(model, p2p_efficiency=g)
    return topo, rows, model


def table(machine: str, topo, rows, model) -> float:
    print(f"\n{machine}: latency_scale={model.latency_scale:.3f} "
          f"net_latency_scale={model.net_latency_scale} "
          f"net_efficiency={model.net_efficiency:.3f} p2p_efficiency={model.p2p_efficiency:.3f}")
    print(f"{'collective':<14}{'system':<11}" + "".join(f"{s >> 20:>8}M meas/pred/err"
                                                        for s in SIZES))
    errs = []
    for coll, system, meas, pred in ring_predictions(topo, rows, model):
        cells = []
        for m, p in zip(meas, pred, strict=True):
            err = (p - m) / m
            errs.append(abs(err))
            cells.append(f"{m:>9.2f}/{p:7.2f}/{err:+6.1%}")
        print(f"{coll:<14}{system:<11}" + "".join(cells))
    mean = sum(errs) / len(errs)
    print(f"mean |error| {mean:.1%}, max {max(errs):.1%}")
    return mean


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="only print the presets' errors")
    p.add_argument("--machine", choices=sorted(MACHINES), action="append")
    p.add_argument("--split", action="store_true",
                   help="also fit a separate latency scale for network hops")
    args = p.parse_args(argv)
    for machine in args.machine or sorted(MACHINES):
        t0 = time.time()
        if args.check:
            topo, rows = ring_rows(machine)
            model = model_named(MACHINES[machine][2])
        else:
            topo, rows, model = fit(machine, args.split)
        table(machine, topo, rows, model)
        print(f"({time.time() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    from colc.collector import fewer_collections

    with fewer_collections():  # the command's thresholds: build times as users see them
        sys.exit(main())
