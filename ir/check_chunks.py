"""Prove a chunk-level schedule correct: structure, races, postcondition, physics.

Input: a ``Schedule`` (``colc.ir.chunks``), optionally the ``Topology``.
Output: a list of one-line problems (empty = proved correct).

What is proved, for each aliasing mode the schedule claims (in-place,
out-of-place):

1. *Structure*: op ids are positions, deps point to earlier ops, counts are
   positive, every slot range lies inside the real buffer extents
   (``colc.ir.core.buffer_extents``; scratch = ``scratch_chunks``).
2. *Race freedom*: any two ops touching the same physical chunk, one of them
   writing it, are ordered by the transitive closure of ``deps``.  Hence
   every execution that respects ``deps`` computes the same values as the
   program order.
3. *Postcondition*: symbolic execution in program order, where input chunk
   ``k`` of rank ``r`` is the symbol ``(r, k)`` and a reduction is the
   disjoint union of contribution sets (adding one contribution twice is
   reported), ends with the collective's output in every rank's output
   buffer.  Reads of never-written chunks are reported.
4. *Physics* (with a topology): every transfer goes from a rank to a rank it
   reaches directly or through switches only (``rank_reach``).

Complexity: O(total chunk accesses) plus, for accesses whose order is not a
direct dependency, a backward search bounded to the ops between the two.
"""

from __future__ import annotations

from colc.ir.chunks import Op, OpKind, Schedule, Slot
from colc.ir.core import Buffer, Collective, buffer_extents, inplace_alias
from colc.ir.topology import Topology, rank_reach

Value = frozenset[tuple[int, int]]
Phys = tuple[int, Buffer, int]

MAX_REPORTS = 20


def check_schedule(sched: Schedule, topo: Topology | None = None) -> list[str]:
    """Check ``sched`` under every aliasing mode it claims.

    Parameters
    ----------
    sched : Schedule
    topo : Topology, optional
        When given, every transfer is checked against the fabric.

    Returns
    -------
    list of str
        Problems, one line each; empty when the schedule is proved correct.
    """
    problems = _check_structure(sched)
    if problems:
        return problems
    if topo is not None:
        problems += _check_physical(sched, topo)
    modes = [m for m, on in ((True, sched.inplace), (False, sched.outofplace)) if on]
    if not modes:
        problems.append("schedule claims neither in-place nor out-of-place correctness")
    for inplace in modes:
        label = "in-place" if inplace else "out-of-place"
        found = _check_races(sched, inplace) or _check_postcondition(sched, inplace)
        problems += [f"{label}: {p}" for p in found]
    return problems[:MAX_REPORTS]


def _check_structure(sched: Schedule) -> list[str]:
    out: list[str] = []
    if sched.ngpus < 1 or sched.nchunks < 1 or (
            sched.nchunks % sched.ngpus and sched.collective is not Collective.ALLREDUCE):
        # an allreduce names every chunk alike on every rank: the runtime only
        # needs the count to divide into them (rings2d's paired halves: N/2)
        return [f"nchunks {sched.nchunks} is not a multiple of ngpus {sched.ngpus}"]
    ext = buffer_extents(sched.collective, sched.nchunks, sched.ngpus)
    ext[Buffer.SCRATCH] = sched.scratch_chunks
    for pos, op in enumerate(sched.ops):
        if op.op_id != pos:
            out.append(f"op at position {pos} has id {op.op_id}")
        if op.count < 1:
            out.append(f"op {pos}: count {op.count} < 1")
        if any(d < 0 or d >= pos for d in op.deps):
            out.append(f"op {pos}: dependency {op.deps} does not point to an earlier op")
        out += _slot_problems(sched, op, ext)
        if op.kind is OpKind.REDUCE and op.operand is None:
            out.append(f"op {pos}: reduce without operand")
        if op.kind is OpKind.REDUCE and not op.is_transfer and op.operand != op.dst:
            out.append(f"op {pos}: a local reduce must use its destination as operand")
        if len(out) >= MAX_REPORTS:
            break
    return out


def _slot_problems(sched: Schedule, op: Op, ext: dict[Buffer, int]) -> list[str]:
    out = []
    slots = [("src", op.src), ("dst", op.dst)]
    if op.operand is not None:
        slots.append(("operand", op.operand))
        if op.operand.rank != op.dst.rank:
            out.append(f"op {op.op_id}: operand on rank {op.operand.rank}, dst on {op.dst.rank}")
    for name, s in slots:
        if not 0 <= s.rank < sched.ngpus:
            out.append(f"op {op.op_id}: {name} rank {s.rank} out of range")
        elif s.index < 0 or s.index + op.count > ext[s.buffer]:
            out.append(f"op {op.op_id}: {name} {s.buffer.value}[{s.index}:{s.index + op.count}]"
                       f" outside its {ext[s.buffer]} chunks on rank {s.rank}")
    return out


