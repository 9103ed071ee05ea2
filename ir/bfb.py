"""Step-schedule IR of the direct-connect chapter: BFB and expansion schedules.

A *step schedule* (seed 001 section 3.3.1, A.2; inventory 1.2) is a set of
tuples ``((v, C), (w, u), t)``: in communication step ``t`` rank ``w`` sends
the part ``C`` of rank ``v``'s shard to its out-neighbour ``u``.  Shards are
the interval ``[0, 1)``; ``C`` is a half-open sub-interval ``[lo, hi)`` with
exact ``Fraction`` ends.  Two representations live here:

``StepSchedule``
    The explicit tuple list (``Send`` objects), used by expansions, the ring
    schedule, the chunk lowering and the validators.
``BfbSolution``
    The compact result of the BFB linear programs (LP 3.1): for every
    receiving rank ``u`` and step ``t`` a reference to one solved *pattern*
    (``BfbPattern``) shared by every ``(u, t)`` whose LP is the same up to
    relabeling.  ``BfbSolution.to_steps()`` materialises the tuples.

Units and the cost model (alpha-beta, seed 001 section 3.3.2):

* bandwidths are GB/s (``Topology`` units); a link ``w -> u`` of capacity
  ``c`` carrying ``s`` shards in one step is busy ``s / c`` (in units of
  "shard size in GB" per GB/s, i.e. seconds per GB of shard);
* ``step_times[t-1]`` is the largest such busy time of any link in step
  ``t``; ``bandwidth_time = sum(step_times)``, so that the bandwidth runtime
  of one allgather of total size ``M`` bytes is
  ``T_B = (M / N) * bandwidth_time`` (seed eq. 3.2);
* the normalised value of the seed's tables is
  ``tau = T_B / (M / B) = B * bandwidth_time / N`` for a node bandwidth
  ``B`` (``tau(B)``); the nccl-tests allgather bus-independent bandwidth is
  ``algbw = M / T_B = N / bandwidth_time`` GB/s;
* ``T_L = alpha * num_steps``.

Invariants: ``1 <= src, dst, shard < num_ranks``-style rank indices,
``0 <= lo < hi <= 1``, ``1 <= step <= num_steps``; sends are sorted by
``(step, dst, shard, src, lo)``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np


@dataclass(frozen=True, slots=True, order=True)
class Send:
    """Rank ``src`` sends ``[lo, hi)`` of rank ``shard``'s shard to ``dst`` in ``step``."""

    step: int
    dst: int
    shard: int
    src: int
    lo: Fraction
    hi: Fraction

    @property
    def size(self) -> Fraction:
        """Fraction of one shard moved."""
        return self.hi - self.lo


@dataclass(frozen=True, slots=True)
class StepSchedule:
    """An explicit allgather step schedule on ranks ``0..num_ranks-1``.

    Parameters
    ----------
    num_ranks : int
    num_steps : int
        ``t_max``; ``T_L = alpha * num_steps``.
    sends : tuple of Send
        Sorted (see the module docstring).
    name : str
        Generator, for reports (``"bfb"``, ``"line-graph(bfb)"``, ...).
    """

    num_ranks: int
    num_steps: int
    sends: tuple[Send, ...]
    name: str = ""

    def by_step(self) -> list[list[Send]]:
        """Sends grouped per step: element ``t-1`` holds step ``t``."""
        out: list[list[Send]] = [[] for _ in range(self.num_steps)]
        for s in self.sends:
            out[s.step - 1].append(s)
        return out

    def link_loads(self) -> list[dict[tuple[int, int], Fraction]]:
        """Shards carried per ``(src, dst)`` pair, per step."""
        loads: list[dict[tuple[int, int], Fraction]] = [{} for _ in range(self.num_steps)]
        for s in self.sends:
            key = (s.src, s.dst)
            d = loads[s.step - 1]
            d[key] = d.get(key, Fraction(0)) + s.size
        return loads

    def step_times(self, capacity: dict[tuple[int, int], Fraction]) -> tuple[Fraction, ...]:
        """Largest ``load / capacity`` over the links, per step.

        Parameters
        ----------
        capacity : dict
            GB/s per ordered rank pair (parallel links summed).
        """
        out = []
        for loads in self.link_loads():
            out.append(max((v / capacity[k] for k, v in loads.items()), default=Fraction(0)))
        return tuple(out)


