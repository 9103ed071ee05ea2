"""Which variants ``auto`` builds: algorithms x chunkings x protocols, by scale.

Input: a ``Compiler`` (its topology, options and threadblock budget).
Output: the ``Variant`` list ``variants`` returns, every one an algorithm
that builds the collective, with the chunkings and protocols worth ranking
at this many ranks; ``scale_skip`` says why an algorithm is left out
(shown by ``colc analyze``), ``least_size`` from which message size the
portfolio ranks a variant.  Every rule is a constant with the measurement
that set it: past a few hundred ranks each variant more is minutes of
lowering, proving and simulating, so the rules keep those that can win.
Cost: O(algorithms x chunkings x protocols), plus rings2d's threadblock
count per chunking (``rings2d.crossing_threadblocks``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from colc.compiler.algorithms import (
    ALGORITHMS,
    ALLTOALL_CHUNKINGS,
    CHUNKINGS,
    RING_COPIES,
    THREAD_ALGORITHMS,
    available_algorithms,
    box_switches,
    builds,
    meshed_boxes,
)
from colc.compiler.options import Variant
from colc.compiler.trees.rate_links import rating_differs
from colc.ir.core import Collective, Protocol
from colc.ir.load_checks import MAX_CHANNELS
from colc.ir.runtime_model import model_for
from colc.ir.topology import Topology, boxes

from colc.errors import ColcError, UnsupportedError

if TYPE_CHECKING:
    from colc.compiler.pipeline import Compiler


#: Ranks above which bfb and dimrings try one chunking, one chunk per shard:
#: each further chunking is a whole job more, and a chunk per shard costs
#: little there (hypercube dim 9 bfb bandwidth-only: 220.7 GB/s at 1 chunk,
#: 225.4 at the LP's own 9) while the simulation and the verifier run a call
#: per chunk (9 times as many at 9 chunks).  dimrings' blocks on large tori
#: are long enough to split evenly anyway.  rails too: at 128 DGX boxes a
#: carrier relays 16 blocks to each box peer, and only one chunk per shard
#: keeps those relays within 64 steps per threadblock in pieces the LL128
#: FIFO holds (DGX A100 x128 allgather: 98.5 GB/s at 1 GiB; 4 chunks per
#: shard deadlock).
ONE_CHUNKING_RANKS = 256

#: Ranks up to which tree chunkings are used as listed; above, they shrink in
#: proportion (``scale_chunks``) so a chunk keeps its size and the steps per
#: connection stay within the runtime's limits as trees pass more peers.
CHUNK_SCALE_RANKS = 32


#: Ranks above which ``auto`` leaves ring-shaped schedules (``RING_FAMILY``)
#: out on boxes that ``rails`` serves: a ring of N ranks is N - 1 dependent
#: hops per call (DGX A100 x128: 1023 hops, 10 ms of hop latency alone) and
#: within 64 steps per threadblock one ring takes N/64 threadblocks per rank,
#: so a budget of 32 holds one ring.  Building them costs minutes and
#: gigabytes (x128: 83 s for ``ring``'s schedule alone; the x32 portfolio
#: passed 14 GB with them).  ``--algorithm ring`` still builds it.
RING_RANKS = 128
#: Ranks from which ``auto`` tries ``rails`` on boxes without a switch (MI250):
#: below, its relays along spanning trees of the box lose to trees, rings2d
#: and RCCL's rings (MI250 x2 allgather at 1 GiB: 97.9 GB/s against trees'
#: 158.3; x4: 96.0 against the ring's 146.6), and building it costs time;
#: from 8 boxes RCCL's 16 rings no longer fit the GPU and one ring is left.
MESH_RAILS_RANKS = 128
#: Its chunkings there: a lane's steps grow with the trees sharing a link, so
#: more chunks mean longer pieces, not more of them (MI250 x8 allgather at 1
#: GiB: 74.8 / 67.3 / 53.7 GB/s at 1 / 2 / 4 chunks per shard).
MESH_RAILS_CHUNKINGS = (1, 2)
#: rails' chunkings past ``RING_RANKS`` ranks behind box switches (DGX A100
#: x17 to x32; one chunk only past ``ONE_CHUNKING_RANKS``).  The lanes' 24
#: transfers per peer make pieces of a whole shard there whatever the
#: chunking, and a piece of several chunks is several calls in the FIFO:
#: DGX A100 x32 at 1 GiB (Simple, 30 threadblocks), 1 / 2 chunks per shard
#: allgather 140.6 / 128.3 GB/s, reduce-scatter 136.3 / 112.3, allreduce
#: 61.9 / 61.0; 4 and more hang in Simple's FIFO of 2 calls; LL and LL128
#: simulate the same at every chunking (16 MiB, 128 MiB).
LARGE_RAILS_CHUNKINGS = (1, 2)
#: Algorithms whose threadblocks each serve one ring.
RING_FAMILY = ("ring", "rings2d", "nccl-rings")
#: rings2d's chunkings past ``RING_RANKS`` ranks on boxes without a switch
#: (``large_rings2d_chunks``): its rings stay inside a box there, and its
#: crossing form's network threadblocks serve a send and a receive each.
#: MI250 x16 at 1 GiB (simulated, 32 threadblocks): allgather 113.2 GB/s
#: and reduce-scatter 96.3 with 4 chunks per shard in one stage, against
#: rails' 89.8 and 73.8 (over a grid of boxes: allgather 137.6,
#: reduce-scatter 127.7, 133.1 with its passes on all the box's cycles,
#: ``rings2d.placement._landing_places``); its allreduce over all the boxes only
#: fits 2 chunks there (29.7 against rails' 37.5), so an allreduce goes
#: in paired halves (``PAIRED_MESH_CHUNKINGS``).
MESH_CROSSING_CHUNKINGS = (2, 4)
#: rings2d's chunkings of an allreduce past ``RING_RANKS`` ranks on boxes
#: without a switch: those in which it goes in paired halves
#: (``rings2d.paired_halves``; its grid form over all the boxes fits 2
#: chunks per shard on MI250 x16, 29.7 GB/s at 1 GiB against rails' 37.5).
#: MI250 x16 with 4 chunks per shard (simulated, 32 threadblocks): 45.9 /
#: 59.5 GB/s at 16 MiB / 1 GiB against rails' 27.4 / 37.5; x32 with 2:
#: 55.6 / 58.7 at 128 MiB / 1 GiB against 31.0 / 35.3 (with one cycle of
#: the box per chunk, before ``rings2d.placement._landing_places``: x16 43.3 / 54.1,
#: x32 35.6 / 36.3).
PAIRED_MESH_CHUNKINGS = (2, 4)
#: Past ``GRID_EVERY_SIZE_RANKS`` ranks on such boxes one chunk per shard
#: (the only chunking within 64 steps per ring there; an allreduce in
#: paired halves), ranked from ``GRID_LEAST_SIZE`` only: MI250 x64 (1024
#: GCDs) at 1 GiB, simulated, allgather 103.3 GB/s with 31 threadblocks
#: against rails' 96.2, reduce-scatter 121.0 with 32 against 82.8,
#: allreduce 51.9 with 32 against 38.2 (with one cycle of the box per
#: chunk the reduce-scatter gave 42.3: every ring on one cycle's links).
LARGE_MESH_CROSSING_CHUNKINGS = (1,)
#: rings2d's chunkings past ``RING_RANKS`` ranks behind box switches
#: (``large_rings2d_chunks``): the crossing allgather and reduce-scatter
#: over a grid of boxes (``rings2d.box_grid``), 16 rings, the chunkings
#: whose passes fit 64 steps per ring.  DGX A100 at 1 GiB (simulated, at
#: most 31 threadblocks): allgather x32 (2 x 4 x 4) 156.3 GB/s with 4
#: chunks per shard, x64 (2 x 2 x 2 x 2 x 4) 146.1 with 2 (126.7 with 1),
#: x128 (2^7) 151.6 with 1, against rails' 140.6, 138.9 and 115.2;
#: reduce-scatter x32 165.4 with 4 (80% of the cut bound: 165.2), x64
#: 156.8 with 2, x128 156.1 with 1 (rails: 144.7, 143.7, 126.7).  An
#: allreduce takes the most that fit (``large_rings2d_chunks``), over all
#: the boxes or in paired halves (``rings2d.paired_halves``): DGX A100 at
#: 128 MiB / 1 GiB x32 65.3 / 79.4 with 4 in halves (2 over all the boxes:
#: 59.0 / 72.5), x64 57.7 / 71.8 with 2 in halves (1 over all: 54.8 with
#: rails at 128 MiB, 67.7), x128 70.0 at 1 GiB with 1 in halves (rails
#: 58.1); every chunking ranked took the x64 portfolio 935 s to build.
GRID_CROSSING_CHUNKINGS = (1, 2, 4)
#: Protocols ``auto`` tries those in: Simple (its 1 MiB chunks at 1 GiB; at
#: 128 MiB rails' LL128 files win, DGX A100 x16 allgather 132.2 GB/s
#: against 124.6).  Each protocol more lowers, checks and simulates a
#: schedule of a million ops at 1024 GPUs: with all three the x128
#: allgather portfolio took more than 13 minutes.
GRID_PROTOCOLS = (Protocol.SIMPLE,)
#: Ranks up to which the portfolio ranks the grid form behind box switches
#: at every size its protocol serves; past them only from ``GRID_LEAST_SIZE``
#: (``least_size``).  At 1024 GPUs one lowering, proof and simulation of its
#: million-op schedule takes minutes: ranked at every Simple size, the x128
#: allgather portfolio built for more than 12 minutes (rails alone 340 s),
#: and there it only leads at the largest size (DGX A100 x128 allgather,
#: simulated: 40.6 GB/s at 64 MiB and 151.6 at 1 GiB; rails' files 87.6 at
#: 128 MiB and 115.2 at 1 GiB).  Since the twenty-fifth session (its last
#: stage on two connections) the grid gives 63.8 / 101.3 / 162.4 at 64 /
#: 128 MiB / 1 GiB, and it leads from 128 MiB: the portfolio's sizes past
#: 512 ranks go 64 MiB, 1 GiB, and the midpoint between them goes to the
#: faster neighbour (``portfolio._coarse_rivals``, twenty-sixth session).
GRID_EVERY_SIZE_RANKS = 512
#: The least size the portfolio ranks the grid form at past
#: ``GRID_EVERY_SIZE_RANKS`` ranks.
GRID_LEAST_SIZE = 1 << 30
#: Tree algorithms: they spread over every rail peer on boxes behind a box
#: switch, are lowered decoupled first and take the portfolio's tree chunkings.
SPREAD_TREES = ("trees", "trees-rated", "hier")
#: ``trees-rated`` is tried where the runtime reaches a NIC's bandwidth less
#: than this share as well as a GPU link's (MI250: 0.577 against 0.859;
#: DGX A100: 0.887 against 0.8, where rated trees lose: x2 allgather at 1
#: GiB 182.9 against 222.7 GB/s).
RATED_TREES_BELOW = 0.75
#: On boxes without a switch, from ``MESH_RAILS_RANKS`` ranks, ``auto`` tries
#: those trees only within this many threadblocks per box and rail peer:
#: their relays inside the box add lanes and steps (MI250 x8 allgather, 22
#: box and rail peers: trees need 40 threadblocks, refused at 32 after 5 min
#: 19 s and 1.6 GB; hier 41 at 4 chunks, 81 at 8), and at x16 their packings
#: took half of the allreduce portfolio's first 10 minutes (py-spy; it had
#: not finished in 40).
MESH_TREE_LANES_PER_PEER = 2


#: Boxes (behind switches) up to which rails is also tried unpaired: its lanes
#: planned for about half the budget, each lane a sending and a receiving
#: threadblock (``RailPlan.unpaired``).  DGX A100 x2 reduce-scatter at budget
#: 32 (simulated, c16 Simple, 32 threadblocks): 214.3 / 254.1 GB/s at 128M /
#: 1G against the paired file's 177.6 / 234.1.  A paired lane alternates a
#: send with a receive-reduce, and its NVLink share idles while it reduces;
#: unpaired, a sending threadblock only sends.  From 4 boxes the halved
#: plan loses (x4 reduce-scatter at 1 GiB: 157.9 against 201.9).
UNPAIRED_RAILS_BOXES = 2
#: Chunks per shard of the unpaired variants (powers of two, so the runtime
#: selects them at power-of-two sizes; x2 reduce-scatter: c8 202.4 / 254.1,
#: c16 214.3 / 254.1, c32 214.3 / 232.7 at 128M / 1G).
UNPAIRED_RAILS_CHUNKINGS = (8, 16)
#: ``direct`` all-to-all's chunkings where every peer can have a sending and
#: a receiving threadblock of its own (``direct_unpaired``); each is also
#: tried unpaired.  A paired threadblock alternates a peer's send with its
#: receive, so each direction of the pair runs half the time: DGX A100 x1 at
#: 1 GiB (simulated, Simple) 67.0 GB/s with one chunk per block paired (8
#: threadblocks, the only file before), 144.8 with 4 paired (15), 154.7
#: with 1 unpaired (15), 262.7 with 2, 4 or 8 unpaired (29); at 16 MiB 8
#: chunks unpaired lead (143.6 against 130.6 with 4).
DIRECT_UNPAIRED_CHUNKINGS = (1, 2, 4, 8)
#: ``ring``'s chunkings are copies of its rings (``algorithms.RING_COPIES``),
#: each with channel hints of its own (``ring_copies``), tried up to this many
#: ranks (a copy is N^2 ops).  One DGX A100 box, allgather at 1 GiB
#: (simulated, Simple): one ring 22.0 GB/s on 2 threadblocks, 4 copies
#: 87.2 on 5, 8 copies 170.4 on 9 (trees within 8: 66.9, within 16: 157.0).
RING_COPIES_RANKS = 64


def large_rings2d_chunks(topo: Topology, collective: Collective | None,
                         budget: int) -> tuple[int, ...]:
    """rings2d's chunkings past ``RING_RANKS`` ranks: its crossing allgather
    and reduce-scatter, and its allreduce behind box switches (over a grid
    of boxes or in paired halves) and, on boxes without a switch, in paired
    halves (``rings2d.paired_halves``).

    Parameters
    ----------
    topo : Topology
    collective : Collective or None
        Allgather, reduce-scatter and allreduce take them; None takes none.
    budget : int
        Threadblocks per rank: the crossing form's least
        (``rings2d.crossing_threadblocks``, network sends and receives
        paired) must fit it.

    Returns
    -------
    tuple of int
        Those of ``MESH_CROSSING_CHUNKINGS`` (an allreduce's
        ``PAIRED_MESH_CHUNKINGS``; past ``GRID_EVERY_SIZE_RANKS`` ranks
        ``LARGE_MESH_CROSSING_CHUNKINGS``;
        ``GRID_CROSSING_CHUNKINGS``
        behind box switches) in which ``collective`` takes the crossing form
        within ``budget`` (an allreduce the largest of them); () elsewhere
        (fewer ranks, boxes of unequal sizes, other collectives).

    Examples
    --------
    >>> from colc.frontends.families import build_family
    >>> m = build_family({"family": "mi250", "boxes": 16}, "x")
    >>> [large_rings2d_chunks(m, c, 32) for c in (Collective.ALLGATHER, Collective.ALLREDUCE)]
    [(2, 4), (4,)]
    >>> large_rings2d_chunks(m, Collective.REDUCESCATTER, 22), large_rings2d_chunks(m, Collective.REDUCESCATTER, 23)
    ((), (2, 4))
    >>> t = build_family({"family": "dgx-a100", "boxes": 64}, "x")
    >>> large_rings2d_chunks(t, Collective.ALLGATHER, 32), large_rings2d_chunks(t, Collective.REDUCESCATTER, 32)
    ((1, 2), (1, 2))
    """
    from colc.compiler.rings.rings2d import crossing_threadblocks, paired_halves

    if collective is None or collective is Collective.ALLTOALL or topo.num_ranks <= RING_RANKS:
        return ()
    paired_only = meshed_boxes(topo) and collective is Collective.ALLREDUCE
    if meshed_boxes(topo) and topo.num_ranks > GRID_EVERY_SIZE_RANKS:
        chunkings = LARGE_MESH_CROSSING_CHUNKINGS
    elif paired_only:
        chunkings = PAIRED_MESH_CHUNKINGS
    elif meshed_boxes(topo):
        chunkings = MESH_CROSSING_CHUNKINGS
    elif box_switches(topo):
        chunkings = GRID_CROSSING_CHUNKINGS
    else:
        return ()
    groups = boxes(topo)
    if len({len(g) for g in groups}) != 1:
        return ()
    if paired_only:
        chunkings = tuple(c for c in chunkings if paired_halves(groups, collective, c))
    fit = tuple(c for c in chunkings if 0 < crossing_threadblocks(groups, collective, c) <= budget)
    # an allreduce's chunkings all fill 64 steps per ring with 512 chunks at
    # most: the most per shard pipeline its stages best
    return (max(fit),) if fit and collective is Collective.ALLREDUCE else fit


def least_size(topo: Topology, variant: Variant) -> int:
    """The least message size (bytes) the portfolio ranks ``variant`` at: 0, or
    ``GRID_LEAST_SIZE`` for rings2d past ``GRID_EVERY_SIZE_RANKS`` ranks
    (where it crosses in stages over a grid of boxes).

    Examples
    --------
    >>> from colc.frontends.families import build_family
    >>> t = build_family({"family": "dgx-a100", "boxes": 128}, "x")
    >>> v = Variant("rings2d", 1, Protocol.SIMPLE)
    >>> least_size(t, v) == GRID_LEAST_SIZE, least_size(t, Variant("rails", 1, Protocol.SIMPLE))
    (True, 0)
    >>> least_size(build_family({"family": "dgx-a100", "boxes": 64}, "x"), v)
    0
    """
    if variant.algorithm == "rings2d" and topo.num_ranks > GRID_EVERY_SIZE_RANKS:
        return GRID_LEAST_SIZE
    return 0


def scale_skip(topo: Topology, algorithm: str, budget: int,
               collective: Collective | None = None) -> str | None:
    """Why ``auto`` does not try ``algorithm`` for ``collective`` here (before
    building it), or None.  Without ``collective`` rings2d is judged as the
    other ring-shaped schedules.

    Trees and hierarchical trees on boxes joined by a network (behind box
    switches, or on their own links as MI250) take a threadblock per box
    peer and per rail peer (spread splitting rotates a GPU's trees over
    every other box: DGX A100 x32, 38 peers per GPU), so ``nb - 1 + G - 1``
    above the budget rules them out before the packing (minutes and
    gigabytes past 256 GPUs).  On boxes without a switch from
    ``MESH_RAILS_RANKS`` ranks, where ``rails`` applies, their relays inside
    the box need about ``MESH_TREE_LANES_PER_PEER`` threadblocks per peer.
    Ring-shaped schedules are left out past ``RING_RANKS`` ranks where
    ``rails`` applies (see there), save rings2d's crossing form, whose
    rings stay inside a box (``large_rings2d_chunks``).

    Examples
    --------
    >>> from colc.frontends.families import build_family
    >>> t = build_family({"family": "dgx-a100", "boxes": 64}, "x")
    >>> scale_skip(t, "trees", 32)[:48]
    'trees take a threadblock per box and rail peer: '
    >>> scale_skip(t, "rails", 32) is None, scale_skip(t, "trees", 108) is None
    (True, True)
    >>> m = build_family({"family": "mi250", "boxes": 8}, "x")
    >>> scale_skip(m, "hier", 32)[:56], scale_skip(m, "hier", 44) is None
    ('hier on boxes without a switch relay inside the box and ', True)
    """
    if algorithm == "trees-rated" and not rating_differs(topo, model_for(topo),
                                                         RATED_TREES_BELOW):
        return ("trees-rated: the runtime reaches every link here about as well as the "
                "NICs, so the rated trees are the trees (--algorithm trees-rated builds "
                "them anyway)")
    if algorithm == "rails" and topo.num_ranks < MESH_RAILS_RANKS and meshed_boxes(topo):
        return (f"rails on boxes without a switch relay along trees of the box's links; "
                f"below {MESH_RAILS_RANKS} ranks trees and rings are faster (--algorithm "
                f"rails builds it anyway)")
    if algorithm not in SPREAD_TREES + RING_FAMILY or not (
            box_switches(topo) or meshed_boxes(topo)):
        return None
    groups = boxes(topo)
    if len(groups) < 2 or len({len(g) for g in groups}) != 1:
        return None
    peers = len(groups) - 1 + len(groups[0]) - 1
    if algorithm in SPREAD_TREES and peers > budget:
        return (f"{algorithm} take a threadblock per box and rail peer: {peers} per GPU "
                f"here, more than the budget of {budget} (--max-threadblocks)")
    need = MESH_TREE_LANES_PER_PEER * peers
    if (algorithm in SPREAD_TREES and need > budget
            and topo.num_ranks >= MESH_RAILS_RANKS and meshed_boxes(topo)):
        return (f"{algorithm} on boxes without a switch relay inside the box and take "
                f"about {need} threadblocks per GPU here ({MESH_TREE_LANES_PER_PEER} per box "
                f"and rail peer), more than the budget of {budget} (--max-threadblocks "
                f"{need} tries them; --algorithm {algorithm} builds them anyway)")
    if algorithm == "rings2d" and large_rings2d_chunks(topo, collective, budget):
        return None
    if algorithm in RING_FAMILY and topo.num_ranks > RING_RANKS:
        return (f"{algorithm}: a ring of {topo.num_ranks} ranks is {topo.num_ranks - 1} "
                f"dependent hops per call and takes {-(-topo.num_ranks // 64)} threadblocks "
                f"per rank and ring; past {RING_RANKS} ranks auto uses rails (--algorithm "
                f"{algorithm} builds it anyway)")
    return None


def scale_chunks(chunks: tuple[int | None, ...], ngpus: int) -> tuple[int | None, ...]:
    """Tree chunkings for ``ngpus`` ranks: ``c * 32 // ngpus`` above 32 ranks.

    Examples
    --------
    >>> scale_chunks((16, 32, 64), 16), scale_chunks((16, 32, 64), 256)
    ((16, 32, 64), (2, 4, 8))
    >>> scale_chunks((1, 4, 16), 1024)
    (1,)
    """
    if ngpus <= CHUNK_SCALE_RANKS:
        return chunks
    out: list[int | None] = []
    for c in chunks:
        scaled = None if c is None else max(1, c * CHUNK_SCALE_RANKS // ngpus)
        if scaled not in out:
            out.append(scaled)
    return tuple(out)


def variants(compiler: Compiler, protocols: tuple[Protocol, ...] | None = None,
             chunkings: tuple[int, ...] | None = None) -> list[Variant]:
    """Variants to try: algorithms that apply x chunkings x protocols."""
    opts = compiler.opts
    names = sorted(ALGORITHMS) if opts.algorithm == "auto" else [opts.algorithm]
    if opts.algorithm in THREAD_ALGORITHMS:
        raise UnsupportedError(f"{opts.algorithm} writes one oneCCL file, not threadblock "
                               "programs to rank or a portfolio; use -o FILE.oneccl.xml")
    if opts.algorithm != "auto" and opts.algorithm not in ALGORITHMS:
        raise UnsupportedError(f"unknown algorithm '{opts.algorithm}'; choose from "
                               f"{', '.join(available_algorithms())}")
    protocols = protocols or (opts.protocol,)
    out = []
    for name in names:
        name_protocols = protocols
        if opts.algorithm == "auto" and (
                scale_skip(compiler.topo, name, compiler.budget, opts.collective)
                or not builds(name, opts.collective)):
            continue
        if opts.chunks is not None and name == "ring" and opts.chunks > MAX_CHANNELS:
            if opts.algorithm == name:
                raise UnsupportedError(
                    f"--chunks {opts.chunks}: ring's chunks are copies of its rings, at most "
                    f"{MAX_CHANNELS} (the runtime's channels); use --chunks {MAX_CHANNELS} or "
                    f"fewer")
            continue  # under auto: the others take it
        if opts.chunks is not None:
            chunks: tuple[int | None, ...] = (opts.chunks,)
        elif opts.collective is Collective.ALLTOALL:
            chunks = ALLTOALL_CHUNKINGS.get(name, (None,))
            if name == "rails":
                from colc.compiler.alltoall.rails_alltoall import uses_carriers

                if uses_carriers(compiler.topo, compiler.budget):
                    chunks = (1,)  # through carriers None is one chunk per block too
            elif name == "direct" and direct_unpaired(compiler.topo, compiler.budget):
                chunks = DIRECT_UNPAIRED_CHUNKINGS
        elif chunkings is not None and name in SPREAD_TREES:
            chunks = scale_chunks(chunkings, compiler.topo.num_ranks)
        elif name in SPREAD_TREES:
            chunks = scale_chunks(CHUNKINGS[name], compiler.topo.num_ranks)
        elif name in ("bfb", "dimrings", "rails") and \
                compiler.topo.num_ranks > ONE_CHUNKING_RANKS:
            chunks = (1,)
        elif name == "rails" and meshed_boxes(compiler.topo):
            chunks = MESH_RAILS_CHUNKINGS
        elif name == "rails" and compiler.topo.num_ranks > RING_RANKS:
            chunks = LARGE_RAILS_CHUNKINGS
        elif name == "rings2d" and (large := large_rings2d_chunks(
                compiler.topo, opts.collective, compiler.budget)):
            chunks = large
            if opts.algorithm == "auto" and (box_switches(compiler.topo) or
                                             compiler.topo.num_ranks > GRID_EVERY_SIZE_RANKS):
                name_protocols = tuple(p for p in protocols if p in GRID_PROTOCOLS)
        elif name == "ring":
            chunks = ring_copies(compiler)
        else:
            chunks = CHUNKINGS.get(name, (None,))
        out += [Variant(name, c, p) for c in chunks for p in name_protocols]
        if name == "rings2d" and Protocol.SIMPLE in name_protocols:
            out += [Variant(name, c, Protocol.SIMPLE, budget=b)
                    for c in chunks for b in compiler.fewer_split_budgets(c)]
        if name == "rails" and _unpaired_rails(compiler.topo, opts.collective):
            chunks = (opts.chunks,) if opts.chunks is not None else UNPAIRED_RAILS_CHUNKINGS
            out += [Variant(name, c, p, unpaired=True) for c in chunks for p in protocols]
        if (name == "direct" and opts.collective is Collective.ALLTOALL
                and direct_unpaired(compiler.topo, compiler.budget)):
            out += [Variant(name, c, p, unpaired=True) for c in chunks for p in name_protocols]
    return out


def ring_copies(compiler: Compiler) -> tuple[int | None, ...]:
    """``ring``'s chunkings: one ring (None), and ``RING_COPIES`` copies up to
    the budget and to about as many as the links carry beside one
    threadblock's rate (the ring's bandwidth-only algbw over what one
    threadblock a rank sends at gives), up to ``RING_COPIES_RANKS`` ranks
    on fabrics without a network (across boxes ``nccl-rings`` builds
    several rings).

    Examples
    --------
    >>> from colc.compiler.pipeline import Compiler, CompileOptions
    >>> from colc.frontends.families import dgx_a100, torus
    >>> ring_copies(Compiler(dgx_a100(1), CompileOptions(collective=Collective.ALLGATHER)))
    (None, 2, 4, 8, 16)
    >>> ring_copies(Compiler(dgx_a100(1), CompileOptions(max_threadblocks=6)))
    (None, 2, 4)
    >>> ring_copies(Compiler(torus([3, 3], 10), CompileOptions()))  # links below a threadblock
    (None,)
    """
    n = compiler.topo.num_ranks
    if n > RING_COPIES_RANKS or n < 2 or any(nd.is_network for nd in compiler.topo.nodes):
        return (None,)  # boxes joined by a network: nccl-rings' rings are the copies
    sends = (n - 1) / n * (2 if compiler.opts.collective is Collective.ALLREDUCE else 1)
    rate = compiler.model.costs(Protocol.SIMPLE).tb_p2p
    try:
        useful = compiler.estimate(Variant("ring")) * sends / rate
    except ColcError:  # ring's own variant says why (a refusal note), and auto goes on
        return (None,)
    copies = compiler.opts.instances  # --instances multiplies them
    return (None, *(c for c in RING_COPIES
                    if c * copies <= compiler.budget and c * copies / 2 < useful))


def direct_unpaired(topo: Topology, budget: int) -> bool:
    """Whether ``direct`` all-to-all is also tried unpaired, with
    ``DIRECT_UNPAIRED_CHUNKINGS``: when every rank's peers can each have a
    sending and a receiving threadblock within ``budget`` (one DGX A100
    box: 14 of 32); the local copy then rides on one of them
    (``lower_to_program._local_threadblocks``) where the budget leaves it
    no threadblock of its own (one box at 14, 1 GiB: 128.6 GB/s, against
    83.6 paired).

    Examples
    --------
    >>> from colc.frontends.families import dgx_a100
    >>> direct_unpaired(dgx_a100(1), 14), direct_unpaired(dgx_a100(1), 13)
    (True, False)
    >>> direct_unpaired(dgx_a100(4), 32)
    False
    """
    return 2 * (topo.num_ranks - 1) <= budget


def _unpaired_rails(topo: Topology, collective: Collective) -> bool:
    """Whether rails is also tried unpaired here (``UNPAIRED_RAILS_BOXES``)."""
    if collective is Collective.ALLTOALL or not box_switches(topo):
        return False  # boxes without a switch lower rails unpaired anyway
    return 2 <= len(boxes(topo)) <= UNPAIRED_RAILS_BOXES
