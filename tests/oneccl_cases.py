"""Hand-built threadblock Programs shared by the oneCCL tests (ring collectives).

Each builder returns a ``Program`` of the ring algorithm on ``n`` ranks with
one chunk per rank, one threadblock per rank (or two, with cross-threadblock
dependencies, for ``ring_allgather_split``).
"""

from __future__ import annotations

from colc.ir.core import Buffer, Collective, Protocol
from colc.ir.program import Loc, Program, RankProgram, Step, StepKind, Threadblock

I, O = Buffer.INPUT, Buffer.OUTPUT


def _loc(buf: Buffer, k: int) -> Loc:
    return Loc(buf, k)


def _step(kind: StepKind, src: Loc, dst: Loc, dep: tuple[int, int] | None = None,
          has_dep: bool = False, count: int = 1) -> Step:
    return Step(kind, src, dst, count, dep, has_dep)


def _program(name: str, coll: Collective, n: int, ranks: list[RankProgram], *,
             inplace: bool, outofplace: bool, proto: Protocol = Protocol.SIMPLE) -> Program:
    return Program(name, coll, proto, 1, n, n, inplace, outofplace, 0, 0, tuple(ranks))


def ring_allreduce(n: int) -> Program:
    """In-place ring allreduce: s, rrs x (n-2), rrcs, rcs x (n-2), r."""
    ranks = []
    for r in range(n):
        def c(j: int) -> Loc:
            return _loc(I, (r - j) % n)
        steps = [_step(StepKind.SEND, c(0), c(0))]
        steps += [_step(StepKind.RECV_REDUCE_SEND, c(j), c(j)) for j in range(1, n - 1)]
        steps.append(_step(StepKind.RECV_REDUCE_COPY_SEND, c(n - 1), c(n - 1)))
        steps += [_step(StepKind.RECV_COPY_SEND, c(j), c(j)) for j in range(n, 2 * n - 2)]
        steps.append(_step(StepKind.RECV, c(2 * n - 2), c(2 * n - 2)))
        tb = Threadblock(0, (r + 1) % n, (r - 1) % n, 0, tuple(steps))
        ranks.append(RankProgram(r, n, 0, 0, (tb,)))
    return _program(f"ring-allreduce-{n}", Collective.ALLREDUCE, n, ranks,
                    inplace=True, outofplace=False)


def ring_allgather(n: int, proto: Protocol = Protocol.SIMPLE) -> Program:
    """Ring allgather: cpy i[0]->o[r], s, rcs x (n-2), r."""
    ranks = []
    for r in range(n):
        def c(j: int) -> Loc:
            return _loc(O, (r - j) % n)
        steps = [_step(StepKind.COPY, _loc(I, 0), c(0)), _step(StepKind.SEND, c(0), c(0))]
        steps += [_step(StepKind.RECV_COPY_SEND, c(j), c(j)) for j in range(1, n - 1)]
        steps.append(_step(StepKind.RECV, c(n - 1), c(n - 1)))
        tb = Threadblock(0, (r + 1) % n, (r - 1) % n, 0, tuple(steps))
        ranks.append(RankProgram(r, 1, n, 0, (tb,)))
    return _program(f"ring-allgather-{n}", Collective.ALLGATHER, n, ranks,
                    inplace=True, outofplace=True, proto=proto)


def ring_reducescatter(n: int) -> Program:
    """Ring reducescatter: s i[r-1], rrs x (n-2), rrc i[r] -> o[0]."""
    ranks = []
    for r in range(n):
        def c(j: int) -> Loc:
            return _loc(I, (r - 1 - j) % n)
        steps = [_step(StepKind.SEND, c(0), c(0))]
        steps += [_step(StepKind.RECV_REDUCE_SEND, c(j), c(j)) for j in range(1, n - 1)]
        steps.append(_step(StepKind.RECV_REDUCE_COPY, _loc(I, r), _loc(O, 0)))
        tb = Threadblock(0, (r + 1) % n, (r - 1) % n, 0, tuple(steps))
        ranks.append(RankProgram(r, n, 1, 0, (tb,)))
    return _program(f"ring-reducescatter-{n}", Collective.REDUCESCATTER, n, ranks,
                    inplace=True, outofplace=True)


def ring_allgather_split(n: int, drop_dep: bool = False) -> Program:
    """Ring allgather with a send-only and a recv-only threadblock per rank.

    tb 0: cpy i[0]->o[r]; s o[r]; s o[r-1] (dep tb1.0); ...; tb 1: r o[r-1]; r o[r-2]; ...
    ``drop_dep`` removes the dependency of the second send (a data race).
    """
    ranks = []
    for r in range(n):
        def c(j: int) -> Loc:
            return _loc(O, (r - j) % n)
        sends = [_step(StepKind.COPY, _loc(I, 0), c(0)), _step(StepKind.SEND, c(0), c(0))]
        for j in range(1, n - 1):
            dep = None if (drop_dep and j == 1) else (1, j - 1)
            sends.append(_step(StepKind.SEND, c(j), c(j), dep=dep))
        recvs = [_step(StepKind.RECV, c(j), c(j), has_dep=j < n - 1) for j in range(1, n)]
        tb0 = Threadblock(0, (r + 1) % n, None, 0, tuple(sends))
        tb1 = Threadblock(1, None, (r - 1) % n, 0, tuple(recvs))
        ranks.append(RankProgram(r, 1, n, 0, (tb0, tb1)))
    return _program(f"ring-allgather-split-{n}", Collective.ALLGATHER, n, ranks,
                    inplace=False, outofplace=True)
