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

from collections.abc import Iterator

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
    if sched.ngpus < 1 or sched.nchunks % sched.ngpus:
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


def _accesses(sched: Schedule, op: Op, inplace: bool) -> Iterator[tuple[Phys, bool]]:
    """Physical chunks an op touches, with ``True`` for writes."""
    for d in range(op.count):
        yield _phys(sched, op.src, d, inplace), False
        if op.operand is not None:
            yield _phys(sched, op.operand, d, inplace), False
        yield _phys(sched, op.dst, d, inplace), True


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
    last_write: dict[Phys, int] = {}
    readers: dict[Phys, list[int]] = {}
    out: list[str] = []
    for op in sched.ops:
        for chunk, is_write in _accesses(sched, op, inplace):
            prior = last_write.get(chunk)
            if prior is not None and not order.before(prior, op.op_id):
                out.append(_race(op.op_id, prior, chunk))
            if is_write:
                out += [_race(op.op_id, r, chunk) for r in readers.get(chunk, ())
                        if not order.before(r, op.op_id)]
                last_write[chunk] = op.op_id
                readers[chunk] = []
            else:
                readers.setdefault(chunk, []).append(op.op_id)
            if len(out) >= MAX_REPORTS:
                return out
    return out


def _race(a: int, b: int, chunk: Phys) -> str:
    rank, buf, idx = chunk
    return f"data race between ops {b} and {a} on rank {rank} {buf.value}[{idx}]"


def _initial(sched: Schedule, inplace: bool) -> dict[Phys, Value]:
    state: dict[Phys, Value] = {}
    ext = buffer_extents(sched.collective, sched.nchunks, sched.ngpus)
    for r in range(sched.ngpus):
        for k in range(ext[Buffer.INPUT]):
            state[_phys(sched, Slot(r, Buffer.INPUT, k), 0, inplace)] = frozenset({(r, k)})
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
    return frozenset((q, k) for q in range(ngpus)) if rank == 0 else frozenset()


def _check_postcondition(sched: Schedule, inplace: bool) -> list[str]:
    state = _initial(sched, inplace)
    out: list[str] = []
    for op in sched.ops:
        for d in range(op.count):
            src = _phys(sched, op.src, d, inplace)
            dst = _phys(sched, op.dst, d, inplace)
            value = state.get(src)
            if value is None:
                out.append(f"op {op.op_id} reads uninitialised rank {src[0]} "
                           f"{src[1].value}[{src[2]}]")
                continue
            if op.kind is OpKind.REDUCE:
                assert op.operand is not None  # checked by _check_structure
                other = state.get(_phys(sched, op.operand, d, inplace))
                if other is None:
                    out.append(f"op {op.op_id} reduces into uninitialised operand")
                    continue
                if value & other:
                    out.append(f"op {op.op_id} adds contributions {sorted(value & other)[:3]} twice"
                               f" on rank {dst[0]}")
                value = value | other
            state[dst] = value
        if len(out) >= MAX_REPORTS:
            return out
    return out + _compare_outputs(sched, state, inplace)


def _compare_outputs(sched: Schedule, state: dict[Phys, Value], inplace: bool) -> list[str]:
    out: list[str] = []
    ext = buffer_extents(sched.collective, sched.nchunks, sched.ngpus)
    for r in range(sched.ngpus):
        if sched.collective is Collective.REDUCE and r != 0:
            continue
        for k in range(ext[Buffer.OUTPUT]):
            want = expected_output(sched.collective, r, k, sched.nchunks, sched.ngpus)
            got = state.get(_phys(sched, Slot(r, Buffer.OUTPUT, k), 0, inplace))
            if got != want:
                out.append(f"rank {r} output[{k}] ends with {_show(got)}, expected {_show(want)}")
                if len(out) >= MAX_REPORTS:
                    return out
    return out


def _show(v: Value | None) -> str:
    if v is None:
        return "nothing"
    items = sorted(v)
    text = ",".join(f"in{r}[{k}]" for r, k in items[:4])
    return f"{{{text}{',...' if len(items) > 4 else ''}}}"
