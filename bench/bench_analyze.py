"""Wall time of ``colc analyze`` (issue 20; run by hand, prints a table).

    python bench/bench_analyze.py                      # DGX A100 x2 x4 x32, MI250 x2
    python bench/bench_analyze.py --search             # the full search instead
    python bench/bench_analyze.py --family mi250 --boxes 2 4

Each run is ``colc analyze TOPO --json`` in a child process (its own peak
memory), timed end to end as a user meets it; the row counts say how many
algorithms were simulated (up to 64 ranks) or estimated (above 128).
Targets of issue 20: 10 s on two boxes, 60 s on DGX A100 x32.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

DEFAULT = (("dgx-a100", 2), ("mi250", 2), ("dgx-a100", 4), ("dgx-a100", 32))


def run(family: str, boxes: int, search: bool) -> dict:
    """Time one ``colc analyze`` of ``family`` x ``boxes``."""
    with tempfile.TemporaryDirectory() as tmp:
        topo = os.path.join(tmp, f"{family}-{boxes}.yaml")
        with open(topo, "w", encoding="utf-8") as f:
            f.write(f"family: {family}\nboxes: {boxes}\n")
        cmd = [sys.executable, "-m", "colc.cli", "analyze", topo, "--json"]
        cmd += ["--search"] if search else []
        start = time.perf_counter()
        with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
            proc = subprocess.Popen(cmd, stdout=out, stderr=err, text=True)
            _, status, usage = os.wait4(proc.pid, 0)
            wall = time.perf_counter() - start
            out.seek(0)
            err.seek(0)
            stdout, stderr = out.read(), err.read()
    if os.waitstatus_to_exitcode(status) != 0:
        return {"wall": wall, "error": stderr.strip().splitlines()[-1:]}
    peak = usage.ru_maxrss  # the analyze process itself (its forked workers are smaller)
    report = json.loads(stdout)
    rows = report["schedules"]
    return {"wall": wall, "peak_mb": peak / 1024, "ranks": report["ranks"],
            "simulated": sum(1 for r in rows if "simulated" in r),
            "estimated": sum(1 for r in rows if r.get("estimated"))}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--family", default=None)
    p.add_argument("--boxes", type=int, nargs="*", default=None)
    p.add_argument("--search", action="store_true")
    args = p.parse_args()
    cases = ([(args.family, b) for b in args.boxes or (2,)] if args.family else DEFAULT)
    print(f"{'topology':<14}{'ranks':>6}{'wall s':>9}{'peak MB':>9}{'simulated':>10}"
          f"{'estimated':>10}")
    for family, boxes in cases:
        r = run(family, boxes, args.search)
        if "error" in r:
            print(f"{family + ' x' + str(boxes):<14}{'':>6}{r['wall']:>9.1f}  {r['error']}")
            continue
        print(f"{family + ' x' + str(boxes):<14}{r['ranks']:>6}{r['wall']:>9.1f}"
              f"{r['peak_mb']:>9.0f}{r['simulated']:>10}{r['estimated']:>10}", flush=True)


if __name__ == "__main__":
    from colc.collector import fewer_collections

    with fewer_collections():  # the command's thresholds: build times as users see them
        main()
