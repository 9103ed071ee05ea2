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

The pass lives in this package, one module per part:

* ``schedule``: ``rings2d_schedule``, which picks the form and writes it;
* ``box_rings``: the rings inside one box (``_packed_rings``, ``_layout``);
* ``forms``: which form a topology and chunking take, and whether it fits
  the runtime's 64 steps per threadblock and 32 channels;
* ``budget``: what the optional second connections and split chains take
  of the threadblock budget, and the budgets that key each schedule;
* ``placement``: rings, channels and landing places of the ops;
* ``scatter``, ``switched``, ``grid_scatter``, ``split``: the reduce-scatter
  forms and the split chains of their first pass;
* ``gather``: the allgathers (an allreduce's second half);
* ``pairs``: the allreduce in paired halves.
"""

from __future__ import annotations

from colc.compiler.rings.rings2d.box_rings import ring_shares
from colc.compiler.rings.rings2d.budget import (fewer_split_budgets, narrowed, narrowing_budget,
                                                next_box_twice, second_connections, simple_form,
                                                split_chunks)
from colc.compiler.rings.rings2d.forms import (box_grid, crossing_once, crossing_rings,
                                               crossing_threadblocks, pair_grid, paired_halves,
                                               switched_form)
from colc.compiler.rings.rings2d.placement import DEFAULT_CHUNKS, NAME, RINGS
from colc.compiler.rings.rings2d.schedule import rings2d_schedule

__all__ = [
    "DEFAULT_CHUNKS", "NAME", "RINGS", "box_grid", "crossing_once", "crossing_rings",
    "crossing_threadblocks", "fewer_split_budgets", "narrowed", "narrowing_budget",
    "next_box_twice", "pair_grid", "paired_halves", "ring_shares", "rings2d_schedule",
    "second_connections", "simple_form", "split_chunks", "switched_form",
]
