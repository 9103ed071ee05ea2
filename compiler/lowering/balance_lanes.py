"""Pass ``balance-lanes``: give every connection the parallel threadblocks it needs.

One CUDA block cannot drive an NVLink or a NIC (runtime notes 4.3; the
per-threadblock rates of ``colc.ir.runtime_model``), and a threadblock runs
its steps one after the other.  This pass spreads the transfers of each
directed rank pair over ``L`` *lanes*: channel hints ``0..L-1``, which the
lowering turns into distinct channels and so distinct threadblocks.

Input invariant: a ``Schedule`` proved by ``check_schedule``.
Output invariant: the same data movement (every op, or its split pieces,
moves the same chunks between the same slots; program order is kept, so
``check_schedule`` still holds) with channel hints such that, for each pair:

* ``L >= ceil(rate / cap)``: at the schedule's bandwidth-model algbw the
  pair carries ``rate`` GB/s, and one lane carries at most ``cap`` (the
  protocol's per-threadblock P2P rate, or the per-connection NET rate);
* no lane has more than ``step_budget`` ops (the runtime allows 64 steps per
  threadblock, nops included);
* lanes carry about the same number of chunks (greedy, in program order; an
  op that forwards a chunk keeps the lane it arrived on when that lane is not
  ahead, so the lowering can still fuse the receive and the send);
* per rank, send lanes plus receive lanes stay within the threadblock budget
  (lanes are taken back from the pairs with the most lanes per GB/s first).

Ops are split into single-chunk pieces when a pair has fewer ops than lanes;
dependencies are then inferred again.

Complexity: O(P + #ops * L) for P rank pairs.
"""

from __future__ import annotations

import dataclasses
import heapq
import math
from collections import defaultdict
from fractions import Fraction

from colc.compiler.estimate_bandwidth import schedule_algbw
from colc.compiler.lowering.infer_dependencies import infer_dependencies
from colc.errors import InfeasibleError
from colc.ir.chunks import Op, OpKind, Schedule, Slot
from colc.ir.core import Protocol
from colc.ir.routing import Router
from colc.ir.runtime_model import RuntimeModel
from colc.ir.topology import Topology

NAME = "balance-lanes"
#: Ops per lane: 64 runtime steps, with room for the nops of multiple deps.
STEP_BUDGET = 40
MAX_CHANNELS = 32
#: Most local threadblocks (copies and reductions) per rank.
MAX_LOCAL_LANES = 8
#: Ops per local lane: local reductions wait on two threadblocks (a nop each).
LOCAL_STEP_BUDGET = 28


@dataclasses.dataclass(frozen=True, slots=True)
class LanePlan:
    """Lanes per directed rank pair, and the timing estimates of the list schedule.

    ``lane_rate`` is the GB/s one lane of a pair gets when every pair
    crossing the same links is busy (its fair share, at most one
    threadblock's rate); ``hop`` the pair's latency in us; ``local_rate``
    the GB/s of a local copy.
    """

    lanes: dict[tuple[int, int], int]
    target_algbw: float
    lane_rate: dict[tuple[int, int], float]
    hop: dict[tuple[int, int], float]
    local_rate: float
    local_lanes: dict[int, int] = dataclasses.field(default_factory=dict)


