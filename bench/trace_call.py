"""Where one simulated call spends its time (run by hand, prints tables).

    python bench/trace_call.py --boxes 16 --collective allreduce --algorithm rings2d --chunks 4
    python bench/trace_call.py --family mi250 --boxes 4 --collective allreduce \\
        --algorithm rings2d --chunks 8 --link b0g0,ib --rank 0 --after 13000

One variant (``--algorithm``, ``--chunks``, ``--protocol``) of one
topology is lowered within the budget and simulated at ``--size`` MiB with
colc's calibrated simulator.  Printed:

* the call's algbw and time;
* a link's busy share per ``--bin`` microseconds (``--link``, default the
  first GPU's NIC towards the network switch: ``b0g0,ib0`` on DGX boxes,
  ``b0g0,ib`` on MI250; where the NIC idles at the start, in dips and at
  the end), and its first and last busy instants;
* for every threadblock of ``--rank``: its peers, channel, steps, when it
  ends, and the start time of each of its steps from ``--after``
  microseconds on (which steps make a call's tail).

The recorder wraps the simulator's private engine (``_Engine._rebalance``,
``_Simulation.resume``, ``_transmission_table``), so it is a development
tool: ``tests/test_bench_trace.py`` runs it on a small topology to keep it
working as the simulator changes.
"""

from __future__ import annotations

import argparse
import sys


def trace(topo, options, variant, nbytes: int, link: tuple[str, str], rank: int) -> dict:
    """Simulate ``variant`` once at ``nbytes`` bytes, recording ``link``'s
    load and ``rank``'s step start times.

    Returns
    -------
    dict
        ``result`` (the ``SimResult``), ``program``, ``load`` (a list of
        ``(time_us, bytes_per_us, capacity)`` at every change of the link's
        flows), ``steps`` (threadblock index -> step start times, the last
        loop iteration's) and ``ends`` (threadblock id -> end time).
    """
    from colc.compiler.pipeline import Compiler
    from colc.ir import simulate as sim

    compiler = Compiler(topo, options)
    program = compiler.program(variant)
    load: list[tuple[float, float, float]] = []
    starts: dict[int, list[float]] = {}
    ends: dict[int, float] = {}
    state: dict = {}

    class _Recorded(list):
        def __init__(self, items, index: int) -> None:
            super().__init__(items)
            self.index = index

        def __iter__(self):
            for item in list.__iter__(self):
                starts.setdefault(self.index, []).append(state["sim"].engine.now)
                yield item

    rebalance, resume = sim._Engine._rebalance, sim._Simulation.resume
    table, init = sim._transmission_table, sim._Simulation.__init__

    def _rebalance(self, links, extra=None):
        rebalance(self, links, extra)
        for lk in links:
            if lk.ends == link:
                load.append((self.now, sum(f.rate for f in lk.flows), lk.cap))

    def _resume(self, tb):
        resume(self, tb)
        if tb.done and tb.rank == rank and tb.id not in ends:
            ends[tb.id] = self.engine.now

    def _table(loaded, local):
        rows = table(loaded, local)
        rows[rank] = [_Recorded(txs, k) for k, txs in enumerate(rows[rank])]
        return rows

    def _init(self, *args, **kwargs):
        state["sim"] = self
        init(self, *args, **kwargs)

    sim._Engine._rebalance, sim._Simulation.resume = _rebalance, _resume
    sim._transmission_table, sim._Simulation.__init__ = _table, _init
    try:
        # not ``compiler.simulate``: it may hold the result of an earlier run
        result = sim.simulate(program, topo, compiler.model, nbytes, options.dtype_bytes)
    finally:
        sim._Engine._rebalance, sim._Simulation.resume = rebalance, resume
        sim._transmission_table, sim._Simulation.__init__ = table, init
    per_tb = {k: len(tb.steps) for k, tb in enumerate(program.ranks[rank].threadblocks)}
    steps = {k: times[-per_tb[k]:] if per_tb[k] else [] for k, times in starts.items()}
    return {"result": result, "program": program, "load": load, "steps": steps, "ends": ends}


