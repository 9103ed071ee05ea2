"""Pass ``generate-trees``: ForestColl end to end (``--algorithm trees``).

Input invariant: a ``Topology`` accepted by ``check_tree_topology``.
Output invariant: ``pack_trees`` returns a verified ``TreePacking``;
``tree_schedule`` returns a chunk-level ``Schedule`` (``ir.chunks``) whose
ops, run sequentially in program order, implement the collective, with
dependencies inferred from that order.

Pipeline (seed 001 sections 4.5.2-4.5.7):

1. ``find_optimal_throughput`` -- exact ``1/x* = p/q``, ``k = q``, ``U = p``;
2. when ``k`` exceeds ``max_k`` (None: no cap, the default), scan
   ``k = 1..max_k`` with ``fixed_k_scale`` and keep the best algbw (ties:
   the smaller ``k``) -- the "scan over small k";
3. ``split_switches`` on the tree capacities, then
4. ``pack_spanning_trees`` on the switch-free logical topology.

Lowering: a batch of ``m`` identical trees of root ``r`` gets ``m / g``
consecutive chunks of ``r``'s shard (``g`` = gcd of all multiplicities), times
``pipeline`` slices for pipelining, so ``cf = pipeline * k / g``.  A batch's
slice moves as one multi-chunk op per tree edge (at most 71 chunks, the
runtime's ``cnt`` limit), so the number of runtime steps grows with the
number of batches, not with ``k``.  Allgather: the root copies its input
shard into its output shard, then every tree edge copies the slice
parent.output -> child.output in breadth-first order.  Reduce-scatter: each tree reversed; a node reduces its
children's partials into a scratch accumulator (the root: its output chunk),
the first child using the node's input chunk as operand.  Allreduce:
reduce-scatter then allgather on the same trees over the full buffer.
``channel`` = index of the tree within its root modulo ``channels``.

Complexity: dominated by steps 3-4 (see those modules); lowering is linear
in ``pipeline * (number of batches) * N``.

Example
-------
>>> from colc.frontends.families import ring
>>> from colc.ir.core import Collective
>>> s = tree_schedule(ring(4, 10), Collective.ALLGATHER)
>>> s.ngpus, s.nchunks, len(s.ops)
(4, 8, 29)
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from fractions import Fraction

from colc.compiler.trees.find_optimal_throughput import (
    IntegerGraph,
    Optimum,
    check_tree_topology,
    integer_graph,
    optimum_of,
)
from colc.compiler.trees.fixed_k_trees import fixed_k_scale, floor_capacities
from colc.compiler.trees.pack_spanning_trees import pack_spanning_trees
from colc.compiler.trees.split_switches import box_rotation, split_switches
from colc.errors import InternalError, UnsupportedError
from colc.ir.chunks import Op, OpKind, Schedule, Slot
from colc.ir.core import Buffer, Collective
from colc.ir.topology import Topology
from colc.ir.trees import Tree, TreePacking

NAME = "generate-trees"

#: Default cap on k: none (the optimal k).  The lowering moves each batch of
#: trees as multi-chunk steps, so runtime steps grow with batches, not with k;
#: the pipeline retries smaller caps when a file breaks the runtime's limits.
DEFAULT_MAX_K: int | None = None

#: ``progress(stage, done, total)``.
ProgressFn = Callable[[str, int, int], None]


class _Progress:
    """Stage progress: to a callback, or a bar on stderr when it is a TTY."""

    def __init__(self, callback: ProgressFn | None) -> None:
        self.callback = callback
        self.tty = callback is None and sys.stderr.isatty()
        self.start = time.monotonic()

    def __call__(self, stage: str, done: int, total: int) -> None:
        if self.callback is not None:
            self.callback(stage, done, total)
        elif self.tty:
            frac = done / total if total else 1.0
            elapsed = time.monotonic() - self.start
            eta = elapsed / frac - elapsed if frac > 0 else 0.0
            bar = "#" * int(30 * frac)
            sys.stderr.write(f"\r{stage:<16} [{bar:<30}] {done}/{total} eta {eta:5.1f}s")
            if done >= total:
                sys.stderr.write("\n")
            sys.stderr.flush()

    def stage(self, name: str) -> Callable[[int, int], None] | None:
        if self.callback is None and not self.tty:
            return None
        return lambda done, total: self(name, done, total)


def choose_k(graph: IntegerGraph, opt: Optimum, max_k: int | None) -> tuple[int, Fraction]:
    """The ``(k, U)`` to pack: optimal if ``k* <= max_k``, else the best fixed k.

    Parameters
    ----------
    graph : IntegerGraph
    opt : Optimum
    max_k : int or None
        None: no cap.

    Returns
    -------
    (int, Fraction)
        ``k`` and the scale ``U`` (tree capacity of arc e is ``floor(U beta_e)``).
    """
    if max_k is None or opt.k <= max_k:
        return opt.k, opt.scale
    best: tuple[Fraction, int, Fraction] | None = None
    for k in range(1, max_k + 1):
        u = fixed_k_scale(graph, k)
        rate = Fraction(k) / u
        if best is None or rate > best[0]:
            best = (rate, k, u)
    assert best is not None
    return best[1], best[2]


def pack_trees(
    topo: Topology,
    *,
    k: int | None = None,
    max_k: int | None = DEFAULT_MAX_K,
    progress: ProgressFn | None = None,
    spread: bool = False,
) -> TreePacking:
    """ForestColl allgather trees for a topology.

    Parameters
    ----------
    topo : Topology
    k : int or None
        Force this many trees per root (fixed-k optimum); None: the optimal
        ``k`` if it is at most ``max_k``, else the best ``k <= max_k``.
    max_k : int or None
        Largest ``k`` considered when ``k`` is None (None: no cap).
    progress : callable or None
        ``progress(stage, done, total)``; without it a bar is drawn on
        stderr when stderr is a TTY.
    spread : bool
        Spread switch splitting (``split_switches``): shallow trees.

    Returns
    -------
    TreePacking

    Raises
    ------
    TopologyError
        Not strongly connected, or a node with ingress != egress (switches).
    UnsupportedError
        Fewer than 2 ranks; ``k < 1``; a fixed-k graph that is not Eulerian.
    """
    check_tree_topology(topo)
    bar = _Progress(progress)
    graph = integer_graph(topo)
    bar("optimum", 0, 1)
    opt = optimum_of(graph, topo.num_ranks)
    bar("optimum", 1, 1)
    if k is None:
        k_used, scale = choose_k(graph, opt, None if max_k is None else max(1, max_k))
    elif k == opt.k:
        k_used, scale = k, opt.scale
    else:
        k_used, scale = k, fixed_k_scale(graph, k)
    caps = floor_capacities(graph, scale)
    _check_eulerian(graph, caps, k_used)
    free = split_switches(graph.nodes, graph.compute, caps, k_used,
                          progress=bar.stage("split switches"), spread=spread)
    ranks = graph.ranks
    rank_of = {node: r for r, node in enumerate(ranks)}
    logical = {(rank_of[u], rank_of[v]): c for (u, v), c in free.capacity.items()}
    batches = pack_spanning_trees(len(ranks), logical, k_used,
                                  progress=bar.stage("pack trees"),
                                  symmetry=_rank_rotations(graph, caps, ranks, rank_of))
    trees = tuple(Tree(b.root, b.edges, b.multiplicity) for b in batches)
    routes = tuple(
        ((rank_of[u], rank_of[v]),
         tuple((tuple(graph.nodes[i] for i in path), units) for path, units in paths))
        for (u, v), paths in free.routes.items()
    )
    y = graph.unit / scale
    return TreePacking(
        topology=topo.name,
        num_ranks=topo.num_ranks,
        k=k_used,
        tree_bandwidth=y,
        inv_x_star=opt.inv_x_star,
        inv_rate=1 / (k_used * y),
        trees=trees,
        routes=routes,
    )


def _rank_rotations(graph: IntegerGraph, caps: dict[tuple[int, int], int],
                    ranks: tuple[int, ...] | list[int], rank_of: dict[int, int]
                    ) -> list[list[int]] | None:
    """The box rotations (``box_rotation``) as permutations of rank indices, if any."""
    perms = box_rotation(graph.nodes, graph.compute, caps)
    if perms is None:
        return None
    return [[rank_of[p[node]] for node in ranks] for p in perms]


def _check_eulerian(graph: IntegerGraph, caps: dict[tuple[int, int], int], k: int) -> None:
    if all(graph.compute):
        return
    bal = [0] * len(graph.nodes)
    for (u, v), c in caps.items():
        bal[u] += c
        bal[v] -= c
    for i, b in enumerate(bal):
        if b:
            raise UnsupportedError(
                f"with k = {k} the rounded tree capacities at {graph.nodes[i]!r} are not "
                f"balanced (edge splitting needs equal ingress and egress); use the "
                f"optimal k or a bidirectional topology")


def tree_algbw(packing: TreePacking) -> Fraction:
    """Allgather (= reduce-scatter) algbw of a packing in GB/s: ``N k y``.

    Parameters
    ----------
    packing : TreePacking

    Returns
    -------
    Fraction
    """
    return packing.algbw


# --------------------------------------------------------------------------- lowering


#: Largest ``cnt`` of one runtime step (runtime notes section 5).
MAX_PIECE = 71
#: Most local-copy steps per rank (one threadblock, 64 steps at most).
LOCAL_STEPS = 32


class _Ops:
    def __init__(self) -> None:
        self.ops: list[Op] = []

    def add(self, kind: OpKind, src: Slot, dst: Slot, channel: int,
            operand: Slot | None = None, count: int = 1) -> None:
        self.ops.append(Op(len(self.ops), kind, src, dst, count, operand, (), channel))


#: One coalesced piece of a batch: (tree, first chunk in the root's shard, chunks, lane).
Piece = tuple[Tree, int, int, int]


def batch_chunks(trees: tuple[Tree, ...], k: int, cf: int) -> list[int]:
    """Chunks of a root's ``cf``-chunk shard given to each batch (seed 001 A.5.2).

    Each batch of multiplicity ``m`` should get ``cf * m / k`` chunks; the
    shares are rounded by largest remainder (ties to the earlier batch), so
    they add up to ``cf``.  A batch may get 0 chunks when ``cf`` is small.

    Examples
    --------
    >>> from colc.ir.trees import Tree
    >>> ts = tuple(Tree(0, (), m) for m in (5, 5, 3))
    >>> batch_chunks(ts, 13, 16)
    [6, 6, 4]
    """
    exact = [Fraction(cf * t.multiplicity, k) for t in trees]
    sizes = [int(x) for x in exact]
    left = cf - sum(sizes)
    order = sorted(range(len(trees)), key=lambda i: (-(exact[i] - sizes[i]), i))
    for i in order[:left]:
        sizes[i] += 1
    return sizes


def _chunk_plan(packing: TreePacking, pipeline: int, chunks_per_root: int | None,
                piece: int) -> tuple[int, list[list[Piece]]]:
    """``cf`` and the pieces in program order, grouped by round.

    Exact plan (``chunks_per_root`` None): a batch of ``m`` trees owns
    ``pipeline * m / g`` consecutive chunks of its root's shard (``g`` = gcd
    of the multiplicities).  Discretized plan: the root's ``chunks_per_root``
    chunks are shared by ``batch_chunks``.  Either way a batch's chunks are
    cut into pieces of at most ``piece`` chunks; round ``j`` holds the
    ``j``-th piece of every batch, so program order interleaves the trees.
    The lane of a piece is the batch's index in the packing.
    """
    g = 0
    for t in packing.trees:
        g = math.gcd(g, t.multiplicity)
    cf = chunks_per_root if chunks_per_root is not None else pipeline * packing.k // g
    rounds: list[list[Piece]] = []
    lane_of = {id(t): i for i, t in enumerate(packing.trees)}
    for root, trees in sorted(packing.by_root().items()):
        if chunks_per_root is None:
            sizes = [pipeline * t.multiplicity // g for t in trees]
        else:
            sizes = batch_chunks(trees, packing.k, cf)
        offset = 0
        for t, size in zip(trees, sizes, strict=True):
            for j, lo in enumerate(range(0, size, piece)):
                if j == len(rounds):
                    rounds.append([])
                rounds[j].append((t, offset + lo, min(piece, size - lo), lane_of[id(t)]))
            offset += size
        if offset != cf:
            raise InternalError(f"root {root}: chunks {offset} != cf {cf}")
    return cf, rounds


def _depths(t: Tree) -> dict[tuple[int, int], int]:
    """Depth of each edge of a tree (edges out of the root: 0)."""
    level = {t.root: 0}
    out = {}
    for parent, child in t.edges:
        out[(parent, child)] = level[parent]
        level[child] = level[parent] + 1
    return out


def _allgather_ops(out: _Ops, rounds: list[list[Piece]], cf: int, channels: int,
                   root_input: bool = False, n: int = 0) -> None:
    """Broadcast each piece down its tree, in wavefront order.

    Program order sorts the edge transfers by ``round + depth`` (then depth,
    then batch): the order in which their data can arrive when every hop
    takes about the same time, so the steps the lowering puts in each
    threadblock come in arrival order (no head-of-line waits).

    ``root_input`` (allgather): roots send from their input, and every rank
    also copies its input shard into its output in at most ``LOCAL_STEPS``
    pieces, each placed before the first round that sends from it (in-place
    the copy is onto itself, so those sends wait for that small copy only).
    """
    moves = []
    if root_input:
        size = max(1, -(-cf // LOCAL_STEPS))
        start = {}
        for j, pieces in enumerate(rounds):
            for t, off, count, _ in pieces:
                start.setdefault(off // size, j)
        for lo in range(0, cf, size):
            for r in range(n):
                moves.append(((start.get(lo // size, 0), -1, r, lo), None, lo, min(size, cf - lo),
                              0, r, r))
    for j, pieces in enumerate(rounds):
        for b, (t, off, count, slot) in enumerate(pieces):
            depth = _depths(t)
            for e, (parent, child) in enumerate(t.edges):
                d = depth[(parent, child)]
                moves.append(((j + d, d, b, e), t, off, count, slot, parent, child))
    moves.sort(key=lambda m: m[0])
    for _, t, off, count, slot, parent, child in moves:
        if t is None:  # a rank's local copy
            out.add(OpKind.COPY, Slot(parent, Buffer.INPUT, off),
                    Slot(parent, Buffer.OUTPUT, parent * cf + off), 0, count=count)
            continue
        idx = t.root * cf + off
        # allgather roots send from their input: no wait for the local copy
        src = (Slot(parent, Buffer.INPUT, off) if root_input and parent == t.root
               else Slot(parent, Buffer.OUTPUT, idx))
        out.add(OpKind.COPY, src, Slot(child, Buffer.OUTPUT, idx), slot % channels,
                count=count)


def _reduce_ops(out: _Ops, rounds: list[list[Piece]], cf: int, channels: int,
                root_slot: Callable[[int, int], Slot], scratch: dict[int, int],
                parallel: bool = False) -> None:
    """Reduce each piece up the reversed tree into ``root_slot(root, idx)``.

    A rank's first child reduces into the rank's accumulator on arrival
    (with the rank's input as the other operand).  The other children reduce
    into it on arrival too, one after the other; with ``parallel`` their
    partials arrive in scratch slots of their own instead and are folded in
    by local reductions just before the rank sends its partial up (more
    steps; it did not pay off in simulation on the machines tried).
    """

    def fresh(rank: int, count: int) -> Slot:
        slot = Slot(rank, Buffer.SCRATCH, scratch.get(rank, 0))
        scratch[rank] = scratch.get(rank, 0) + count
        return slot

    for pieces in rounds:
        for t, off, count, lane in pieces:
            idx = t.root * cf + off
            kids = t.children()
            acc: dict[int, Slot] = {t.root: root_slot(t.root, idx)}
            for rank in kids:
                if rank != t.root:
                    acc[rank] = fresh(rank, count)
            started: set[int] = set()
            pending: dict[int, list[Slot]] = {}

            def fold(rank: int) -> None:
                for tmp in pending.pop(rank, ()):
                    out.add(OpKind.REDUCE, tmp, acc[rank], lane % channels, acc[rank], count)

            for parent, child in reversed(t.edges):
                if child in kids:
                    fold(child)
                src = acc[child] if child in kids else Slot(child, Buffer.INPUT, idx)
                if parent in started and not parallel:
                    out.add(OpKind.REDUCE, src, acc[parent], lane % channels, acc[parent], count)
                    continue
                if parent in started:
                    tmp = fresh(parent, count)
                    out.add(OpKind.COPY, src, tmp, lane % channels, count=count)
                    pending.setdefault(parent, []).append(tmp)
                    continue
                started.add(parent)
                out.add(OpKind.REDUCE, src, acc[parent], lane % channels,
                        Slot(parent, Buffer.INPUT, idx), count)
            fold(t.root)


def lower_packing(packing: TreePacking, collective: Collective, *, pipeline: int = 1,
                  channels: int = 2, chunks_per_root: int | None = None,
                  piece: int = MAX_PIECE, broadcast: TreePacking | None = None) -> Schedule:
    """Lower a packing to the chunk-level IR (program order, ``deps=()``).

    Allreduce on a directed topology takes two packings (seed 001 ch. 4 and
    B: reduce-scatter needs spanning in-arborescences, allgather
    out-arborescences): ``packing`` made on the transposed topology, whose
    trees reversed are the in-trees of the reduce phase, and ``broadcast``
    made on the topology itself for the allgather phase.  Both phases cut
    each root's shard into the same ``cf`` chunks (the least common multiple
    of their exact plans when ``chunks_per_root`` is None), so the chunk a
    root reduces is the chunk it broadcasts.

    Parameters
    ----------
    packing : TreePacking
    collective : Collective
        ALLGATHER, REDUCESCATTER or ALLREDUCE.
    pipeline : int
        Chunks per tree unit (pipelining depth), >= 1; exact plan only.
    channels : int
        Number of channel hints to spread tree batches over, >= 1.
    chunks_per_root : int or None
        Discretize: every root's shard is this many chunks, shared among its
        batches by ``batch_chunks`` (e.g. a power of two, so the runtime
        selects the file at power-of-two sizes); None: the exact plan.
    piece : int
        Most chunks one op moves (1 = every chunk its own step, the finest
        pipelining; at most ``MAX_PIECE``).
    broadcast : TreePacking or None
        Allreduce only: the allgather phase's packing when it differs from
        the reduce phase's (directed topologies; see above).

    Returns
    -------
    Schedule

    Raises
    ------
    UnsupportedError
        Another collective, or bad ``pipeline``/``channels``.
    """
    if pipeline < 1 or channels < 1 or not 1 <= piece <= MAX_PIECE:
        raise UnsupportedError("pipeline, channels and piece must be at least 1 "
                               f"(piece at most {MAX_PIECE})")
    if chunks_per_root is not None and chunks_per_root < 1:
        raise UnsupportedError("chunks_per_root must be at least 1")
    if broadcast is not None and collective is not Collective.ALLREDUCE:
        raise UnsupportedError("a separate broadcast packing is for allreduce only")
    n = packing.num_ranks
    cf, rounds = _chunk_plan(packing, pipeline, chunks_per_root, piece)
    bc_rounds = rounds
    if broadcast is not None:
        bc_cf, bc_rounds = _chunk_plan(broadcast, pipeline, chunks_per_root, piece)
        if bc_cf != cf:  # exact plans of different k: both on their common multiple
            cf = math.lcm(cf, bc_cf)
            _, rounds = _chunk_plan(packing, pipeline, cf, piece)
            _, bc_rounds = _chunk_plan(broadcast, pipeline, cf, piece)
    out = _Ops()
    scratch: dict[int, int] = {}
    if collective is Collective.ALLGATHER:
        _allgather_ops(out, rounds, cf, channels, root_input=True, n=n)
    elif collective is Collective.REDUCESCATTER:
        _reduce_ops(out, rounds, cf, channels,
                    lambda root, idx: Slot(root, Buffer.OUTPUT, idx - root * cf), scratch)
    elif collective is Collective.ALLREDUCE:
        _reduce_ops(out, rounds, cf, channels,
                    lambda root, idx: Slot(root, Buffer.OUTPUT, idx), scratch)
        _allgather_ops(out, bc_rounds, cf, channels)
    else:
        raise UnsupportedError(f"tree schedules do not implement {collective.value}")
    sched = Schedule(
        collective=collective,
        ngpus=n,
        nchunks=n * cf,
        scratch_chunks=max(scratch.values(), default=0),
        ops=tuple(out.ops),
        algorithm=f"trees-k{packing.k}" + (f"+k{broadcast.k}" if broadcast else ""),
        routes=(_routing_witness(packing, collective) if broadcast is None else
                _merged_witness(packing, broadcast)),
    )
    return _finish(sched)


def _merged_witness(reduce: TreePacking, broadcast: TreePacking):
    """The routing witness of a two-packing allreduce: the reduce phase's
    reversed paths and the broadcast phase's paths.  A tree unit of a
    packing of ``k`` moves ``1/k`` of its root's shard, so weights are
    scaled to a common unit before paths of one pair are added."""
    merged: dict[tuple[int, int], dict[tuple[str, ...], int]] = {}
    for packing, coll, scale in ((reduce, Collective.REDUCESCATTER, broadcast.k),
                                 (broadcast, Collective.ALLGATHER, reduce.k)):
        for pair, paths in _routing_witness(packing, coll):
            into = merged.setdefault(pair, {})
            for path, units in paths:
                into[path] = into.get(path, 0) + units * scale
    return tuple((pair, tuple(sorted(paths.items()))) for pair, paths in sorted(merged.items()))


def _routing_witness(packing: TreePacking, collective: Collective
                     ) -> tuple[tuple[tuple[int, int], tuple[tuple[tuple[str, ...], int], ...]], ...]:
    """The switch paths of the logical arcs, as ``Schedule.routes``.

    Broadcast transfers follow the logical arc ``(u, v)``; reduction
    transfers run the arc backwards (``v -> u`` over the reversed path,
    whose links exist with the same bandwidth, or the packing was made on
    the transposed topology).  Every tree unit moves the same volume, so
    adding the weights of both directions' contributions is exact.
    """
    merged: dict[tuple[int, int], dict[tuple[str, ...], int]] = {}

    def add(pair: tuple[int, int], path: tuple[str, ...], units: int) -> None:
        into = merged.setdefault(pair, {})
        into[path] = into.get(path, 0) + units

    for (u, v), paths in packing.routes:
        for path, units in paths:
            if collective.reduces:
                add((v, u), tuple(reversed(path)), units)
            if collective is not Collective.REDUCESCATTER:
                add((u, v), tuple(path), units)
    return tuple((pair, tuple(sorted(paths.items()))) for pair, paths in sorted(merged.items()))


def _finish(sched: Schedule) -> Schedule:
    """Infer dependencies from program order (the lead's pass)."""
    from colc.compiler.lowering.infer_dependencies import infer_dependencies

    return infer_dependencies(sched)


def check_tree_schedule(sched: Schedule, topo: Topology | None = None) -> None:
    """Run ``colc.ir.check_chunks`` and raise ``InternalError`` on any problem."""
    from colc.ir.check_chunks import check_schedule

    problems = check_schedule(sched, topo)
    if problems:
        raise InternalError("tree schedule failed verification: " + "; ".join(problems[:5]))


def is_symmetric(topo: Topology) -> bool:
    """Whether every link has a reverse link of the same bandwidth."""
    cap = topo.capacity()
    return all(cap.get((v, u)) == c for (u, v), c in cap.items())


def transpose(topo: Topology) -> Topology:
    """The topology with every link reversed (for reduce-scatter in-trees)."""
    links = tuple(replace(lk, src=lk.dst, dst=lk.src) for lk in topo.links)
    return replace(topo, name=topo.name, links=links)


def tree_schedule(
    topo: Topology,
    collective: Collective,
    *,
    k: int | None = None,
    max_k: int | None = DEFAULT_MAX_K,
    pipeline: int = 1,
    channels: int = 2,
    chunks_per_root: int | None = None,
    piece: int = MAX_PIECE,
    spread: bool = False,
    progress: ProgressFn | None = None,
    verify: bool = True,
) -> Schedule:
    """ForestColl schedule of ``collective`` on ``topo`` in the chunk IR.

    Parameters
    ----------
    topo : Topology
    collective : Collective
        ALLGATHER, REDUCESCATTER or ALLREDUCE.
    k, max_k, progress, spread
        As for ``pack_trees``.
    pipeline, channels, chunks_per_root, piece
        As for ``lower_packing``.
    verify : bool
        Prove the schedule with ``colc.ir.check_chunks`` (default).

    Returns
    -------
    Schedule

    Notes
    -----
    Directed (or asymmetric) topologies: reduce-scatter packs the transposed
    topology (its out-trees reversed are in-trees); allreduce packs both and
    runs the reduce phase on the in-trees, the allgather on the out-trees.
    """
    target, broadcast = topo, None
    if collective.reduces and not is_symmetric(topo):
        target = transpose(topo)  # in-trees of G are reversed out-trees of G^T
        if collective is Collective.ALLREDUCE:  # allgather on G's own out-trees
            broadcast = pack_trees(topo, k=k, max_k=max_k, progress=progress, spread=spread)
    packing = pack_trees(target, k=k, max_k=max_k, progress=progress, spread=spread)
    sched = lower_packing(packing, collective, pipeline=pipeline, channels=channels,
                          chunks_per_root=chunks_per_root, piece=piece, broadcast=broadcast)
    if verify:
        check_tree_schedule(sched, topo)
    return sched


def exact_bounds(topo: Topology, *, allreduce_lp: bool = True) -> dict[str, object]:
    """Bounds for ``colc analyze``: exact cut bound and the B.7 allreduce bound.

    Parameters
    ----------
    topo : Topology
    allreduce_lp : bool
        Solve the B.7 LP (skipped, value None, when False or too large).

    Returns
    -------
    dict
        ``allgather`` and ``reducescatter``: optimal algbw (Fraction GB/s; on
        a directed topology reduce-scatter's is the transposed topology's);
        ``allreduce_trees``: RS on the optimal in-trees then AG on the
        optimal out-trees, ``1 / (1/rs + 1/ag)`` (``N x*/2`` when symmetric);
        ``allreduce_lp``: the B.7 LP bound (Fraction, float-derived) or None;
        ``inv_x_star``, ``k`` and ``bottleneck`` (node ids of ``S*``).
    """
    check_tree_topology(topo)
    opt = optimum_of(integer_graph(topo), topo.num_ranks)
    rs = opt.allgather_algbw
    if not is_symmetric(topo):  # reduce-scatter runs on in-trees: G transposed
        rs = optimum_of(integer_graph(transpose(topo)), topo.num_ranks).allgather_algbw
    lp = None
    if allreduce_lp:
        from colc.compiler.trees.allreduce_bound import allreduce_bound

        lp = allreduce_bound(topo)
    return {
        "allgather": opt.allgather_algbw,
        "reducescatter": rs,
        "allreduce_trees": 1 / (1 / rs + 1 / opt.allgather_algbw),
        "allreduce_lp": lp,
        "inv_x_star": opt.inv_x_star,
        "k": opt.k,
        "bottleneck": opt.bottleneck,
    }


__all__ = ["exact_bounds", "lower_packing", "pack_trees", "tree_algbw", "tree_schedule"]
