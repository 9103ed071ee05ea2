"""Pass ``rings2d``: two-level rings, inside each box and along the network rails.

On multi-box machines whose boxes are joined by a network, a flat ring
crosses the network twice per box and a tree's reductions wait on each
other; a two-level (2D) schedule keeps every network byte to the minimum
and every step a fused ring step (``--algorithm rings2d``).  With ``B``
boxes of ``G`` ranks, rank ``(b, g)`` (``g``: its place in its box) and
``cf`` chunks per shard:

* the *box shard* ``g`` of a box is the chunks of the ranks ``(b', g)`` of
  every box (its rail);
* reduce-scatter: (1) inside every box, a ring reduce-scatter over the box
  shards, so ``(b, g)`` holds box ``b``'s partial of its rail's chunks; (2)
  along every rail, a ring reduce-scatter over those partials across the
  network, ending in the owner's output.  Phase (1) runs one ring pass per
  destination box, the other boxes' chunks first, so their network phase
  overlaps the pass for the box's own chunks (MI250 x2, 1 GiB, 32 chunks
  per shard, simulated: 137 -> 190 GB/s);
* reduce-scatter in the *crossing form* (``crossing_rings``: boxes of three
  ranks or more whose ring threadblocks stay within 64 steps; where
  ``min(R, cf)`` rings would not, 16 rings share the passes, two passes at
  once) sends every
  partial straight to its box and never makes the network wait
  (``_reduce_scatter_crossing``): the other boxes' chunks first, in groups
  of one chunk per ring so the network starts after the first group; each
  partial is reduced as it lands in scratch at its rail peer, with that
  rank's input and the partials landed before, and the sum joins its own
  box's chain one rank before the owner.  Lowered with network sends and
  receives on threadblocks of their own: ``R + 4`` threadblocks on two
  boxes, ``R + 2 (B-1)`` from three (DGX A100 x2, 32 chunks per shard, 20:
  188.1 GB/s at 128 MiB as LL128, 250.4 at 1 GiB as Simple, ForestColl's
  measured figures with 25; MI250 x2 224.1 at 1 GiB against RCCL's 163;
  MI250 x4, 16 chunks, 24: 163.6 against RCCL's rings as a file, 148.4;
  each pass's partials cross in the order of their rings' pace,
  ``ring_shares``, the next box's on two connections where the budget
  holds them, an allreduce's every box's, ``second_connections``); behind
  box switches from three boxes, where the boxes outpace their NICs, the
  *switched form* (``_reduce_scatter_switched``) starts the network sooner
  (part of the first pass's rings held back, ``Schedule.gates``) and ends
  it in the owners' outputs (DGX A100 x8 at 1 GiB, 32 threadblocks: 183.1
  GB/s against 177.0 for NCCL's rings as a file), and with two groups of
  chunks a pass its first chunks' chains run in two halves, the second
  backwards on a ring of its own (``split_chunks``, ``_split_pass``; DGX
  A100 x4, 32 chunks, 32 threadblocks: 217.1 against 180.3);
  an allreduce on two boxes (from ``CROSSING_GATHER_CHUNKS`` chunks per
  shard) follows it on the same threadblocks, the owners' results sent to
  their rail peers and the box rings handing round one chunk
  at a time (``_allgather_two``; MI250 x2 at 1 GiB 95.7 GB/s with 20
  against RCCL's tree 86.5); from three boxes, where both halves fit 64
  steps per ring, the crossing allgather follows from the owners' results
  (MI250 x8, 4 chunks per shard, 30 threadblocks: 58.9 GB/s at 1 GiB
  against rails' 29.2);
* allgather in the crossing form (from ``CROSSING_GATHER_CHUNKS`` chunks per
  shard or ``CROSSING_GATHER_TOTAL`` over all boxes, at most 64 steps per
  ring; ``_allgather_crossing``): every
  rank sends its shard to its rail peer in every other box at once, and the
  box rings hand round the own box's chunks, then the landed ones in the
  order they land, spread over the rings so the last ones go round together
  (MI250 x4, 16 chunks, 23 threadblocks: 171.6 GB/s at 1 GiB against RCCL's
  rings as a file, 146.6; MI250 x8, 8 chunks on 16 rings, 31: 142.7
  against rails' 83.5);
* where sends and receives over the network would not fit threadblocks of
  their own (from 16 boxes: 16 rings and 15 distances), the crossing form
  goes in stages over a grid of boxes (``box_grid``, ``grid``): the
  allgather sends, along each dimension in turn, a rank's own shard and
  those landed in the stages before to its rail peers along that dimension
  (``_allgather_grid``), the reduce-scatter the same backwards, each box
  forwarding its own box's partials with those landed for the same box
  (``_reduce_scatter_grid``), an allreduce the one after the other; every
  shard or partial still crosses once per box, on ``sum(d_i - 1)``
  connections per rank (4 x 4: 6; a reduce-scatter whose last stage
  forwards as it lands, ``_fuses_last``, sends that stage on the stage
  before's channel, one fewer).  DGX A100 at 1 GiB (simulated, at most
  32 threadblocks): x16 allgather 173.5 GB/s, reduce-scatter 170.3,
  allreduce 82.1 (rails: 162.3, 162.0, 76.5); x64 allgather 163.4, x128
  162.4 (rails: 138.9, 115.2); MI250 x16 allgather 141.2 (the one-stage
  crossing, its network threadblocks serving a send and a receive each,
  113.2); the allgather's box rings hand round the landed chunks in the
  order they land (``grid.landing_times``), chunks that land together on
  different rings; on a grid of 2s (x128) its last stage, half of the
  shards on one distance, crosses on two connections (``_two_last``);
* an allreduce whose grid form does not fit 64 steps per ring (DGX A100
  x128 with one chunk per shard) goes in *paired halves*
  (``paired_halves``, ``_allreduce_pairs``): each half of the boxes runs
  the grid's allreduce on its own, and between its reduce-scatter and its
  allgather every owner exchanges its half's sum with its rail peer in the
  partner box of the other half, so a chunk has two owners, the ring
  threadblocks half the steps, and the network traffic is the same.  At 1
  GiB (simulated, at most 32 threadblocks): DGX A100 x32 79.4 GB/s with 4
  chunks per shard (the grid over all boxes with 2: 72.5), x64 76.4 (67.7),
  x128 75.2 (rails 58.1); MI250 x16 54.1 (rails 37.5);
* where even those do not fit the budget, one threadblock per distance
  serves a send and a receive, and the crossings are listed so each box
  sends a chunk before it receives it (``_send_first``);
* allgather otherwise: (1) along every rail a ring allgather of the shards,
  (2) inside every box a ring allgather of the box shards;
* allreduce: reduce-scatter (into the output), then allgather.

The box rings are Hamiltonian cycles of the box: over direct links, ``R``
cycles chosen among all of them by a small MIP that minimises the largest
number of rings per unit of link width (``_packed_rings``); behind a box
switch, NCCL's spread rings (``nccl_rings`` on the box alone).  Chunk ``q``
of every shard travels on ring ``q mod R`` (the crossing form:
``_scatter_ring``, ``_gather_ring``).  In the crossing reduce-scatter's
form for Simple files (in one stage or over a grid) on boxes of direct
links a pass may run on any of the cycles (``simple_form``): every chain
for owner ``g`` that does not end at ``g`` ends at ``g``'s predecessor on
the own box's ring for the chunk (``_landing_places``), the landings of
every stage that a box forwards meet there, and a
pass whose ring reaches that place earlier joins the landed sum there
(MI250 x64 reduce-scatter at 1 GiB: 42.3 GB/s with every pass on one
cycle, 121.0 over all of them; x8 with 8 chunks 74.5 / 124.7 / 133.6 ->
77.7 / 131.6 / 140.5 at 16 MiB / 128 MiB / 1 GiB).  The lowering fuses each ring
step (``rrs``/``rcs``); the pipeline lowers it without lane balancing.  Each rank sends
``(G-1)/G`` of the buffer inside its box and ``(B-1)/(B G)`` over the
network per phase: the least network traffic of any schedule.

Input invariant: a validated ``Topology`` of at least two boxes of equal
size (``boxes``) in which rank ``(b, g)`` reaches ``(b', g)`` through the
network and every box has a Hamiltonian cycle over its own fabric.
Output invariant: a ``Schedule`` (deps inferred) that ``check_schedule``
proves for in-place and out-of-place, every transfer between ranks joined
through switches or links; scratch ``2 N cf`` chunks (reduce-scatter and
allreduce), ``B N cf`` in the crossing form.

Complexity: O(N * cf) ops per phase; ring search per box as in
``nccl_baseline`` (small boxes).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

from colc.compiler.lowering.infer_dependencies import infer_dependencies
from colc.compiler.rings.grid import (grid_dims, landing_order, landing_times, line_sends,
                                      shifted, stage_of, stage_sends)
from colc.compiler.rings.nccl_baseline import nccl_rings
from colc.errors import UnsupportedError
from colc.ir.chunks import Op, OpKind, Schedule, Slot
from colc.ir.core import Buffer, Collective, Protocol
from colc.ir.routing import Router
from colc.ir.topology import Topology, box_topology, boxes

NAME = "rings2d"
#: Rings inside each box (chunks of a shard are dealt to them in turn).
RINGS = 16
#: Network channels per rail peer of the crossing form on two boxes
#: (``_rail_channel``): one connection does not fill a NIC.
RAIL_CHANNELS = 2
#: Chunks per shard from which an allgather, and an allreduce on two boxes,
#: take the crossing form (``crossing_once``): with 8 the old form's extra
#: threadblocks win at 1M and 16M (MI250 x2 allreduce: 11.7 / 65.4 GB/s with
#: 24 against 7.4 / 56.3 with 13; allgather 20.3 / 110.4 with 32 against
#: 8.9 / 86.2 with 11), with 16 the crossing form at 128M and 1G (allreduce
#: 88.1 / 91.6 against 78.6 / 78.9).
CROSSING_GATHER_CHUNKS = 16
#: Chunks over all boxes from which an allgather takes the crossing form
#: with fewer than ``CROSSING_GATHER_CHUNKS`` per shard: on eight boxes 4
#: and 8 per shard (16 would need 120 steps per ring; MI250 x8: 16.2 / 91.0
#: GB/s at 1M / 16M with 4, 142.7 at 1 GiB with 8, 31 threadblocks, against
#: rails' 11.5 / 48.0 / 83.5), on four boxes 8 (on two the old form's 8).
CROSSING_GATHER_TOTAL = 32
#: Share of the first pass's chunks whose rings go first in the switched
#: reduce-scatter (``_reduce_scatter_switched``), the others starting when
#: these are one step from their ends: DGX A100 x8 at 1 GiB 183.1 GB/s with
#: 11/16 or 3/4, 182.8 with 5/8, 181.5 with 13/16, 179.3 with 3/8.
FIRST_PART = (11, 16)
#: Boxes from which the switched reduce-scatter sends its last two
#: crossings, not one, from the owner's place to the owner, after its own
#: box's pass (DGX A100 at 1 GiB: x8 182.0 -> 183.1 GB/s; x4 190.7 -> 162.4,
#: the own box's pass is not done when the first of them lands; x6 184.2 ->
#: 183.8).
TWO_TO_OWNER = 8
#: Steps a threadblock of the crossing form may take (the runtime's 64 per
#: threadblock): ``B G`` per group of chunks on a reduce-scatter ring.
MAX_RING_STEPS = 64
#: Channels of a file (the runtime's 32): rings, rail channels, the
#: allgather's local copies.
MAX_CHANNELS = 32
#: Steps from the ends of the first pass's chains at which the held passes
#: start in the grid's reduce-scatter (``_reduce_scatter_grid``): the first
#: alone crosses sooner.  DGX A100 x16 at 1 GiB, 8 chunks per shard: 168.0
#: GB/s with both at once, 168.7 with 1 step, 170.3 with 2, 170.1 with 3;
#: x64 (2 chunks, the last four of eight passes held): 163.5 with 4, 162.7
#: with 6, 164.0 with 2.
GRID_HELD = 2
#: In the switched reduce-scatter with two groups a pass
#: (``_reduce_scatter_switched``), a rank's first crossings of the last
#: distance start once it has sent this part of the distance before's: the
#: owner adds a last-distance landing onto its own box's sum, which waits for
#: the landings of the distance before, so a last-distance partial sent early
#: holds its connection (the receiver takes no credit) while that distance's
#: partials still cross.  DGX A100 x4, 32 chunks per shard (simulated):
#: 768 MiB 202.7 -> 206.5 GB/s, 1 GiB 209.2 -> 211.2, 2 GiB 213.8 -> 214.9;
#: 11/16 gave 209.8 at 1 GiB, 13/16 208.9; 512 MiB loses (196.9 -> 193.0), a
#: size rails serves.
LAST_HELD = (3, 4)
#: Passes of the grid's first stage at once (``R / cf``) from which an
#: allreduce holds back the second half of them (a reduce-scatter a
#: quarter, ``GRID_HELD_PART``), not only the second pass
#: (``_reduce_scatter_grid``).  Simulated at 1 GiB (twenty-fifth session):
#: DGX A100 x64 (paired halves, 2 chunks, 8 at once) 75.7 -> 76.4 GB/s (128
#: MiB 60.7 -> 61.2), x128 (1 chunk, 16) 74.3 -> 75.2, MI250 x32 (2 chunks)
#: 59.9 -> 60.9 (56.8 -> 57.5), MI250 x64 (1 chunk) 59.3 -> 59.1; with 4 at
#: once the half lost (x16 82.1 -> 81.9, x32 79.4 -> 79.1).
HALF_HELD_AT_ONCE = 8
#: A reduce-scatter holds back the last ``1 / GRID_HELD_PART`` of the first
#: stage's passes at once (``_reduce_scatter_grid``; an allreduce the second
#: half, ``HALF_HELD_AT_ONCE``): twelve of sixteen passes at once fill the
#: NIC sooner than eight.  Simulated at 1 GiB (twenty-eighth session), with
#: a half / a quarter held: DGX A100 x32 (4 chunks, 4 at once) 166.5 /
#: 166.8 GB/s, x64 (2 chunks, 8 at once) 164.1 / 164.5, x128 (1 chunk, 16
#: at once) 161.3 / 161.8; x16 (8 chunks, 2 at once) holds the second pass
#: either way.  Holding the last eighth lost at x128 (159.5).
GRID_HELD_PART = 4
#: Most chunks per shard of a fused last stage (``_fuses_last``): the
#: calls Simple's FIFO holds.
FUSED_LAST_CHUNKS = Protocol.SIMPLE.fifo_depth
#: The staged allgather hands its landed chunks round in the order they
#: land on rings this many apart: on boxes of direct links the packed
#: cycles repeat on neighbouring rings (MI250: rings 0-2 are one cycle), and
#: chunks landing one after another on them share links (MI250 x16 at 1 GiB:
#: 141.2 GB/s, 137.6 with stride 11 and 134.0 with 1; x32 136.6 against
#: 129.9; x64 134.5 against 128.0); behind a box switch 1 and 7 give the same.
GRID_RING_STRIDE = 7
#: Least chunks per shard with which an allreduce's crossing reduce-scatter
#: sends every box's partials on two connections (``second_connections``),
#: not only the next box's: with fewer, a distance's few partials do not keep
#: two connections busy.  Simulated, 128 MiB / 1 GiB: MI250 x4 with 8 chunks
#: on 16 rings 65.9 / 67.1 -> 70.1 / 71.7 GB/s, x3 62.3 / 68.3 -> 67.0 /
#: 74.6; MI250 x5 with 4 (32 threadblocks) 58.3 / 62.4 -> 57.1 / 62.4.
EVERY_BOX_TWICE_CHUNKS = 8
#: Chunks per shard when none are asked for.
DEFAULT_CHUNKS = 16
#: Chunks of the switched reduce-scatter's first pass whose chains run in
#: two halves, the second backwards on a ring of its own
#: (``split_chunks``, ``_split_pass``; with two groups of chunks a pass,
#: one threadblock each), ``1 / SPLIT_FREE_PART`` of the first group's
#: chunks whole beside them and the rest held until the halves have taken
#: ``SPLIT_HELD`` steps on the rank.  DGX A100 x4, 32 chunks per shard, 1
#: GiB (simulated): 211.2 GB/s without, 211.4 with 2 (30 threadblocks),
#: 214.3 with 3 (31), 217.1 with 4 (32; 512 MiB 193.0 -> 194.6, where 3
#: give 200.5); with 4, 2 free chunks gave 211.8, 3 214.7, 5 216.5; held
#: from the third step 216.4, from the first 215.6.
SPLIT_CHUNKS = 4
SPLIT_FREE_PART = 4
SPLIT_HELD = 2
#: The crossing reduce-scatter's split chunks (``split_chunks``): MI250 x4,
#: 16 chunks per shard, 1 GiB / 128 MiB (simulated): 163.6 / 144.3 GB/s
#: without (24 threadblocks), 170.7 / 159.1 with 2 (26); with the forward
#: halves listed first, 170.7 / 155.5 with 2, 169.7 / 148.8 with 3, 168.3
#: / 152.7 with 4, and beside 2 split ones 4 whole chunks gave the 170.7, 2
#: gave 166.9, 8 169.6.  Splitting the chunks whose rings share their
#: links least instead (``ring_shares``) lost (166.4).
CROSSING_SPLIT_CHUNKS = 2
#: Fewest split chunks a reduce-scatter takes (``split_chunks``):
#: one alone lost (DGX A100 x4 at 1 GiB, 29 threadblocks: 210.6 GB/s
#: against 211.2 without); two gain at every size from 128 MiB (116.8 ->
#: 128.0 GB/s there, 30 threadblocks), three from 256 MiB.
SPLIT_LEAST = 2
#: The grid's reduce-scatter (an allreduce's first half) splits
#: ``SPLIT_LEAST`` chunks of its first pass (``split_chunks``) where the pass
#: has at least this many, the last ``1 / GRID_SPLIT_HELD_PART`` of them held
#: until the halves have taken ``SPLIT_HELD`` steps and the rest whole
#: beside them; the held passes then wait for the whole chunks' chains
#: (``_reduce_scatter_grid``).  Simulated, 128 MiB / 1 GiB, 32 threadblocks:
#: DGX A100 x16 allreduce (4 chunks) 67.9 / 82.1 -> 71.4 / 83.2 GB/s (the
#: held passes waiting for the held chunk instead, 66.6 / 82.1; no chunk
#: held, 67.6 / 82.0), reduce-scatter (8 chunks) 114.8 / 172.1 -> 117.7 /
#: 173.7 (two held; one, 117.5 / 173.6; none, 123.1 / 172.1; six, 115.8 /
#: 170.1), MI250 x16 reduce-scatter (4 chunks) 124.0 / 133.2 -> 129.0 /
#: 138.2; DGX A100 x64 with 2 chunks, both split, 111.2 / 164.5 -> 120.0 /
#: 163.7, so not there.
GRID_SPLIT_CHUNKS = 4
GRID_SPLIT_HELD_PART = 4

IN, OUT, SCR = Buffer.INPUT, Buffer.OUTPUT, Buffer.SCRATCH


class _Ops:
    def __init__(self) -> None:
        self.ops: list[Op] = []
        self.gates: list[int] = []  # ``Schedule.gates``

    def add(self, kind: OpKind, src: Slot, dst: Slot, channel: int,
            operand: Slot | None = None, gate: int = -1) -> None:
        self.ops.append(Op(len(self.ops), kind, src, dst, 1, operand, (), channel))
        self.gates.append(gate)


#: Most Hamiltonian cycles of a box enumerated for the ring packing.
MAX_CYCLES = 4000


def _cycles(n: int, width: dict[tuple[int, int], float]) -> list[tuple[int, ...]]:
    """Directed Hamiltonian cycles from place 0 over the box's direct links (capped)."""
    succ = {u: sorted(v for (a, v) in width if a == u) for u in range(n)}
    found: list[tuple[int, ...]] = []
    path, seen = [0], {0}

    def extend() -> None:
        if len(found) >= MAX_CYCLES:
            return
        u = path[-1]
        if len(path) == n:
            if (u, 0) in width:
                found.append(tuple(path))
            return
        for v in succ[u]:
            if v not in seen:
                path.append(v)
                seen.add(v)
                extend()
                seen.discard(path.pop())

    extend()
    return found


