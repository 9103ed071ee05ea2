"""Pass ``rails``: rail-aligned hierarchical schedules within a threadblock budget.

Boxes of ``G`` ranks behind a box switch (NVSwitch: every box peer one hop
away), joined by a network in which rank ``(b, g)`` (place ``g`` of box
``b``) reaches ``(b', g)`` of every other box: its *rail*.  Every byte
crosses the network once, on a rail, and every GPU keeps to a fixed, small
set of peers, so a file fits the threadblocks a training job can spare
(``--max-threadblocks``) from two boxes to 1024 GPUs.

Allgather, with box ``b``'s *block* the contiguous output chunks of its
ranks, cut into ``S`` *segments* (``S`` divides ``G``; a segment is ``G/S``
shards):

1. every rank sends its shard to its ``G-1`` box peers;
2. segment ``j`` of block ``b`` goes to box ``b'`` over one rail: its
   *carrier* place is ``((c-1) S + j) mod G`` for ``d = (b'-b) mod nb``
   and ``c = min(d, nb - d)``, so every place carries and receives the same
   number of segments, and exchanges them with the same rail peers both ways
   (``S = G``: the carrier is the shard's owner and the segment its own shard);
3. the receiving carrier forwards the segment to its ``G-1`` box peers.

Where the ``(nb-1) S`` segments of a box do not fall evenly on its ``G``
places (DGX A100 x12 and x16 at 4 segments), a few distances cross as one
shard per place, carried by its owner, and the others take the carriers in
turn among themselves (``RailPlan.spread``, when a rail peer more fits the
budget): every NIC then carries the same share.

Reduce-scatter runs it backwards: box peers send their inputs of a segment to
its carrier, which reduces them (in up to ``SUM_CHAINS`` short chains when a
threadblock is spare, ``_carrier_sum``) and sends the box's partial over the rail;
the owner reduces its input, its box peers' inputs and the partials that
crossed the network (through the receiving carrier when ``S < G``; in a
Simple file that carrier lands the partials of a chunk and sums them on a
local threadblock, ``_lands``, rather than reducing each as it arrives).
Allreduce is the reduce-scatter into the output, then the allgather, whose
phase 1 (every owner's reduced shard to its box peers) runs as the owners'
sums end (``_OwnSpreads``, from four boxes); a Simple allreduce's
reduce-scatter starts each shard and segment with pieces of one chunk
(``_lead_chunks``, ``_lead_plan``), and on eight boxes its allgather's
crossings start one after another (``_staggered``).

Transfers are cut into pieces (``piece`` chunks; with one segment per block
a Simple allgather halves each crossing's last piece, ``_tapered``, and a
Simple allreduce past ``PHASE_RANKS`` ranks takes pieces that fill a lane's
64 steps, ``PAIRED_LANE_TRANSFERS``; where an allreduce's crossings are one
piece each, its allgather takes finer ones, ``_gather_piece``) dealt
round robin to ``lanes`` channels per box peer (an allgather's last round of
relays off the first lane where own shards share it, ``_spare_first_lane``),
and the network pairs get their own
channels: on every rank the lowering pairs a lane's send to a peer with its
receive from the same peer, so a rank takes ``1 + lanes (G-1) + net_lanes
n_net`` threadblocks (``n_net``: its rail peers, about ``(nb-1) S / G``; one
more combines the carriers' split sums).
``plan_rails`` picks the most segments (fewest rail peers first is the
fallback) and lanes the budget allows: ``S = G`` at 2 to 8 DGX boxes, one
segment per block at 64 and 128 (16 rail peers each way at 128, where own
and relayed data share two lanes per box peer: 31 threadblocks; a
reduce-scatter or allreduce on 3 to 8 boxes with a segment per place
shares its lanes too, an allreduce's pieces planned for both phases,
``SHARED_PHASE_TRANSFERS``).  Lanes are
planned here, so the pipeline lowers without ``balance-lanes``.  Each
transfer has a round (``Schedule.rounds``, the lowering's order);
``separated_rounds`` gives every (pair, lane) at most one per round, the
ordering the pipeline lowers when the plain one hangs in a paired lowering.

Input invariant: a validated ``Topology`` of at least two boxes of equal size,
each box behind switches (every box peer reached without the network), every
rank reaching its rail peers through the network.
Output invariant: a ``Schedule`` (deps inferred) that ``check_schedule``
proves in-place and out-of-place; every op moves a contiguous range of at
most ``MAX_COUNT`` chunks between ranks joined through switches.

Complexity: O(N (G + nb S / G) cf / piece) ops.  Seeds: the hierarchical
(rail-aligned) schedules of 004 section 5.3 and the threadblock remarks of
004 section 4.5 (few trees, each with its own threadblocks).


The package, one module per part: ``layout`` (boxes and places; a
spanning tree of the box's links per place on boxes without a switch),
``plan`` (``RailPlan``: segments, carriers, lanes and pieces within the
budget), ``builder`` (the op writer), ``gather`` (allgather and an
allreduce's second half), ``scatter`` (reduce-scatter and its first half),
``schedule`` (``rails_schedule``, the Simple files' forms,
``separated_rounds``).
"""

from __future__ import annotations

from colc.compiler.hierarchical.rails.gather import STAGGER_FREE
from colc.compiler.hierarchical.rails.layout import _layout, box_trees
from colc.compiler.hierarchical.rails.plan import (
    PAIRED_LANE_TRANSFERS,
    SHARED_PHASE_TRANSFERS,
    STEPS_PER_LANE,
    SUM_CHAINS,
    RailPlan,
    _contiguous,
    _gather_piece,
    _split_lanes,
    carrier_place,
    fifo_problem,
    plan_rails,
    rail_peers,
)
from colc.compiler.hierarchical.rails.scatter import _carrier_sum
from colc.compiler.hierarchical.rails.schedule import (
    LANDS_BOXES,
    LEAD_PIECES,
    NAME,
    rails_schedule,
    separated_rounds,
    simple_form,
)

__all__ = ["NAME", "RailPlan", "box_trees", "carrier_place", "fifo_problem", "plan_rails",
           "rail_peers", "rails_schedule", "separated_rounds", "simple_form"]