def plan_lanes(sched: Schedule, topo: Topology, model: RuntimeModel, protocol: Protocol, *,
               target_algbw: float | None = None, step_budget: int = STEP_BUDGET,
               max_channels: int = MAX_CHANNELS, max_threadblocks: int | None = None,
               router: Router | None = None, paired: bool = False) -> LanePlan:
    """Choose the lanes of every pair (see module docstring).

    Parameters
    ----------
    sched : Schedule
    topo : Topology
    model : RuntimeModel
    protocol : Protocol
    target_algbw : float, optional
        GB/s to provision for; default: the bandwidth-model algbw of
        ``sched`` times the model's link efficiency (the lower of its GPU
        link and NIC efficiencies where the topology has a network, the GPU
        link's where it has none: one MI250 box at 0.859, not the NICs'
        0.577, whose lanes then carried its all-to-all at 42.2 GB/s where
        it runs at 52.5).
    step_budget, max_channels, max_threadblocks
        Runtime limits (threadblocks default to the model's).
    router : Router, optional
        Shared switch paths.
    paired : bool
        The lowering will let one threadblock serve a send lane and a receive
        lane (``pair_connections``): a rank then needs about as many
        threadblocks as the larger of its send and receive lanes, not their sum.

    Returns
    -------
    LanePlan
    """
    router = router or Router(topo)
    costs = model.costs(protocol)
    if target_algbw is None:
        eff = (min(model.p2p_efficiency, model.net_efficiency)
               if any(node.is_network for node in topo.nodes) else model.p2p_efficiency)
        target_algbw = float(schedule_algbw(sched, topo, router)) * eff
    chunks: dict[tuple[int, int], int] = defaultdict(int)
    nops: dict[tuple[int, int], int] = defaultdict(int)
    local: dict[int, float] = defaultdict(float)
    nlocal: dict[int, int] = defaultdict(int)
    for op in sched.ops:
        if op.is_transfer:
            pair = (op.src.rank, op.dst.rank)
            chunks[pair] += op.count
            nops[pair] += 1
        else:
            local[op.dst.rank] += op.count * (1.5 if op.kind is OpKind.REDUCE else 1.0)
            nlocal[op.dst.rank] += 1
    lanes: dict[tuple[int, int], int] = {}
    rate: dict[tuple[int, int], float] = {}
    cap_of: dict[tuple[int, int], float] = {}
    hop: dict[tuple[int, int], float] = {}
    link_chunks: dict[tuple[str, str], int] = defaultdict(int)
    paths = {}
    lat = model.latency(protocol)
    for pair, c in chunks.items():
        path = router.switch_paths(pair[0]).get(pair[1], ())
        paths[pair] = path
        net = any(topo.node[v].is_network for v in path)
        cap_of[pair] = cap = costs.conn_net if net else costs.tb_p2p
        hop[pair] = lat.hop_net if net else lat.hop_p2p
        for e in zip(path, path[1:], strict=False):
            link_chunks[e] += c
        rate[pair] = c / sched.nchunks * target_algbw
        want = max(math.ceil(rate[pair] / cap - 1e-9), math.ceil(nops[pair] / step_budget), 1)
        lanes[pair] = min(want, max_channels, c)
    local_lanes = {r: max(1, min(MAX_LOCAL_LANES, max(
        math.ceil(nlocal[r] / LOCAL_STEP_BUDGET),
        math.ceil(w / sched.nchunks * target_algbw / model.local_bw))))
        for r, w in local.items()}
    _fit_with_local(lanes, rate, nops, step_budget, max_threadblocks or model.max_threadblocks,
                    local_lanes, sched.ngpus, paired)
    lane_rate = {}
    for pair, c in chunks.items():
        share = min((float(router.cap[e]) * _efficiency(topo, model, e) * c / link_chunks[e]
                     for e in zip(paths[pair], paths[pair][1:], strict=False)),
                    default=cap_of[pair])
        lane_rate[pair] = min(cap_of[pair], share / lanes[pair])
    return LanePlan(lanes, target_algbw, lane_rate, hop, model.local_bw, local_lanes)


def _efficiency(topo: Topology, model: RuntimeModel, link: tuple[str, str]) -> float:
    net = topo.node[link[0]].is_network or topo.node[link[1]].is_network
    return model.net_efficiency if net else model.p2p_efficiency


def _fit_with_local(lanes: dict[tuple[int, int], int], rate: dict[tuple[int, int], float],
                    nops: dict[tuple[int, int], int], step_budget: int, budget: int,
                    reserve: dict[int, int], ngpus: int, paired: bool) -> None:
    """``_fit_budget`` leaving each rank ``reserve[r]`` threadblocks for its
    local steps; a rank whose connections cannot fit what that leaves gives
    them its whole budget (the lowering then puts its local steps on their
    threadblocks, ``lower_to_program._local_threadblocks``), and the fit is
    tried again from the lanes asked for: the other ranks keep their
    reserves.  At most one retry per rank with a reserve."""
    wanted = dict(lanes)
    budgets = [budget - reserve.get(r, 0) for r in range(ngpus)]
    while True:
        over = _fit_budget(lanes, rate, nops, step_budget, budgets, ngpus, paired)
        if over is None:
            return
        rank, used = over
        if budgets[rank] == budget:
            raise InfeasibleError(
                f"rank {rank} needs {used} threadblocks for its connections, more than "
                f"the {budget} the threadblock budget leaves for them")
        budgets[rank] = budget
        lanes.clear()
        lanes.update(wanted)


