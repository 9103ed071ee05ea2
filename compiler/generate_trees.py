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
(4, 8, 25)
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from fractions import Fraction

from colc.compiler.find_optimal_throughput import (
    IntegerGraph,
    Optimum,
    check_tree_topology,
    integer_graph,
    optimum_of,
)
from colc.compiler.fixed_k_trees import fixed_k_scale, floor_capacities
from colc.compiler.pack_spanning_trees import pack_spanning_trees
from colc.compiler.split_switches import split_switches
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
                          progress=bar.stage("split switches"))
    ranks = graph.ranks
    rank_of = {node: r for r, node in enumerate(ranks)}
    logical = {(rank_of[u], rank_of[v]): c for (u, v), c in free.capacity.items()}
    batches = pack_spanning_trees(len(ranks), logical, k_used,
                                  progress=bar.stage("pack trees"))
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


class _Ops:
    def __init__(self) -> None:
        self.ops: list[Op] = []

    def add(self, kind: OpKind, src: Slot, dst: Slot, channel: int,
            operand: Slot | None = None, count: int = 1) -> None:
        self.ops.append(Op(len(self.ops), kind, src, dst, count, operand, (), channel))


#: One coalesced piece of a batch: (tree, first chunk in the root's shard, chunks, slot).
Piece = tuple[Tree, int, int, int]


def _chunk_plan(packing: TreePacking, pipeline: int) -> tuple[int, list[list[Piece]]]:
    """``cf`` and the pieces in program order, grouped by pipeline round.

    A batch of ``m`` trees owns ``pipeline * m / g`` consecutive chunks of its
    root's shard; round ``j`` of the pipeline moves the ``j``-th slice of
    ``m / g`` chunks (cut into pieces of at most ``MAX_PIECE``) of every batch.
    """
    g = 0
    for t in packing.trees:
        g = math.gcd(g, t.multiplicity)
    cf = pipeline * packing.k // g
    rounds: list[list[Piece]] = [[] for _ in range(pipeline)]
    for root, trees in sorted(packing.by_root().items()):
        offset = 0
        for i, t in enumerate(trees):
            size = t.multiplicity // g
            for j in range(pipeline):
                for lo in range(0, size, MAX_PIECE):
                    count = min(MAX_PIECE, size - lo)
                    rounds[j].append((t, offset + j * size + lo, count, i))
            offset += pipeline * size
        if offset != cf:
            raise InternalError(f"root {root}: chunks {offset} != cf {cf}")
    return cf, rounds


def _allgather_ops(out: _Ops, rounds: list[list[Piece]], cf: int, channels: int) -> None:
    """Broadcast each piece down its tree, round by round (pipelined)."""
    for pieces in rounds:
        for t, off, count, slot in pieces:
            idx = t.root * cf + off
            for parent, child in t.edges:
                out.add(OpKind.COPY, Slot(parent, Buffer.OUTPUT, idx),
                        Slot(child, Buffer.OUTPUT, idx), slot % channels, count=count)


def _reduce_ops(out: _Ops, rounds: list[list[Piece]], cf: int, channels: int,
                root_slot: Callable[[int, int], Slot], scratch: dict[int, int]) -> None:
    """Reduce each piece up the reversed tree into ``root_slot(root, idx)``."""
    for pieces in rounds:
        for t, off, count, slot in pieces:
            idx = t.root * cf + off
            kids = t.children()
            acc: dict[int, Slot] = {t.root: root_slot(t.root, idx)}
            for rank in kids:
                if rank != t.root:
                    acc[rank] = Slot(rank, Buffer.SCRATCH, scratch.get(rank, 0))
                    scratch[rank] = scratch.get(rank, 0) + count
            started: set[int] = set()
            for parent, child in reversed(t.edges):
                src = acc[child] if child in kids else Slot(child, Buffer.INPUT, idx)
                operand = acc[parent] if parent in started else Slot(parent, Buffer.INPUT, idx)
                started.add(parent)
                out.add(OpKind.REDUCE, src, acc[parent], slot % channels, operand, count)


def _local_copies(out: _Ops, n: int, cf: int) -> None:
    """Allgather: every rank copies its input shard into its output shard."""
    for r in range(n):
        for lo in range(0, cf, MAX_PIECE):
            out.add(OpKind.COPY, Slot(r, Buffer.INPUT, lo), Slot(r, Buffer.OUTPUT, r * cf + lo),
                    0, count=min(MAX_PIECE, cf - lo))