def busy_profile(load: list[tuple[float, float, float]], end: float, width: float
                 ) -> list[float]:
    """The link's busy share (0-1) in each bin of ``width`` us up to ``end``.

    >>> busy_profile([(0.0, 5.0, 10.0), (10.0, 10.0, 10.0), (20.0, 0.0, 10.0)], 30.0, 10.0)
    [0.5, 1.0, 0.0, 0.0]
    """
    bins = [0.0] * (int(end // width) + 1)
    if not load:
        return bins
    cap = load[0][2]
    for (t0, rate, _), (t1, _, _) in zip(load, [*load[1:], (end, 0.0, cap)], strict=True):
        t = t0
        while t < t1:
            b = int(t // width)
            stop = min(t1, (b + 1) * width)
            if b < len(bins):
                bins[b] += rate * (stop - t)
            t = stop
    return [x / (cap * width) for x in bins]


def main(argv: list[str] | None = None) -> int:
    from colc.compiler.pipeline import CompileOptions, Variant
    from colc.frontends.families import build_family
    from colc.ir.core import Collective, Protocol

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--family", default="dgx-a100")
    ap.add_argument("--boxes", type=int, default=2)
    ap.add_argument("--collective", default="allreduce", choices=[c.value for c in Collective])
    ap.add_argument("--algorithm", default="rings2d")
    ap.add_argument("--chunks", type=int, default=None)
    ap.add_argument("--protocol", default="Simple", choices=[p.value for p in Protocol])
    ap.add_argument("--size", type=float, default=1024.0, help="MiB (default 1024)")
    ap.add_argument("--max-threadblocks", type=int, default=32)
    ap.add_argument("--link", default=None,
                    help="link ends, comma-separated (default: b0g0 to its network switch)")
    ap.add_argument("--bin", type=float, default=250.0, help="us per bin of the busy profile")
    ap.add_argument("--rank", type=int, default=0)
    ap.add_argument("--after", type=float, default=None,
                    help="print step start times from this time (us); default: the last 10%%")
    args = ap.parse_args(argv)
    topo = build_family({"family": args.family, "boxes": args.boxes}, "<trace>")
    options = CompileOptions(collective=Collective(args.collective), algorithm=args.algorithm,
                             max_threadblocks=args.max_threadblocks)
    variant = Variant(args.algorithm, args.chunks, Protocol(args.protocol))
    if args.link is None:
        args.link = "b0g0," + ("ib" if "ib" in topo.node else "ib0")
    ends_of_link = tuple(args.link.split(","))
    if len(ends_of_link) != 2 or any(e not in topo.node for e in ends_of_link):
        ap.error(f"--link {args.link}: two node names of {topo.name} expected")
    out = trace(topo, options, variant, int(args.size * (1 << 20)), ends_of_link, args.rank)
    res, program = out["result"], out["program"]
    end = res.time_us
    print(f"{topo.name} {args.collective} {args.algorithm} c{args.chunks} {args.protocol} "
          f"{args.size:g} MiB: {res.algbw:.1f} GB/s, {end:.0f} us, "
          f"{program.max_threadblocks} threadblocks per GPU")
    load = out["load"]
    busy = [k for k, (_, rate, _) in enumerate(load) if rate > 0]
    if busy:
        idle = load[busy[-1] + 1][0] if busy[-1] + 1 < len(load) else end
        print(f"link {args.link}: first byte at {load[busy[0]][0]:.0f} us, "
              f"idle from {idle:.0f} us")
        prof = busy_profile(out["load"], end, args.bin)
        cells = [f"{i * args.bin / 1000:.2f}:{100 * x:.0f}%" for i, x in enumerate(prof)]
        for k in range(0, len(cells), 10):
            print("  " + " ".join(cells[k:k + 10]))
    else:
        print(f"link {args.link}: no traffic")
    after = end * 0.9 if args.after is None else args.after
    print(f"rank {args.rank}: threadblock, channel, send / recv peer, steps, end; "
          f"step starts from {after:.0f} us")
    for k, tb in enumerate(program.ranks[args.rank].threadblocks):
        late = [(i, t) for i, t in enumerate(out["steps"].get(k, [])) if t >= after]
        print(f"  tb{tb.id} ch{tb.channel} {tb.send}/{tb.recv} {len(tb.steps)} steps, "
              f"end {out['ends'].get(tb.id, -1):.0f}: "
              + " ".join(f"{i}@{t:.0f}" for i, t in late))
    return 0


if __name__ == "__main__":
    sys.exit(main())
