"""Pass ``discretize-chunks``: cut shards into equal chunks (seed 001 A.5.2).

Input invariant: a ``StepSchedule`` (or ``BfbSolution``) whose intervals
are exact fractions and whose sends into each ``(rank, shard)`` tile
``[0, 1)``.
Output invariant: a ``ChunkedSchedule`` with ``P`` chunks per shard.

Two modes:

* **exact** (``chunks_per_shard=None``): ``P`` is the LCM of the
  denominators of every interval end, so every send is a whole number of
  chunks and the bandwidth time is unchanged;
* **fixed P**: the integer program (A.11) is approximated by rounding its
  LP relaxation ``y = P x``.  Rounding every interval *end* to the nearest
  multiple of ``1/P`` (ties up) keeps the intervals of one ``(rank, shard)``
  a tiling, and each rounded count differs from ``P x`` by less than one, as
  the seed requires (``sum floor <= P <= sum ceil``, ``y < y_LP + 1``).
  Theorem 20 bounds the loss: ``T_B <= T_B^OPT + (M/B) d (d^D - 1) /
  ((d - 1) P N)`` (``theorem20_bound``); ``rounding_bound`` gives the
  schedule-specific bound ``sum_t max_link (sources on the link)/(P cap)``
  that the proof actually uses.

``choose_chunks_per_shard`` picks ``P`` for lowering: the exact LCM when it
is at most ``max_chunks`` (the MSCCL ``cnt`` field holds at most 71 chunks
per op, so the default is 64), otherwise the ``P <= max_chunks`` whose
rounded schedule has the smallest bandwidth time (ties: smaller ``P``).

Complexity: O(sends) per ``P``.
"""

from __future__ import annotations

import math
from fractions import Fraction

from colc.errors import SpecError
from colc.ir.bfb import BfbSolution, ChunkedSchedule, ChunkSend, StepSchedule

NAME = "discretize-chunks"

#: Default upper bound on chunks per shard (MSCCL ``cnt`` <= 71).
MAX_CHUNKS_PER_SHARD = 64


def exact_chunks_per_shard(steps: StepSchedule) -> int:
    """LCM of the denominators of all interval ends (1 for an empty schedule)."""
    dens = {x.denominator for s in steps.sends for x in (s.lo, s.hi)}
    return math.lcm(*dens) if dens else 1


def discretize_chunks(
    steps: StepSchedule | BfbSolution, chunks_per_shard: int | None = None
) -> ChunkedSchedule:
    """Chunk a step schedule exactly (LCM) or with ``P`` chunks per shard.

    Parameters
    ----------
    steps : StepSchedule or BfbSolution
    chunks_per_shard : int or None
        ``None`` for the exact LCM.

    Returns
    -------
    ChunkedSchedule

    Raises
    ------
    SpecError
        If ``chunks_per_shard < 1``.

    Examples
    --------
    >>> from colc.ir.bfb import Send
    >>> h = Fraction(1, 2)
    >>> s = StepSchedule(2, 1, (Send(1, 1, 0, 0, Fraction(0), h), Send(1, 1, 0, 0, h, Fraction(1))))
    >>> discretize_chunks(s).chunks_per_shard
    2
    """
    if isinstance(steps, BfbSolution):
        steps = steps.to_steps()
    p = exact_chunks_per_shard(steps) if chunks_per_shard is None else chunks_per_shard
    if p < 1:
        raise SpecError("<options>", f"chunks_per_shard must be >= 1, got {p}")
    sends: dict[tuple[int, int, int, int, int], int] = {}
    for s in steps.sends:
        first, end = _round(s.lo * p), _round(s.hi * p)
        if end > first:
            sends[(s.step, s.dst, s.shard, s.src, first)] = end - first
    out = tuple(sorted(ChunkSend(*k, c) for k, c in sends.items()))
    return ChunkedSchedule(steps.num_ranks, steps.num_steps, p, _merge(out), steps.name)


def _round(x: Fraction) -> int:
    return math.floor(x + Fraction(1, 2))


def _merge(sends: tuple[ChunkSend, ...]) -> tuple[ChunkSend, ...]:
    """Join adjacent ranges of the same (step, dst, shard, src)."""
    out: list[ChunkSend] = []
    for s in sends:
        if out:
            last = out[-1]
            if (last.step, last.dst, last.shard, last.src) == (s.step, s.dst, s.shard, s.src) \
                    and last.first + last.count == s.first:
                out[-1] = ChunkSend(s.step, s.dst, s.shard, s.src, last.first, last.count + s.count)
                continue
        out.append(s)
    return tuple(out)


def theorem20_bound(degree: int, diameter: int, num_ranks: int, chunks_per_shard: int) -> Fraction:
    """Seed Thm 20 excess, in units of ``M/B``: ``d (d^D - 1) / ((d - 1) P N)``.

    Examples
    --------
    >>> theorem20_bound(4, 3, 64, 8)
    Fraction(21, 128)
    """
    geometric = sum(degree ** t for t in range(1, diameter + 1))
    return Fraction(geometric, chunks_per_shard * num_ranks)


def rounding_bound(steps: StepSchedule, capacity: dict[tuple[int, int], Fraction],
                   chunks_per_shard: int) -> Fraction:
    """Schedule-specific bound on the added bandwidth time of rounding.

    Each rounded send exceeds its exact size by less than ``1/P`` shard, so
    a link's step load grows by less than ``(number of its sends) / P``.
    The result bounds ``bandwidth_time(rounded) - bandwidth_time(exact)``.
    """
    per_link: list[dict[tuple[int, int], int]] = [{} for _ in range(steps.num_steps)]
    for s in steps.sends:
        d = per_link[s.step - 1]
        d[(s.src, s.dst)] = d.get((s.src, s.dst), 0) + 1
    return sum(
        (max((Fraction(c, chunks_per_shard) / capacity[k] for k, c in d.items()), default=Fraction(0))
         for d in per_link),
        Fraction(0),
    )


def choose_chunks_per_shard(steps: StepSchedule, capacity: dict[tuple[int, int], Fraction],
                            max_chunks: int = MAX_CHUNKS_PER_SHARD) -> int:
    """Chunks per shard for lowering (see the module docstring).

    Raises
    ------
    SpecError
        If ``max_chunks < 1``.
    """
    if max_chunks < 1:
        raise SpecError("<options>", f"max chunks per shard must be >= 1, got {max_chunks}")
    exact = exact_chunks_per_shard(steps)
    if exact <= max_chunks:
        return exact
    best_p, best_t = 1, None
    for p in range(1, max_chunks + 1):
        t = sum(discretize_chunks(steps, p).step_times(capacity), Fraction(0))
        if best_t is None or t < best_t:
            best_p, best_t = p, t
    return best_p
