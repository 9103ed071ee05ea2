"""Helpers for the verifier tests: example files and a tiny XML generator.

The generator writes MSCCL XML directly (independent of colc's printer) so
the verifier can be tested on larger, known-correct schedules.
"""

from __future__ import annotations

from pathlib import Path

EXAMPLES = Path(__file__).parent / "data" / "msccl-examples"


def example(prefix: str, kind: str = "executor") -> str:
    """Text of the example file starting with ``prefix`` of the given kind."""
    (path,) = sorted(EXAMPLES.glob(f"{prefix}*.{kind}.xml"))
    return path.read_text()


def mutate(text: str, old: str, new: str, count: int = 1) -> str:
    """Replace ``old`` by ``new`` (``count`` times); fail loudly when absent."""
    if old not in text:
        raise ValueError(f"{old!r} not in text")
    return text.replace(old, new, count)


def step(s: int, kind: str, src: tuple[str, int], dst: tuple[str, int], cnt: int = 1,
         dep: tuple[int, int] | None = None, hasdep: int = 0) -> str:
    """One ``<step>`` line."""
    depid, deps = dep if dep is not None else (-1, -1)
    return (f'      <step s="{s}" type="{kind}" srcbuf="{src[0]}" srcoff="{src[1]}" '
            f'dstbuf="{dst[0]}" dstoff="{dst[1]}" cnt="{cnt}" depid="{depid}" deps="{deps}" '
            f'hasdep="{hasdep}"/>')


def ring_allreduce(n: int, proto: str = "Simple") -> str:
    """In-place ring allreduce on ``n`` ranks, one chunk per rank, two tbs per rank.

    tb 0 (chan 0) is the reduce-scatter pass ``s, rrs * (n-2), rrc``; it
    leaves the full sum of chunk ``(r+1) % n`` on rank r.  tb 1 (chan 1) is
    the allgather pass ``s, rcs * (n-2), r``, whose first step depends on
    tb 0's last one.  Steps per tb: n, so n <= 64.
    """
    lines = [f'<algo name="ring" proto="{proto}" nchannels="2" nchunksperloop="{n}" '
             f'ngpus="{n}" coll="allreduce" inplace="1" outofplace="0" minBytes="0" '
             'maxBytes="0">']
    for r in range(n):
        nxt, prv = (r + 1) % n, (r - 1) % n
        lines.append(f'  <gpu id="{r}" i_chunks="{n}" o_chunks="0" s_chunks="0">')
        lines.append(f'    <tb id="0" send="{nxt}" recv="{prv}" chan="0">')
        lines.append(step(0, "s", ("i", r), ("i", r)))
        for j in range(1, n - 1):
            c = (r - j) % n
            lines.append(step(j, "rrs", ("i", c), ("i", c)))
        c = (r + 1) % n
        lines.append(step(n - 1, "rrc", ("i", c), ("i", c), hasdep=1))
        lines.append("    </tb>")
        lines.append(f'    <tb id="1" send="{nxt}" recv="{prv}" chan="1">')
        lines.append(step(0, "s", ("i", c), ("i", c), dep=(0, n - 1)))
        for j in range(1, n - 1):
            c = (r + 1 - j) % n
            lines.append(step(j, "rcs", ("i", c), ("i", c)))
        c = (r + 2) % n
        lines.append(step(n - 1, "r", ("i", c), ("i", c)))
        lines.append("    </tb>")
        lines.append("  </gpu>")
    lines.append("</algo>")
    return "\n".join(lines) + "\n"


def pairwise_allreduce_outofplace(inplace: int, outofplace: int) -> str:
    """2-rank allreduce correct only out-of-place: o[1] is a temporary early on.

    Rank r sends i[0], i[1], receives the peer's i[0] into o[0] and reduces
    its own i[0] into it, then the same for chunk 1.  In-place, o[0] is i[0]:
    the receive destroys the own contribution, which the ``re`` then adds
    twice.
    """
    lines = [f'<algo name="pairs" proto="Simple" nchannels="1" nchunksperloop="2" ngpus="2" '
             f'coll="allreduce" inplace="{inplace}" outofplace="{outofplace}" minBytes="0" '
             'maxBytes="0">']
    for r in range(2):
        peer = 1 - r
        lines.append(f'  <gpu id="{r}" i_chunks="2" o_chunks="2" s_chunks="0">')
        lines.append(f'    <tb id="0" send="{peer}" recv="{peer}" chan="0">')
        lines.append(step(0, "s", ("i", 0), ("o", 0)))
        lines.append(step(1, "s", ("i", 1), ("o", 1)))
        lines.append(step(2, "r", ("i", 0), ("o", 0)))
        lines.append(step(3, "re", ("i", 0), ("o", 0)))
        lines.append(step(4, "r", ("i", 1), ("o", 1)))
        lines.append(step(5, "re", ("i", 1), ("o", 1)))
        lines.append("    </tb>")
        lines.append("  </gpu>")
    lines.append("</algo>")
    return "\n".join(lines) + "\n"


def segmented_ring_allgather(n: int, hops_per_tb: int = 63) -> str:
    """Out-of-place ring allgather on ``n`` ranks, one chunk per rank (LL).

    The n-1 hops of the ring are cut into segments of ``hops_per_tb`` hops;
    segment k runs in tb k+1 on channel k (tb 0 copies the own chunk).  A
    segment starts with an ``s`` of the chunk the previous segment received
    last (a dependency on it) and ends with an ``r`` that publishes a flag.
    """
    segs = [list(range(lo, min(lo + hops_per_tb, n))) for lo in range(1, n, hops_per_tb)]
    lines = [f'<algo name="ring_ag" proto="LL" nchannels="{len(segs)}" nchunksperloop="{n}" '
             f'ngpus="{n}" coll="allgather" inplace="0" outofplace="1" minBytes="0" '
             'maxBytes="0">']
    for r in range(n):
        nxt, prv = (r + 1) % n, (r - 1) % n
        lines.append(f'  <gpu id="{r}" i_chunks="1" o_chunks="{n}" s_chunks="0">')
        lines.append('    <tb id="0" send="-1" recv="-1" chan="0">')
        lines.append(step(0, "cpy", ("i", 0), ("o", r)))
        lines.append("    </tb>")
        for k, hops in enumerate(segs):
            lines.append(f'    <tb id="{k + 1}" send="{nxt}" recv="{prv}" chan="{k}">')
            first = (r - (hops[0] - 1)) % n
            src = ("i", 0) if k == 0 else ("o", first)
            dep = None if k == 0 else (k, len(segs[k - 1]))
            lines.append(step(0, "s", src, ("o", first), dep=dep))
            for pos, h in enumerate(hops, start=1):
                c = (r - h) % n
                last = pos == len(hops)
                lines.append(step(pos, "r" if last else "rcs", ("o", c), ("o", c),
                                  hasdep=int(last)))
            lines.append("    </tb>")
        lines.append("  </gpu>")
    lines.append("</algo>")
    return "\n".join(lines) + "\n"
