"""rails' reduce-scatter, and an allreduce's first half.

Input: a ``_Builder`` on a ``RailPlan``.  Output: its ops: box peers' inputs
reduced at each segment's carrier (in short chains summed on a local
threadblock when one is spare, ``_carrier_sum``), the box's partial across
the rail, the owner's chain of its input, its box peers' inputs and the
landed partials (``_owner_sums``, ``_chain``); carriers' sums kept
``LEAD`` pieces ahead of the owners' (``_interleave``).  Every reduction
reads only initialised operands (``check_schedule`` proves it).  O(N (G +
nb S / G) cf / piece) ops.  Seed 004 section 5.3.
"""

from __future__ import annotations

import dataclasses

from colc.compiler.hierarchical.rails.builder import _Builder, _by_receiver, _gather
from colc.compiler.hierarchical.rails.gather import _OwnSpreads
from colc.compiler.hierarchical.rails.plan import IN, OUT, SCR, _contiguous, _segments
from colc.ir.chunks import OpKind, Slot
from colc.ir.core import Collective

#: Pieces the carriers' sums run ahead of the owners' sums in an unpaired
#: reduce-scatter (``_interleave``; DGX A100 x2, 1 GiB c16: lead 1 248.2
#: GB/s, 2 and 3 254.1).
LEAD = 2
#: Channel hint of the combining threadblock (a local threadblock per hint:
#: on channel 0's, behind the owner's sums that wait on the network, the
#: next loop iteration's combines stalled the NIC for 214 us each).
SUM_CHANNEL = 1
#: Pieces of owners' sums between a piece's sums and its spread (``_OwnSpreads``).
SPREAD_LAG = 2


