"""Pass ``dimrings``: dimension-ordered rings on tori, several shards per step.

Input invariant: a direct-connect ``Topology`` that is a torus in the
``torus`` family's rank order (``torus_dims`` finds the dimensions from the
links: a Cartesian product of cycles, row-major, last dimension fastest; a
ring is a 1-D torus, a hypercube a torus of 2s).
Output invariant: an allgather, reduce-scatter or allreduce ``Schedule``
that ``check_schedule`` proves for in-place and out-of-place, every transfer
between torus neighbours, every op moving a contiguous range of at most
``MAX_COUNT`` chunks.

Why: BFB and the other generators move one shard per step, so a rank needs
a step per foreign shard: thousands of steps on large tori, and each step
is a call of its own.  Gathering the
fastest dimension first keeps what a rank holds contiguous in rank order
(a row, then a plane, ...), so one step carries a whole row: on an RxC
torus a rank has O(R + C) steps instead of R*C (50x50, blocks in 2
pieces: about 250 sends instead of 2499).

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

Reduce-scatter is the allgather reversed (seed 001 A.2's reversal): every
transfer u -> v of a range becomes v -> u in reverse program order, where u
adds v's partial into its accumulator (scratch, one chunk per chunk of the
input), so each chunk's broadcast tree becomes its reduction tree and every
contribution is added once.  An accumulator starts as the first reduction
of the rank's input with a child's partial; a rank with no child sends its
input; ranges are cut where that differs.  The owner copies its total to the
output.  Allreduce is that reduce-scatter (totals into the output) followed
by the allgather on the output: twice the steps and half the algbw.
Dependencies of reduce-scatter and allreduce come from
``infer_dependencies`` (their accumulators are read and written again).

Complexity: O(N * sum(n_k) * pieces) ops for N ranks (plus O(chunk accesses)
for the inferred dependencies of reduce-scatter and allreduce); detection
O(factorizations * degree + N * degree).  Seeds: 002 (rings), the
dimension-ordered bucket algorithm on tori; BFB's bound (001 3.6) is the
comparison.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from colc.compiler.lowering.infer_dependencies import infer_dependencies
from colc.errors import UnsupportedError
from colc.ir.chunks import Op, OpKind, Schedule, Slot
from colc.ir.core import Buffer, Collective
from colc.ir.topology import Topology

NAME = "dimrings"

#: Chunks one op may move (the runtime's cnt <= 71).
MAX_COUNT = 71

#: Pieces a block move is cut into at least (when it has the chunks), most
#: first: each piece relays on its own, so a link is driven by that many
#: threadblocks (one cannot drive it).  Torus 16x16 allgather at 1 GiB,
#: simulated: 67.8 GB/s with 1, 83.6 with 2, 90.3 with 4 (BFB 96.4).  Fewer
#: above ``MANY_RANKS`` (steps cost lowering time) or when the runtime's node
#: limit needs it (``_pieces``).
PIECES = (4, 2, 1)
MANY_RANKS = 1024

#: XML nodes kept free per rank for threadblocks and nops when choosing pieces.
_NODE_MARGIN = 200

#: Ordered factorizations tried when looking for a torus (prunes at rank 0).
_SEARCH_LIMIT = 100000

IN, OUT, SCR = Buffer.INPUT, Buffer.OUTPUT, Buffer.SCRATCH


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
    """Dimension-ordered rings of ``collective`` on ``topo`` (see the module docstring).

    Parameters
    ----------
    topo : Topology
        A torus (``torus_dims`` finds it).
    collective : Collective
        Allgather, reduce-scatter or allreduce.
    chunks : int or None
        Chunks per shard (default 1).

    Raises
    ------
    UnsupportedError
        When ``topo`` is not a torus or the collective is another one.
    """
    if collective not in (Collective.ALLGATHER, Collective.REDUCESCATTER,
                          Collective.ALLREDUCE):
        raise UnsupportedError(f"dimrings builds allgather, reducescatter and allreduce, not "
                               f"{collective.value}")
    dims = torus_dims(topo)
    if dims is None:
        raise UnsupportedError(f"dimrings needs a torus (a Cartesian product of rings in "
                               f"row-major rank order); {topo.name!r} is not one")
    cf = chunks or 1
    n = math.prod(dims)
    builder = _Builder(n, cf, _pieces(dims, cf, collective))
    for k in reversed(range(len(dims))):
        _phase(builder, dims, k)
    if collective is Collective.ALLGATHER:
        ops = _allgather_ops(builder.moves, n, cf)
        return Schedule(collective, n, n * cf, 0, tuple(ops), algorithm=NAME)
    ops = _reduce_scatter_ops(builder.moves, n, cf, collective)
    if collective is Collective.ALLREDUCE:
        ops += _allgather_ops(builder.moves, n, cf, first=len(ops), own=False)
    sched = Schedule(collective, n, n * cf, n * cf, tuple(ops), algorithm=NAME)
    return infer_dependencies(sched)


def _allgather_ops(moves: list[tuple[int, int, int, int, int]], n: int, cf: int,
                   first: int = 0, own: bool = True) -> list[Op]:
    """The allgather: (with ``own``) each rank's input to its output, then ``moves``.

    Every output chunk of every rank is written once (the own shard by the
    local copy, which in-place is the chunk itself), so an op's only hazards
    are its reads: it depends on the ops that wrote its source range
    (``writer``, per rank, the op id of each chunk's writer); the same
    dependencies ``infer_dependencies`` would find, in O(chunks) numpy work.
    Op ids start at ``first``; without ``own`` the shards are already in place
    and the moves have no dependencies yet.
    """
    ops: list[Op] = []
    writer = [np.full(n * cf, -1, dtype=np.int64) for _ in range(n)] if own else None
    if own:
        for r in range(n):
            writer[r][r * cf:(r + 1) * cf] = first + len(ops)
            ops.append(Op(first + len(ops), OpKind.COPY, Slot(r, IN, 0), Slot(r, OUT, r * cf),
                          cf))
    for src, dst, start, size, hint in moves:
        op_id = first + len(ops)
        deps: tuple[int, ...] = ()
        if writer is not None:
            deps = tuple(np.unique(writer[src][start:start + size]).tolist())
            writer[dst][start:start + size] = op_id
        ops.append(Op(op_id, OpKind.COPY, Slot(src, OUT, start), Slot(dst, OUT, start), size,
                      None, deps, hint))
    return ops


def _reduce_scatter_ops(moves: list[tuple[int, int, int, int, int]], n: int, cf: int,
                        collective: Collective) -> list[Op]:
    """The allgather's moves reversed into reductions, then each total to its owner's output.

    ``acc[r][c]``: whether rank r's accumulator (scratch chunk c) holds a value;
    where it does not, the rank's input stands for it.
    """
    ops: list[Op] = []
    acc = [np.zeros(n * cf, dtype=bool) for _ in range(n)]

    def where(rank: int, at: int, held: bool) -> Slot:
        return Slot(rank, SCR if held else IN, at)

    for parent, child, start, size, hint in reversed(moves):
        end = start + size
        # runs of chunks where both ends are in the same state
        state = acc[child][start:end].astype(np.int8) * 2 + acc[parent][start:end]
        cuts = [0, *(np.flatnonzero(np.diff(state)) + 1).tolist(), size]
        for a, b in zip(cuts, cuts[1:]):
            lo = start + a
            held_child, held_parent = bool(state[a] >= 2), bool(state[a] % 2)
            ops.append(Op(len(ops), OpKind.REDUCE, where(child, lo, held_child),
                          Slot(parent, SCR, lo), b - a, where(parent, lo, held_parent), (),
                          hint))
        acc[parent][start:end] = True
    for r in range(n):
        dst = Slot(r, OUT, 0 if collective is Collective.REDUCESCATTER else r * cf)
        for a, b in _runs(acc[r][r * cf:(r + 1) * cf]):
            ops.append(Op(len(ops), OpKind.COPY, where(r, r * cf + a, bool(acc[r][r * cf + a])),
                          dst.shifted(a), b - a))
    return ops


def _runs(flags: np.ndarray) -> list[tuple[int, int]]:
    """Maximal ``[a, b)`` runs of equal values in ``flags``."""
    cuts = [0, *(np.flatnonzero(np.diff(flags.astype(np.int8))) + 1).tolist(), len(flags)]
    return list(zip(cuts, cuts[1:]))


class _Builder:
    """The allgather's transfers in program order: (src, dst, first chunk, chunks, hint)."""

    def __init__(self, n: int, cf: int, pieces: int = 1) -> None:
        self.n = n
        self.cf = cf
        self.pieces = pieces
        self.moves: list[tuple[int, int, int, int, int]] = []

    def move(self, src: int, dst: int, start: int, length: int, hint: int) -> None:
        """Copy chunks ``[start, start+length)`` of the output from ``src`` to ``dst``,
        in ``self.pieces`` pieces (fewer when it has fewer chunks), each of at most
        ``MAX_COUNT``."""
        pieces = max(-(-length // MAX_COUNT), min(self.pieces, length))
        for i in range(pieces):
            size = length // pieces + (1 if i < length % pieces else 0)
            self.moves.append((src, dst, start, size, hint))
            start += size


def _pieces(dims: tuple[int, ...], cf: int, collective: Collective) -> int:
    """The most pieces per block move (``PIECES``) whose steps fit the node limit.

    A rank's XML holds ``MAX_NODES`` nodes: the ``algo`` element, every rank's
    ``gpu`` element, its threadblocks and steps.  Each move is a send on one
    rank and a receive on another; allreduce moves everything twice.
    """
    from colc.compiler.lowering.lower_to_program import MAX_NODES

    n = math.prod(dims)
    strides = _strides(dims)
    choices = [p for p in PIECES if n <= MANY_RANKS or p <= 2]
    for p in choices:
        moves = 0
        for k in range(len(dims)):
            plan = _Plan(dims, k, strides[k], cf)
            per = max(-(-plan.part // MAX_COUNT), min(p, plan.part))
            moves += (plan.down + plan.up) * per * (2 if plan.split else 1)
        steps = 2 * moves * (2 if collective is Collective.ALLREDUCE else 1)
        if 1 + n + steps + _NODE_MARGIN < MAX_NODES:
            return p
    return choices[-1]


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


def dimrings_estimate(topo: Topology,
                      collective: Collective = Collective.ALLGATHER) -> tuple[int, Fraction]:
    """(hops, bandwidth-only algbw) of ``dimrings_schedule(topo, collective)`` without
    building it: per dimension, the chunks one link direction carries in its ring
    phase and, when the next dimension splits by parity, in that phase's exchange
    (reduce-scatter: the same in the other direction; allreduce: both).  The
    hops of reduce-scatter and allreduce are those of the allgather (once,
    twice): a lower bound, as reductions into one accumulator follow each other.

    Raises
    ------
    UnsupportedError
        When ``topo`` is not a torus.

    Examples
    --------
    >>> from colc.frontends.families import torus
    >>> dimrings_estimate(torus([4, 4], 10))
    (5, Fraction(32, 1))
    >>> dimrings_estimate(torus([4, 4], 10), Collective.ALLREDUCE)
    (10, Fraction(160, 9))
    """
    dims = torus_dims(topo)
    if dims is None:
        raise UnsupportedError(f"dimrings needs a torus; {topo.name!r} is not one")
    strides = _strides(dims)
    cap = topo.capacity()
    both = collective is Collective.ALLREDUCE
    load = [0] * len(dims)  # chunks per link direction, per dimension
    hops = 0
    for k in reversed(range(len(dims))):
        plan = _Plan(dims, k, strides[k])
        plus = sum(plan.share(t, 1) for t in range(1, plan.down + 1))
        minus = sum(plan.share(t, -1) for t in range(1, plan.up + 1))
        # a length-2 dimension is one duplex link: both directions share it
        one_way = plus + minus if dims[k] == 2 else max(plus, minus)
        load[k] += (2 * one_way if dims[k] == 2 else plus + minus) if both else one_way
        hops += max(plan.down, plan.up)
        if plan.split:  # the exchange: the same shares, one hop along dimension k + 1
            load[k + 1] += plus + minus if both else max(plus, minus)
            hops += 1
    worst = Fraction(0)
    for k, d in enumerate(dims):
        bw = cap[(topo.ranks[0], topo.ranks[strides[k] % math.prod(dims)])]
        worst = max(worst, Fraction(load[k]) / bw)
    return (2 * hops if both else hops), Fraction(math.prod(dims)) / worst