@dataclass(frozen=True, slots=True)
class BfbPattern:
    """One solved BFB LP (3.1) in its relabeled form.

    Slots ``0..k-1`` are the receiver's in-neighbours in a canonical order;
    a *class* is the set of sources that may be sent by exactly the slots of
    ``mask`` (bit ``j`` = slot ``j``).  Sources of one class are
    interchangeable, so the LP only fixes the per-class totals.

    Parameters
    ----------
    capacity : tuple of Fraction
        GB/s of each slot's link.
    masks, counts : tuple of int
        Classes (sorted by mask) and their number of sources.
    amounts : tuple of tuple of (int, Fraction)
        Per class, ``(slot, shards)`` with positive shards summing to the
        class count; slots increasing.
    load : Fraction
        The LP optimum ``U = max_j sum_c amounts[c][j] / capacity[j]``.
    """

    capacity: tuple[Fraction, ...]
    masks: tuple[int, ...]
    counts: tuple[int, ...]
    amounts: tuple[tuple[tuple[int, Fraction], ...], ...]
    load: Fraction


@dataclass(frozen=True, eq=False)
class BfbSolution:
    """The optimal BFB allgather schedule of a graph, compactly.

    Parameters
    ----------
    num_ranks : int
    num_steps : int
        The diameter ``D(G)`` (Thm 15).
    in_neighbours : tuple of tuple of int
        Per receiver ``u``, its in-neighbours in slot order.
    pattern_of : tuple of tuple of int
        ``pattern_of[u][t-1]`` indexes ``patterns`` (``-1``: nothing to
        receive in step ``t``).
    patterns : tuple of BfbPattern
    step_times : tuple of Fraction
        ``max_u patterns[pattern_of[u][t-1]].load`` per step.
    distance : numpy.ndarray
        Read-only ``N x N`` hop distances, ``distance[v, u] = d(v, u)``.
    name : str
    """

    num_ranks: int
    num_steps: int
    in_neighbours: tuple[tuple[int, ...], ...]
    pattern_of: tuple[tuple[int, ...], ...]
    patterns: tuple[BfbPattern, ...]
    step_times: tuple[Fraction, ...]
    distance: np.ndarray = field(repr=False)
    name: str = "bfb"

    @property
    def bandwidth_time(self) -> Fraction:
        """``sum_t max_u U_{u,t}``; ``T_B = (M / N) * bandwidth_time``."""
        return sum(self.step_times, Fraction(0))

    def tau(self, node_bandwidth: Fraction) -> Fraction:
        """``T_B / (M / B)`` for node bandwidth ``B`` (seed tables' T_B column)."""
        return Fraction(node_bandwidth) * self.bandwidth_time / self.num_ranks

    def algbw(self) -> Fraction:
        """Allgather algbw ``M / T_B`` in GB/s (nccl-tests convention)."""
        return Fraction(self.num_ranks) / self.bandwidth_time

    def source_masks(self, u: int) -> tuple[np.ndarray, np.ndarray]:
        """Per source rank: its distance to ``u`` and its slot mask at ``u``.

        Bit ``j`` of ``mask[v]`` is set when slot ``j`` (in-neighbour ``w``)
        has ``d(v, w) = d(v, u) - 1``.  Uses Python ints beyond 62 slots.
        """
        return source_masks(self.distance, u, self.in_neighbours[u])

    def sends_into(self, u: int, t: int) -> Iterator[Send]:
        """The sends received by ``u`` in step ``t``, in ``(shard, src)`` order.

        Sources of one class are laid end to end on ``[0, count)`` and each
        slot takes a consecutive stretch of its class amount, so most
        sources come from a single in-neighbour and every source's shard is
        partitioned into consecutive intervals (A.5, "from fractions to
        intervals").
        """
        pid = self.pattern_of[u][t - 1]
        if pid < 0:
            return
        pat = self.patterns[pid]
        dist, mask = self.source_masks(u)
        srcs = np.flatnonzero(dist == t)
        by_class: dict[int, list[int]] = {}
        for v in srcs.tolist():
            by_class.setdefault(int(mask[v]), []).append(v)
        nbrs = self.in_neighbours[u]
        out: list[Send] = []
        for c, m in enumerate(pat.masks):
            members = by_class.get(m, [])
            pos = Fraction(0)
            for slot, amount in pat.amounts[c]:
                end = pos + amount
                first = int(pos)
                for i in range(first, len(members)):
                    lo, hi = max(pos, Fraction(i)), min(end, Fraction(i + 1))
                    if lo >= hi:
                        break
                    out.append(Send(t, u, members[i], nbrs[slot], lo - i, hi - i))
                pos = end
        out.sort()
        yield from out

    def to_steps(self) -> StepSchedule:
        """Materialise every send (O(N^2) objects; for lowering and checks)."""
        sends: list[Send] = []
        for t in range(1, self.num_steps + 1):
            for u in range(self.num_ranks):
                sends.extend(self.sends_into(u, t))
        sends.sort()
        return StepSchedule(self.num_ranks, self.num_steps, tuple(sends), self.name)


