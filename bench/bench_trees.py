"""Benchmark ForestColl tree generation (optimal k): topology, N, k, algbw, seconds.

Usage: python bench/bench_trees.py [--skip-big] [--max-gpus N]

Rows: DGX A100 x2, MI250 x2, DGX A100 x4 (reference Python implementation:
8.7 s, 54 s, 58 s on this machine; target 20x faster), then the DGX A100
growth curve 16..1024 GPUs.  Times are wall clock (and CPU) for
``pack_trees`` with the optimal k (no k cap).
"""

from __future__ import annotations

import argparse
import time

from colc.compiler.generate_trees import pack_trees
from colc.frontends.families import dgx_a100, mi250


def row(name: str, topo) -> None:
    w0, c0 = time.perf_counter(), time.process_time()
    packing = pack_trees(topo, max_k=10**9)
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    print(f"{name:<16} {topo.num_ranks:>5} {packing.k:>4} {float(packing.algbw):>10.3f} "
          f"{'yes' if packing.optimal else 'no':>7} {wall:>9.3f} {cpu:>9.3f}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--skip-big", action="store_true", help="stop the growth curve at 64 GPUs")
    ap.add_argument("--max-gpus", type=int, default=1024)
    args = ap.parse_args()
    print(f"{'topology':<16} {'N':>5} {'k':>4} {'algbw':>10} {'optimal':>7} {'wall s':>9} {'cpu s':>9}")
    row("dgx-a100 x2", dgx_a100(2))
    row("mi250 x2", mi250(2))
    row("dgx-a100 x4", dgx_a100(4))
    limit = 64 if args.skip_big else args.max_gpus
    boxes = 2
    while boxes * 8 <= limit:
        row(f"dgx-a100 x{boxes}", dgx_a100(boxes))
        boxes *= 2


if __name__ == "__main__":
    main()
