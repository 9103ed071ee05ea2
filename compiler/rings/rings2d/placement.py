"""Where ``rings2d``'s ops go: its rings, channels, landing places and the op list.

The vocabulary every form of the pass shares (``colc.compiler.rings.rings2d``):
the ring of each chunk (``_scatter_ring``, ``_gather_ring``, ``_ring_groups``),
the channel of each ring, rail, grid connection and split chain (``_channel``,
``_rail_channel``, ``_grid_channel``, ``_split_channel``, ...), where a
chunk's partials land in its own box (``_landing_places``), the order in
which boxes send along a distance (``_send_first``), the grid's optional
connections (``_grid_spare``, ``_fuses_last``, ``_two_last``), and ``_Ops``,
the list the forms append their ops and gates to.

Input invariant: ring orders as ``box_rings._layout`` returns them.
Output invariant: every helper is a pure function of its arguments; channels
stay below ``MAX_CHANNELS`` where the forms' fit checks (``forms``) hold.
Complexity: O(1) per call, ``_ring_loads`` O(B cf).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from colc.ir.chunks import Op, OpKind, Slot
from colc.ir.core import Buffer, Protocol

NAME = "rings2d"
#: Rings inside each box (chunks of a shard are dealt to them in turn).
RINGS = 16
#: Network channels per rail peer of the crossing form on two boxes
#: (``_rail_channel``): one connection does not fill a NIC.
RAIL_CHANNELS = 2
#: Steps a threadblock of the crossing form may take (the runtime's 64 per
#: threadblock): ``B G`` per group of chunks on a reduce-scatter ring.
MAX_RING_STEPS = 64
#: Channels of a file (the runtime's 32): rings, rail channels, the
#: allgather's local copies.
MAX_CHANNELS = 32
#: Most chunks per shard of a fused last stage (``_fuses_last``): the
#: calls Simple's FIFO holds.
FUSED_LAST_CHUNKS = Protocol.SIMPLE.fifo_depth
#: Chunks per shard when none are asked for.
DEFAULT_CHUNKS = 16

IN, OUT, SCR = Buffer.INPUT, Buffer.OUTPUT, Buffer.SCRATCH


class _Ops:
    def __init__(self) -> None:
        self.ops: list[Op] = []
        self.gates: list[int] = []  # ``Schedule.gates``

    def add(self, kind: OpKind, src: Slot, dst: Slot, channel: int,
            operand: Slot | None = None, gate: int = -1) -> None:
        self.ops.append(Op(len(self.ops), kind, src, dst, 1, operand, (), channel))
        self.gates.append(gate)


def _channel(q: int, box: int, rings: int) -> int:
    """Channel of chunk ``q`` of box ``box``'s shard on a box ring: every
    (ring, box) pair gets its own, so a ring step moves one message per
    connection (``B`` messages on one connection would fill a FIFO of depth
    2 before any ring step could forward, and every ring would wait)."""
    return (q % rings + rings * box) % 32


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


def _ring_groups(cf: int, rings: int) -> list[range]:
    """The chunks ``q`` of a crossing reduce-scatter's pass in groups of one
    chunk per ring, in order.

    >>> _ring_groups(40, 16)
    [range(0, 16), range(16, 32), range(32, 40)]
    """
    return [range(q, min(cf, q + rings)) for q in range(0, cf, rings)]


def _grid_split_channel(rings: int, dims: tuple[int, ...]) -> int:
    """The grid's first split chunk's channel (``_reduce_scatter_grid``):
    after the grid's channels (``_grid_channel``) and the first pass's
    second connection (``_grid_spare``)."""
    return rings + sum(d - 1 for d in dims) + _grid_spare(rings, dims)


def _split_channel(rings: int, nb: int, two: int) -> int:
    """The first split chunk's channel (``_split_pass``): after the rail
    channels (``_rail_channel``), the distances up to ``two`` with two."""
    return rings + max(RAIL_CHANNELS, nb - 1) + two


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


def _unpaired_threadblocks(rings: int, nb: int, two: int) -> int:
    """Threadblocks of the crossing reduce-scatter with its network sends and
    receives apart and the distances up to ``two`` on two connections:
    ``R + 2 (B - 1)`` (two boxes: two channels, ``R + 4``) and two per
    second connection."""
    return rings + 2 * (max(RAIL_CHANNELS, nb - 1) + two)


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