def _fit_budget(lanes: dict[tuple[int, int], int], rate: dict[tuple[int, int], float],
                nops: dict[tuple[int, int], int], step_budget: int, budget: list[int],
                ngpus: int, paired: bool = False) -> tuple[int, int] | None:
    """Take lanes back until every rank ``r``'s send + receive lanes (paired:
    the larger of the two) fit ``budget[r]``; ``(rank, lanes it still
    needs)`` of the first rank whose connections cannot come down to its
    budget (each pair keeps a lane per ``step_budget`` transfers), else
    None."""
    def used(r: int) -> int:
        send = sum(v for (a, _), v in lanes.items() if a == r)
        recv = sum(v for (_, b), v in lanes.items() if b == r)
        return max(send, recv) if paired else send + recv

    for r in range(ngpus):
        while used(r) > budget[r]:
            mine = [p for p in lanes if r in p and lanes[p] > math.ceil(nops[p] / step_budget)
                    and lanes[p] > 1]
            if not mine:
                return r, used(r)
            pair = max(mine, key=lambda p: (lanes[p] / max(rate[p], 1e-9), p))
            lanes[pair] -= 1
    return None


def balance_lanes(sched: Schedule, plan: LanePlan, *, size: int = 1 << 30,
                  urgency: float = 0.0) -> Schedule:
    """Apply a ``LanePlan`` by list scheduling: lanes and a new program order.

    Every op is scheduled when its dependencies have (estimated) finished:
    a transfer on the lane of its pair where it can start first (the lane
    its chunk arrived on when that is as early, so the lowering may fuse the
    receive and the send; no lane beyond ``STEP_BUDGET`` ops), taking
    ``bytes / lane_rate`` plus the pair's hop latency; local ops on a
    per-rank copy engine.  Program order becomes the estimated start order,
    so every threadblock lists its steps in the order their data arrives and
    no step waits behind a later one (head-of-line blocking).  The order is
    still a valid sequential execution: an op starts after its dependencies
    finish.

    Parameters
    ----------
    sched : Schedule
    plan : LanePlan
    size : int
        Message size (bytes) the timing estimate assumes.
    urgency : float
        0: ops are placed in the order they become ready.  Above 0, an op
        with a long path of work after it (its *tail*: durations and hops to
        the end, as in HEFT's upward rank) is placed earlier by ``urgency``
        times its tail, so the transfers that feed a slow hop start first
        (reduce-scatter's network hop comes last in its trees).

    Returns
    -------
    Schedule
    """
    ops, source = _split(sched, plan.lanes)
    rounds = sched.rounds_of(source)
    if len(ops) != len(sched.ops):
        ops = list(infer_dependencies(dataclasses.replace(
            sched, ops=tuple(dataclasses.replace(o, deps=()) for o in ops))).ops)
    chunk = size / sched.nchunks
    gates = sched.gates if len(sched.gates) == len(ops) else ()  # waits, as dependencies
    users: dict[int, list[int]] = defaultdict(list)
    waiting = [0] * len(ops)
    for op in ops:
        gate = gates[op.op_id] if gates else -1
        for d in sorted({*op.deps, gate} - {-1}):
            users[d].append(op.op_id)
            waiting[op.op_id] += 1
    ready = [0.0] * len(ops)
    start = [0.0] * len(ops)
    lane_of = [0] * len(ops)
    # per pair (per rank for local ops): each lane's free time and op count
    free = {pair: [0.0] * n for pair, n in plan.lanes.items()}
    count = {pair: [0] * n for pair, n in plan.lanes.items()}
    local_free: dict[int, list[float]] = {}
    local_count: dict[int, list[int]] = {}
    arrived: dict[tuple[int, object, int], int] = {}
    tail = _tails(ops, users, plan, chunk) if urgency else [0.0] * len(ops)
    heap = [(-urgency * tail[op.op_id], op.op_id) for op in ops if not waiting[op.op_id]]
    heapq.heapify(heap)
    while heap:
        _, i = heapq.heappop(heap)
        t = ready[i]
        op = ops[i]
        src, dst = op.src, op.dst
        if src.rank != dst.rank:
            pair = (src.rank, dst.rank)
            lanes_free, lanes_count = free[pair], count[pair]
            lane = _lane(lanes_free, lanes_count, t,
                         arrived.get((src.rank, src.buffer, src.index)))
            begin = max(t, lanes_free[lane])
            end = begin + op.count * chunk / (plan.lane_rate[pair] * 1000.0)
            lanes_free[lane] = end
            lanes_count[lane] += 1
            done = end + plan.hop[pair]
            arrived[(dst.rank, dst.buffer, dst.index)] = lane
        else:
            r = dst.rank
            n = plan.local_lanes.get(r, 1)
            if r not in local_free:
                local_free[r], local_count[r] = [0.0] * n, [0] * n
            lanes_free, lanes_count = local_free[r], local_count[r]
            lanes = [k for k in range(n) if lanes_count[k] < LOCAL_STEP_BUDGET] or range(n)
            lane = min(lanes, key=lambda k: (max(t, lanes_free[k]), k))
            begin = max(t, lanes_free[lane])
            work = 1.5 if op.kind is OpKind.REDUCE else 1.0
            done = lanes_free[lane] = begin + work * op.count * chunk / (plan.local_rate * 1000.0)
            lanes_count[lane] += 1
        start[i], lane_of[i] = begin, lane
        for u in users[i]:
            if ready[u] < done:
                ready[u] = done
            waiting[u] -= 1
            if waiting[u] == 0:
                heapq.heappush(heap, (ready[u] - urgency * tail[u], u))
    order = sorted(range(len(ops)), key=lambda i: (start[i], i))
    new_id = {old: k for k, old in enumerate(order)}
    out = tuple(Op(new_id[i], op.kind, op.src, op.dst, op.count, op.operand,
                   tuple(sorted(new_id[d] for d in op.deps)), lane_of[i])
                for i, op in ((i, ops[i]) for i in order))  # dataclasses.replace, 3x faster
    return dataclasses.replace(sched, ops=out, gates=tuple(
        new_id[gates[i]] if gates[i] >= 0 else -1 for i in order) if gates else (),
        rounds=tuple(rounds[i] for i in order) if rounds else ())