def source_masks(
    distance: np.ndarray, u: int, nbrs: tuple[int, ...]
) -> tuple[np.ndarray, np.ndarray]:
    """Distances ``d(., u)`` and in-neighbour masks of every source (see above).

    Parameters
    ----------
    distance : numpy.ndarray
        ``distance[v, x] = d(v, x)``.
    u : int
    nbrs : tuple of int
        In-neighbours of ``u`` in slot order.
    """
    du = distance[:, u]
    k = len(nbrs)
    if k <= 62:
        mask = np.zeros(du.shape[0], dtype=np.int64)
        for j, w in enumerate(nbrs):
            mask |= (distance[:, w] == du - 1).astype(np.int64) << j
    else:
        mask = np.zeros(du.shape[0], dtype=object)
        for j, w in enumerate(nbrs):
            mask = mask + (distance[:, w] == du - 1).astype(object) * (1 << j)
    return du, mask


@dataclass(frozen=True, slots=True, order=True)
class ChunkSend:
    """Rank ``src`` sends chunks ``first .. first+count-1`` of shard ``shard`` to ``dst``."""

    step: int
    dst: int
    shard: int
    src: int
    first: int
    count: int


@dataclass(frozen=True, slots=True)
class ChunkedSchedule:
    """A step schedule whose shards are cut into ``chunks_per_shard`` equal chunks.

    Parameters
    ----------
    num_ranks, num_steps : int
    chunks_per_shard : int
        ``P``; the whole buffer has ``P * num_ranks`` chunks.
    sends : tuple of ChunkSend
        Sorted; ``count >= 1``.
    name : str
    """

    num_ranks: int
    num_steps: int
    chunks_per_shard: int
    sends: tuple[ChunkSend, ...]
    name: str = ""

    def step_times(self, capacity: dict[tuple[int, int], Fraction]) -> tuple[Fraction, ...]:
        """Largest ``shards / capacity`` of any link, per step."""
        loads: list[dict[tuple[int, int], int]] = [{} for _ in range(self.num_steps)]
        for s in self.sends:
            d = loads[s.step - 1]
            d[(s.src, s.dst)] = d.get((s.src, s.dst), 0) + s.count
        p = self.chunks_per_shard
        return tuple(
            max((Fraction(v, p) / capacity[k] for k, v in d.items()), default=Fraction(0))
            for d in loads
        )


def allgather_problems(cs: ChunkedSchedule, capacity: dict[tuple[int, int], Fraction] | None = None,
                       limit: int = 20) -> list[str]:
    """Check that ``cs`` is an allgather: an empty list means proved.

    Every sender holds what it sends at the start of the step (its own
    shard from the start, received chunks from the end of their step), no
    rank receives a chunk twice or its own shard, every link exists (when
    ``capacity`` is given), and every rank ends with every chunk (Def 4).
    Bitsets per (rank, shard); O(sends + N^2).
    """
    n, p = cs.num_ranks, cs.chunks_per_shard
    full = (1 << p) - 1
    have = [[full if v == u else 0 for v in range(n)] for u in range(n)]
    out: list[str] = []
    for t in range(1, cs.num_steps + 1):
        arrivals: list[tuple[int, int, int]] = []
        for s in (x for x in cs.sends if x.step == t):
            bits = ((1 << s.count) - 1) << s.first
            where = f"step {t}: {s.src}->{s.dst} shard {s.shard} chunks {s.first}+{s.count}"
            if s.first < 0 or s.first + s.count > p or s.count < 1:
                out.append(f"{where}: chunk range outside 0..{p - 1}")
            elif capacity is not None and (s.src, s.dst) not in capacity:
                out.append(f"{where}: no link")
            elif have[s.src][s.shard] & bits != bits:
                out.append(f"{where}: sender does not hold the chunks yet")
            else:
                arrivals.append((s.dst, s.shard, bits))
        for u, v, bits in arrivals:
            if have[u][v] & bits:
                out.append(f"step {t}: rank {u} receives chunks of shard {v} it already holds")
            have[u][v] |= bits
        if len(out) >= limit:
            return out[:limit]
    for u in range(n):
        for v in range(n):
            if have[u][v] != full:
                out.append(f"rank {u} misses chunks of shard {v} at the end")
                if len(out) >= limit:
                    return out
    return out
