"""Pass ``portfolio``: one runtime file per message-size window (``colc TOPO -o DIR/``).

The runtime tries the files of ``MSCCL_ALGO_DIR`` in sorted order and takes
the first whose ``[minBytes, maxBytes]`` window holds the call's size and
whose ``nchunksperloop`` divides its element count (runtime notes 4.1).  A
portfolio is a set of files with contiguous, non-overlapping windows from 0
to unlimited, each holding the variant the simulator predicts fastest there.

Input: a ``Topology`` and ``CompileOptions`` (collective, algorithm or
``auto``, machine).  Output: a ``Portfolio``: windows in size order, each
with its verified program and text, and the simulated results per size.

Search (``colc.compiler.pipeline.Compiler``): at every evaluated size
(``SIZES``: 1 KiB to 1 GiB by factors of 4) the variants whose protocol
suits the size (``PROTOCOL_SIZES``: LL for small messages, LL128 in the
middle, Simple from 256 KiB up; under ``auto`` none below the variant's
``least_size``: rings2d's grid form past 512 ranks from 1 GiB) and which
the runtime would select there
for fp32 (hence also for fp16 and bf16) are simulated (when none is
selectable, e.g. allreduce on a rank count that is not a power of two, all
are, and the portfolio says the runtime will not use it at that size);
variants whose bandwidth bound cannot beat the best simulated one are
skipped.  Each size's winner is also lowered for the smaller budgets a
single compile tries (``_with_ladders``), and the best of those goes
first where it is faster or as fast on fewer threadblocks.  Runs of
sizes with the same winner form a window; a window ends at twice its last
evaluated size ``s`` (a power of two, so every power-of-two size between two
evaluated sizes falls in one window) or, when the next window's file or a
runner-up of either side is selected and simulates faster at ``2 s``, at
``s``, the runner-up then serving ``(s, 2 s]`` (``_split_midpoints``: 128
MiB, what nccl-tests reports, lies between the evaluated 64 and 256 MiB;
past ``COARSE_RANKS`` ranks only the two neighbours, and only where the
next window's form was not ranked at ``s``, ``_coarse_rivals``);
the first starts at 0 and the last is unlimited.  A winner that fails
verification is replaced by the next best for its sizes.

Complexity: one simulation per (variant, size) at most, plus up to
``2 + 2 MIDPOINT_RIVALS`` per window boundary and one per smaller budget of
each size's winner; the lowering of each variant once.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from colc.compiler.choose_variants import least_size, scale_skip
from colc.compiler.parallel import jobs_for, prefetch, simulate_pairs
from colc.compiler.pipeline import (
    ALGORITHMS,
    CompileOptions,
    LADDER_RANKS,
    OFF_LADDER_VARIANTS,
    Compiler,
    Variant,
    VerificationFailed,
    below_rung,
    ladder_variants,
    off_ladder,
    rank_limit_problem,
    smallest_budget,
    variants,
)
from colc.errors import ColcError, InfeasibleError, UnsupportedError
from colc.ir.core import Protocol
from colc.ir.program import Program
from colc.ir.simulate import SimResult, nccl_tests_bytes, selection, window_selection
from colc.ir.topology import Topology
from colc.progress import report as progress_report

NAME = "portfolio"

#: Evaluated message sizes (bytes): 1 KiB .. 1 GiB by factors of 4.
SIZES = tuple(1 << k for k in range(10, 31, 2))
#: Ranks above which the default sizes go by factors of 16 (1K, 16K, 256K, 4M,
#: 64M, 1G): one simulation of a 1024-rank file takes 20 s at 1 MiB and
#: minutes at 1 GiB, and the windows stay contiguous from 0 to unlimited.
COARSE_RANKS = 512
#: Sizes (inclusive) at which each protocol is considered.
PROTOCOL_SIZES = {Protocol.LL: (0, 4 << 20), Protocol.LL128: (16 << 10, 256 << 20),
                  Protocol.SIMPLE: (256 << 10, 1 << 62)}
#: Where no Simple file lowers (its FIFO holds 2 calls: DGX A100 x128 rails
#: needs pieces of 4 chunks to stay within 64 steps per threadblock), LL128
#: serves the large sizes too.
STRETCHED_SIZES = {**PROTOCOL_SIZES, Protocol.LL128: (16 << 10, 1 << 62)}
#: Chunks per shard tried per protocol (tree algorithms).
CHUNKINGS = {Protocol.LL: (1, 4, 16), Protocol.LL128: (4, 16, 64), Protocol.SIMPLE: (16, 32, 64)}


@dataclass(frozen=True, slots=True)
class Window:
    """One file of a portfolio: sizes ``lo..hi`` bytes (``hi`` 0 = unlimited)."""

    lo: int
    hi: int
    variant: Variant
    program: Program
    text: str
    results: tuple[SimResult, ...]

    def __repr__(self) -> str:
        """One line: the window, the variant and its threadblocks per GPU
        (the file's text and results are left out)."""
        return (f"Window({self.span()}, {self.variant.label}, "
                f"{self.program.max_threadblocks} threadblocks per GPU)")

    def filename(self, index: int, collective: str) -> str:
        """Sortable file name (window order), naming what the runtime matches
        a call on besides the window (rank count; the mode when only one):
        ``colc-allgather-16ranks-01-le512K.xml``,
        ``colc-allreduce-8ranks-inplace-00-le2K.xml``.  Portfolios for other
        rank counts or modes can share one ``MSCCL_ALGO_DIR``."""
        p = self.program
        mode = "" if p.inplace == p.outofplace else "-inplace" if p.inplace else "-outofplace"
        return (f"colc-{collective}-{p.ngpus}ranks{mode}-{index:02d}-"
                f"{self.span(compact=True)}.xml")

    def span(self, compact: bool = False) -> str:
        """``le128K``/``<=128K``, ``128K..512K`` (above 128K, at most 512K), ``gt512M``."""
        if self.lo == 0 and self.hi == 0:
            return "all"
        if self.lo == 0:
            return f"le{_human(self.hi)}" if compact else f"<={_human(self.hi)}"
        if self.hi == 0:
            return f"gt{_human(self.lo - 1)}" if compact else f">{_human(self.lo - 1)}"
        return f"{_human(self.lo - 1)}-{_human(self.hi)}" if compact else \
            f"{_human(self.lo - 1)}<..<={_human(self.hi)}"


@dataclass(frozen=True, slots=True)
class Portfolio:
    """Windows in size order, and every simulated (variant, size) for reports."""

    windows: tuple[Window, ...]
    table: tuple[tuple[str, int, SimResult], ...]
    notes: tuple[str, ...] = ()
    budget: int = 0  # threadblocks per GPU every window respects

    def __repr__(self) -> str:
        """The windows on one line each, not the files' text."""
        rows = "".join(f"\n    {w!r}," for w in self.windows)
        return (f"Portfolio(budget={self.budget}, {len(self.table)} simulated figures, "
                f"windows=({rows}\n))")


def _human(n: int) -> str:
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return str(n)


def default_sizes(ranks: int) -> tuple[int, ...]:
    """Sizes a portfolio of ``ranks`` ranks evaluates by default.

    >>> len(default_sizes(1024)), default_sizes(1024)[-1] == default_sizes(16)[-1] == 1 << 30
    (6, True)
    >>> default_sizes(512) == SIZES
    True
    """
    return SIZES[::2] if ranks > COARSE_RANKS else SIZES


def build_portfolio(topo: Topology, opts: CompileOptions,
                    sizes: tuple[int, ...] | None = None) -> Portfolio:
    """Search the variants and cut the size axis into windows (see module docstring).

    Parameters
    ----------
    topo : Topology
    opts : CompileOptions
        ``protocol`` and ``min_bytes``/``max_bytes`` are ignored: every
        protocol the machine offers is tried and the windows cover all sizes.
    sizes : tuple of int, optional
        Evaluated sizes, in any order (sorted here; default ``default_sizes``).

    Returns
    -------
    Portfolio

    Raises
    ------
    InfeasibleError
        No variant is selectable and correct at some evaluated size.
    """
    sizes = tuple(sorted(set(sizes))) if sizes else default_sizes(topo.num_ranks)  # windows ascend
    opts = dataclasses.replace(opts, min_bytes=0, max_bytes=0, rank_sizes=sizes,
                               protocol_ranges=tuple((p, lo, hi) for p, (lo, hi)
                                                     in STRETCHED_SIZES.items()))
    from colc.compiler.option_refusal import mode_problem, option_problem

    if (why := mode_problem(opts)) is not None:
        raise UnsupportedError(why)
    problem = rank_limit_problem(topo.num_ranks)
    if problem is not None:  # a portfolio is MSCCL files; refused before anything is built
        raise InfeasibleError(problem)
    try:
        return _build_once(topo, opts, sizes)
    except InfeasibleError as err:

        def build(t: Topology, o: CompileOptions) -> Portfolio:
            return _build_once(t, o, sizes)

        better = option_problem(topo, opts, err, build) or smallest_budget(topo, opts, err, build)
        if better is None:
            raise
        raise InfeasibleError(better) from None


def _build_once(topo: Topology, opts: CompileOptions, sizes: tuple[int, ...]) -> Portfolio:
    """``build_portfolio`` at ``opts.max_threadblocks``, without the budget search."""
    compiler = Compiler(topo, opts)
    protocols = tuple(p for p in (Protocol.LL, Protocol.LL128, Protocol.SIMPLE)
                      if p in compiler.model.protocols)
    cands: list[Variant] = []
    for proto in protocols:
        cands += variants(compiler, (proto,), CHUNKINGS[proto])
    notes: list[str] = [why for name in sorted(ALGORITHMS) if compiler.opts.algorithm == "auto"
                        and (why := scale_skip(topo, name, compiler.budget,
                                               compiler.opts.collective))]
    table: list[tuple[str, int, SimResult]] = []
    _prefetch(compiler, cands, sizes)
    ranking = {}
    for i, s in enumerate(sizes):
        ranking[s] = _rank(compiler, cands, s, notes, table, PROTOCOL_SIZES)
        if s > PROTOCOL_SIZES[Protocol.LL128][1]:
            rivals = (cands if _falls(ranking, sizes, i) else
                      [] if topo.num_ranks > COARSE_RANKS else _last_ll128(ranking, sizes, i))
            ranking[s] = _with_ll128(compiler, rivals, s, notes, table, ranking[s])
    _with_ladders(compiler, sizes, table, ranking, cands)
    windows = _windows(compiler, sizes, ranking, notes)
    return Portfolio(tuple(windows), tuple(table), tuple(dict.fromkeys(notes)), compiler.budget)


def _falls(ranking: dict[int, list[tuple[float, Variant]]], sizes: tuple[int, ...],
           i: int) -> bool:
    """``falls_behind`` of the rankings at ``sizes[i]`` and one size below."""
    def best(s: int) -> float | None:
        return ranking[s][0][0] if ranking[s] else None

    return falls_behind(best(sizes[i]), best(sizes[i - 1]) if i else None)


def falls_behind(here: float | None, below: float | None) -> bool:
    """Whether LL128 is ranked at a size past its range, where ``here`` is the
    best Simple algbw (None: no file serves it) and ``below`` the best one
    size smaller: past LL128's range only Simple is ranked, and where Simple
    files lose (DGX A100 x16 allreduce at 1 GiB: NCCL's rings 38.8 GB/s after
    rails' LL128 53.4 at 128 MiB) LL128 is ranked there too.

    >>> falls_behind(None, None), falls_behind(38.8, 53.4), falls_behind(60.0, 53.4)
    (True, True, False)
    """
    return here is None or (below is not None and here < below)


def _last_ll128(ranking: dict[int, list[tuple[float, Variant]]], sizes: tuple[int, ...],
               i: int) -> list[Variant]:
    """The fastest LL128 variant at the largest size below ``sizes[i]`` in
    LL128's range (none: empty).  Past that range only Simple is ranked, but
    the LL128 file that led there is simulated too and can still be faster
    (DGX A100 x16 reduce-scatter at 1 GiB: rails LL128 c1 157.8 GB/s, the
    best Simple file 156.1; x32 136.3 -> 142.8 with both changes of
    2026-11-27); one more simulation per size costs little beside the
    Simple ranking.  Past ``COARSE_RANKS`` ranks it is not asked for: there a
    simulation at 1 GiB takes minutes (DGX A100 x128 allreduce's rails LL128:
    358 s of the portfolio's 630), and no LL128 file led a Simple one at 1 GiB
    (DGX A100 x128 and MI250 x64, all three collectives)."""
    top = last_ll128_size(sizes, i)
    if top is None:
        return []
    return [v for _, v in ranking[top] if v.protocol is Protocol.LL128][:1]


def last_ll128_size(sizes: tuple[int, ...], i: int) -> int | None:
    """The largest of ``sizes[:i]`` in LL128's range (``PROTOCOL_SIZES``),
    where the portfolio and ``colc analyze --search`` take the LL128 variant
    they also simulate past that range; None when there is none.

    >>> last_ll128_size((64 << 20, 256 << 20, 1 << 30), 2) == 256 << 20
    True
    """
    hi = PROTOCOL_SIZES[Protocol.LL128][1]
    return max((s for s in sizes[:i] if s <= hi), default=None)


def _with_ll128(compiler: Compiler, cands: list[Variant], size: int, notes: list[str],
                table: list, simple: list[tuple[float, Variant]]) -> list[tuple[float, Variant]]:
    """``simple`` (the ranking at ``size``) with the LL128 candidates ranked
    there as well (``STRETCHED_SIZES``) when one of them is faster."""
    ll128 = [v for v in cands if v.protocol is Protocol.LL128]
    more = _rank(compiler, ll128, size, notes, table, STRETCHED_SIZES)
    if not more or (simple and more[0][0] <= simple[0][0]):
        return simple
    if simple:
        notes.append(f"at {_human(size)}B LL128 ({more[0][0]:.1f} GB/s) is faster than "
                     f"every Simple file ({simple[0][0]:.1f}): LL128 is used there")
    else:
        notes.append(f"at {_human(size)}B no Simple file is correct: LL128 is used there")
    return sorted(simple + more, key=lambda e: (-e[0], e[1].label))


def _prefetch(compiler: Compiler, cands: list[Variant], sizes: tuple[int, ...]) -> None:
    """Lower and simulate in parallel what ``_rank`` will surely simulate: below
    the pruned range every candidate ``_usable`` gives (the selectable ones,
    or all where none is: DGX A100 x128 at 1 KiB, rails LL, 19 s alone after
    the prefetch before), the schedules built here and shared by the workers."""
    jobs = jobs_for(compiler.opts)
    if jobs <= 1:
        return
    tasks = _large_firsts(compiler, cands, sizes)
    mine: dict[Variant, list[int]] = {}
    for s in sizes:
        if s < 64 << 20:
            for _, _, v in _usable(compiler, cands, s, PROTOCOL_SIZES)[0]:
                mine.setdefault(v, []).append(s)
    tasks += [(v, tuple(mine[v])) for v in cands if v in mine]
    prefetch(compiler, tasks, jobs)
    # The large sizes prune by bandwidth bound, but ``_rank`` always simulates
    # the first candidate it has not seen refused: those run in parallel too
    # (at 1024 ranks each is minutes).
    pairs = []
    for s in sizes:
        if s < 64 << 20:
            continue
        top = _first_simulated(compiler, cands, s, PROTOCOL_SIZES)
        if top is False and s > PROTOCOL_SIZES[Protocol.LL128][1]:  # every Simple refused
            top = _first_simulated(compiler, cands, s, STRETCHED_SIZES)
        if top:
            pairs.append((top, s))
    simulate_pairs(compiler, pairs + _midpoint_pairs(compiler, cands, sizes,
                                                     {s: v for v, s in pairs}), jobs)


def _midpoint_pairs(compiler: Compiler, cands: list[Variant], sizes: tuple[int, ...],
                    firsts: dict[int, Variant]) -> list[tuple[Variant, int]]:
    """The simulations ``_coarse_rivals`` is expected to ask for past
    ``COARSE_RANKS`` ranks: at the midpoint below the least size of a
    candidate ranked from a large size only (``_large_firsts`` prefetches
    that candidate there), the variant ``_rank`` simulates first at the
    evaluated size below (``firsts``, by size: the likely winner there).
    Run beside ``_prefetch``'s other large-size simulations rather than
    alone after the ranking (DGX A100 x128 allreduce: rails LL128 at 128
    MiB, 28 s, beside its 64 MiB).  A wrong guess costs a simulation on a
    worker, not the result: the ranking simulates what it needs."""
    out: list[tuple[Variant, int]] = []
    for v in cands:
        m = _midpoint_below(compiler, v, sizes)
        low = firsts.get(m // 2) if m else None
        if low is not None and low != v and (low, m) not in out:
            out.append((low, m))
    return out


def _midpoint_below(compiler: Compiler, v: Variant, sizes: tuple[int, ...]) -> int | None:
    """Past ``COARSE_RANKS`` ranks, the midpoint between ``v``'s least size
    and the evaluated size below it, where ``_coarse_rivals`` compares the
    two neighbours' winners; None when there is none (fewer ranks, no size
    below, or sizes a factor of 2 apart)."""
    least = _least(compiler, v)
    below = [s for s in sizes if s < least]
    if compiler.topo.num_ranks <= COARSE_RANKS or not below or 2 * below[-1] >= least:
        return None
    return 2 * below[-1]


def _large_firsts(compiler: Compiler, cands: list[Variant],
                  sizes: tuple[int, ...]) -> list[tuple[Variant, tuple[int, ...]]]:
    """Prefetch tasks of the candidates ranked from a large size only
    (``least_size``: rings2d's grid past 512 ranks) at the sizes where
    ``_rank`` simulates them first (the best bandwidth bound): their lowering
    and simulation then run beside the small sizes' instead of after them
    (at 1024 ranks about two minutes; the schedules are built here, before
    the fork).  Listed first, the longest tasks start first.  Past
    ``COARSE_RANKS`` ranks such a task also takes the midpoint below its
    least size, which ``_coarse_rivals`` asks for where the form wins its
    least size (x128 allgather portfolio: 4 min 53 s, against 5 min 29 s
    with that simulation after the ranking); it comes after the task's
    other sizes, so should it fail, the worker keeps those
    (``parallel._lower_and_simulate``)."""
    large = [_least(compiler, v) for v in cands if _least(compiler, v) >= 64 << 20]
    firsts: dict[Variant, list[int]] = {}
    for s in sizes:
        top = _first_bound(compiler, cands, s) if large and s >= min(large) else None
        if top is not None and _least(compiler, top) >= 64 << 20:
            firsts.setdefault(top, []).append(s)
    for v, mine in firsts.items():
        if (m := _midpoint_below(compiler, v, sizes)) is not None:
            mine.append(m)
    return [(v, tuple(mine)) for v, mine in firsts.items()]


def _first_bound(compiler: Compiler, cands: list[Variant], size: int) -> Variant | None:
    """The usable candidate with the best bandwidth bound at ``size`` (what
    ``_rank`` simulates first there, unless its lowering is refused)."""
    usable, _ = _usable(compiler, cands, size, PROTOCOL_SIZES)
    return usable[0][2] if usable else None


def _least(compiler: Compiler, v: Variant) -> int:
    """The least size ``auto``'s portfolio ranks ``v`` at (``least_size``);
    a portfolio of one algorithm ranks it at every size."""
    return least_size(compiler.topo, v) if compiler.opts.algorithm == "auto" else 0


def _serves(compiler: Compiler, v: Variant, size: int,
            ranges: dict[Protocol, tuple[int, int]]) -> bool:
    """Whether the portfolio ranks ``v`` at ``size``: its protocol's range in
    ``ranges``, from its least size."""
    lo, hi = ranges[v.protocol]
    return max(lo, _least(compiler, v)) <= size <= hi


def _first_simulated(compiler: Compiler, cands: list[Variant], size: int,
                     ranges: dict[Protocol, tuple[int, int]]) -> Variant | bool | None:
    """The variant ``_rank`` simulates first at ``size``: the best bandwidth
    bound among the usable ones not refused, if it is lowered already; False
    when every usable one is refused; None when that is not known yet."""
    usable, _ = _usable(compiler, cands, size, ranges)
    for _, _, v in usable:
        if v in compiler._refused:
            continue
        return v if v in compiler._programs else None
    return False


def _usable(compiler: Compiler, cands: list[Variant], size: int,
            ranges: dict[Protocol, tuple[int, int]], every: bool = False) -> tuple[list, list[str]]:
    """``(selectable, bandwidth bound, variant)`` of the candidates whose protocol
    serves ``size`` (only the selectable ones when any is, unless ``every``),
    best bound first, and the reasons the others were refused."""
    usable, refusals = [], []
    for v in cands:
        if not _serves(compiler, v, size, ranges):
            continue
        try:
            est = compiler.estimate(v)
            selectable = _selectable(compiler, v, size)
        except ColcError as err:
            refusals.append(f"{v.algorithm}: {err}")
            continue
        usable.append((selectable, est, v))
    if not every and any(sel for sel, _, _ in usable):
        usable = [u for u in usable if u[0]]
    usable.sort(key=lambda e: (-e[1], e[2].label))
    return usable, refusals


def _selectable(compiler: Compiler, v: Variant, size: int) -> bool:
    """Whether the runtime would select ``v``'s file for a call of ``size``
    (its nchunksperloop against what nccl-tests moves there; the schedule
    is the one ``estimate`` built)."""
    nchunks = compiler.variant_schedule(v).nchunks
    dtype = compiler.opts.dtype_bytes
    moved = nccl_tests_bytes(compiler.opts.collective, compiler.topo.num_ranks, size, dtype)
    return not window_selection(nchunks, 0, 0, moved, dtype)


def _rank(compiler: Compiler, cands: list[Variant], size: int, notes: list[str],
          table: list, ranges: dict[Protocol, tuple[int, int]]) -> list[tuple[float, Variant]]:
    """Variants usable at ``size`` (their protocol's range in ``ranges``), fastest first."""
    usable, refusals = _usable(compiler, cands, size, ranges)
    notes += refusals
    if usable and not any(sel for sel, _, _ in usable):
        notes.append(f"at {_human(size)}B no file is selected by the runtime: "
                     f"nchunksperloop (a multiple of the {compiler.topo.num_ranks} ranks) "
                     f"divides no element count of that size; NCCL runs instead there")
    best, out = 0.0, []
    for _, est, v in usable:
        if est < best and size >= 64 << 20:
            continue  # bandwidth-bound there, and the bound is below the best
        try:
            res = compiler.simulate(v, size)
        except ColcError as err:
            notes.append(f"{v.label}: {err}")
            continue
        table.append((v.label, size, res))
        out.append((res.algbw, v))
        best = max(best, res.algbw)
    out.sort(key=_fastest_first(compiler, size))
    return out


def _fastest_first(compiler: Compiler, size: int):
    """Sort key of ``(algbw, variant)`` at ``size``: a file the runtime
    selects there first, then the faster, of equal figures the file holding
    fewer threadblocks (SMs), then by label."""
    return lambda e: (not _selectable(compiler, e[1], size), -e[0],
                      compiler.program(e[1]).max_threadblocks, e[1].label)


def _with_ladders(compiler: Compiler, sizes: tuple[int, ...], table: list,
                  ranking: dict[int, list[tuple[float, Variant]]],
                  cands: list[Variant]) -> None:
    """Put first at each size, where faster or as fast on fewer threadblocks,
    the best of its winner lowered for the budgets below the compiler's
    (``ladder_variants``), as a single compile tries them: fewer lanes
    sometimes pipeline better (a 4-ring's allgather at 1 MiB within 4: 3
    threadblocks 25.4 GB/s, 4 threadblocks 23.0).  Off the ladder (a budget
    the user chose) the best ``OFF_LADDER_VARIANTS`` at each size are
    lowered so too, for the budgets from the rung below, as a single
    compile does (within 4 the ring's two copies, 25.3 GB/s, won; the one
    ring within 2 gives 26.5).  Each is first simulated at the largest size
    its leader led, and only those at least as good there at the others.
    Only the best goes in: the runners-up are the midpoints' rivals.
    Candidates the runtime would not select at a size, but whose bandwidth
    bound passes the file ranked first there, lead too (``_unselected_leaders``):
    lowered for fewer threadblocks they may be selected (DGX A100 x2
    allreduce within 6: NCCL's rings on 6 threadblocks make 96 chunks per
    loop, on 4 a selectable file of 41.5 GB/s at 1 GiB, where the
    portfolio served 1 GiB with one ring on 2, 20.8)."""
    if compiler.topo.num_ranks > LADDER_RANKS:
        return
    off = off_ladder(compiler)
    extra = below_rung(compiler) if off else ()

    def leaders(s: int) -> list[Variant]:
        out: list[Variant] = []
        for _, v in ranking[s]:
            if len(out) == (OFF_LADDER_VARIANTS if off else 1):
                break
            if v not in out and (not off or not out or v.budget == 0):
                out.append(v)
        return out

    led = {s: leaders(s) + _unselected_leaders(compiler, cands, s, ranking[s], off)
           for s in sizes}
    won: dict[Variant, list[int]] = {}
    for s in sizes:
        for v in led[s]:
            won.setdefault(v, []).append(s)
    ladders = {w: _ladder(compiler, w, extra) for w in won}
    jobs = jobs_for(compiler.opts)
    prefetch(compiler, [(v, (max(at),)) for w, at in won.items() for v in ladders[w]], jobs)

    seen: dict[tuple[Variant, int], tuple[float, Variant] | None] = {}

    def better(v: Variant, s: int) -> tuple[float, Variant] | None:
        """``v`` at ``s`` where at least as good as the winner there."""
        if (v, s) not in seen:
            try:
                res = compiler.simulate(v, s)
            except ColcError:  # a smaller budget it does not fit: the larger one's stands
                seen[v, s] = None
            else:
                table.append((v.label, s, res))
                e, key = (res.algbw, v), _fastest_first(compiler, s)
                seen[v, s] = e if not ranking[s] or key(e) <= key(ranking[s][0]) else None
        return seen[v, s]

    keep = {w: [v for v in ladders[w] if better(v, max(at))] for w, at in won.items()}
    for s in sizes:
        found = [e for w in led[s] for v in keep.get(w, []) if (e := better(v, s))]
        if found:
            ranking[s] = [min(found, key=_fastest_first(compiler, s)), *ranking[s]]


def _ladder(compiler: Compiler, leader: Variant, extra: tuple[int, ...]) -> list[Variant]:
    """``ladder_variants`` of ``leader``, none where it does not fit the
    budget at all (an unselected leader is not lowered before)."""
    try:
        return ladder_variants(compiler, leader, full=False, extra=extra)
    except ColcError:
        return []


def _unselected_leaders(compiler: Compiler, cands: list[Variant], size: int,
                        ranked: list[tuple[float, Variant]], off: bool) -> list[Variant]:
    """Up to ``OFF_LADDER_VARIANTS`` off the ladder (else one) of ``cands``
    the portfolio ranks at ``size`` whose files the runtime would not select
    there, best bandwidth bound first, where that bound passes the file
    ranked first (``_rank`` drops them where another is selectable)."""
    first = ranked[0][0] if ranked and _selectable(compiler, ranked[0][1], size) else 0.0
    ranked_variants = {v for _, v in ranked}
    out = [v for selectable, est, v in _usable(compiler, cands, size, PROTOCOL_SIZES,
                                                every=True)[0]
           if not selectable and est > first and v.budget == 0 and v not in ranked_variants]
    return out[:OFF_LADDER_VARIANTS if off else 1]


def _windows(compiler: Compiler, sizes: tuple[int, ...],
             ranking: dict[int, list[tuple[float, Variant]]], notes: list[str]) -> list[Window]:
    """Merge sizes with the same (verified) winner into windows."""
    failed: set[Variant] = set()
    while True:
        winners = []
        for s in sizes:
            ok = [v for _, v in ranking[s] if v not in failed]
            if not ok:
                why = "; ".join(dict.fromkeys(notes))
                raise InfeasibleError(f"no variant is correct and selectable at {_human(s)}B"
                                      + (f": {why}" if why else ""))
            winners.append(ok[0])
        runs: list[tuple[Variant, list[int]]] = []
        for s, v in zip(sizes, winners, strict=True):
            if runs and runs[-1][0] == v:
                runs[-1][1].append(s)
            else:
                runs.append((v, [s]))
        split = _split_midpoints(compiler, runs, ranking, failed)
        try:
            return _finish(compiler, split)
        except VerificationFailed as err:
            bad = next(v for v, _, _ in split if v.label in str(err))
            failed.add(bad)
            notes.append(str(err))


def _split_midpoints(compiler: Compiler, runs: list[tuple[Variant, list[int]]],
                     ranking: dict[int, list[tuple[float, Variant]]], failed: set[Variant]
                     ) -> list[tuple[Variant, list[int], int]]:
    """``(variant, sizes, hi)`` per window: a window ends at twice its last
    evaluated size ``s`` (the power of two between ``s`` and the next window's
    first size: 128 MiB between 64 MiB and 256 MiB), unless another variant is
    selected there and simulates faster: the next window's variant (the window
    then ends at ``s``), or one of the ``MIDPOINT_RIVALS`` next best of either
    neighbouring size's ``ranking``, which then gets a window of its own,
    ``(s, 2 s]``.  The midpoint joins the sizes of the window that serves it
    (its figure is shown and counted in the file's comment).

    Before, the midpoint always went to the smaller sizes' winner: MI250 x2
    reduce-scatter at 128 MiB ran rings2d at 112.8 GB/s where RCCL's rings,
    the winner from 256 MiB, give 134.6.  Then only the two neighbours' winners
    competed: DGX A100 x4 allgather ran NCCL's rings as LL128 at 128 MiB
    (153.4) where rails c8 Simple, second at 256 MiB, gives 163.6.  A few
    simulations per boundary (on ``--jobs`` processes); past
    ``COARSE_RANKS`` ranks, where a simulation takes a minute, only at a
    boundary into a form not ranked below it (``_coarse_rivals``).
    """
    cuts = [2 * run[-1] for _, run in runs[:-1]]
    if compiler.topo.num_ranks > COARSE_RANKS:
        rivals = [_coarse_rivals(compiler, runs, i, m) for i, m in enumerate(cuts)]
    else:
        rivals = [_rivals(compiler, runs, i, m, ranking, failed) for i, m in enumerate(cuts)]
    pairs = [(v, m) for i, m in enumerate(cuts) for v in rivals[i]]
    simulate_pairs(compiler, pairs, jobs_for(compiler.opts))
    out: list[tuple[Variant, list[int], int]] = []
    sizes = list(runs[0][1])
    for i, m in enumerate(cuts):
        v, nxt = runs[i][0], list(runs[i + 1][1])
        best = max(((r.algbw, -k) for k, c in enumerate(rivals[i])  # ties: the earlier
                    if (r := _sim_or_none(compiler, c, m)) is not None and r.selected),
                   default=None)
        if best is None:  # nobody serves the midpoint: the window ends there anyway
            out.append((v, sizes, m))
        elif best[1] == 0:
            out.append((v, [*sizes, m], m))
        elif best[1] == -1:
            out.append((v, sizes, m // 2))
            nxt.insert(0, m)
        else:
            out += [(v, sizes, m // 2), (rivals[i][-best[1]], [m], m)]
        sizes = nxt
    out.append((runs[-1][0], sizes, 0))
    return out


def _coarse_rivals(compiler: Compiler, runs: list[tuple[Variant, list[int]]], i: int,
                   m: int) -> list[Variant]:
    """``_split_midpoints``' rivals at the ``i``-th boundary (midpoint ``m``)
    past ``COARSE_RANKS`` ranks, where a simulation takes a minute: the two
    neighbours' winners where the next window's variant was not ranked at
    the smaller size (its ``least_size`` is above it: rings2d's grid form,
    ranked from 1 GiB), else none (the window ends at ``m``).

    DGX A100 x128 at 128 MiB, between the evaluated 64 MiB and 1 GiB
    (simulated, 31-32 threadblocks): rails' LL128 files give allgather
    87.6, reduce-scatter 101.5 and allreduce 52.6 GB/s, the grid forms
    101.3, 106.8 and 58.0; each boundary checked costs a simulation of a
    million-op file (about 50 s; in a portfolio one boundary at most, the
    grid form's lower edge).
    """
    (low, run), (high, above) = runs[i], runs[i + 1]
    # sizes a factor of 2 apart have no midpoint between them
    if _least(compiler, high) > run[-1] and m < above[0]:
        return [low, high]
    return []


#: Variants besides the two neighbours' winners ranked at a midpoint size: the
#: next best at each neighbouring evaluated size, this many from each.
MIDPOINT_RIVALS = 2


def _rivals(compiler: Compiler, runs: list[tuple[Variant, list[int]]], i: int, m: int,
            ranking: dict[int, list[tuple[float, Variant]]],
            failed: set[Variant]) -> list[Variant]:
    """The winners on both sides of the ``i``-th boundary (midpoint ``m``),
    then up to ``MIDPOINT_RIVALS`` runners-up of each side whose protocol
    serves ``m`` (``PROTOCOL_SIZES``)."""
    out = [runs[i][0], runs[i + 1][0]]
    for s in (runs[i][1][-1], runs[i + 1][1][0]):
        more = [v for _, v in ranking.get(s, []) if v not in out and v not in failed
                and _serves(compiler, v, m, PROTOCOL_SIZES)]
        out += more[:MIDPOINT_RIVALS]
    return out


def _sim_or_none(compiler: Compiler, v: Variant, size: int) -> SimResult | None:
    try:
        return compiler.simulate(v, size)
    except ColcError:
        return None


def _finish(compiler: Compiler, runs: list[tuple[Variant, list[int], int]]) -> list[Window]:
    """The windows' files (``(variant, sizes, hi)`` each, ``hi`` 0 for the last),
    verified: all at once on ``--jobs`` processes, and one that fails again
    through ``Compiler.finish`` (the next lowering)."""
    spans, emitted = [], []
    for i, (v, run, hi) in enumerate(runs):
        lo = 0 if i == 0 else runs[i - 1][2] + 1
        hi = compiler.window_end(v, hi)  # the loop-iteration limit may end the last one
        def comment(v: Variant = v, run: list[int] = run, lo: int = lo, hi: int = hi) -> str:
            served = [s for s in run if not hi or s <= hi] or run
            return _window_comment(v, lo, hi, [compiler.simulate(v, s) for s in served])

        spans.append((lo, hi, comment))
        emitted.append(compiler.emit(v, comment, (lo, hi)))
    progress_report(f"verifying {len(emitted)} files", compiler._work, 0)
    passed = compiler.verify_all([text for _, text in emitted])
    out = []
    for (v, run, _), (lo, hi, comment), (program, text), ok in zip(runs, spans, emitted, passed,
                                                                  strict=True):
        if not ok:
            try:
                program, text = compiler.finish(v, comment, (lo, hi))
            except InfeasibleError as err:  # lowered again: the refusal names no variant
                raise InfeasibleError(f"{v.label}: {err}") from None
        # past a window ended at the loop-iteration limit, NCCL runs: no figure there
        results = tuple(compiler.simulate(v, s) for s in run if not hi or s <= hi)
        out.append(Window(lo, hi, v, program, text, results))
    return out


def _window_comment(v: Variant, lo: int, hi: int, results: list[SimResult]) -> str:
    """A window file's provenance line: its least simulated algbw over the
    sizes it was ranked at, and where (three digits: a 1 KiB call runs at
    hundredths of a GB/s).

    >>> r = SimResult(1024, 40.0, 0.0256, 0.0, True, "", (0, 0, 1.0), ("g0", "g1", 1.0))
    >>> _window_comment(Variant("ring", None), 0, 32768, [r]).split(": ")[1]
    'ring/Simple, window 0..32768 bytes, predicted algbw >= 0.0256 GB/s (simulated, least at 1K)'
    """
    from colc import __version__
    from colc.sizes import format_size

    worst = min(results, key=lambda r: r.algbw)
    return (f"generated by colc {__version__}: {v.label}, window {lo}..{hi or 'unlimited'} "
            f"bytes, predicted algbw >= {worst.algbw:.3g} GB/s (simulated, least at "
            f"{format_size(worst.nbytes)})")


def check_windows(windows: tuple[Window, ...] | list[Window]) -> list[str]:
    """Problems with a portfolio's windows: gaps, overlaps, a bounded last
    window (but at its file's loop-iteration limit, ``iteration_limit``)."""
    from colc.ir.simulate import iteration_limit

    problems = []
    expect = 0
    for i, w in enumerate(windows):
        if w.lo != expect:
            problems.append(f"window {i} starts at {w.lo}, expected {expect}")
        last = i == len(windows) - 1
        if last and w.hi != 0 and w.hi != iteration_limit(w.program):
            problems.append("the last window is bounded")
        if not last and w.hi < w.lo:
            problems.append(f"window {i} is empty")
        expect = w.hi + 1
    return problems


def format_portfolio(p: Portfolio) -> str:
    """The summary table: window, algorithm, protocol, chunks, threadblocks per
    GPU (the most of any rank), predicted algbw; a figure at a size where the
    runtime would not select the file is marked ``*`` and explained under the
    table."""
    from colc.sizes import format_gbs

    lines = [f"{'window (bytes)':<22}{'algorithm':<12}{'protocol':<9}{'nchunks':>8}"
             f"{'tbs/GPU':>8}  predicted algbw GB/s"]
    unselected = False
    for w in p.windows:
        span = w.span()
        bws = ", ".join(f"{format_gbs(r.algbw)}@{_human(r.nbytes)}{'' if r.selected else '*'}"
                        for r in w.results)
        unselected = unselected or not all(r.selected for r in w.results)
        lines.append(f"{span:<22}{w.variant.algorithm:<12}{w.variant.protocol.value:<9}"
                     f"{w.program.nchunks:>8}{w.program.max_threadblocks:>8}  {bws}")
    if unselected:
        lines.append("* not selected by the runtime at that size (its element count is not a "
                     "multiple of the file's nchunksperloop): NCCL's own algorithm runs there")
    if p.budget:
        lines.append(f"threadblock budget: {p.budget} per GPU (--max-threadblocks)")
    return "\n".join(lines)


__all__ = ["NAME", "Portfolio", "SIZES", "Window", "build_portfolio", "check_windows",
           "default_sizes", "falls_behind", "format_portfolio"]
_ = selection
