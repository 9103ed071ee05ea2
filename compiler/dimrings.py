"""Pass ``dimrings``: dimension-ordered ring allgather on tori, several shards per step.

Input invariant: a direct-connect ``Topology`` that is a torus in the
``torus`` family's rank order (``torus_dims`` finds the dimensions from the
links: a Cartesian product of cycles, row-major, last dimension fastest; a
ring is a 1-D torus, a hypercube a torus of 2s).
Output invariant: an allgather ``Schedule`` that
``check_schedule`` proves for in-place and out-of-place, every transfer
between torus neighbours, every op moving a contiguous range of at most
``MAX_COUNT`` chunks.

Why: BFB and the other generators move one shard per step, so a rank needs
a step per foreign shard, and past about 2047 ranks the runtime's parser
cannot hold the file (``pipeline.shard_steps_problem``).  Gathering the
fastest dimension first keeps what a rank holds contiguous in rank order
(a row, then a plane, ...), so one step carries a whole row: on an RxC
torus a rank has O(R + C) steps instead of R*C (50x50: about 300 instead
of 2499).

Phases (the multidimensional bucket algorithm): for each dimension from the
fastest to the slowest, every line along it runs a ring allgather of the
blocks its ranks hold, each block going the shorter way round (two
directions, about (n-1)/2 blocks per link).  Rows-first alone leaves the
links of the dimensions already gathered idle while the block grows, so the
last phase alone costs about twice the bound.  When the previous dimension
has even length >= 4, its parity splits the work: a line whose previous
coordinate is even carries the lower half of every block, an odd one the
upper half, and each rank gets the other half of every block from its two
neighbours along the previous dimension (blocks that came from one side
from the left neighbour, the rest from the right), which overlaps with the
ring.  2-D RxC, C even, link bandwidth b, shard s: about
(C-1)s/2b + (R-1)Cs/4b against the BFB bound (RC-1)s/4b (50x50: 98%).

Complexity: O(N * sum(n_k) * pieces) ops for N ranks; detection
O(factorizations * degree + N * degree).  Seeds: 002 (rings), the
dimension-ordered bucket algorithm on tori; BFB's bound (001 3.6) is the
comparison.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from colc.errors import UnsupportedError
from colc.ir.chunks import Op, OpKind, Schedule, Slot
from colc.ir.core import Buffer, Collective
from colc.ir.topology import Topology

NAME = "dimrings"

#: Chunks one op may move (the runtime's cnt <= 71).
MAX_COUNT = 71

#: Ordered factorizations tried when looking for a torus (prunes at rank 0).
_SEARCH_LIMIT = 100000

IN, OUT = Buffer.INPUT, Buffer.OUTPUT


def torus_dims(topo: Topology) -> tuple[int, ...] | None:
    """The dimensions of ``topo`` as a row-major torus, or None.

    A torus here is what the ``torus`` family builds: rank ``r`` with
    coordinates ``c`` (last dimension fastest) is joined by duplex links to
    ``c +- e_k`` (mod ``n_k``) and to nothing else.  The slowest dimension
    comes first.

    Examples
    --------
    >>> from colc.frontends.families import torus, ring, hypercube
    >>> torus_dims(torus([3, 4], 10)), torus_dims(ring(5, 10)), torus_dims(hypercube(3, 1))
    ((3, 4), (5,), (2, 2, 2))
    """
    if topo.has_switches or topo.num_ranks < 2:
        return None
    n = topo.num_ranks
    nbrs = _neighbours(topo)
    if nbrs is None:
        return None
    budget = [_SEARCH_LIMIT]
    for dims in _candidates(n, 1, frozenset(nbrs[0]), budget):
        if _matches(dims, nbrs):
            return dims
    return None


def _neighbours(topo: Topology) -> list[set[int]] | None:
    """Undirected rank adjacency, or None when some link is one-way."""
    rank_of = topo.rank_of
    arcs: set[tuple[int, int]] = set()
    for link in topo.links:
        arcs.add((rank_of[link.src], rank_of[link.dst]))
    nbrs: list[set[int]] = [set() for _ in range(topo.num_ranks)]
    for u, v in arcs:
        if (v, u) not in arcs:
            return None
        if u != v:
            nbrs[u].add(v)
    return nbrs


def _expected(d: int, stride: int) -> set[int]:
    return {stride} if d == 2 else {stride, (d - 1) * stride}


def _candidates(rest: int, stride: int, at_zero: frozenset[int], budget: list[int]):
    """Dimension tuples (slowest first) of ``rest`` ranks whose rank-0 neighbours fit."""
    if rest == 1:
        if not at_zero:
            yield ()
        return
    for d in range(2, rest + 1):
        if rest % d:
            continue
        budget[0] -= 1
        if budget[0] < 0:
            return
        want = _expected(d, stride)
        if not want <= at_zero:
            continue
        for head in _candidates(rest // d, stride * d, at_zero - want, budget):
            yield (*head, d)


def _matches(dims: tuple[int, ...], nbrs: list[set[int]]) -> bool:
    strides = _strides(dims)
    for r, have in enumerate(nbrs):
        want = set()
        for d, s in zip(dims, strides):
            x = r // s % d
            want.add(r + ((x + 1) % d - x) * s)
            want.add(r + ((x - 1) % d - x) * s)
        if want != have:
            return False
    return True


def _strides(dims: tuple[int, ...]) -> list[int]:
    return [math.prod(dims[k + 1:]) for k in range(len(dims))]


def dimrings_schedule(topo: Topology, collective: Collective,
                      chunks: int | None = None) -> Schedule:
    """Dimension-ordered ring allgather of ``topo`` (see the module docstring).

    Parameters
    ----------
    topo : Topology
        A torus (``torus_dims`` finds it).
    collective : Collective
        Allgather only.
    chunks : int or None
        Chunks per shard (default 1).

    Raises
    ------
    UnsupportedError
        When ``topo`` is not a torus or the collective is not allgather.
    """
    if collective is not Collective.ALLGATHER:
        raise UnsupportedError(f"dimrings builds allgather only, not {collective.value}; "
                               f"use --algorithm bfb or ring")
    dims = torus_dims(topo)
    if dims is None:
        raise UnsupportedError(f"dimrings needs a torus (a Cartesian product of rings in "
                               f"row-major rank order); {topo.name!r} is not one")
    cf = chunks or 1
    builder = _Builder(math.prod(dims), cf)
    for r in range(builder.n):
        builder.writer[r][r * cf:(r + 1) * cf] = len(builder.ops)
        builder.ops.append(Op(len(builder.ops), OpKind.COPY, Slot(r, IN, 0),
                              Slot(r, OUT, r * cf), cf))
    for k in reversed(range(len(dims))):
        _phase(builder, dims, k)
    return Schedule(collective, builder.n, builder.n * cf, 0, tuple(builder.ops),
                    algorithm=NAME)


class _Builder:
    """Ops in program order with their dependencies.

    Every output chunk of every rank is written once (the own shard by the
    local copy, which in-place is the chunk itself), so an op's only hazards
    are its reads: it depends on the ops that wrote its source range
    (``writer``, per rank, the op id of each chunk's writer); the same
    dependencies ``infer_dependencies`` would find, in O(chunks) numpy work.
    """

    def __init__(self, n: int, cf: int) -> None:
        self.n = n
        self.cf = cf
        self.ops: list[Op] = []
        self.writer = [np.full(n * cf, -1, dtype=np.int64) for _ in range(n)]

    def move(self, src: int, dst: int, start: int, length: int, hint: int) -> None:
        """Copy chunks ``[start, start+length)`` of the output from ``src`` to ``dst``."""
        pieces = -(-length // MAX_COUNT)
        for i in range(pieces):
            size = length // pieces + (1 if i < length % pieces else 0)
            deps = np.unique(self.writer[src][start:start + size])
            op_id = len(self.ops)
            self.writer[dst][start:start + size] = op_id
            self.ops.append(Op(op_id, OpKind.COPY, Slot(src, OUT, start), Slot(dst, OUT, start),
                               size, None, tuple(deps.tolist()), hint))
            start += size


class _Plan:
    """The geometry of the phase along dimension ``k`` (ranges in chunks)."""

    def __init__(self, dims: tuple[int, ...], k: int, stride: int, cf: int = 1) -> None:
        self.n = n = dims[k]
        self.length = stride * cf  # chunks each rank holds before the phase: one block
        self.split = k + 1 < len(dims) and dims[k + 1] % 2 == 0 and dims[k + 1] >= 4
        self.part = self.length // 2 if self.split else self.length
        self.halve = n % 2 == 0 and self.part >= 2  # the opposite block travels both ways
        self.down = (n - 1) // 2 + (1 if self.halve else 0)  # steps of the + direction
        self.up = n - 1 - (n - 1) // 2  # steps of the - direction

    def share(self, hops: int, sign: int) -> int:
        """Chunks of a block (this rank's part) on its ``hops``-th hop in direction ``sign``."""
        return self.cut(hops, sign)[1]

    def cut(self, hops: int, sign: int) -> tuple[int, int]:
        """(offset in the rank's part, chunks) on the ``hops``-th hop in direction ``sign``."""
        part = self.part
        if self.halve and hops == self.n // 2:
            return (0, part // 2) if sign > 0 else (part // 2, part - part // 2)
        return 0, part


def _phase(b: _Builder, dims: tuple[int, ...], k: int) -> None:
    """Gather along dimension ``k``: each rank's block grows ``dims[k]``-fold.

    A block goes the shorter way round; on an even ring the opposite block is
    cut in two, one half each way, when it has two chunks or more.
    """
    strides = _strides(dims)
    n, stride = dims[k], strides[k]
    plan = _Plan(dims, k, stride, b.cf)
    side = strides[k + 1] if plan.split else 0

    def along(r: int, delta: int) -> int:
        x = r // stride % n
        return r + ((x + delta) % n - x) * stride

    def block(r: int, delta: int, sign: int, hops: int) -> tuple[int, int]:
        """(first chunk, chunks) of this rank's share of the block ``delta`` away,
        on its ``hops``-th hop in direction ``sign``."""
        x = r // stride % n
        start = (r - r % stride + ((x + delta) % n - x) * stride) * b.cf
        if plan.split and r // side % 2:
            start += plan.part
        offset, size = plan.cut(hops, sign)
        return start + offset, size

    def beside(r: int, delta: int) -> int:
        y = r // side % dims[k + 1]
        return r + ((y + delta) % dims[k + 1] - y) * side

    for t in range(1, max(plan.down, plan.up) + 1):
        for r in range(b.n):
            if t <= plan.down:
                b.move(r, along(r, 1), *block(r, -(t - 1), 1, t), 0)
            if t <= plan.up:
                b.move(r, along(r, -1), *block(r, t - 1, -1, t), 1)
        if not plan.split:
            continue
        for r in range(b.n):
            # what arrived this step goes on to the other parity beside
            if t <= plan.down:
                b.move(r, beside(r, 1), *block(r, -t, 1, t), 2)
            if t <= plan.up:
                b.move(r, beside(r, -1), *block(r, t, -1, t), 3)


def dimrings_estimate(topo: Topology) -> tuple[int, Fraction]:
    """(hops, bandwidth-only algbw) of ``dimrings_schedule(topo, ALLGATHER)`` without
    building it: per dimension, the chunks one link direction carries in its ring
    phase and, when the next dimension splits by parity, in that phase's exchange.

    Raises
    ------
    UnsupportedError
        When ``topo`` is not a torus.

    Examples
    --------
    >>> from colc.frontends.families import torus
    >>> dimrings_estimate(torus([4, 4], 10))
    (5, Fraction(32, 1))
    """
    dims = torus_dims(topo)
    if dims is None:
        raise UnsupportedError(f"dimrings needs a torus; {topo.name!r} is not one")
    strides = _strides(dims)
    cap = topo.capacity()
    load = [0] * len(dims)  # chunks per link direction, per dimension
    hops = 0
    for k in reversed(range(len(dims))):
        plan = _Plan(dims, k, strides[k])
        plus = sum(plan.share(t, 1) for t in range(1, plan.down + 1))
        minus = sum(plan.share(t, -1) for t in range(1, plan.up + 1))
        # a length-2 dimension is one duplex link: both directions share it
        load[k] += plus + minus if dims[k] == 2 else max(plus, minus)
        hops += max(plan.down, plan.up)
        if plan.split:  # the exchange: the same shares, one hop along dimension k + 1
            load[k + 1] += max(plus, minus)
            hops += 1
    worst = Fraction(0)
    for k, d in enumerate(dims):
        bw = cap[(topo.ranks[0], topo.ranks[strides[k] % math.prod(dims)])]
        worst = max(worst, Fraction(load[k]) / bw)
    return hops, Fraction(math.prod(dims)) / worst