def _tails(ops: list[Op], users: dict[int, list[int]], plan: LanePlan,
           chunk: float) -> list[float]:
    """Estimated work after each op (its duration, hop and the longest tail after it)."""
    tail = [0.0] * len(ops)
    for op in reversed(ops):
        if op.is_transfer:
            pair = (op.src.rank, op.dst.rank)
            own = op.count * chunk / (plan.lane_rate[pair] * 1000.0) + plan.hop[pair]
        else:
            own = op.count * chunk / (plan.local_rate * 1000.0)
        tail[op.op_id] = own + max((tail[u] for u in users[op.op_id]), default=0.0)
    return tail


def _lane(free: list[float], count: list[int], t: float, came: int | None) -> int:
    """The lane where an op ready at ``t`` starts first (``came``, the lane its
    chunk arrived on, on ties; then the fewest ops, then the lowest index);
    lanes with ``STEP_BUDGET`` ops only when every lane has them."""
    n = len(free)
    if n == 1:
        return 0
    best = full = None
    for k in range(n):
        f = free[k]
        c = count[k]
        cand = (f if f > t else t, k != came, c, k)
        if c < STEP_BUDGET:
            if best is None or cand < best:
                best = cand
        elif full is None or cand < full:
            full = cand
    return (best or full)[3]


def _split(sched: Schedule, lanes: dict[tuple[int, int], int]) -> tuple[list[Op], list[int]]:
    """Ops in program order, multi-chunk transfers cut when their pair has
    too few ops; and the index of the op each came from."""
    count: dict[tuple[int, int], int] = defaultdict(int)
    for op in sched.ops:
        if op.is_transfer:
            count[(op.src.rank, op.dst.rank)] += 1
    out: list[Op] = []
    source: list[int] = []
    for k, op in enumerate(sched.ops):
        pair = (op.src.rank, op.dst.rank)
        if not op.is_transfer or op.count == 1 or count[pair] >= lanes[pair]:
            # ids are positions: once an op is cut, the ones after it move
            out.append(op if op.op_id == len(out) else dataclasses.replace(op, op_id=len(out)))
            source.append(k)
            continue
        for d in range(op.count):
            out.append(Op(len(out), op.kind, op.src.shifted(d), op.dst.shifted(d), 1,
                          op.operand.shifted(d) if op.operand is not None else None, (),
                          op.channel))
            source.append(k)
    return out, source


__all__ = ["NAME", "LanePlan", "balance_lanes", "plan_lanes"]
_ = (Fraction, Slot)
