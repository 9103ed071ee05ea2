"""Pass ``mcf``: all-to-all routed by the optimal multi-commodity flow.

On a direct-connect fabric the runtime routes nothing: a block from ``s`` to
``t`` crosses every rank on its way as a receive and a send.  This pass takes
the optimum of LP (A.1) (``compiler/alltoall/mcf.py``, seed 001 A.1.5),
decomposes each source's flow into paths to every destination, cuts every
block into ``cf`` chunks dealt to its paths in proportion to their flow
(largest remainder), and emits one transfer per (path, hop) through scratch
at the relays.  On symmetric fabrics the decomposition of one source per
rank class (rank 0 on vertex-transitive ones) is translated to every source
of its class (``McfResult.translates``), so sources round alike and link
loads stay balanced.

Ops are listed hop by hop (all first hops, then all second hops, ...), with
``Schedule.rounds`` = the hop, so the lowering interleaves the two
directions of a link; lanes are left to ``balance-lanes``.

Input invariant: a validated ``Topology`` of ranks only (links join ranks),
every rank reaching every other.
Output invariant: a ``Schedule`` of ``Collective.ALLTOALL`` (deps inferred),
proved out of place; every transfer over one link; the traffic on every link
is at most ``cf`` rounding away from the LP's flow (``schedule_algbw`` within
a few percent of ``N f`` for ``cf`` of 4 or more).

Complexity: the LP, then O(N^2 P D) for P paths of at most D hops per pair.
Seed: 001 appendix A.1.5 (LP (A.1)); the path relaying follows the
companion paper's lowering of MCF routes (issue 19).
"""

from __future__ import annotations

import functools
from collections import deque

import numpy as np

from colc.compiler.alltoall.direct import MAX_COUNT, pieces, require_alltoall
from colc.compiler.alltoall.mcf import McfResult, alltoall_mcf
from colc.compiler.lowering.infer_dependencies import infer_dependencies
from colc.errors import InfeasibleError, InternalError, UnsupportedError
from colc.ir.chunks import Op, OpKind, Schedule, Slot
from colc.ir.core import Buffer, Collective
from colc.ir.topology import Topology

NAME = "mcf"
#: The variant on shortest paths only.
HOPS_NAME = "mcf-hops"
#: Chunks per block when none are asked for.
DEFAULT_CHUNKS = 8
#: Flow below this share of ``f`` is dropped as numerical noise.
EPS = 1e-9


def mcf_schedule(topo: Topology, collective: Collective, chunks: int | None = None) -> Schedule:
    """All-to-all along the optimal multi-commodity flow (see module docstring).

    Parameters
    ----------
    topo : Topology
    collective : Collective
        Must be ``ALLTOALL``.
    chunks : int or None
        Chunks per block (default ``DEFAULT_CHUNKS``).

    Returns
    -------
    Schedule

    Raises
    ------
    UnsupportedError
        Another collective, or a fabric with switches (``direct`` and
        ``rails`` serve those).
    InfeasibleError
        A pair of ranks is not connected, the LP is too large, or the ranks
        would send more transfers than a file holds (``MAX_SENDS_PER_RANK``).
    """
    return _routed(topo, collective, chunks, NAME)


def mcf_hops_schedule(topo: Topology, collective: Collective,
                      chunks: int | None = None) -> Schedule:
    """``mcf_schedule`` with every block on shortest paths (``mcf-hops``).

    LP (A.1) restricted to each source's shortest-path links
    (``alltoall_mcf(shortest=True)``): no block takes more hops than its
    distance, at a lower rate where the optimum needs detours (generalized
    Kautz 2-48 and 4-64: 81% of it; tori and hypercubes: all of it).  The
    variant for small messages, where each hop's latency outweighs the
    bandwidth; the portfolio ranks both by simulation.  Parameters, returns
    and errors as ``mcf_schedule``.
    """
    return _routed(topo, collective, chunks, HOPS_NAME)