def _packed_rings(n: int, width: dict[tuple[int, int], float], rings: int
                  ) -> list[list[int]] | None:
    """``rings`` Hamiltonian cycles (repeats allowed) minimising the largest
    rings-per-unit-width over the links (a small MIP solved with HiGHS), or
    None when the box has no cycle over its direct links."""
    import highspy
    import numpy as np

    from colc.compiler.highs_solver import new_highs

    cycles = _cycles(n, width)
    if not cycles:
        return None
    links = sorted(width)
    index = {e: i for i, e in enumerate(links)}
    h = new_highs()
    h.setOptionValue("time_limit", 10.0)
    m = len(cycles)
    inf = highspy.kHighsInf
    h.addVars(m + 1, np.zeros(m + 1), np.full(m + 1, inf))
    h.changeColsCost(m + 1, np.arange(m + 1, dtype=np.int32),
                     np.concatenate((np.zeros(m), [1.0])))
    h.changeColsIntegrality(m, np.arange(m, dtype=np.int32),
                            np.full(m, highspy.HighsVarType.kInteger))
    h.addRow(rings, rings, m, np.arange(m, dtype=np.int32), np.ones(m))
    uses: list[list[int]] = [[] for _ in links]
    for c, cyc in enumerate(cycles):
        for a, b in zip(cyc, cyc[1:] + cyc[:1], strict=True):
            uses[index[(a, b)]].append(c)
    for e, cols in enumerate(uses):
        if cols:  # sum of the cycles through e <= z * width(e)
            idx = np.array([*cols, m], dtype=np.int32)
            val = np.array([1.0] * len(cols) + [-float(width[links[e]])])
            h.addRow(-inf, 0.0, len(idx), idx, val)
    h.run()
    x = np.asarray(h.getSolution().col_value)
    picked: list[list[int]] = []
    for c in range(m):
        picked += [list(cycles[c])] * int(round(x[c]))
    return picked if len(picked) == rings else None


def _link_widths(topo: Topology, members: list[int]) -> dict[tuple[int, int], float] | None:
    """Width (GB/s) of each direct link between two places of the box, or
    None when the box has a switch inside."""
    place = {r: i for i, r in enumerate(members)}
    box = box_topology(topo, members)
    if not all(nd.is_compute for nd in box.nodes):
        return None
    width: dict[tuple[int, int], float] = {}
    for lk in box.links:
        e = (place[topo.rank_of[lk.src]], place[topo.rank_of[lk.dst]])
        width[e] = width.get(e, 0.0) + float(lk.bandwidth)
    return width


def _box_rings(topo: Topology, members: list[int], rings: int) -> list[list[int]]:
    """Rings of one box as orders of places: packed over the direct links when
    the box has no internal switch, else NCCL's spread rings."""
    place = {r: i for i, r in enumerate(members)}
    width = _link_widths(topo, members)
    if width is not None:
        packed = _packed_rings(len(members), width, rings)
        if packed is not None:
            return packed
    box = box_topology(topo, members)
    local = [topo.rank_of[i] for i in box.ranks]
    try:
        found = nccl_rings(box, rings)
    except UnsupportedError as err:
        raise UnsupportedError(f"two-level rings: {err}") from None
    return [[place[local[r]] for r in ring.order] for ring in found]


def ring_shares(topo: Topology, members: list[int], orders: list[list[int]]) -> list[float]:
    """Each ring's share of its most shared link (GB/s): the width of the link
    over the rings that use it, the least along the ring; 1.0 for every ring
    behind a box switch, or where a ring steps between places that no direct
    link joins.  A ring runs at about this pace, so in the crossing
    reduce-scatter the partials of the rings with the largest share are ready
    first (MI250: one of 16 rings has no link it shares three ways).

    Parameters
    ----------
    topo : Topology
    members : list of int
        The box's ranks, place by place.
    orders : list of list of int
        The box's rings as orders of places.

    Returns
    -------
    list of float
        One share per ring, in the order of ``orders``.

    Examples
    --------
    >>> from colc.frontends.families import mi250
    >>> t = mi250(2)
    >>> g = boxes(t)[0]
    >>> ring_shares(t, g, [[0, 1, 5, 4, 6, 7, 3, 2, 10, 11, 15, 14, 12, 13, 9, 8]] * 2)
    [25.0, 25.0]
    >>> ring_shares(t, g, [list(range(16))])  # places 1 and 2 share no link
    [1.0]
    """
    width = _link_widths(topo, members)
    edges = [list(zip(o, o[1:] + o[:1], strict=True)) for o in orders]
    if width is None or any(e not in width for ring in edges for e in ring):
        return [1.0] * len(orders)
    uses: dict[tuple[int, int], int] = {}
    for ring in edges:
        for e in ring:
            uses[e] = uses.get(e, 0) + 1
    return [min(width[e] / uses[e] for e in ring) for ring in edges]


