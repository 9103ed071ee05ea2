"""Benchmark ForestColl tree generation (optimal k): topology, N, k, algbw, seconds.

Usage: python bench/bench_trees.py [--skip-big] [--max-gpus N]

Rows: DGX A100 x2, MI250 x2, DGX A100 x4 (reference Python implementation:
8.7 s, 54 s, 58 s on this machine; target 20x faster), then the DGX A100
growth curve 16..1024 GPUs (the authors' Java implementation: 36.5 min on
128 cores for 1024 GPUs; target here: under 10 minutes on 2 cores).  Times are wall clock (and CPU) for
``pack_trees`` with the optimal k (no k cap); ``split s`` and ``pack s`` are
the switch-removal and tree-packing stages.
"""

from __future__ import annotations

import argparse
import time

from colc.compiler.trees.generate_trees import pack_trees
from colc.frontends.families import dgx_a100, mi250


def row(name: str, topo) -> None:
    stages: dict[str, float] = {}
    last = [time.perf_counter()]

    def progress(stage: str, done: int, total: int) -> None:
        now = time.perf_counter()
        stages[stage] = stages.get(stage, 0.0) + now - last[0]
        last[0] = now

    w0, c0 = time.perf_counter(), time.process_time()
    packing = pack_trees(topo, max_k=None, progress=progress)
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    split = stages.get("split switches", 0.0)
    pack = stages.get("pack trees", 0.0)
    print(f"{name:<16} {topo.num_ranks:>5} {packing.k:>4} {float(packing.algbw):>10.3f} "
          f"{'yes' if packing.optimal else 'no':>7} {wall:>9.3f} {cpu:>9.3f} "
          f"{split:>8.2f} {pack:>8.2f}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--skip-big", action="store_true", help="stop the growth curve at 64 GPUs")
    ap.add_argument("--max-gpus", type=int, default=1024)
    args = ap.parse_args()
    print(f"{'topology':<16} {'N':>5} {'k':>4} {'algbw':>10} {'optimal':>7} {'wall s':>9} "
          f"{'cpu s':>9} {'split s':>8} {'pack s':>8}")
    row("dgx-a100 x2", dgx_a100(2))
    row("mi250 x2", mi250(2))
    row("dgx-a100 x4", dgx_a100(4))
    limit = 64 if args.skip_big else args.max_gpus
    boxes = 2
    while boxes * 8 <= limit:
        row(f"dgx-a100 x{boxes}", dgx_a100(boxes))
        boxes *= 2


if __name__ == "__main__":
    from colc.collector import fewer_collections

    with fewer_collections():  # the command's thresholds: build times as users see them
        main()