def _routed(topo: Topology, collective: Collective, chunks: int | None,
            name: str) -> Schedule:
    require_alltoall(collective, name)
    if len(topo.node) != topo.num_ranks:
        raise UnsupportedError(f"{name} routes over direct-connect fabrics (links between "
                               "ranks); this one has switches: use --algorithm direct or "
                               "--algorithm rails")
    cf = chunks or DEFAULT_CHUNKS
    _check_steps(topo)
    result = _solved(topo, name == HOPS_NAME)
    routes = chunk_routes(result, cf)
    return _schedule(topo.num_ranks, cf, routes, name)


#: Steps one rank can hold in an MSCCL file: 64 per threadblock, at most 108
#: threadblocks (an A100), half of them sends on paired threadblocks.  colc's
#: oneCCL files printed from a lowered program keep that bound; ``hop-relay``
#: writes oneCCL threads without it.
MAX_SENDS_PER_RANK = 64 * 108 // 2


def routed_steps_problem(topo: Topology) -> str | None:
    """Why no routed all-to-all fits a threadblock program on ``topo``, or None:
    every rank sends at least one transfer per hop of every block it sends or
    relays, ``sum_t dist(s, t)`` (a 32x32 torus: 16384), against
    ``MAX_SENDS_PER_RANK``.

    Parameters
    ----------
    topo : Topology

    Returns
    -------
    str or None
        The one-line refusal, naming the limit and the oneCCL route.

    Raises
    ------
    InfeasibleError
        Some rank does not reach another.
    """
    from colc.compiler.alltoall.mcf import rank_distances

    sends = int(rank_distances(topo).sum(axis=1).max())
    if sends <= MAX_SENDS_PER_RANK:
        return None
    return (f"mcf all-to-all on {topo.num_ranks} ranks: a rank sends or relays at least "
            f"{sends} transfers (one per hop of every block), more than the "
            f"{MAX_SENDS_PER_RANK} steps an MSCCL file holds per rank (64 per threadblock, "
            f"half of 108 threadblocks); hop-relay writes it as oneCCL threads, one message "
            f"per link and hop (-o FILE.oneccl.xml, --algorithm auto or --algorithm hop-relay)")


def _check_steps(topo: Topology) -> None:
    """Refuse, before the LP and the routes, a fabric whose routed blocks need
    more steps than a threadblock program holds (``routed_steps_problem``)."""
    problem = routed_steps_problem(topo)
    if problem is not None:
        raise InfeasibleError(problem)


@functools.lru_cache(maxsize=4)
def _solved(topo: Topology, shortest: bool) -> McfResult:
    """LP (A.1) once per fabric, whatever the chunking (the portfolio builds
    several).  The result is shared: callers only read it."""
    return alltoall_mcf(topo, shortest=shortest)


def chunk_routes(result: McfResult, cf: int) -> dict[tuple[int, int], list[tuple[tuple[int, ...], int]]]:
    """``(s, t) -> [(path, chunks)]``: every block's chunks on the flow's paths.

    Paths are node-index tuples from ``s`` to ``t``; chunk counts sum to ``cf``.
    """
    n = result.ranks
    if result.translates is None:
        return {(s, t): split for s in range(n)
                for t, split in _source_routes(result, s, cf).items()}
    base = {o: _source_routes(result, o, cf) for o in sorted(result.flows)}
    out = {}
    for s in range(n):
        perm = _node_perm(result, s)
        for t0, split in base[result.rep(s)].items():
            out[(s, perm[t0])] = [(tuple(perm[v] for v in path), k) for path, k in split]
    return out


def _node_perm(result: McfResult, s: int) -> list[int]:
    """``pi_s`` as a node permutation, read off the edge translates: edge
    ``translates[s][e]`` of the representative of ``s`` is carried to edge
    ``e``."""
    n = result.ranks
    perm = [-1] * n
    for e, e0 in enumerate(result.translates[s]):
        u0, v0 = result.edges[e0]
        u, v = result.edges[e]
        perm[u0], perm[v0] = u, v
    if -1 in perm or len(set(perm)) != n:
        raise InternalError("mcf: a source's translation is not a permutation")
    return perm