def _check_physical(sched: Schedule, topo: Topology) -> list[str]:
    if topo.num_ranks != sched.ngpus:
        return [f"schedule has {sched.ngpus} ranks, topology {topo.num_ranks}"]
    reach = rank_reach(topo)
    out = []
    for op in sched.ops:
        if op.is_transfer and (op.src.rank, op.dst.rank) not in reach:
            out.append(f"op {op.op_id}: rank {op.src.rank} ({topo.ranks[op.src.rank]}) is not "
                       f"connected to rank {op.dst.rank} ({topo.ranks[op.dst.rank]}); "
                       "data must be relayed")
    out.extend(_check_routes(sched, topo))
    return out


def _check_routes(sched: Schedule, topo: Topology) -> list[str]:
    """Every routing-witness path joins its pair through switches over real links."""
    cap = topo.capacity()
    out = []
    for (u, v), paths in sched.routes:
        if not (0 <= u < topo.num_ranks and 0 <= v < topo.num_ranks) or u == v:
            out.append(f"route for pair ({u}, {v}): not two distinct ranks")
            continue
        for path, weight in paths:
            ends = (path[0], path[-1]) if path else None
            if ends != (topo.ranks[u], topo.ranks[v]) or weight <= 0:
                out.append(f"route {path} (weight {weight}) does not join rank {u} to rank {v}")
            elif any(topo.node[x].is_compute for x in path[1:-1]):
                out.append(f"route {path} passes through a rank; only switches forward data")
            elif any(cap.get(e, 0) <= 0 for e in zip(path, path[1:], strict=False)):
                out.append(f"route {path} uses a link the topology does not have")
    return out


def _phys(sched: Schedule, slot: Slot, delta: int, inplace: bool) -> Phys:
    if not inplace:
        return (slot.rank, slot.buffer, slot.index + delta)
    buf, idx = inplace_alias(sched.collective, slot.rank, sched.nchunks, sched.ngpus,
                             slot.buffer, slot.index + delta)
    return (slot.rank, buf, idx)


_BUFFERS = tuple(Buffer)
_CODE = {b: i for i, b in enumerate(_BUFFERS)}