def lower_packing(packing: TreePacking, collective: Collective, *, pipeline: int = 1,
                  channels: int = 2) -> Schedule:
    """Lower a packing to the chunk-level IR (program order, ``deps=()``).

    Parameters
    ----------
    packing : TreePacking
    collective : Collective
        ALLGATHER, REDUCESCATTER or ALLREDUCE.
    pipeline : int
        Chunks per tree unit (pipelining depth), >= 1.
    channels : int
        Number of channel hints to spread trees over, >= 1.

    Returns
    -------
    Schedule

    Raises
    ------
    UnsupportedError
        Another collective, or bad ``pipeline``/``channels``.
    """
    if pipeline < 1 or channels < 1:
        raise UnsupportedError("pipeline and channels must be at least 1")
    n = packing.num_ranks
    cf, rounds = _chunk_plan(packing, pipeline)
    out = _Ops()
    scratch: dict[int, int] = {}
    if collective is Collective.ALLGATHER:
        _local_copies(out, n, cf)
        _allgather_ops(out, rounds, cf, channels)
    elif collective is Collective.REDUCESCATTER:
        _reduce_ops(out, rounds, cf, channels,
                    lambda root, idx: Slot(root, Buffer.OUTPUT, idx - root * cf), scratch)
    elif collective is Collective.ALLREDUCE:
        _reduce_ops(out, rounds, cf, channels,
                    lambda root, idx: Slot(root, Buffer.OUTPUT, idx), scratch)
        _allgather_ops(out, rounds, cf, channels)
    else:
        raise UnsupportedError(f"tree schedules do not implement {collective.value}")
    sched = Schedule(
        collective=collective,
        ngpus=n,
        nchunks=n * cf,
        scratch_chunks=max(scratch.values(), default=0),
        ops=tuple(out.ops),
        algorithm=f"trees-k{packing.k}",
        routes=_routing_witness(packing, collective),
    )
    return _finish(sched)


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
    from colc.compiler.infer_dependencies import infer_dependencies

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
    progress: ProgressFn | None = None,
    verify: bool = True,
) -> Schedule:
    """ForestColl schedule of ``collective`` on ``topo`` in the chunk IR.

    Parameters
    ----------
    topo : Topology
    collective : Collective
        ALLGATHER, REDUCESCATTER or ALLREDUCE.
    k, max_k, progress
        As for ``pack_trees``.
    pipeline, channels
        As for ``lower_packing``.
    verify : bool
        Prove the schedule with ``colc.ir.check_chunks`` (default).

    Returns
    -------
    Schedule

    Raises
    ------
    UnsupportedError
        Allreduce on a topology with asymmetric links.
    """
    target = topo
    if collective.reduces and not is_symmetric(topo):
        if collective is not Collective.REDUCESCATTER:
            raise UnsupportedError(
                f"tree {collective.value} needs symmetric link bandwidths; topology "
                f"{topo.name!r} has a one-way or asymmetric link")
        target = transpose(topo)  # in-trees of G are reversed out-trees of G^T
    packing = pack_trees(target, k=k, max_k=max_k, progress=progress)
    sched = lower_packing(packing, collective, pipeline=pipeline, channels=channels)
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
        ``allgather`` and ``reducescatter``: optimal algbw (Fraction GB/s);
        ``allreduce_trees``: RS+AG on the optimal trees (``N x*/2``);
        ``allreduce_lp``: the B.7 LP bound (Fraction, float-derived) or None;
        ``inv_x_star``, ``k`` and ``bottleneck`` (node ids of ``S*``).
    """
    check_tree_topology(topo)
    opt = optimum_of(integer_graph(topo), topo.num_ranks)
    lp = None
    if allreduce_lp:
        from colc.compiler.allreduce_bound import allreduce_bound

        lp = allreduce_bound(topo)
    return {
        "allgather": opt.allgather_algbw,
        "reducescatter": opt.allgather_algbw,
        "allreduce_trees": opt.allgather_algbw / 2,
        "allreduce_lp": lp,
        "inv_x_star": opt.inv_x_star,
        "k": opt.k,
        "bottleneck": opt.bottleneck,
    }


__all__ = ["exact_bounds", "lower_packing", "pack_trees", "tree_algbw", "tree_schedule"]