def _source_routes(result: McfResult, s: int, cf: int) -> dict[int, list[tuple[tuple[int, ...], int]]]:
    """Paths of source ``s``'s flow to each destination, with chunk counts."""
    flow = dict(zip(result.edges, result.flow(s).tolist(), strict=True))
    f = result.f
    succ: dict[int, list[int]] = {}
    for (u, v), x in sorted(flow.items()):
        if x > EPS * f:
            succ.setdefault(u, []).append(v)
    out = {}
    for t in range(result.ranks):
        if t == s:
            continue
        paths = []
        need = f
        while need > EPS * f:
            path = _path(succ, flow, s, t, EPS * f)
            if path is None:
                raise InternalError(f"mcf: flow of source {s} does not reach {t}")
            width = min(need, *(flow[(a, b)] for a, b in zip(path, path[1:], strict=False)))
            for a, b in zip(path, path[1:], strict=False):
                flow[(a, b)] -= width
            need -= width
            paths.append((path, width))
        out[t] = _deal(paths, cf)
    return out


def _path(succ, flow, s: int, t: int, eps: float) -> tuple[int, ...] | None:
    """Fewest-hop path from ``s`` to ``t`` over edges with flow left (BFS)."""
    prev = {s: s}
    queue = deque([s])
    while queue:
        u = queue.popleft()
        if u == t:
            break
        for v in succ.get(u, ()):
            if v not in prev and flow[(u, v)] > eps:
                prev[v] = u
                queue.append(v)
    if t not in prev:
        return None
    path = [t]
    while path[-1] != s:
        path.append(prev[path[-1]])
    return tuple(reversed(path))


def _deal(paths: list[tuple[tuple[int, ...], float]], cf: int) -> list[tuple[tuple[int, ...], int]]:
    """``cf`` chunks over ``paths`` in proportion to their widths (largest
    remainder; ties to the shorter, then the earlier path); paths with no
    chunk are dropped."""
    total = sum(w for _, w in paths)
    exact = [cf * w / total for _, w in paths]
    counts = [int(np.floor(x)) for x in exact]
    order = sorted(range(len(paths)), key=lambda i: (-(exact[i] - counts[i]),
                                                      len(paths[i][0]), i))
    for i in order[:cf - sum(counts)]:
        counts[i] += 1
    return [(paths[i][0], counts[i]) for i in range(len(paths)) if counts[i]]


def _schedule(n: int, cf: int, routes, name: str = NAME) -> Schedule:
    ops: list[Op] = []
    rounds: list[int] = []
    scratch = [0] * n
    for r in range(n):  # own block
        for c, k in pieces(0, cf):
            ops.append(Op(len(ops), OpKind.COPY, Slot(r, Buffer.INPUT, r * cf + c),
                          Slot(r, Buffer.OUTPUT, r * cf + c), k))
            rounds.append(0)
    # (current slot, remaining path, count, final slot) of every piece in flight
    moving = []
    for (s, t), split in sorted(routes.items()):
        first = 0
        for path, k in split:
            for c, m in pieces(first, k, MAX_COUNT):
                moving.append((Slot(s, Buffer.INPUT, t * cf + c), path[1:], m,
                               Slot(t, Buffer.OUTPUT, s * cf + c)))
            first += k
    hop = 0
    while moving:
        hop += 1
        later = []
        for here, rest, m, final in moving:
            if len(rest) == 1:
                dst = final
            else:
                dst = Slot(rest[0], Buffer.SCRATCH, scratch[rest[0]])
                scratch[rest[0]] += m
                later.append((dst, rest[1:], m, final))
            ops.append(Op(len(ops), OpKind.COPY, here, dst, m))
            rounds.append(hop)
        moving = later
    sched = Schedule(Collective.ALLTOALL, n, n * cf, max(scratch), tuple(ops), algorithm=name,
                     inplace=False, rounds=tuple(rounds))
    return infer_dependencies(sched)


__all__ = ["DEFAULT_CHUNKS", "HOPS_NAME", "MAX_SENDS_PER_RANK", "NAME", "chunk_routes",
           "mcf_hops_schedule", "mcf_schedule", "routed_steps_problem"]