class _Keys:
    """Physical chunks as integers: ``((rank * 3 + buffer) << 32) + index``.

    The in-place aliasing maps a slot range to a contiguous physical range
    (``inplace_alias`` is an offset per buffer), so an op's chunks are its
    first chunk's key plus 0..count-1: one alias lookup per op, not per chunk.
    """

    def __init__(self, sched: Schedule, inplace: bool) -> None:
        self.sched = sched
        self.inplace = inplace

    def base(self, slot: Slot) -> int:
        rank, buf, idx = _phys(self.sched, slot, 0, self.inplace)
        return ((rank * 3 + _CODE[buf]) << 32) + idx

    @staticmethod
    def chunk(key: int) -> Phys:
        """The (rank, buffer, index) of ``key``."""
        high = key >> 32
        return (high // 3, _BUFFERS[high % 3], key & 0xFFFFFFFF)


class _Order:
    """Happens-before queries over the dependency DAG."""

    def __init__(self, ops: tuple[Op, ...]) -> None:
        self.deps = [frozenset(op.deps) for op in ops]

    def before(self, a: int, b: int) -> bool:
        """Whether op ``a`` precedes op ``b`` through dependencies."""
        if a == b or a in self.deps[b]:
            return True
        seen: set[int] = set()
        stack = [d for d in self.deps[b] if d > a]
        while stack:
            x = stack.pop()
            if x in seen:
                continue
            seen.add(x)
            if a in self.deps[x]:
                return True
            stack.extend(d for d in self.deps[x] if d > a and d not in seen)
        return False


def _check_races(sched: Schedule, inplace: bool) -> list[str]:
    order = _Order(sched.ops)
    keys = _Keys(sched, inplace)
    last_write: dict[int, int] = {}
    readers: dict[int, list[int]] = {}
    out: list[str] = []
    for op in sched.ops:
        me = op.op_id
        mine = order.deps[me]
        read_bases = [keys.base(op.src)]
        if op.operand is not None:
            read_bases.append(keys.base(op.operand))
        dst = keys.base(op.dst)
        for d in range(op.count):
            for chunk in [b + d for b in read_bases]:
                prior = last_write.get(chunk)
                if prior is not None and prior not in mine and not order.before(prior, me):
                    out.append(_race(me, prior, keys.chunk(chunk)))
                got = readers.get(chunk)
                if got is None:
                    readers[chunk] = [me]
                else:
                    got.append(me)
            chunk = dst + d
            prior = last_write.get(chunk)
            if prior is not None and prior not in mine and not order.before(prior, me):
                out.append(_race(me, prior, keys.chunk(chunk)))
            out += [_race(me, r, keys.chunk(chunk)) for r in readers.get(chunk, ())
                    if r != me and r not in mine and not order.before(r, me)]
            last_write[chunk] = me
            readers[chunk] = []
            if len(out) >= MAX_REPORTS:
                return out
    return out


def _race(a: int, b: int, chunk: Phys) -> str:
    rank, buf, idx = chunk
    return f"data race between ops {b} and {a} on rank {rank} {buf.value}[{idx}]"


def _initial(sched: Schedule, inplace: bool) -> dict[int, Value]:
    state: dict[int, Value] = {}
    keys = _Keys(sched, inplace)
    ext = buffer_extents(sched.collective, sched.nchunks, sched.ngpus)
    for r in range(sched.ngpus):
        base = keys.base(Slot(r, Buffer.INPUT, 0))
        for k in range(ext[Buffer.INPUT]):
            state[base + k] = frozenset({(r, k)})
    return state


def expected_output(coll: Collective, rank: int, k: int, nchunks: int, ngpus: int) -> Value:
    """The symbolic value ``o[k]`` must hold on ``rank`` at the end."""
    cf = nchunks // ngpus
    if coll is Collective.ALLGATHER:
        return frozenset({(k // cf, k % cf)})
    if coll is Collective.REDUCESCATTER:
        return frozenset((q, rank * cf + k) for q in range(ngpus))
    if coll is Collective.ALLREDUCE:
        return frozenset((q, k) for q in range(ngpus))
    if coll is Collective.BROADCAST:
        return frozenset({(0, k)})
    if coll is Collective.ALLTOALL:  # block k // cf is rank k // cf's block for this rank
        return frozenset({(k // cf, rank * cf + k % cf)})
    return frozenset((q, k) for q in range(ngpus)) if rank == 0 else frozenset()


def _check_postcondition(sched: Schedule, inplace: bool) -> list[str]:
    state = _initial(sched, inplace)
    keys = _Keys(sched, inplace)
    out: list[str] = []
    for op in sched.ops:
        src, dst = keys.base(op.src), keys.base(op.dst)
        operand = keys.base(op.operand) if op.operand is not None else None
        for d in range(op.count):
            value = state.get(src + d)
            if value is None:
                rank, buf, idx = keys.chunk(src + d)
                out.append(f"op {op.op_id} reads uninitialised rank {rank} {buf.value}[{idx}]")
                continue
            if operand is not None:
                other = state.get(operand + d)
                if other is None:
                    out.append(f"op {op.op_id} reduces into uninitialised operand")
                    continue
                if value & other:
                    out.append(f"op {op.op_id} adds contributions {sorted(value & other)[:3]} twice"
                               f" on rank {op.dst.rank}")
                value = value | other
            state[dst + d] = value
        if len(out) >= MAX_REPORTS:
            return out
    return out + _compare_outputs(sched, state, inplace)


def _compare_outputs(sched: Schedule, state: dict[int, Value], inplace: bool) -> list[str]:
    out: list[str] = []
    keys = _Keys(sched, inplace)
    ext = buffer_extents(sched.collective, sched.nchunks, sched.ngpus)
    expected = _expected_outputs(sched)
    matched: dict[int, tuple[Value, Value]] = {}  # id -> (expected value, a value equal to it)
    for r in range(sched.ngpus):
        if sched.collective is Collective.REDUCE and r != 0:
            continue
        base = keys.base(Slot(r, Buffer.OUTPUT, 0))
        for k in range(ext[Buffer.OUTPUT]):
            want = expected(r, k)
            got = state.get(base + k)
            seen = matched.get(id(want))
            if seen is not None and seen[0] is want and seen[1] is got:
                continue  # copies of one value: compared once
            if got == want:
                matched[id(want)] = (want, got)  # holds ``want``: its id stays its own
            else:
                out.append(f"rank {r} output[{k}] ends with {_show(got)}, expected {_show(want)}")
                if len(out) >= MAX_REPORTS:
                    return out
    return out


def _expected_outputs(sched: Schedule):
    """``expected_output`` of ``sched`` as a function of ``(rank, k)``; where
    ``o[k]`` is the same on every rank (allreduce, broadcast) each value is
    built once (N values of N contributions, not N^2 of them: minutes at 1024
    ranks)."""
    coll, n, nchunks = sched.collective, sched.ngpus, sched.nchunks
    if coll in (Collective.ALLREDUCE, Collective.BROADCAST):
        memo: dict[int, Value] = {}

        def same_on_every_rank(r: int, k: int) -> Value:
            if k not in memo:
                memo[k] = expected_output(coll, r, k, nchunks, n)
            return memo[k]

        return same_on_every_rank
    return lambda r, k: expected_output(coll, r, k, nchunks, n)


def _show(v: Value | None) -> str:
    if v is None:
        return "nothing"
    items = sorted(v)
    text = ",".join(f"in{r}[{k}]" for r, k in items[:4])
    return f"{{{text}{',...' if len(items) > 4 else ''}}}"