def _carrier_sum(out: _Builder, sources: list[Slot], first: Slot, acc: Slot, k: int) -> Slot:
    """``acc = first (+) sources`` on ``first``'s rank in ``plan.sum_chains``
    chains of received reductions: the first from ``first`` into ``acc``, each
    other from a plain receive into scratch; then the others reduced into
    ``acc`` on the combining threadblock.  Returns the slot of the sum
    (``first`` itself when there is nothing to add)."""
    t, m = first.rank, out.plan.sum_chains
    width = -(-len(sources) // m) or 1
    chains = [sources[i:i + width] for i in range(0, len(sources), width)] or [[]]
    prev = first
    for src in chains[0]:
        out.add(OpKind.REDUCE, src, acc, k, prev)
        prev = acc
    others = []
    for chain in chains[1:]:
        other = Slot(t, SCR, out.alloc(t, k))
        out.add(OpKind.COPY, chain[0], other, k)
        for src in chain[1:]:
            out.add(OpKind.REDUCE, src, other, k, other)
        others.append(other)
    j = out.sums[t] = out.sums.get(t, -1) + 1
    for other in others:
        out.add(OpKind.REDUCE, other, acc, k, acc,
                local=SUM_CHANNEL + j % out.plan.sum_tbs)
    return prev


def _reduce_scatter(out: _Builder, coll: Collective,
                    spreads: _OwnSpreads | None = None) -> None:
    """The allgather backwards; the owner's result lands in its output
    (``spreads``: an allreduce's own shards spread as their sums end)."""
    plan, cf = out.plan, out.cf
    if plan.segments < plan.size:
        _contiguous(plan)
    first = len(out.ops)
    ends = []  # where each piece round of the carriers' sums ends
    crossings = list(_segments(plan, cf))
    partial: dict[tuple[int, int], Slot] = {}  # (carrier rank, chunk) -> its box's partial
    # A crossing of the allgather carries block b from box b to box b2; here box
    # b2's partial of block b crosses back.
    out.relay = 1
    chains = []
    for _, b2, _, _, g, start, width in crossings:
        members, t = plan.groups[b2], plan.groups[b2][g]
        chains.append((members, t, start, out.alloc(t, width),
                       out.pieces(start, width, lead=out.lead), g))
    batches = _by_receiver(chains, lambda x: x[1])
    for p in range(max(len(x[4]) for x in chains)):  # 3': box inputs to the carrier
        for batch in batches:
            batch = [x for x in batch if p < len(x[4])]
            gathered = _gather(out, [(x[0], plan.tree(x[5]), *x[4][p]) for x in batch])
            for (members, t, start, at, pieces, g), sources in zip(batch, gathered):
                c, k = pieces[p]
                partial[(t, c)] = _carrier_sum(out, sources, Slot(t, IN, c),
                                               Slot(t, SCR, at + c - start), k)
            out.round += 1
        ends.append(len(out.ops))
    # (receiving rank, chunk) -> (length, the partials that cross to it)
    arrived: dict[tuple[int, int], tuple[int, list[Slot]]] = {}
    for b, b2, _, _, g, start, width in crossings:  # 2': over the rails
        t, u = plan.groups[b2][g], plan.groups[b][g]
        for c, k in out.pieces(start, width, lead=out.lead):
            arrived.setdefault((u, c), (k, []))[1].append(partial[(t, c)])
    starts = _owner_sums(out, coll, arrived, spreads)
    if plan.unpaired and starts and starts[0] == ends[-1]:  # nothing crossed apart
        _interleave(out, [first, *ends], [*starts, len(out.ops)])


def _owner_sums(out: _Builder, coll: Collective,
                arrived: dict[tuple[int, int], tuple[int, list[Slot]]],
                spreads: _OwnSpreads | None = None) -> list[int]:
    """1': every owner reduces its input, its box peers' inputs and the partials that
    crossed the rails (through the receiving carrier's sum when it is not the owner),
    each piece round followed by the ``spreads`` that its sums complete.
    Returns where each piece round of the owners' sums starts in ``out.ops``."""
    plan, cf = out.plan, out.cf
    # Two boxes' reduce-scatter chains the crossing partial into the owner's
    # sum (simulated DGX A100 x2 at 1 GiB: 222 GB/s, landed first 208); else
    # it lands in scratch first (x8: 167 against 158; allreduce: no hang).
    land = (coll is Collective.ALLREDUCE and not plan.unpaired) or len(plan.groups) > 2
    extra: dict[tuple[int, int], list[Slot]] = {}  # (owner, chunk) -> rail sources
    base, nth = out.round, {}  # a receiving rank's j-th arrival crosses in round base + j
    for (u, c), (k, parts) in sorted(arrived.items()):
        nth[u] = nth.get(u, -1) + 1
        out.round = base + nth[u]
        owners = range(c // cf, (c + k - 1) // cf + 1)
        if owners == range(u, u + 1) and not land:  # chained into the owner's sum
            extra.setdefault((u, c), []).extend(parts)
            continue
        if owners == range(u, u + 1):  # the owner receives them itself
            # into scratch, plainly: a receive chained to the owner's sum waits
            # for the box peers' inputs while the rank's network sends of later
            # rounds run ahead (allreduce: four sends in a depth-2 FIFO, a hang)
            for part in parts:
                landing = Slot(u, SCR, out.alloc(u, k))
                out.add(OpKind.COPY, part, landing, k)
                extra.setdefault((u, c), []).append(landing)
            continue
        acc = Slot(u, SCR, out.alloc(u, k))  # the receiving carrier sums them first
        out.add(OpKind.COPY, parts[0], acc, k)
        if out.land:  # each into scratch, then summed locally (``_lands``)
            landed = [Slot(u, SCR, out.alloc(u, k)) for _ in parts[1:]]
            for part, landing in zip(parts[1:], landed):
                out.add(OpKind.COPY, part, landing, k)
            for landing in landed:
                out.add(OpKind.REDUCE, landing, acc, k, acc)
        else:  # reduced as they arrive, one rail threadblock after the other
            for p in parts[1:]:
                out.add(OpKind.REDUCE, p, acc, k, acc)
        for o in owners:
            lo = max(c, o * cf)
            part = acc.shifted(lo - c)
            if plan.trees and o != u:  # no box switch: down u's tree towards o
                part = _toward(out, u, o, part, min(c + k, (o + 1) * cf) - lo)
            extra.setdefault((o, lo), []).append(part)
    out.round = base + max(nth.values(), default=0) + 1
    out.relay = 0
    owners = [(members, r, out.alloc(r, cf), out.pieces(r * cf, cf, lead=out.lead), g)
              for members in plan.groups for g, r in enumerate(members)]
    starts = []
    for p in range(len(owners[0][3])):  # in rounds, as the allgather
        out.round += 1
        starts.append(len(out.ops))
        gathered = _gather(out, [(x[0], plan.tree(x[4]), *x[3][p]) for x in owners])
        for (members, r, base, pieces, g), sources in zip(owners, gathered):
            c, k = pieces[p]
            final = (Slot(r, OUT, c - r * cf) if coll is Collective.REDUCESCATTER
                     else Slot(r, OUT, c))
            _chain(out, r, sources, extra.get((r, c), []), Slot(r, IN, c),
                   Slot(r, SCR, base + c - r * cf), final, k)
        if spreads is not None and p >= SPREAD_LAG:
            c, k = owners[0][3][p - SPREAD_LAG]
            spreads.upto(c + k - owners[0][1] * cf)
    if spreads is not None:
        spreads.upto(cf)
    out.round += 1  # the last piece's forwarded partials take the round after it
    return starts


def _interleave(out: _Builder, carriers: list[int], owners: list[int]) -> None:
    """Reorder ``out.ops`` so that the owners' sums of piece ``p`` follow the
    carriers' sums of piece ``p + LEAD`` (``carriers`` and ``owners``: where
    each piece round of the two starts, and where the last ends).

    Unpaired lanes carry both in program order.  Carriers' sums first, then
    owners' sums (as paired lanes do them side by side) end with the last
    piece's network crossing after the box links are done: on DGX A100 x2 the
    NIC is fed at the pace of the owners' sums and the call ends 340 us
    after the NVLinks idle (reduce-scatter, 1 GiB, c16 Simple: 246.0 GB/s).
    With the carriers ``LEAD`` pieces ahead the last crossing overlaps the
    last owners' sums: 254.1 GB/s.  Every op keeps its data dependencies
    (an owner's sum reads a carrier's partial of the same piece, ahead of it);
    rounds become the new groups, carriers' before owners'.
    """
    ops, pieces = out.ops, []
    groups = [list(range(a, b)) for a, b in zip(carriers, carriers[1:])]
    later = [list(range(a, b)) for a, b in zip(owners, owners[1:])]
    for i in range(max(len(groups), len(later) + LEAD)):
        if i < len(groups):
            pieces.append(groups[i])
        if 0 <= i - LEAD < len(later):
            pieces.append(later[i - LEAD])
    head = ops[:carriers[0]]
    new, rounds = list(head), list(out.rounds[:carriers[0]])
    base = max(rounds, default=-1) + 1
    for g, idx in enumerate(pieces):
        for j in idx:
            new.append(dataclasses.replace(ops[j], op_id=len(new)))
            rounds.append(base + g)
    out.ops, out.rounds = new, rounds


def _toward(out: _Builder, u: int, o: int, part: Slot, n: int) -> Slot:
    """Relay ``n`` chunks at ``part`` (on ``u``) down ``u``'s box tree to the
    rank above ``o`` (scratch copies on the ranks between); the slot there."""
    plan = out.plan
    members = plan.groups[out.box_of[u]]
    place = {r: g for g, r in enumerate(members)}
    parent = {b: a for a, b in plan.tree(place[u])}
    path = [place[o]]
    while path[-1] != place[u]:
        path.append(parent[path[-1]])
    for g in reversed(path[1:-1]):  # u's child on the way, ..., o's parent
        hop = Slot(members[g], SCR, out.alloc(members[g], n))
        out.add(OpKind.COPY, part, hop, n)
        part = hop
    return part


def _chain(out: _Builder, r: int, box: list[Slot], crossed: list[Slot], first: Slot,
           acc: Slot, final: Slot, k: int) -> None:
    """``final = first (+) box (+) crossed`` on rank ``r`` through the accumulator
    ``acc`` (``box``: the box peers' inputs or partials; ``crossed``: what
    crossed the rails for ``r``, forwarded by a receiving carrier or landed
    on ``r`` itself).

    Received sources reduce as they arrive (``rrc``), the box peers' first;
    the forwarded partials follow in the next round (``Schedule.rounds``), so
    that on a paired box threadblock a rank's forwarding of a partial, which
    waits for the rails, is listed after its part in the box peers' chains,
    which does not: else every owner's chain stalls behind the last
    crossing (DGX A100 x16 reduce-scatter at 1 GiB, Simple: 149.7 -> 156.1
    GB/s).  Sources already on ``r`` (landed in scratch) are summed into the
    first of them on a local threadblock as they land, and that sum is
    reduced into ``final`` last: one local reduce after the chain instead of
    one per landing (with the rounds: x16 allreduce 67.5 -> 76.5)."""
    sources = box + crossed
    remote = [x for x in sources if x.rank != r]
    local = [x for x in sources if x.rank == r]
    if not remote:  # a box of one rank: everything landed here
        out.add(OpKind.COPY, first, acc, k)
        for src in local:
            out.add(OpKind.REDUCE, src, acc, k, acc)
        out.add(OpKind.COPY, acc, final, k)
        return
    for src in local[1:]:
        out.add(OpKind.REDUCE, src, local[0], k, local[0])
    # With separated rounds (``out.last``) ``_Builder.add`` moves the rounds on
    # itself, and an offset taken back here would undo that.
    later = set(crossed) if out.last is None else set()
    here, prev = out.round, first
    for i, src in enumerate(remote):
        out.round = here + (src in later)
        dst = final if i == len(remote) - 1 else acc
        out.add(OpKind.REDUCE, src, dst, k, prev)
        prev = dst
    if later:
        out.round = here
    if local:
        out.add(OpKind.REDUCE, local[0], final, k, final)