def _layout(topo: Topology, rings: int,
            crossing: bool = False) -> tuple[list[list[int]], list[list[list[int]]]]:
    """Boxes (rank lists) and, per box, its rings as local orders (places
    0..G-1); at most ``32 // B`` rings unless ``crossing`` (a channel per
    (ring, box) in the allgather's box phase)."""
    groups = boxes(topo)
    if len(groups) < 2:
        raise UnsupportedError("two-level rings need at least two boxes; use ring")
    if not crossing:
        rings = max(1, min(rings, 32 // len(groups)))  # a channel per (ring, box)
    size = len(groups[0])
    if any(len(g) != size for g in groups):
        raise UnsupportedError("two-level rings need boxes of equal size")
    router = Router(topo)
    for g in range(size):
        for a in groups:
            for b in groups:
                if a is not b and b[g] not in router.switch_paths(a[g]):
                    raise UnsupportedError(
                        f"rank {topo.ranks[a[g]]} does not reach its rail peer "
                        f"{topo.ranks[b[g]]} through the network")
    found: dict[tuple, list[list[int]]] = {}  # boxes alike get alike rings
    orders = []
    for members in groups:
        key = _box_shape(topo, members)
        if key not in found:
            found[key] = [[0]] * rings if size == 1 else _box_rings(topo, members, rings)
        orders.append([list(o) for o in found[key]])
    return groups, orders


def _box_shape(topo: Topology, members: list[int]) -> tuple:
    """What ``_box_rings`` reads of one box, its node names replaced by their
    place in the box's node list (and their rank in name order, which breaks
    ties): boxes of one shape get the same rings as orders of places, so
    they are found once (DGX A100 x128: 18 s of 128 boxes' ring searches)."""
    box = box_topology(topo, members)
    index = {nd.id: i for i, nd in enumerate(box.nodes)}
    by_name = {name: k for k, name in enumerate(sorted(index))}
    place = {topo.ranks[r]: p for p, r in enumerate(members)}
    nodes = tuple((by_name[nd.id], nd.kind, nd.multicast, nd.net, place.get(nd.id))
                  for nd in box.nodes)
    links = tuple((index[lk.src], index[lk.dst], lk.bandwidth, lk.latency)
                  for lk in box.links)
    return nodes, links


def rings2d_schedule(topo: Topology, collective: Collective,
                     chunks: int | None = None, simple: bool = False,
                     budget: int = 0) -> Schedule:
    """Two-level ring schedule of ``collective`` (see module docstring).

    Parameters
    ----------
    topo : Topology
    collective : Collective
    chunks : int or None
        Chunks per shard (default ``DEFAULT_CHUNKS``); chunk ``q`` of each
        shard travels on box ring ``q mod RINGS`` (in the crossing
        allgather, a landed chunk on a ring further on).
    simple : bool
        The form for Simple files (``simple_form``): the first pass's
        split chains (``split_chunks``) and, on boxes of direct links, the
        crossing reduce-scatter's passes over all the box's cycles.
    budget : int
        Threadblocks per rank the file may take (0: no limit); it counts
        only where it takes the grid allgather's second last-stage
        connection, the crossing reduce-scatter's second one to the next
        box away or its split chains (``narrowed``).

    Returns
    -------
    Schedule

    Raises
    ------
    UnsupportedError
        One box, boxes of different sizes, a rank that does not reach its
        rail peers, or a box without a Hamiltonian cycle.
    """
    cf = chunks or DEFAULT_CHUNKS
    if cf < 1:
        raise UnsupportedError("chunks must be at least 1")
    rings = crossing_rings(boxes(topo), collective, cf)
    crossing = rings > 0
    # a chunk's partials land at one place in every pass: a reduce-scatter's
    # ring sets repeat one set of cycles, so each pass's chains end next to
    # the owner, but in the form for Simple files on boxes of direct links
    # (``simple_form``), whose passes take all the box's cycles and end
    # where the own box's ring for the chunk puts them (``_landing_places``)
    cycles = rings if collective is Collective.ALLGATHER else min(rings, cf)
    spread = simple and _spread_form(topo, collective, cf)
    if spread:
        cycles = rings
    groups, orders = _layout(topo, cycles or min(RINGS, cf), crossing)
    if crossing and cycles < rings:
        orders = [o * (rings // cycles) for o in orders]
    if crossing and any(o != orders[0] for o in orders):  # boxes ring unlike
        crossing = False
        groups, orders = _layout(topo, min(RINGS, cf))
    n, nb = topo.num_ranks, len(groups)
    out = _Ops()
    grid = box_grid(nb, rings, collective) if crossing else (nb,)
    if crossing and paired_halves(groups, collective, cf):
        nchunks, scratch = _allreduce_pairs(out, groups, orders, cf, n, pair_grid(nb, rings))
        return _schedule(out, collective, n, nchunks, scratch)
    if collective is not Collective.ALLGATHER:
        if len(grid) > 1:
            _reduce_scatter_grid(out, groups, orders, cf, n, grid,
                                 collective is Collective.REDUCESCATTER,
                                 split=split_chunks(topo, groups, collective, cf, budget)
                                 if simple else 0)
        elif crossing and switched_form(topo, groups, collective, cf, len(orders[0])):
            _reduce_scatter_switched(out, groups, orders, cf, n,
                                     split_chunks(topo, groups, collective, cf, budget)
                                     if simple else 0)
        elif crossing:
            _reduce_scatter_crossing(out, groups, orders, cf, n, collective,
                                     ring_shares(topo, groups[0], orders[0]), spread,
                                     second_connections(topo, groups, collective, cf, budget),
                                     split_chunks(topo, groups, collective, cf, budget)
                                     if simple else 0)
        else:
            _reduce_scatter(out, groups, orders, cf, n, collective)
    if crossing and collective is Collective.ALLREDUCE and nb == 2:
        _allgather_two(out, groups, orders, cf)
    elif len(grid) > 1 and collective is not Collective.REDUCESCATTER:
        _allgather_grid(out, groups, orders, cf, grid,
                        reduced=collective is Collective.ALLREDUCE,
                        second=not narrowed(topo, groups, collective, cf, budget))
    elif crossing and collective is not Collective.REDUCESCATTER:
        _allgather_crossing(out, groups, orders, cf,
                            reduced=collective is Collective.ALLREDUCE)
    elif collective is not Collective.REDUCESCATTER:
        _allgather(out, groups, orders, cf, collective)
    scratch = (0 if collective is Collective.ALLGATHER
               else (nb if crossing else 2) * n * cf)
    return _schedule(out, collective, n, n * cf, scratch)


def _schedule(out: _Ops, collective: Collective, n: int, nchunks: int,
              scratch: int) -> Schedule:
    """The ``Schedule`` of ``out``'s ops (gates kept where any op has one),
    dependencies inferred."""
    gates = tuple(out.gates) if any(g >= 0 for g in out.gates) else ()
    return infer_dependencies(Schedule(collective, n, nchunks, scratch, tuple(out.ops),
                                       algorithm=NAME, gates=gates))


def simple_form(topo: Topology, collective: Collective, chunks: int | None) -> bool:
    """Whether ``rings2d_schedule``'s form for Simple files differs here from
    the others': where its first pass splits chains (``split_chunks``; the
    LL files lose, MI250 x4 reduce-scatter, 16 chunks, 1 / 4 MiB: 15.8 /
    26.5 -> 15.6 / 25.3 GB/s), or where the passes spread over the box's
    cycles (``_spread_form``).

    >>> from colc.frontends.families import dgx_a100, mi250
    >>> [simple_form(mi250(n), Collective.REDUCESCATTER, c) for n, c in ((2, 32), (4, 16), (8, 8))]
    [True, True, True]
    >>> [simple_form(dgx_a100(4), Collective.REDUCESCATTER, c) for c in (32, 16)]
    [True, False]
    """
    cf = chunks or DEFAULT_CHUNKS
    groups = boxes(topo)
    if len({len(g) for g in groups}) != 1:
        return False
    return _spread_form(topo, collective, cf) or split_chunks(topo, groups, collective, cf) > 0


def _spread_form(topo: Topology, collective: Collective, chunks: int | None) -> bool:
    """Whether the form for Simple files spreads the passes over the box's
    cycles: a crossing reduce-scatter (or allreduce) on boxes of direct
    links with fewer chunks per shard than rings, whose passes then take
    all the box's cycles (``_landing_places``) instead of repeating one set
    of ``cf``.  The Simple files gain from 16 MiB (MI250 x64 reduce-scatter
    at 1 GiB 42.3 -> 121.0 GB/s, x8 74.5 / 124.7 / 133.6 -> 77.7 / 131.6 /
    140.5 at 16 MiB / 128 MiB / 1 GiB); the LL files at 1 MiB lose (x32
    reduce-scatter 11.9 -> 10.3, x16 12.9 -> 12.6): a chain that joins a
    landed sum before its end waits for it sooner, and at 1 MiB the
    latency is all.  The pipeline builds a separate schedule for its Simple
    files only then (``Compiler._simple_form``).

    >>> from colc.frontends.families import dgx_a100, mi250
    >>> [_spread_form(mi250(n), Collective.REDUCESCATTER, c) for n, c in ((4, 16), (8, 8), (64, 1))]
    [False, True, True]
    >>> (_spread_form(mi250(8), Collective.ALLGATHER, 8),
    ...  _spread_form(dgx_a100(16), Collective.ALLREDUCE, 4))
    (False, False)
    """
    cf = chunks or DEFAULT_CHUNKS
    groups = boxes(topo)
    if collective is Collective.ALLGATHER or len({len(g) for g in groups}) != 1:
        return False
    rings = crossing_rings(groups, collective, cf)
    return 0 < cf < rings and _link_widths(topo, groups[0]) is not None


def _channel(q: int, box: int, rings: int) -> int:
    """Channel of chunk ``q`` of box ``box``'s shard on a box ring: every
    (ring, box) pair gets its own, so a ring step moves one message per
    connection (``B`` messages on one connection would fill a FIFO of depth
    2 before any ring step could forward, and every ring would wait)."""
    return (q % rings + rings * box) % 32


def crossing_once(groups: list[list[int]], collective: Collective, chunks: int) -> bool:
    """Whether ``collective`` takes the crossing form (``crossing_rings``).

    >>> g2, g4 = [[0, 1, 2], [3, 4, 5]], [[4 * b + i for i in range(4)] for b in range(4)]
    >>> [crossing_once(g2, Collective.ALLREDUCE, c) for c in (8, 16, 32)]
    [False, True, False]
    >>> [crossing_once(g4, Collective.REDUCESCATTER, c) for c in (16, 32, 80)]
    [True, True, False]
    >>> [crossing_once(g4, c, 16) for c in (Collective.ALLGATHER, Collective.ALLREDUCE)]
    [True, True]
    >>> crossing_once(g4, Collective.ALLREDUCE, 32)  # two groups per pass
    False
    """
    return crossing_rings(groups, collective, chunks) > 0


def crossing_rings(groups: list[list[int]], collective: Collective, chunks: int) -> int:
    """Rings of the crossing form of ``collective`` on boxes that ring their
    places alike, or 0 where it is not taken: boxes of at least three ranks,
    one group of chunks per pass (a reduce-scatter may take more), every
    ring threadblock within ``MAX_RING_STEPS`` and every channel below 32.

    * reduce-scatter (``_reduce_scatter_crossing``): groups of one chunk
      per ring, as many a pass as the ring threadblocks' steps hold (DGX
      A100 x4 takes two with 32 chunks per shard, in the switched form);
    * allgather (``_allgather_crossing``): from ``CROSSING_GATHER_CHUNKS``
      chunks per shard, or ``CROSSING_GATHER_TOTAL`` over all boxes (with
      fewer, the old form's extra threadblocks win at 1M and 16M);
    * allreduce: on two boxes the reduce-scatter, then ``_allgather_two``,
      from ``CROSSING_GATHER_CHUNKS`` chunks per shard; from three boxes the
      reduce-scatter, then the crossing allgather from the owners' results,
      where both halves fit one ring threadblock's 64 steps.

    ``min(RINGS, chunks)`` rings where their steps fit, else ``RINGS``
    sharing the passes (``_scatter_ring``, ``_gather_ring``): MI250 x8, 8
    chunks per shard, takes 16 rings of 4 passes each (8 rings would take
    8 passes of 15 or 16 steps).  Network sends and receives land on
    threadblocks of their own (the pipeline lowers the form unpaired first;
    where those do not fit the budget, a threadblock per distance serves
    both, in the order ``_send_first`` lists them).  Where a pair per
    distance to every other box would not fit 32 beside the rings, the
    form crosses over a grid of boxes (``box_grid``): a channel per grid
    dimension and distance.

    Parameters
    ----------
    groups : list of list of int
        The boxes' ranks (``boxes``), place by place.
    collective : Collective
    chunks : int
        Chunks per shard.

    Returns
    -------
    int
        Rings of the crossing form, 0 where the old form is built.

    Examples
    --------
    >>> g8 = [[16 * b + i for i in range(16)] for b in range(8)]
    >>> [crossing_rings(g8, c, 8) for c in (Collective.ALLGATHER, Collective.REDUCESCATTER)]
    [16, 16]
    >>> crossing_rings(g8, Collective.ALLGATHER, 16)
    0
    """
    nb = len(groups)
    if nb < 2 or len(groups[0]) < 3:
        return 0
    for rings in sorted({min(RINGS, chunks), RINGS}):
        if _whole_fit(collective, nb, len(groups[0]), chunks, rings):
            return rings
        if collective is Collective.ALLREDUCE and _pairs_fit(nb, len(groups[0]), chunks, rings):
            return rings
    return 0


def paired_halves(groups: list[list[int]], collective: Collective, chunks: int) -> bool:
    """Whether ``collective`` takes the crossing form in paired halves
    (``_allreduce_pairs``): an allreduce whose grid form does not fit 64
    steps per ring, where each half's does.

    >>> g = [[8 * b + i for i in range(8)] for b in range(128)]
    >>> [paired_halves(g, Collective.ALLREDUCE, c) for c in (1, 2)]
    [True, False]
    """
    nb, size = len(groups), len(groups[0])
    if collective is not Collective.ALLREDUCE or nb < 2 or size < 3:
        return False
    rings = crossing_rings(groups, collective, chunks)
    return bool(rings) and not _whole_fit(collective, nb, size, chunks, rings)


def _whole_fit(collective: Collective, nb: int, size: int, cf: int, rings: int) -> bool:
    """Whether the crossing form over all ``nb`` boxes fits ``rings`` rings:
    its passes within 64 steps per ring (``_crossing_fit``), its channels
    (and an allgather's local copies') within ``MAX_CHANNELS``."""
    local = 1 if collective is Collective.ALLGATHER else 0  # its own shard's copies
    return (_crossing_fit(collective, nb, size, cf, rings)
            and rings + _network_channels(nb, rings, collective) + local <= MAX_CHANNELS)


def pair_grid(nb: int, rings: int) -> tuple[int, ...]:
    """Grid of each half of ``nb`` boxes in the paired allreduce, whose
    network threadblocks (a send and a receive per distance) and the
    exchange's two fit ``MAX_CHANNELS`` beside the rings: ``grid_dims``'
    (the fewest dimensions, then distances).  Measured (simulated,
    Simple), 16 / 128 MiB / 1 GiB: MI250 x16 (halves of 8 boxes, 4 chunks
    per shard) one stage 43.3 / 52.8 / 54.1 GB/s against 2 x 4 34.4 / 54.8
    / 57.3 (and 2 x 2 x 2 54.0 at 1 GiB); DGX A100 x16 (8 chunks) one
    stage 78.6 at 1 GiB against 2 x 4 81.8 (the grid over all the boxes
    with 4 chunks, 82.1, is the file there); DGX A100 x32 (4 chunks) 4 x 4
    79.4 at 1 GiB against 2 x 2 x 4 77.9 and 2^4 72.3, MI250 x32 4 x 4
    36.3 against 2^4 34.6; DGX A100 x64 (2 chunks) 2 x 4 x 4 60.7 / 75.7
    at 128 MiB / 1 GiB against 2^5 54.8 (rails) / 72.5; x128 (1 chunk,
    ranked from 1 GiB only) 2 x 2 x 2 x 2 x 4 74.3 against 2^6 70.0.
    Until the twenty-fourth session the halves of 64 boxes took 2^6 (one
    connection per stage), which led while the allgather's chunks landing
    together went round on one ring (2 x 2 x 2 x 2 x 4: 67.2; x64 2 x 4 x 4
    71.8 then).

    >>> pair_grid(16, 16), pair_grid(32, 16), pair_grid(64, 16), pair_grid(128, 16)
    ((8,), (4, 4), (2, 4, 4), (2, 2, 2, 2, 4))
    """
    return grid_dims(nb // 2, rings + 2, MAX_CHANNELS)


def _pairs_fit(nb: int, size: int, cf: int, rings: int) -> bool:
    """Whether the paired allreduce fits ``rings`` rings: a grid form on
    16 boxes or more, each half's passes within 64 steps per ring, its
    network threadblocks and the exchange's within ``MAX_CHANNELS``."""
    if nb % 2 or len(box_grid(nb, rings, Collective.ALLREDUCE)) < 2:
        return False
    links = sum(d - 1 for d in pair_grid(nb, rings))
    return (_crossing_fit(Collective.ALLREDUCE, nb // 2, size, cf, rings)
            and rings + 2 * links + 2 <= MAX_CHANNELS)


def crossing_threadblocks(groups: list[list[int]], collective: Collective, chunks: int) -> int:
    """Least threadblocks per rank of the crossing form (``crossing_rings``),
    or 0 where it is not taken: its rings, a threadblock per network
    distance serving a send and a receive, and the allgather's local copies.

    >>> g = [[8 * b + i for i in range(8)] for b in range(16)]
    >>> [crossing_threadblocks(g, c, 2) for c in (Collective.ALLGATHER, Collective.REDUCESCATTER)]
    [23, 23]
    """
    rings = crossing_rings(groups, collective, chunks)
    if not rings:
        return 0
    nb = len(groups)
    if paired_halves(groups, collective, chunks):
        return rings + sum(d - 1 for d in pair_grid(nb, rings)) + 1
    grid = box_grid(nb, rings, collective)
    spare = len(grid) > 1 and collective is not Collective.ALLGATHER and _grid_spare(rings, grid)
    gather = collective is Collective.ALLGATHER
    return rings + _network_channels(nb, rings, collective) + spare + gather + (
        gather and _two_last(grid))


def _network_channels(nb: int, rings: int, collective: Collective) -> int:
    """Network channels of the crossing form: one per grid dimension and
    distance (``box_grid``), else one per distance (two on two boxes)."""
    grid = box_grid(nb, rings, collective)
    return sum(d - 1 for d in grid) if len(grid) > 1 else max(RAIL_CHANNELS, nb - 1)


def box_grid(nb: int, rings: int, collective: Collective) -> tuple[int, ...]:
    """Grid of the crossing allgather or reduce-scatter on ``nb`` boxes with
    ``rings`` rings (``grid.grid_dims``): its network threadblocks, a send
    and a receive per distance, fit ``MAX_CHANNELS`` beside the rings (and
    the allgather's local copies); one dimension (every box at once) where
    that fits or no grid does.  An allreduce's halves share its channels.

    >>> g, r = Collective.ALLGATHER, Collective.REDUCESCATTER
    >>> box_grid(8, 16, g), box_grid(16, 16, g), box_grid(16, 8, r), box_grid(32, 16, r)
    ((8,), (4, 4), (4, 4), (2, 4, 4))
    >>> box_grid(16, 16, Collective.ALLREDUCE)
    (4, 4)
    """
    return grid_dims(nb, rings + (collective is Collective.ALLGATHER), MAX_CHANNELS)


def _crossing_fit(collective: Collective, nb: int, size: int, cf: int, rings: int) -> bool:
    """Whether the crossing form of ``collective`` fits ``rings`` rings
    (``crossing_rings``)."""
    one_group = cf <= rings
    repeats = rings % min(rings, cf) == 0  # a reduce-scatter's ring sets repeat its cycles
    if collective is Collective.REDUCESCATTER:
        scatter = _ring_loads(nb, cf, rings, _scatter_ring)
        return repeats and max(scatter) * size <= MAX_RING_STEPS
    if collective is Collective.ALLGATHER:
        gather = _ring_loads(nb, cf, rings, _gather_ring)
        return (one_group and max(gather) * (size - 1) <= MAX_RING_STEPS
                and (cf >= CROSSING_GATHER_CHUNKS or nb * cf >= CROSSING_GATHER_TOTAL))
    if collective is not Collective.ALLREDUCE:
        return False
    if nb == 2:
        return one_group and cf >= CROSSING_GATHER_CHUNKS
    steps = max(s * size + g * (size - 1) for s, g in
                zip(_ring_loads(nb, cf, rings, _scatter_ring),
                    _ring_loads(nb, cf, rings, _gather_ring), strict=True))
    return one_group and repeats and steps <= MAX_RING_STEPS


def _scatter_ring(q: int, k: int, cf: int, rings: int, nb: int) -> int:
    """Ring of chunk ``q`` of the box ``k`` further in the crossing
    reduce-scatter: ``q mod R`` when ``R`` divides ``cf``; with more rings than
    chunks, the passes take turns on the ring sets, so two passes run at
    once and each ring takes ``B cf / R`` of them."""
    return (q + k * cf) % rings


def _gather_ring(q: int, k: int, cf: int, rings: int, nb: int) -> int:
    """Ring of chunk ``q`` of the box ``k`` further in the crossing
    allgather: ``(q + k R / B) mod R``, so the chunks that land last go
    round on different rings together."""
    return (q + k * max(1, rings // nb)) % rings


def _ring_loads(nb: int, cf: int, rings: int, ring_of: Callable[..., int]) -> list[int]:
    """Passes per ring (one chunk of one box each) under ``ring_of``."""
    loads = [0] * rings
    for k in range(nb):
        for q in range(cf):
            loads[ring_of(q, k, cf, rings, nb)] += 1
    return loads


def _reduce_scatter(out: _Ops, groups: list[list[int]], orders: list[list[list[int]]],
                    cf: int, n: int, coll: Collective) -> None:
    """Box rings, then rail rings; partials in scratch ``[0, n cf)`` (box phase)
    and ``[n cf, 2 n cf)`` (rail phase)."""
    size, nb = len(groups[0]), len(groups)

    def rail_chunk(box: int, g: int, q: int) -> int:
        return groups[box][g] * cf + q

    def box_partial(rank: int, c: int) -> Slot:
        return Slot(rank, IN, c) if size == 1 else Slot(rank, SCR, c)

    # One ring pass per destination box, the other boxes' chunks first (their
    # network phase then overlaps the pass for the box's own chunks); passes
    # follow each other on the same channels, one message per ring step.
    for k in range(nb):
        for t in range(size - 1):
            for b, members in enumerate(groups):
                b2 = (b + 1 + k) % nb
                for q in range(cf):
                    order = orders[b][q % len(orders[b])]
                    for p in range(size):
                        owner = order[(p - t - 1) % size]
                        sender, receiver = members[order[p]], members[order[(p + 1) % size]]
                        c = rail_chunk(b2, owner, q)
                        src = Slot(sender, IN, c) if t == 0 else Slot(sender, SCR, c)
                        out.add(OpKind.REDUCE, src, Slot(receiver, SCR, c),
                                q % len(orders[b]), Slot(receiver, IN, c))
    for t in range(nb - 1):
        for g in range(size):
            rail = [members[g] for members in groups]
            for q in range(cf):
                for p in range(nb):
                    owner = (p - t - 1) % nb
                    sender, receiver = rail[p], rail[(p + 1) % nb]
                    c = rail_chunk(owner, g, q)
                    src = box_partial(sender, c) if t == 0 else Slot(sender, SCR, n * cf + c)
                    if receiver == rail[owner]:
                        dst = Slot(receiver, OUT, q if coll is Collective.REDUCESCATTER else c)
                    else:
                        dst = Slot(receiver, SCR, n * cf + c)
                    out.add(OpKind.REDUCE, src, dst, q % RINGS, box_partial(receiver, c))


def _reduce_scatter_crossing(out: _Ops, groups: list[list[int]],
                             orders: list[list[list[int]]], cf: int, n: int,
                             coll: Collective, shares: list[float], spread: bool = False,
                             two: int = 0, split: int = 0) -> None:
    """Reduce-scatter in which every partial crosses the network once, and no
    receive waits for the receiver's rings (``crossing_once``).

    The box rings reduce the other boxes' chunks first, nearest box first, in
    groups of one chunk per ring (chunks ``[i R, (i+1) R)``), so the network
    starts after the first group rather than after a whole pass.  The chain
    of box ``d``'s chunk for place ``g`` ends at ``g``'s predecessor ``h`` on
    that ring; ``h`` sends the partial to its rail peer, ``h`` of box ``d``
    (``_rail_channel``), whose landing receive adds it to its input and the
    partials landed before and writes the sum to scratch region ``k`` (the
    boxes between them, ``[k n cf, (k+1) n cf)``).  In the pass over its own
    box's chunks ``h`` reduces with that sum instead of its input, and the
    owner, last on the chain, writes the result to its output: no sum waits
    after the box rings, and a landing receive never waits for the
    receiver's rings (only for the same chunk's earlier landing), so the
    NIC is never held up by a full FIFO.  DGX A100 x2 at 1 GiB, 32 chunks
    per shard, 20 threadblocks (simulated): 250.4 GB/s (247.2 with 21 when a
    local threadblock summed each landed copy); the per-pass order, which
    reduces an arriving partial into the receiver's box result on arrival,
    gave 148.3 with 12 chunks and 24 threadblocks (the receiver waited for
    its own rings, and the sender's FIFO filled).  MI250 x4 (one group per
    pass: 64 steps), 16 chunks, 22 threadblocks: 162.9 at 1 GiB against
    148.4 for RCCL's rings as a file; 163.6 with 24, the next box's
    partials on two connections (``two`` = 1, ``next_box_twice``; an
    allreduce's, every box's where the budget holds them,
    ``second_connections``); 170.7 with 26, the first pass's first
    ``split`` chunks' chains in two halves (``split_chunks``,
    ``_split_pass``), a quarter of the group's chunks beside them and the
    rest held until the halves have taken ``SPLIT_HELD`` steps.
    Each pass's partials cross in the order of their rings' share of their
    most shared link (``ring_shares``, largest first): on an MI250 box 15 of
    16 rings share a single xGMI link three ways and one does not, so its
    partial is ready about 0.35 ms sooner, and sent first it starts the NIC
    at 0.73 ms of the call instead of 1.12 (MI250 x4 at 1 GiB: 160.0 -> 162.9
    GB/s, 140.9 -> 145.3 at 128 MiB; MI250 x2 219.4 -> 224.1).  Behind a box
    switch every ring's share is the same and the order stays ``q``.
    With more rings than chunks (``crossing_rings``) chunk ``q`` of the box
    ``k`` further goes on ring ``_scatter_ring``: the passes alternate
    between ring sets, and a chunk's partials land where the own box's ring
    for it puts them (``_landing_places``; the ring sets repeat one set of
    cycles, so that is next to the owner in every pass, but with
    ``spread``, the form for Simple files on boxes of direct links, where
    they take all the box's cycles).  MI250 x8, 8 chunks on 16 rings, 30
    threadblocks: 140.5 GB/s at 1 GiB against rails' 66.0 (133.6 with one
    set of 8 cycles repeated; spread, the share order only where a pass
    takes every ring: with half of them, in that order, 49.0 instead of
    77.7 at 16 MiB).
    """
    rings, nb = len(orders[0]), len(groups)

    def landed(rank: int, c: int, k: int = nb - 1) -> Slot:
        return Slot(rank, SCR, k * n * cf + c)

    scatter = coll is Collective.REDUCESCATTER
    for k in (*range(1, nb), 0):  # the other boxes' chunks first, then the own box's
        for i, qs in enumerate(_ring_groups(cf, rings)):
            if k == 1 and i == 0 and split:
                gate = _split_pass(out, groups, orders[0], qs[:split], cf, landed,
                                   _split_channel(rings, nb, two))
                free = split + len(qs) // SPLIT_FREE_PART
                _box_pass(out, groups, orders, qs[split:free], cf, k, landed, scatter)
                _box_pass(out, groups, orders, qs[free:], cf, k, landed, scatter, gate=gate)
            else:
                _box_pass(out, groups, orders, qs, cf, k, landed, scatter)
            if k:
                _cross(out, groups, orders[0], qs, cf, k, landed,
                       shares if len(qs) == rings or not spread else None, two=two)


def _ring_groups(cf: int, rings: int) -> list[range]:
    """The chunks ``q`` of a crossing reduce-scatter's pass in groups of one
    chunk per ring, in order.

    >>> _ring_groups(40, 16)
    [range(0, 16), range(16, 32), range(32, 40)]
    """
    return [range(q, min(cf, q + rings)) for q in range(0, cf, rings)]


def switched_form(topo: Topology, groups: list[list[int]], collective: Collective,
                  chunks: int, rings: int) -> bool:
    """Whether the crossing reduce-scatter takes the switched form
    (``_reduce_scatter_switched``): a reduce-scatter on three boxes or more
    behind box switches, with a channel to spare for the second one to the
    next box (``_rail_channel``; with two groups of chunks a pass, where
    every distance has two, ``_reduce_scatter_switched`` takes them if they
    fit).

    >>> from colc.frontends.families import dgx_a100, mi250
    >>> t = dgx_a100(4)
    >>> [switched_form(t, boxes(t), Collective.REDUCESCATTER, c, 16) for c in (16, 32)]
    [True, True]
    >>> switched_form(t, boxes(t), Collective.ALLREDUCE, 16, 16)
    False
    >>> m = mi250(4)
    >>> switched_form(m, boxes(m), Collective.REDUCESCATTER, 16, 16)
    False
    """
    return (collective is Collective.REDUCESCATTER and len(groups) > 2
            and rings + len(groups) <= MAX_CHANNELS
            and _link_widths(topo, groups[0]) is None)


def _reduce_scatter_switched(out: _Ops, groups: list[list[int]],
                             orders: list[list[list[int]]], cf: int, n: int,
                             split: int = 0) -> None:
    """The crossing reduce-scatter where the boxes are faster than their
    NICs (behind a box switch): the network's start and end are what is
    left to gain.

    * The first pass's rings go in two parts: ``FIRST_PART`` of its chunks,
      then the rest, whose chains start on each rank once the first part's
      last ring is one step from its end there (``Schedule.gates``).  A
      part of the rings alone ends its pass sooner (the threadblocks' pace
      bounds it, not the box's links), so the network starts sooner, and the
      rest is ready before the network has carried the first part.  The
      first pass crosses on two channels (one connection does not fill a
      NIC).
    * With more chunks than rings (DGX A100 x4 with 32 chunks per shard
      fills its rings' 64 steps) each pass goes in groups of one chunk per
      ring, the first part from the first group: a chain's step moves
      half as much, so the network starts after half the time (0.40 ms
      of a 5.1 ms call instead of 0.75 of 5.6), and every distance
      crosses on two channels (``two``; 28 threadblocks).
    * The chains of the last distance (the last two from ``TWO_TO_OWNER``
      boxes) end at the owner's place, whose rail peer is the owner.  The
      own box's pass runs before those crossings and leaves its sum (with
      the partials landed so far) in the owner's scratch; their landings add
      to it, the last into the output.  After the network's last byte only
      that receive is left, not two ring steps, and with two such distances
      the own box's sum no longer waits for a landing that arrives with the
      last crossings.
    * With two groups a pass, a rank's first crossings of the last distance
      wait until it has sent ``LAST_HELD`` of the distance before's
      (``Schedule.gates``): their landings add onto the own box's sums,
      which wait for that distance's landings, and a partial sent too early
      holds its connection while the distance before still crosses.
    * With ``split`` (``split_chunks``), the first pass starts with that
      many chunks whose chains run in two halves (``_split_pass``) and
      a quarter of the group whole (``SPLIT_FREE_PART``); the rest of the
      first group waits until the halves have taken ``SPLIT_HELD`` steps
      on the rank.  A ring
      threadblock moves one chunk a step, so a chain's length, not the
      box's links, is what the network waits for at the start (DGX A100
      x4 at 1 GiB: the NIC's first byte at 396 us, 211.2 GB/s; with 4 split
      chunks, 32 threadblocks, 217.1).

    DGX A100 x8 at 1 GiB, 16 chunks per shard, 32 threadblocks (simulated):
    183.1 GB/s (80% of the cut bound is 182.9), against 174.8 for the
    crossing form, 177.0 for NCCL's rings as a file; by step: the last
    crossing into the output 176.8, the two parts 179.8, two channels
    181.7, the last two distances to the owner 182.6, the held-back chains
    starting a step sooner 183.1.  DGX A100 x4: 190.7 against 180.4 with
    16 chunks per shard; with 32, 211.2 against rails' 201.7 (209.2 before
    ``LAST_HELD``, 200.7 with one channel for the distances after the
    first; a single group, 16 chunks, on two channels each: 196.2).  On
    MI250 boxes, where the rings bound the box, it loses (x4 at 1 GiB:
    162.9 -> 160.6), and an allreduce's crossing allgather from the
    landings hangs, so neither takes it.
    """
    nb = len(groups)
    # the last distances, whose chains end at the owner's place
    owned = min(2 if nb >= TWO_TO_OWNER else 1, nb - 2)
    ahead = nb - 1 - owned  # the last distance whose landing the own box's pass joins

    def landed(rank: int, c: int, k: int) -> Slot:
        return Slot(rank, SCR, k * n * cf + c)

    rings = len(orders[0])
    lots = _ring_groups(cf, rings)
    # with two groups a pass, every distance crosses on two connections
    two = nb - 1 if len(lots) > 1 and rings + 2 * (nb - 1) <= MAX_CHANNELS else 1
    first = max(1, len(lots[0]) * FIRST_PART[0] // FIRST_PART[1])
    parts = (range(first), lots[0][first:]) if first < len(lots[0]) else (lots[0],)
    gate: dict[int, int] = {}
    if split:
        gate = _split_pass(out, groups, orders[0], range(split), cf, landed,
                           _split_channel(rings, nb, two))
        _cross(out, groups, orders[0], range(split), cf, 1, landed, two=two)
        free = split + len(lots[0]) // SPLIT_FREE_PART
        parts = (lots[0][split:free], lots[0][free:])
    for qs in (*parts, *lots[1:]):
        start = len(out.ops)
        if split and qs is parts[0]:  # the whole chunks beside the split ones
            _box_pass(out, groups, orders, qs, cf, 1, landed)
            _cross(out, groups, orders[0], qs, cf, 1, landed, two=two)
            continue
        _box_pass(out, groups, orders, qs, cf, 1, landed, gate=gate)
        # the held-back chains start on a rank once the last ring of this
        # part is one step from its end there (its ops go step by step, so
        # the part's other rings are about as far)
        steps = (len(out.ops) - start) // (len(groups[0]) - 1)
        gate = ({op.dst.rank: op.op_id for op in out.ops[start:len(out.ops) - steps]}
                if qs is parts[0] and len(parts) > 1 else {})
        _cross(out, groups, orders[0], qs, cf, 1, landed, two=two)
    sent: dict[int, list[int]] = {}  # sender -> its crossings of distance ``ahead``
    for k in range(2, ahead + 1):
        for qs in lots:
            _box_pass(out, groups, orders, qs, cf, k, landed)
            start = len(out.ops)
            _cross(out, groups, orders[0], qs, cf, k, landed, two=two)
            if k == ahead:
                for op in out.ops[start:]:
                    sent.setdefault(op.src.rank, []).append(op.op_id)
    # with two groups a pass, the last distance's crossings wait for most of
    # the distance before's (their landings add onto sums that wait for it)
    held = ({r: ids[len(ids) * LAST_HELD[0] // LAST_HELD[1]] for r, ids in sent.items()}
            if len(lots) > 1 else None)
    for k in range(ahead + 1, nb):
        for qs in lots:
            _box_pass(out, groups, orders, qs, cf, k, landed, to_place=True)
    for qs in lots:
        _box_pass(out, groups, orders, qs, cf, 0, landed, to_place=True, joins=ahead)
    for k in range(ahead + 1, nb):
        def onto(rank: int, c: int, k: int = k) -> Slot:
            return Slot(rank, SCR, c) if k == ahead + 1 else landed(rank, c, k - 1)
        for qs in lots:
            _cross(out, groups, orders[0], qs, cf, k, landed, onto=onto,
                   two=two, held=held if k == ahead + 1 else None)


def split_chunks(topo: Topology, groups: list[list[int]], collective: Collective,
                 chunks: int, budget: int = 0) -> int:
    """How many chunks of the first pass of the crossing reduce-scatter (an
    allreduce's first half) or its switched form run their chains in two
    halves (``_split_pass``) within ``budget`` (0: no limit): up to
    ``CROSSING_SPLIT_CHUNKS`` (switched, with two groups of chunks a pass,
    where every distance crosses on two connections: ``SPLIT_CHUNKS``) and
    at least ``SPLIT_LEAST``, each a threadblock and a channel beyond the
    form's (``_split_form``), on boxes of three places or more; in the
    grid's reduce-scatter (``_reduce_scatter_grid``; not in paired halves)
    ``SPLIT_LEAST`` of its first pass's chunks where it has at least
    ``GRID_SPLIT_CHUNKS``.  MI250 x2 with 32 chunks per shard (two groups
    a pass) gains at 128 MiB, 186.3 -> 217.3 GB/s, and loses at 1 GiB,
    225.3 -> 222.3 (the portfolio ranks the unsplit file beside it,
    ``fewer_split_budgets``).

    >>> from colc.frontends.families import dgx_a100, mi250
    >>> t, m = dgx_a100(4), mi250(4)
    >>> [split_chunks(t, boxes(t), Collective.REDUCESCATTER, 32, b) for b in (0, 28, 29, 30, 32)]
    [4, 0, 0, 2, 4]
    >>> split_chunks(t, boxes(t), Collective.REDUCESCATTER, 16)  # one group a pass
    0
    >>> [split_chunks(m, boxes(m), Collective.REDUCESCATTER, 16, b) for b in (0, 24, 25, 26)]
    [2, 0, 0, 2]
    >>> [split_chunks(m, boxes(m), Collective.ALLREDUCE, 8, b) for b in (28, 30)]
    [0, 2]
    >>> split_chunks(m, boxes(m), Collective.ALLGATHER, 16)
    0
    >>> m2 = mi250(2)
    >>> [split_chunks(m2, boxes(m2), Collective.REDUCESCATTER, c) for c in (16, 32)]
    [2, 2]
    """
    most, channel, base = _split_form(topo, groups, collective, chunks, budget)
    if not most:
        return 0
    spare = MAX_CHANNELS - channel
    if budget:
        spare = min(spare, budget - base)
    rings = crossing_rings(groups, collective, chunks)
    split = min(most, spare, len(_ring_groups(chunks, rings)[0]))
    return split if split >= SPLIT_LEAST else 0


def fewer_split_budgets(topo: Topology, groups: list[list[int]], collective: Collective,
                        chunks: int, budget: int) -> tuple[int, ...]:
    """Budgets below ``budget`` whose schedules split fewer chunks of the
    first pass (``split_chunks``), each the least with as many: none split
    (the form's own threadblocks) and ``SPLIT_LEAST`` up to one less than
    ``budget``'s.  A portfolio ranks them beside ``budget``'s schedule, so a
    larger budget never predicts slower (DGX A100 x16 reduce-scatter at 512
    MiB, 8 chunks: 168.8 GB/s unsplit with 30 threadblocks, 165.7 split
    with 32; DGX A100 x4 at 512 MiB, 32 chunks: 200.5 with 3 split, 194.6
    with 4).

    >>> from colc.frontends.families import dgx_a100
    >>> t = dgx_a100(4)
    >>> [fewer_split_budgets(t, boxes(t), Collective.REDUCESCATTER, 32, b) for b in (0, 32, 30, 29)]
    [(28, 30, 31), (28, 30, 31), (28,), ()]
    """
    split = split_chunks(topo, groups, collective, chunks, budget)
    if not split:
        return ()
    base = _split_form(topo, groups, collective, chunks, budget)[2]
    return tuple(base + s for s in (0, *range(SPLIT_LEAST, split)))


def _split_form(topo: Topology, groups: list[list[int]], collective: Collective,
                chunks: int, budget: int) -> tuple[int, int, int]:
    """``(most split chunks, the first one's channel, threadblocks without
    them)`` of the crossing reduce-scatter's form under ``budget``
    (``split_chunks``; with network sends and receives apart: the crossing
    forms' ``_unpaired_threadblocks`` with their second connections, the
    grid's ``R + 2 sum(d_i - 1)`` and two with ``_grid_spare``), ``(0, 0,
    0)`` where it splits none."""
    rings, nb = crossing_rings(groups, collective, chunks), len(groups)
    if (not rings or collective is Collective.ALLGATHER or len(groups[0]) < 3
            or paired_halves(groups, collective, chunks)):
        return 0, 0, 0
    dims = box_grid(nb, rings, collective)
    if len(dims) > 1:
        if chunks < GRID_SPLIT_CHUNKS:
            return 0, 0, 0
        channel = _grid_split_channel(rings, dims)
        return SPLIT_LEAST, channel, channel + sum(d - 1 for d in dims) + _grid_spare(rings, dims)
    if switched_form(topo, groups, collective, chunks, rings):
        two = nb - 1 if len(_ring_groups(chunks, rings)) > 1 else 0
        most = SPLIT_CHUNKS if two else 0
    else:
        most = CROSSING_SPLIT_CHUNKS
        two = second_connections(topo, groups, collective, chunks, budget)
    return most, _split_channel(rings, nb, two), _unpaired_threadblocks(rings, nb, two)


def _grid_split_channel(rings: int, dims: tuple[int, ...]) -> int:
    """The grid's first split chunk's channel (``_reduce_scatter_grid``):
    after the grid's channels (``_grid_channel``) and the first pass's
    second connection (``_grid_spare``)."""
    return rings + sum(d - 1 for d in dims) + _grid_spare(rings, dims)


def _split_channel(rings: int, nb: int, two: int) -> int:
    """The first split chunk's channel (``_split_pass``): after the rail
    channels (``_rail_channel``), the distances up to ``two`` with two."""
    return rings + max(RAIL_CHANNELS, nb - 1) + two


def _split_pass(out: _Ops, groups: list[list[int]], orders: list[list[int]], qs: range,
                cf: int, landed: Callable[..., Slot], channel: int, k: int = 1,
                dests: list[int] | None = None) -> dict[int, int]:
    """The first pass (to the box ``k`` further, or box ``b``'s chunks to
    box ``dests[b]``, as ``_box_pass``) of the crossing reduce-scatter, its
    switched form or the grid's for chunks ``qs`` with every chain in two halves that
    meet at its end: one along the chunk's ring, ``G - 1 - (G - 1) // 2``
    steps, the other from the places after the end backwards, ``(G - 1) //
    2`` steps, on a ring of its own (channel ``channel + j`` for the
    ``j``-th chunk: the chunk's ring reversed).  The backward half lands in
    the end's scratch region 1 (a region for landings of its own box's
    chunks, unused for another box's) with the end's input; the forward
    half's last step reduces onto it, so the sum the rail crossing sends is
    the whole box's, as a whole chain's is.  Within a step the backward
    halves are listed first: on boxes of an odd size both halves take as
    many steps, and the backward one must land first.  DGX A100 boxes: a
    chain of 4 steps and one of 3, not 7; MI250 boxes, 8 and 7, not 15.
    ``O(G^2 |qs| B)`` ops.

    Returns
    -------
    dict
        Rank -> the op after which its held-back chains start: its last op
        before the halves' step ``SPLIT_HELD``.
    """
    size, nb, rings = len(groups[0]), len(groups), len(orders)
    back = (size - 1) // 2
    fwd = size - 1 - back
    after = {q: _landing_places(orders, q, cf, nb)[1] for q in qs}
    start, held_from = len(out.ops), None
    for t in range(fwd):
        if t == min(SPLIT_HELD, fwd - 1):
            held_from = len(out.ops)
        for b, members in enumerate(groups):
            dest = groups[(b + k) % nb if dests is None else dests[b]]
            for j, q in enumerate(qs):
                ring = _scatter_ring(q, k, cf, rings, nb)
                order = orders[ring]
                if t < back:
                    for p in range(size):  # the half backwards, into the end's region 1
                        end = order[(p - back + t) % size]
                        sender, receiver = members[order[p]], members[order[(p - 1) % size]]
                        c = dest[after[q][end]] * cf + q
                        src = Slot(sender, IN, c) if t == 0 else Slot(sender, SCR, c)
                        dst = landed(receiver, c, 1) if t == back - 1 else Slot(receiver, SCR, c)
                        out.add(OpKind.REDUCE, src, dst, channel + j, Slot(receiver, IN, c))
                for p in range(size):  # the half along the ring, onto the backward one
                    end = order[(p - back - 1 - t) % size]
                    sender, receiver = members[order[p]], members[order[(p + 1) % size]]
                    c = dest[after[q][end]] * cf + q
                    src = Slot(sender, IN, c) if t == 0 else Slot(sender, SCR, c)
                    operand = landed(receiver, c, 1) if t == fwd - 1 else Slot(receiver, IN, c)
                    out.add(OpKind.REDUCE, src, Slot(receiver, SCR, c), ring, operand)
    return {op.dst.rank: op.op_id for op in out.ops[start:held_from]}


def _reduce_scatter_grid(out: _Ops, groups: list[list[int]], orders: list[list[list[int]]],
                         cf: int, n: int, dims: tuple[int, ...], scatter: bool = True,
                         spare: bool = True, split: int = 0) -> None:
    """The crossing reduce-scatter in stages over a grid of boxes
    (``grid``): the allgather's stages backwards, the last dimension first.

    Box ``b``'s partials for box ``X`` cross at the stage of the last
    dimension they still differ in, ``s``, to the box along ``s`` that
    agrees with ``X`` there; the partials a box forwards are its own box's
    chain's sum with the partials landed for ``X`` in the stages before
    (``_box_pass`` ``last``).  So in stage ``s`` a rank sends, to its rail
    peer in each box along dimension ``s``, the partials for every box that
    differs from that one only in the dimensions before ``s``: as many as
    the allgather forwards there.  A landing adds to the chunk's landing
    before it (the first to the receiver's input), in scratch region ``l``
    (its ``l``-th landing of that chunk).  A reduce-scatter's passes whose
    partials are for the receiving box itself (each stage's last, the
    *home* passes) end at the owner's place and cross to the owner: the
    first landing adds to the own box's sum (region 0: its pass, which
    joins nothing, runs after the first stage's passes), each later one to
    the landing before, the last into the output.  So no ring step waits
    for a landing, and after the network's last byte only the landings
    that arrived with it are left (DGX A100 x64 at 1 GiB: 159.7 -> 161.4
    GB/s, x32 165.4 -> 166.9, x16 172.3 -> 172.1, under the simulator of
    2026-11-29; before, only the last stage's landed at the owner, onto a
    sum the own box's pass made one place before it from the other
    stages' landings, and that pass's last ring steps ran after the
    network's last byte).  Where the grid's first two dimensions are 2s
    (``_fuses_last``: DGX A100 x64 and x128, MI250 x64; at most two chunks
    per shard) the last stage's partial for a box takes one landing from the
    stage before, the last to arrive: that landing goes to the owner's
    place, onto the last stage's chain there (which joins the earlier
    landings one place before), and the last stage sends it from there on
    the landing's channel, so the lowering fuses the receive with the
    forwarding send and the last crossing starts as its input lands, not
    after two more ring steps (x128 at 1 GiB: the NIC idled from 6.4 ms
    while a single chunk crossed the last stage; 160.3 -> 161.3 GB/s, x64
    164.0 -> 164.1, with two threadblocks fewer, ``pair_mirrors``).  An
    allreduce's landings all go one place before the owner and its own
    box's pass comes last, joining them (its
    allgather's first sends would wait in the threadblock of the last
    landing, whose FIFO the landings have filled).  Passes go stage by
    stage, taking the ring sets in turn in the order listed (with more
    rings than chunks, ``R / cf`` run at once), the first on two
    connections where a threadblock pair more fits (``_grid_spare``); the
    last quarter of the first stage's passes that run at once
    (``GRID_HELD_PART``; the second pass with 8 chunks on 16 rings, the
    last 2 of 8 with 2; an allreduce's second half) is held back
    until the first's chains are ``GRID_HELD`` steps from their ends
    (``Schedule.gates``): the network starts sooner, on more connections
    (x64 161.4 -> 164.0, x128 157.6 -> 160.3 where only the second pass was
    held; x32 166.9 -> 166.5); an allreduce with fewer than
    ``HALF_HELD_AT_ONCE`` (8) passes at once holds only its second pass (x16
    82.1 against 81.9 with the half, x32 79.4 against 79.1; from 8 the half:
    DGX A100 x64 75.7 -> 76.4, x128 74.3 -> 75.2).  With ``split``
    (``split_chunks``) the first pass's first chunks run their chains in
    two halves (``_split_pass``, on the channels after the grid's,
    ``_grid_split_channel``), its last ``1 / GRID_SPLIT_HELD_PART`` waits
    until the halves have taken ``SPLIT_HELD`` steps, the rest go whole at
    once, and the held passes wait for those whole chunks' chains: the
    network's first byte at 0.49 ms instead of 0.82 (DGX A100 x16
    allreduce at 1 GiB, 82.1 -> 83.2 GB/s, 32 threadblocks).  Network
    sends and receives on threadblocks of their own: ``R + 2 sum(d_i - 1)``
    per rank, 2 more with the second connection, 2 fewer with a fused last
    stage (lowered with ``pair_mirrors``; 1 without), one per split chunk.
    DGX A100 x16 (4 x 4) at 1 GiB, 8 chunks per shard, 30 threadblocks
    (simulated): 171.2 GB/s (80% of the cut bound: 170.7; rails 162.0);
    170.3 with the last stage landing one place before the owner, 164.9
    with the passes' rings by their offsets, one connection and no held
    pass; x32 (2 x 4 x 4, 4 chunks, 32): 164.9 before the landings at the
    owner (159.5 before that; rails 144.7).
    """
    nb, rings = len(groups), len(orders[0])
    offsets = landing_order(dims)
    qs = range(cf)

    def landed(rank: int, c: int, k: int) -> Slot:
        return Slot(rank, SCR, k * n * cf + c)

    def before(s: int) -> int:  # landings of a chunk before stage ``s`` (1-based) sends it
        return sum(d - 1 for d in dims[s:])

    def onward(x: int, s: int) -> tuple[int, ...]:  # the offset left after stage ``s``
        return tuple(0 if j == s - 1 else o for j, o in enumerate(offsets[x]))

    spare = spare and _grid_spare(rings, dims)
    # the last stage forwards the stage before's landings as they arrive
    fused = scatter and _fuses_last(dims, cf)
    stages: dict[int, list[int]] = {}
    ks: dict[int, int] = {}  # pass -> its ring set (``_scatter_ring``)
    for s in range(len(dims), 0, -1):
        # the partials the receiver forwards first go first, those for itself last
        stages[s] = sorted((x for x, off in enumerate(offsets) if stage_of(off) == s),
                           key=lambda x: (-stage_of(onward(x, s)), onward(x, s)[::-1],
                                          offsets[x][s - 1]))
        ks.update({x: len(ks) + 1 + i for i, x in enumerate(stages[s])})
    # the first stage's passes that run at once, on ring sets of their own:
    # the last quarter of them is held back (an allreduce's second half, or
    # its second pass only below ``HALF_HELD_AT_ONCE`` at once)
    at_once = max(2, rings // cf)
    if scatter:  # no more than the stage has
        at_once = min(at_once, len(stages[len(dims)]))
        held = range(at_once - max(1, at_once // GRID_HELD_PART), at_once)
    else:
        if at_once < HALF_HELD_AT_ONCE:
            at_once = 2
        held = range(at_once // 2, at_once)
    # the home passes: partials for the receiving box itself (a reduce-scatter's)
    homes = {x for s, xs in stages.items() for x in xs if scatter and not any(onward(x, s))}
    # with ``fused``, the stage before the last's partials that the last forwards
    forwarded = ({x for x in stages[2] if stage_of(onward(x, 2)) == 1} if fused
                 else set())

    def passes(s: int) -> None:  # stage ``s``'s box passes
        gate = None
        for i, x in enumerate(stages[s]):
            dests = [shifted(b, offsets[x], dims) for b in range(nb)]
            first = s == len(dims) and i == 0
            pqs = qs
            if first and split:  # split chunks, the whole ones, the held ones
                halves = _split_pass(out, groups, orders[0], range(split), cf, landed,
                                     _grid_split_channel(rings, dims), k=ks[x], dests=dests)
                pqs = range(split, cf - cf // GRID_SPLIT_HELD_PART)
            start = len(out.ops)
            _box_pass(out, groups, orders, pqs, cf, ks[x], landed, dests=dests,
                      last=before(2 if fused and s == 1 else s),
                      gate=gate if s == len(dims) and i in held else None,
                      to_place=x in homes or x in forwarded)
            if first:
                # the held passes' chains start on a rank once the first's
                # (with ``split``, its whole chunks') are ``GRID_HELD`` steps
                # from their ends there
                end = len(out.ops)
                steps = (end - start) // (len(groups[0]) - 1)
                gate = {op.dst.rank: op.op_id for op in out.ops[start:end - GRID_HELD * steps]}
            if first and split:
                _box_pass(out, groups, orders, range(pqs.stop, cf), cf, ks[x], landed,
                          dests=dests, last=before(s), gate=halves,
                          to_place=x in homes or x in forwarded)

    def crossings(s: int, i: int, x: int) -> None:  # the crossings of stage ``s``'s pass ``x``
        t = offsets[x][s - 1]
        region = before(s) + t
        pairs = [(sender, groups[shifted(sender, offsets[x], dims)], groups[receiver])
                 for sender, receiver in line_sends(dims, s - 1, t, _send_first)]
        for q in qs:
            order = orders[0][_scatter_ring(q, ks[x], cf, rings, nb)]
            lands_at = _landing_places(orders[0], q, cf, nb)[0]
            # a fused last stage sends on the channel of the landings it forwards
            channel = _grid_channel(rings, dims, 2 if fused and s == 1 else s, t)
            if spare and s == len(dims) and i == 0 and q % 2 and x not in forwarded:
                channel = rings + sum(d - 1 for d in dims)  # the first pass's second
            for sender, owner, there in pairs:
                for g in order:
                    h, c = lands_at[g], owner[g] * cf + q
                    if x in forwarded:  # at the owner's place, onto the last stage's chain
                        out.add(OpKind.REDUCE, Slot(groups[sender][g], SCR, c),
                                landed(there[g], c, region), channel, Slot(there[g], SCR, c))
                    elif x not in homes:  # to the place before the owner's
                        out.add(OpKind.REDUCE, Slot(groups[sender][h], SCR, c),
                                landed(there[h], c, region), channel,
                                Slot(there[h], IN, c) if region == 1
                                else landed(there[h], c, region - 1))
                    else:  # in the own box to the owner, onto its own box's sum
                        # (region 0) or the landing before, the last into the output
                        dst = (Slot(there[g], OUT, q) if region == before(0)
                               else landed(there[g], c, region))
                        src = (landed(groups[sender][g], c, before(1)) if fused and s == 1
                               else Slot(groups[sender][g], SCR, c))
                        out.add(OpKind.REDUCE, src, dst, channel,
                                landed(there[g], c, region - 1))

    for s in range(len(dims), 0, -1):
        if not (fused and s == 1):
            passes(s)
        if fused and s == 2:  # the last stage's chains, which the forwarded landings join
            passes(1)
        if s == len(dims) and scatter:  # the own box's sum, which the home landings add to
            _box_pass(out, groups, orders, qs, cf, 0, landed, scatter, joins=0, to_place=True)
        for i, x in enumerate(stages[s]):
            crossings(s, i, x)
    if not scatter:  # an allreduce's allgather would send from the landing's threadblock
        _box_pass(out, groups, orders, qs, cf, 0, landed, scatter, joins=before(0))


def _allreduce_pairs(out: _Ops, groups: list[list[int]], orders: list[list[list[int]]],
                     cf: int, n: int, dims: tuple[int, ...]) -> tuple[int, int]:
    """An allreduce in paired halves: each half of the boxes runs the grid's
    allreduce over ``dims`` on its own, except that between its
    reduce-scatter and its allgather every owner exchanges its half's sum
    with its rail peer in the partner box of the other half (box ``b`` and
    ``b + B/2``), each adding the other's.  A chunk then has two owners, one
    per half: ``N cf / 2`` chunks, half as many ring steps as the grid's
    allreduce over all the boxes (which does not fit 64 per ring at 1024
    GPUs with one chunk per shard), and the same network traffic (the
    exchange of a sum of ``2/B`` of the buffer replaces the last stage of
    the reduce-scatter and the first of the allgather).

    The half whose owners send first (the second) leaves its sum in
    scratch, so the first half's landing adds onto it in its output while
    the second's is still unread: ``R + 2 sum(d_i - 1) + 2`` threadblocks
    per rank, the exchange's send and receive on a channel after the
    grid's (the first pass's second connection is left out).

    Returns
    -------
    tuple of int
        Chunks of the schedule and scratch chunks.  Ops name chunks by
        the first half's owners, ``(b mod B/2, g)``.
    """
    half, links = len(groups) // 2, sum(d - 1 for d in dims)
    tops = [groups[:half], groups[half:]]
    held = (links + 1) * n * cf  # scratch of the second half's sums
    for h, part in enumerate(tops):
        start = len(out.ops)
        _reduce_scatter_grid(out, part, orders[h * half:(h + 1) * half], cf, n, dims,
                             scatter=False, spare=False)
        if h:  # the second half's sums stay in scratch
            for i in range(start, len(out.ops)):
                op = out.ops[i]
                if op.dst.buffer is OUT:
                    out.ops[i] = dataclasses.replace(
                        op, dst=Slot(op.dst.rank, SCR, held + op.dst.index))
    _exchange(out, groups, cf, len(orders[0]) + links, held)
    for h, part in enumerate(tops):
        _allgather_grid(out, part, orders[h * half:(h + 1) * half], cf, dims, reduced=True)
    out.ops = _named_by_first_half(out.ops, groups, cf, n)
    m = n // 2 * cf
    return m, (links + 2) * m


def _exchange(out: _Ops, groups: list[list[int]], cf: int, channel: int, held: int) -> None:
    """The paired allreduce's exchange on ``channel``: each owner ``(b, g)``
    of the first half sends its half's sum (its output) to ``(b + B/2, g)``,
    which adds its own (scratch ``held`` on) into its output; then the
    second half's owner sends that scratch sum back, added into the first
    owner's output (listed second, it reads the scratch the first left
    alone and writes the output the first has sent)."""
    half, size = len(groups) // 2, len(groups[0])
    for b in range(half):
        for q in range(cf):
            for g in range(size):
                r0, r1 = groups[b][g], groups[b + half][g]
                c0, c1 = r0 * cf + q, r1 * cf + q
                out.add(OpKind.REDUCE, Slot(r0, OUT, c0), Slot(r1, OUT, c1), channel,
                        Slot(r1, SCR, held + c1))
                out.add(OpKind.REDUCE, Slot(r1, SCR, held + c1), Slot(r0, OUT, c0), channel,
                        Slot(r0, OUT, c0))


def _named_by_first_half(ops: list[Op], groups: list[list[int]], cf: int, n: int) -> list[Op]:
    """``ops`` with every chunk named by its first half's owner: chunk ``q``
    of rank ``(b, g)``'s shard becomes ``((b mod B/2) G + g) cf + q``, and
    scratch region ``k`` (``k N cf`` on) starts at ``k N cf / 2``."""
    half, size = len(groups) // 2, len(groups[0])
    name = {r: (b % half) * size + g for b, members in enumerate(groups)
            for g, r in enumerate(members)}
    m = n // 2 * cf

    def rename(slot: Slot | None) -> Slot | None:
        if slot is None:
            return None
        region, c = divmod(slot.index, n * cf)
        r, q = divmod(c, cf)
        return Slot(slot.rank, slot.buffer, region * m + name[r] * cf + q)

    return [dataclasses.replace(op, src=rename(op.src), dst=rename(op.dst),
                                operand=rename(op.operand)) for op in ops]


def _grid_spare(rings: int, dims: tuple[int, ...]) -> bool:
    """Whether the grid's reduce-scatter sends its first pass's partials on
    two connections (one does not fill a NIC): where a send and a receive
    threadblock more fit ``MAX_CHANNELS`` beside the rings and the grid's
    (DGX A100 x16 and x32, not x64)."""
    return rings + 2 * sum(d - 1 for d in dims) + 2 <= MAX_CHANNELS


def _fuses_last(dims: tuple[int, ...], cf: int) -> bool:
    """Whether the grid's reduce-scatter forwards its last stage's partials
    as they land (``_reduce_scatter_grid``): its second dimension is a 2, so
    each box's partial for its last-stage peer takes one landing from the
    stage before, which the lowering fuses with the forwarding send
    (``rrcs``) on the landing's channel; its first is a 2, so the last stage
    has a single distance and the fused threadblock a single send peer
    (DGX A100 x64 and x128, MI250 x64).  At most ``FUSED_LAST_CHUNKS``
    chunks per shard: the fused threadblock forwards them all before it
    receives the stage's own landings, while its peer's receive of them
    waits behind those landings, so more than Simple's FIFO of two calls
    deadlocks (a 2 x 2 x 7 grid, DGX A100 x28, with 4 chunks).

    >>> _fuses_last((2, 2, 4, 4), 2), _fuses_last((2, 4, 4), 1), _fuses_last((2,), 1)
    (True, False, False)
    >>> _fuses_last((2, 2, 7), 4)
    False
    """
    return len(dims) > 1 and dims[0] == 2 and dims[1] == 2 and cf <= FUSED_LAST_CHUNKS


def _two_last(dims: tuple[int, ...]) -> bool:
    """Whether the grid allgather's last stage sends on two connections: a
    grid of 2s (DGX A100 x128), whose last stage, half of the shards, has a
    single distance, and one NET connection carries ``conn_net`` (12.5 GB/s
    on an A100 in Simple) of a NIC's 22.2 (``colc.ir.runtime_model``).
    The second connection takes the chunks at odd places of the stage's
    order on the first stage's channel: its first chunk is the one that
    landed in the first stage, so the lowering fuses that receive and the
    forwarding sends on one threadblock (``rcs``), and the form takes one
    threadblock more, not two (x128: 32)."""
    return len(dims) > 1 and dims[0] == 2 and dims[-1] == 2


def narrowed(topo: Topology, groups: list[list[int]], collective: Collective,
             chunks: int, budget: int) -> bool:
    """Whether ``budget`` takes a connection of the crossing form away.

    * the grid allgather's second last-stage connection (``_two_last``) at
      exactly the budget that holds the form's threadblocks with network
      sends and receives apart (the lowering's first choice) without that
      connection and not with it, ``R + 2 sum(d - 1) + 1``;
    * the crossing reduce-scatter's second one to the next box
      (an allreduce's, every box's) at every budget below ``R + 2 B`` (an
      allreduce's below ``R + 4 (B - 1)``): its unpaired threadblocks, ``R
      + 2 (B - 1)``, and two per such connection (below ``R + 2 (B - 1)``
      the lowering pairs the network sends and receives, and each would
      take one more), ``second_connections``;
    * the split chains' rings (``split_chunks``) at every budget below
      the form's own and its split chunks': the switched reduce-scatter's
      ``R + 4 (B - 1) + SPLIT_CHUNKS``, the grid's ``R + 2 sum(d_i - 1)``
      (and two with ``_grid_spare``) ``+ SPLIT_LEAST``.

    DGX A100 x128 at 31 threadblocks, 1 GiB (simulated): 151.6 GB/s
    without the allgather's (31 threadblocks), 84.2 with it (lowered
    paired: 25).  MI250 x4's reduce-scatter takes 22 threadblocks without
    the second connection to the next box and 24 with it.

    >>> from colc.frontends.families import dgx_a100, mi250
    >>> t = dgx_a100(128)
    >>> [narrowed(t, boxes(t), Collective.ALLGATHER, 1, b) for b in (0, 30, 31, 32)]
    [False, False, True, False]
    >>> narrowed(t, boxes(t), Collective.REDUCESCATTER, 1, 31)
    False
    >>> m = mi250(4)
    >>> [narrowed(m, boxes(m), Collective.REDUCESCATTER, 16, b) for b in (0, 16, 23, 24, 26, 32)]
    [False, True, True, True, False, False]
    """
    if not budget:
        return False
    if collective is not Collective.ALLGATHER:
        return (second_connections(topo, groups, collective, chunks, budget)
                < second_connections(topo, groups, collective, chunks)
                or split_chunks(topo, groups, collective, chunks, budget)
                < split_chunks(topo, groups, collective, chunks))
    rings = crossing_rings(groups, collective, chunks)
    dims = box_grid(len(groups), rings, collective) if rings else ()
    if len(dims) < 2 or not _two_last(dims):
        return False
    return budget == rings + 2 * sum(d - 1 for d in dims) + 1  # the local copies' one


def second_connections(topo: Topology, groups: list[list[int]], collective: Collective,
                       chunks: int, budget: int = 0) -> int:
    """The distances ``1 .. two`` whose partials the crossing reduce-scatter
    sends on two connections within ``budget`` (0: no limit): where
    ``next_box_twice`` says, a reduce-scatter the next box's, an allreduce
    every box's (its distances cross one after the other, each alone on
    the NIC; from ``EVERY_BOX_TWICE_CHUNKS`` chunks per shard), where the
    budget holds the form's unpaired threadblocks, ``R + 2 (B - 1)``, and
    two more per distance (an allreduce whose budget holds only the next
    box's takes that) and the channels fit (the second ones after the
    first, ``_rail_channel``).  MI250 x4 allreduce,
    8 chunks on 16 rings, simulated, 16 MiB / 128 MiB / 1 GiB: 45.5 / 65.9
    / 67.1 GB/s with the next box's (24 threadblocks), 53.0 / 70.1 / 71.7
    with every box's (28); MI250 x3 (24) 1 GiB 68.3 -> 74.6.  A
    reduce-scatter with every box's lost at 1 GiB (MI250 x4, 16 chunks,
    28 threadblocks: 162.6 against 163.6).

    >>> from colc.frontends.families import mi250
    >>> m = mi250(4)
    >>> [second_connections(m, boxes(m), Collective.ALLREDUCE, 8, b) for b in (0, 23, 24, 28)]
    [3, 0, 1, 3]
    >>> second_connections(m, boxes(m), Collective.REDUCESCATTER, 16)
    1
    """
    if not next_box_twice(topo, groups, collective, chunks):
        return 0
    rings, nb = crossing_rings(groups, collective, chunks), len(groups)
    every = collective is Collective.ALLREDUCE and chunks >= EVERY_BOX_TWICE_CHUNKS
    for two in dict.fromkeys((nb - 1 if every else 1, 1)):
        if ((not budget or _unpaired_threadblocks(rings, nb, two) <= budget)
                and rings + nb - 1 + two <= MAX_CHANNELS):
            return two
    return 0


def _unpaired_threadblocks(rings: int, nb: int, two: int) -> int:
    """Threadblocks of the crossing reduce-scatter with its network sends and
    receives apart and the distances up to ``two`` on two connections:
    ``R + 2 (B - 1)`` (two boxes: two channels, ``R + 4``) and two per
    second connection."""
    return rings + 2 * (max(RAIL_CHANNELS, nb - 1) + two)


def narrowing_budget(topo: Topology, groups: list[list[int]], collective: Collective,
                     chunks: int, budget: int) -> int:
    """The budget a rings2d schedule under ``budget`` is keyed and built
    with (``Compiler._narrowing``): 0 where ``budget`` narrows nothing
    (``narrowed``); the grid allgather's, ``budget``; the crossing
    reduce-scatter's, the least budget with as many second connections
    (``second_connections``; 1 for none) and split chunks
    (``split_chunks``; in the switched and grid forms too), so the budgets
    that build one schedule share it.

    >>> from colc.frontends.families import mi250
    >>> m = mi250(4)
    >>> [narrowing_budget(m, boxes(m), Collective.ALLREDUCE, 8, b) for b in (0, 16, 23, 26, 28, 30)]
    [0, 1, 1, 26, 28, 0]
    >>> from colc.frontends.families import dgx_a100
    >>> t = dgx_a100(4)
    >>> [narrowing_budget(t, boxes(t), Collective.REDUCESCATTER, 32, b) for b in (24, 30, 32)]
    [1, 30, 0]
    """
    if collective is Collective.ALLGATHER:
        return budget if narrowed(topo, groups, collective, chunks, budget) else 0
    if not budget:
        return 0
    two = second_connections(topo, groups, collective, chunks, budget)
    split = split_chunks(topo, groups, collective, chunks, budget)
    if (two, split) == (second_connections(topo, groups, collective, chunks),
                        split_chunks(topo, groups, collective, chunks)):
        return 0
    if not two and not split:
        return 1
    return _split_form(topo, groups, collective, chunks, budget)[2] + split


def next_box_twice(topo: Topology, groups: list[list[int]], collective: Collective,
                   chunks: int) -> bool:
    """Whether the crossing reduce-scatter (``_reduce_scatter_crossing``;
    an allreduce's first half) sends its partials for the next box on two
    connections (``_rail_channel``, ``two=1``: the odd chunks on the second,
    so at least two chunks per shard; an allreduce every box's where the
    budget holds them, ``second_connections``) where the budget holds them
    (``narrowed``): three boxes or more in one row of the grid, with the
    channel to spare (``rings + B <= MAX_CHANNELS``: not MI250 x17), on
    boxes of direct links (behind a box switch the reduce-scatter takes the
    switched form, which plans its own), on all ``RINGS`` rings.
    Those partials cross alone, before the farther boxes' passes end, and
    one connection does not fill the NIC; on fewer rings the box's rings
    bound the passes, and a second connection only splits the NIC.
    Simulated at 1 GiB / 256 MiB / 128 MiB / 64 MiB (Simple): MI250 x4
    reduce-scatter, 16 chunks per shard, 162.9 -> 163.6 / 154.4 -> 159.3 /
    145.3 -> 144.3 / 127.9 -> 132.1 GB/s (22 -> 24 threadblocks); with 8
    (8 rings) 148.4 -> 148.3 / 143.8 -> 142.5 / 140.2 -> 136.5 / 125.8 ->
    119.6, and 78.7 -> 72.6 at 16 MiB; allreduce, 8 chunks on 16 rings,
    66.3 -> 67.1 at 1 GiB, 64.2 -> 65.9 at 128 MiB; MI250 x8 (8 chunks on
    16 rings, 30 -> 32 threadblocks) 140.5 -> 141.1, 133.7 -> 134.2 at 128
    MiB; MI250 x3, 16 chunks, 169.6 -> 169.0, 144.1 -> 150.2 at 128 MiB.
    Every distance on two (28 threadblocks on x4) gave 162.6 at 1 GiB.
    Behind box switches the allreduce's crossing form, 16 chunks, is not
    given it: DGX A100 x3 lost (128 MiB 83.6 -> 76.2, 256 MiB 90.7 ->
    87.5), x4 gained (74.4 -> 77.7, 83.4 -> 88.3, 1 GiB 92.1 -> 92.9;
    rails serves 1 GiB there).

    >>> from colc.frontends.families import dgx_a100, mi250
    >>> m = mi250(4)
    >>> rs, ag = Collective.REDUCESCATTER, Collective.ALLGATHER
    >>> [next_box_twice(m, boxes(m), c, 16) for c in (rs, ag)]
    [True, False]
    >>> next_box_twice(m, boxes(m), rs, 8)  # on 8 rings
    False
    >>> t, m2, m17 = dgx_a100(4), mi250(2), mi250(17)
    >>> next_box_twice(t, boxes(t), Collective.ALLREDUCE, 16), next_box_twice(m2, boxes(m2), rs, 16)
    (False, False)
    >>> next_box_twice(m17, boxes(m17), rs, 2), next_box_twice(mi250(9), boxes(mi250(9)), rs, 1)
    (False, False)
    """
    rings, nb = crossing_rings(groups, collective, chunks), len(groups)
    return (collective is not Collective.ALLGATHER and chunks > 1 and rings == RINGS
            and nb > 2 and rings + nb <= MAX_CHANNELS
            and len(box_grid(nb, rings, collective)) == 1  # so not in paired halves
            and _link_widths(topo, groups[0]) is not None)


def _grid_channel(rings: int, dims: tuple[int, ...], stage: int, distance: int) -> int:
    """Channel of the grid's crossings along dimension ``stage`` (1-based)
    at ``distance``: one per dimension and distance, after the rings."""
    return rings + sum(d - 1 for d in dims[:stage - 1]) + distance - 1


def _rail_channel(rings: int, nb: int, q: int, k: int, two: int = 0) -> int:
    """Channel of a crossing to the box ``k`` further: two per rail peer on
    two boxes (one connection does not fill a NIC), else one per distance;
    ``two``: the distances up to ``two`` cross on two (the switched
    reduce-scatter, whose first pass crosses alone: the next box; with two
    groups of chunks a pass, every distance; the crossing reduce-scatter's
    next box, ``next_box_twice``), the second ones after the others."""
    if k <= two and q % 2:
        return rings + nb - 2 + k
    return rings + (q % RAIL_CHANNELS if nb == 2 else k - 1)


def _local_channel(rings: int, nb: int) -> int:
    """Channel of the crossing allgather's local copies, after the rail
    channels."""
    return rings + max(RAIL_CHANNELS, nb - 1)


def _send_first(nb: int, k: int) -> list[int]:
    """Boxes in the order their crossings to the box ``k`` further are
    listed: along each cycle of ``b -> b + k`` backwards (``0, -k, -2k,
    ...``), so a box's send of a chunk is listed before its receive of it in
    every box but one per cycle.

    A threadblock that serves a send and a receive (the paired lowering, when
    the budget has no room for network threadblocks of their own) does them
    in the listed order.  Listed by box, box ``j`` received from ``j - k``
    before it sent to ``j + k`` for every ``j >= k``: each waited for its
    predecessor's send, a chain of ``j / k`` transfers (MI250 x16 allgather,
    2 chunks per shard, 1 GiB: the sends from the box one before started
    12.4 ms into an 18.3 ms call).

    >>> _send_first(4, 1), _send_first(4, 2)
    ([0, 3, 2, 1], [0, 2, 1, 3])
    """
    order: list[int] = []
    for start in range(math.gcd(nb, k)):
        order += [(start - i * k) % nb for i in range(nb // math.gcd(nb, k))]
    return order


def _cross(out: _Ops, groups: list[list[int]], orders: list[list[int]], qs: range, cf: int,
           k: int, landed: Callable[..., Slot], shares: list[float] | None = None, *,
           onto: Callable[[int, int], Slot] | None = None,
           two: int = 0, held: dict[int, int] | None = None) -> None:
    """Send the partials of chunks ``qs`` of the boxes ``k`` further over the
    rails; the landing receive adds each to the receiver's running sum
    (``_reduce_scatter_crossing``).  Chunks go largest ring share first
    (``shares``; None: in order), boxes in ``_send_first`` order; each
    partial lands at ``_landing_places``'.
    ``two``: the distances up to ``two`` cross on two connections
    (``_rail_channel``: the switched reduce-scatter's, and the crossing
    one's next box, ``next_box_twice``);
    ``onto``: the crossing goes from the owner's place to the owner, whose
    landing adds it to ``onto(rank, chunk)`` (its own box's sum, or the
    landing before) and writes region ``k``, or from the last distance, the
    output;
    ``held``: rank -> op after which the rank's first crossing of these
    chunks on each channel starts (``Schedule.gates``)."""
    rings, nb = len(orders), len(groups)
    if shares is not None:
        qs = sorted(qs, key=lambda q: -shares[_scatter_ring(q, k, cf, rings, nb)])
    started: set[tuple[int, int]] = set()  # (sender, channel) with a crossing
    for q in qs:
        order = orders[_scatter_ring(q, k, cf, rings, nb)]
        lands_at = _landing_places(orders, q, cf, nb)[0]
        for b in _send_first(nb, k):
            members, dest = groups[b], groups[(b + k) % nb]
            for g in order:
                h = lands_at[g] if onto is None else g
                c = dest[g] * cf + q
                if onto is None:
                    dst = landed(dest[h], c, k)
                    before = Slot(dst.rank, IN, c) if k == 1 else landed(dst.rank, c, k - 1)
                else:  # the last distance writes a reduce-scatter's result
                    dst = Slot(dest[g], OUT, q) if k == nb - 1 else landed(dest[g], c, k)
                    before = onto(dest[g], c)
                channel = _rail_channel(rings, nb, q, k, two)
                gate = -1
                if held is not None and (members[h], channel) not in started:
                    started.add((members[h], channel))
                    gate = held.get(members[h], -1)
                out.add(OpKind.REDUCE, Slot(members[h], SCR, c), dst, channel, before, gate)


def _box_pass(out: _Ops, groups: list[list[int]], orders: list[list[list[int]]],
              qs: range, cf: int, k: int, landed: Callable[..., Slot],
              scatter: bool = True, *, to_place: bool = False, joins: int | None = None,
              gate: dict[int, int] | None = None, dests: list[int] | None = None,
              last: int = 0) -> None:
    """One ring pass of ``_reduce_scatter_crossing`` over chunks ``qs``: of
    the box ``k`` further (chains end one place early, or with ``to_place``
    at the place whose rail peer owns the chunk) or, ``k == 0``, of the own
    box (the chain's next-to-last rank reduces with its landed sum, region
    ``joins`` (default the last), and the owner writes its output, or with
    ``to_place`` its scratch, to which the last crossing adds).  ``gate``:
    rank -> op its chains' first sends wait for (``Schedule.gates``);
    ``dests``: box ``b``'s chunks are box ``dests[b]``'s, not the box ``k``
    further's; ``last``: the chain's last rank (with ``to_place`` the one
    before it) reduces with its landed sum, region ``last``, not its input
    (the grid's forwarded partials).  Where and what the chain joins is
    ``_landing_places``': a chain not ending at its owner's place ends at
    the place the own box's ring for the chunk has before the owner, and
    the landed sum joins at that place wherever the pass's ring has it
    (the same as above when every pass of the chunk takes one cycle)."""
    size, nb = len(groups[0]), len(groups)
    ends_at_place = to_place or not k
    region = nb - 1 if joins is None else joins
    # the landed sum joins the chain (k: region ``last``; the own box:
    # ``region``) at the chunk's landing place
    join = region if not k else last
    # the crossing forms' boxes ring alike (``rings2d_schedule``)
    places = {q: _landing_places(orders[0], q, cf, nb) for q in qs}
    for t in range(size - 1):
        for b, members in enumerate(groups):
            dest = groups[(b + k) % nb if dests is None else dests[b]]
            for q in qs:
                ring = _scatter_ring(q, k, cf, len(orders[b]), nb)
                order = orders[b][ring]
                before, after = places[q]
                for p in range(size):
                    sender, receiver = members[order[p]], members[order[(p + 1) % size]]
                    end = order[(p - 1 - t) % size]  # the place this chain ends at
                    g = end if ends_at_place else after[end]
                    c = dest[g] * cf + q
                    src = Slot(sender, IN, c) if t == 0 else Slot(sender, SCR, c)
                    dst, operand = Slot(receiver, SCR, c), Slot(receiver, IN, c)
                    if not k and t == size - 2 and not to_place:
                        dst = Slot(receiver, OUT, q if scatter else c)
                    if join and order[(p + 1) % size] == before[g]:
                        operand = landed(receiver, c, join)
                    elif join and t == 0 and order[p] == before[g]:
                        src = landed(sender, c, join)
                    held = gate.get(sender, -1) if gate and t == 0 else -1
                    out.add(OpKind.REDUCE, src, dst, ring, operand, held)


def _landing_places(orders: list[list[int]], q: int, cf: int, nb: int
                    ) -> tuple[dict[int, int], dict[int, int]]:
    """Where chunk ``q``'s partials land in a box, per owner place ``g``:
    ``g``'s predecessor on the own box's ring for ``q`` (every pass's chain
    for ``g`` that does not end at ``g`` ends there, on whatever ring it
    runs), and the inverse map (landing place -> owner place)."""
    ref = orders[_scatter_ring(q, 0, cf, len(orders), nb)]
    size = len(ref)
    before = {ref[i]: ref[i - 1] for i in range(size)}
    return before, {h: g for g, h in before.items()}


def _allgather_two(out: _Ops, groups: list[list[int]], orders: list[list[list[int]]],
                   cf: int) -> None:
    """An allreduce's second half after ``_reduce_scatter_crossing``, on its
    threadblocks: every owner sends its reduced chunk to its rail peer (the
    network channels), then each box ring hands round its own box's chunks
    and then the other box's, one chunk at a time (all of a chunk's steps
    before the next: two messages per ring step fill a FIFO of two calls, and
    a ring step that must send into a full FIFO before it frees its own
    waits for ever).  MI250 x2 at 1 GiB, 16 chunks per shard, 20
    threadblocks (simulated): 95.7 GB/s, against 78.9 for the old two-level
    rings with 24."""
    size, rings = len(groups[0]), len(orders[0])
    for q in range(cf):
        for b, members in enumerate(groups):
            for g in range(size):
                c = members[g] * cf + q
                out.add(OpKind.COPY, Slot(members[g], OUT, c), Slot(groups[1 - b][g], OUT, c),
                        _rail_channel(rings, 2, q, 1))
    for q in range(cf):
        for k in (0, 1):  # the own box's chunk, then the other box's
            _gather_pass(out, groups, orders, cf, k, q, q % rings)


def _gather_pass(out: _Ops, groups: list[list[int]], orders: list[list[list[int]]], cf: int,
                 k: int, q: int, ring: int, from_input: bool = False,
                 sources: list[int] | None = None) -> None:
    """One ring pass that hands chunk ``q`` of the box ``k`` back (of box
    ``sources[b]`` in box ``b``) round every box on ring ``ring`` (from the
    output, or ``from_input``: the own box's chunks from the owners'
    inputs)."""
    size, nb = len(groups[0]), len(groups)
    for t in range(size - 1):
        for b, members in enumerate(groups):
            source = groups[(b - k) % nb if sources is None else sources[b]]
            order = orders[b][ring]
            for p in range(size):
                sender, receiver = members[order[p]], members[order[(p + 1) % size]]
                c = source[order[(p - t) % size]] * cf + q
                src = (Slot(sender, IN, q) if from_input and t == 0
                       else Slot(sender, OUT, c))
                out.add(OpKind.COPY, src, Slot(receiver, OUT, c), ring)


def _allgather_crossing(out: _Ops, groups: list[list[int]], orders: list[list[list[int]]],
                        cf: int, reduced: bool = False) -> None:
    """Allgather in which every shard crosses the network once, at once
    (``reduced``: an allreduce's second half, from the owners' reduced
    chunks in their outputs, on the reduce-scatter's threadblocks).

    Every rank copies its shard to its output and sends it to its rail peer
    in every other box (``_rail_channel``; chunk by chunk, so chunk ``q``
    lands everywhere at about the same time).  The box rings hand round the
    own box's chunks first (chunk ``q`` on ring ``q``), then every landed
    chunk in the order the chunks land (by ``q``), chunk ``q`` of the box
    ``k`` back on ring ``(q + k R / B) mod R``: each ring takes one chunk of
    each box, and the chunks that land last (``q = cf - 1``) are handed
    round by different rings at once, so the call ends one ring pass after
    the network (MI250 x4, 16 chunks, 1 GiB: 171.6 GB/s with 23
    threadblocks; every box's chunk ``q`` on ring ``q``: 126.5; RCCL's
    rings as a file 146.6).
    """
    size, nb, rings = len(groups[0]), len(groups), len(orders[0])

    def shard(r: int, q: int) -> Slot:
        return Slot(r, OUT, r * cf + q) if reduced else Slot(r, IN, q)

    if not reduced:  # an allreduce's owners hold their results in the output already
        for r in (r for members in groups for r in members):
            for q in range(cf):
                out.add(OpKind.COPY, Slot(r, IN, q), Slot(r, OUT, r * cf + q),
                        _local_channel(rings, nb))
    for q in range(cf):
        for k in range(1, nb):
            for b in _send_first(nb, k):
                members, dest = groups[b], groups[(b + k) % nb]
                for g in range(size):
                    out.add(OpKind.COPY, shard(members[g], q),
                            Slot(dest[g], OUT, members[g] * cf + q),
                            _rail_channel(rings, nb, q, k))
    order_of_passes = ([(0, q) for q in range(cf)]
                       + [(k, q) for q in range(cf) for k in range(1, nb)])
    for k, q in order_of_passes:
        _gather_pass(out, groups, orders, cf, k, q, _gather_ring(q, k, cf, rings, nb),
                     from_input=k == 0 and not reduced)


def _allgather_grid(out: _Ops, groups: list[list[int]], orders: list[list[list[int]]],
                    cf: int, dims: tuple[int, ...], reduced: bool = False,
                    second: bool = True) -> None:
    """The crossing allgather in stages over a grid of boxes (``grid``;
    ``reduced``: an allreduce's second half, from the owners' results in
    their outputs).

    Every rank copies its shard to its output; in stage ``i`` it sends to
    its rail peer in each box along dimension ``i`` its own shard and those
    landed in the earlier stages (``stage_sends``; chunk by chunk, on a
    channel per stage and distance after the rings); the box rings hand
    round the own box's chunks, then the landed ones in the order they
    land (``grid.landing_times``, ties in ``landing_order``), the ``i``-th
    on ring ``i * GRID_RING_STRIDE mod R``: chunks that land together, one
    per distance, go round on different rings, and the rings take as many
    passes, within one.  Network sends and receives are lowered on
    threadblocks of their own: ``R + 2 sum(d_i - 1) + 1`` per rank, one
    more with ``_two_last``.

    DGX A100 at 1 GiB, 29-31 threadblocks (simulated): x16 (4 x 4, 8
    chunks per shard) 173.5 GB/s, against 132.3 for the crossing form with
    15 paired network threadblocks and 162.3 for rails.  Handing the
    chunks round stage by stage, chunk ``q`` of the ``x``-th source on
    ring ``(q + x) mod R``, put chunks that land together on one ring (x32,
    2 x 4 x 4: those of the boxes 8 and 24 back; x64, 2 x 2 x 2 x 2 x 4:
    those of all three distances), and the rings ended one after another
    after the network's last byte: x32 156.7 -> 166.1, x64 (2 chunks)
    146.1 -> 163.4, MI250 x64 (1 chunk) 103.3 -> 134.5; an allreduce's
    halves of 2 x 4 x 4 (x64) 71.8 -> 75.7.  On a grid of 2s
    (``_two_last``: x128, 2^7) the last stage's chunks alternate between
    its connection and a second one on the first stage's channel (32
    threadblocks): one NET connection fills 56% of a NIC, and the NIC was
    70-88% busy in the call's second half (1 GiB 151.6 -> 162.4 GB/s, 128
    MiB 68.3 -> 101.3; the landing estimate takes the two connections, and
    without that the rings' order no longer matched the landings: 147.2).

    Complexity: ``O(B^2 cf S^2)`` ops for boxes of ``S`` ranks; the
    landing estimate ``O(B cf sum(d_i - 1))`` and its sort ``O(B cf log(B cf))``.
    """
    size, rings = len(groups[0]), len(orders[0])
    local = rings + sum(d - 1 for d in dims)
    for r in (r for members in groups for r in members if not reduced):
        for q in range(cf):
            out.add(OpKind.COPY, Slot(r, IN, q), Slot(r, OUT, r * cf + q), local)
    sends = list(stage_sends(dims, _send_first))
    two = second and not reduced and _two_last(dims)
    for q in range(cf):
        for send in sends:
            members, dest = groups[send.sender], groups[send.dest]
            channels = [_grid_channel(rings, dims, send.stage, send.distance)]
            if two and send.stage == len(dims):  # odd places on the second connection
                channels.append(_grid_channel(rings, dims, 1, 1))
            for i, j in enumerate(send.sources, q * len(send.sources)):
                channel = channels[i % len(channels)]
                for g in range(size):
                    c = groups[j][g] * cf + q
                    src = (Slot(members[g], IN, q) if j == send.sender and not reduced
                           else Slot(members[g], OUT, c))
                    out.add(OpKind.COPY, src, Slot(dest[g], OUT, c), channel)
    offsets = landing_order(dims)
    passes = [(0, q) for q in range(cf)]
    for stage in range(1, len(dims) + 1):
        xs = [x for x, off in enumerate(offsets) if stage_of(off) == stage]
        passes += [(x, q) for q in range(cf) for x in xs]
    sources = [[shifted(b, tuple(-o for o in off), dims) for b in range(len(groups))]
               for off in offsets]
    # an allreduce's ring steps were fitted with ``_gather_ring``'s loads
    # beside the reduce-scatter's: keep its rings where the turns' loads differ
    turns = not reduced or len(set(_ring_loads(len(groups), cf, rings, _gather_ring))) == 1
    if turns:
        times = landing_times(dims, cf, two)
        passes.sort(key=lambda xq: times[offsets[xq[0]], xq[1]])
    stride = GRID_RING_STRIDE if math.gcd(GRID_RING_STRIDE, rings) == 1 else 1
    for i, (x, q) in enumerate(passes):
        ring = i * stride % rings if turns else _gather_ring(q, x, cf, rings, len(groups))
        _gather_pass(out, groups, orders, cf, 0, q, ring,
                     from_input=x == 0 and not reduced, sources=sources[x])


def _allgather(out: _Ops, groups: list[list[int]], orders: list[list[list[int]]],
               cf: int, coll: Collective) -> None:
    """Rail rings (from the owner's input, or its reduced output), then box rings."""
    size, nb = len(groups[0]), len(groups)
    first = IN if coll is Collective.ALLGATHER else OUT
    if coll is Collective.ALLGATHER:
        for r in range(sum(len(g) for g in groups)):
            for q in range(cf):
                out.add(OpKind.COPY, Slot(r, IN, q), Slot(r, OUT, r * cf + q), q % RINGS)
    for t in range(nb - 1):
        for g in range(size):
            rail = [members[g] for members in groups]
            for q in range(cf):
                for p in range(nb):
                    owner = rail[(p - t) % nb]
                    c = owner * cf + q
                    src_buf, idx = (first, q) if t == 0 and first is IN else (OUT, c)
                    out.add(OpKind.COPY, Slot(rail[p], src_buf, idx),
                            Slot(rail[(p + 1) % nb], OUT, c), q % RINGS)
    for t in range(size - 1):
        for b, members in enumerate(groups):
            for q in range(cf):
                order = orders[b][q % len(orders[b])]
                for p in range(size):
                    owner = order[(p - t) % size]
                    sender, receiver = members[order[p]], members[order[(p + 1) % size]]
                    for b2, box in enumerate(groups):
                        c = box[owner] * cf + q
                        src = (Slot(sender, IN, q) if first is IN and t == 0
                               and box[owner] == sender else Slot(sender, OUT, c))
                        out.add(OpKind.COPY, src, Slot(receiver, OUT, c),
                                _channel(q, b2, len(orders[b])))


__all__ = ["NAME", "rings2d_schedule"]
