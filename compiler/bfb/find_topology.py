"""Pass ``find-topology``: the topology finder of seed 001 section 3.5.4 (A.1.3).

Input: a target rank count ``N`` and degree ``d`` (links out of each rank),
and a workload point (message size, alpha, node bandwidth ``B``).
Output: the Pareto frontier of (hops ``T_L/alpha``, ``tau = T_B/(M/B)``)
over base graphs and expansion sequences that reach exactly ``(N, d)``, the
candidate with the lowest predicted allreduce time ``2(T_L + T_B)``, and
its topology (links of ``B/d`` GB/s) for ``colc compile``.

Predictions are the closed forms of Table 3.3 / inventory 1.14, without
building schedules:

* bases: ``K_{d+1}``, ``K_{d,d}``, Hamming ``H(n, q)``, ``C(N, {m, m+1})``
  (Thm 22, ``d = 4``), BiRing/UniRing, the distance-regular graphs of Table
  A.2 (``d = 4``): BW-optimal BFB, ``hops = D``; generalized Kautz and de
  Bruijn: hops = ``D``, ``tau`` from a BFB run (no closed form);
* ``L(G)``: ``(dN, d, l + 1, tau + 1/N)`` (Thm 7/10; exact for an optimal
  BFB base with ``|N+(u)| > 1``, an upper bound otherwise);
* ``G*n``: ``(nN, nd, l + 1, tau + (n-1)/(nN))`` (Thm 11; no self-loops);
* ``G^n``: ``(N^n, nd, n l, tau N/(N-1) (N^n - 1)/N^n)`` (Thm 12);
* ``G1 x G2`` of BW-optimal BFB factors: ``(N1 N2, d1 + d2, D1 + D2,
  (N - 1)/N)`` (Thm 13).

Pruning: each intermediate ``(N', d')`` keeps its Pareto frontier plus its
best BW-optimal BFB candidate (for products).  Complexity: polynomial in
the number of divisors of ``N``; generalized Kautz ``tau`` costs one BFB
(cached).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

from colc.compiler.bfb.schedule import generate_bfb, rank_capacity
from colc.compiler.bfb.expand_topology import cartesian_power, cartesian_product, degree_expansion, line_graph
from colc.errors import InfeasibleError, SpecError
from colc.frontends.limits import (MAX_BANDWIDTH, MAX_LATENCY, MAX_RANKS, MIN_BANDWIDTH,
                                   approx)
from colc.frontends import families, generative
from colc.ir.topology import Link, Node, Topology

NAME = "find-topology"

#: Largest generalized Kautz / de Bruijn base whose tau is computed by BFB.
MAX_BFB_BASE = 4096


#: Most links per rank ``colc find`` searches: direct-connect fabrics have a
#: few to a few tens of ports (optical patch panels, tori: 2 to 16), and the
#: search grows with the degree (4 ranks of degree 100000 took minutes).
MAX_FIND_DEGREE = 64

@dataclass(frozen=True)
class Candidate:
    """A topology recipe and its predicted costs.

    Parameters
    ----------
    name : str
        Seed notation, e.g. ``L^2(K(4,4))``.
    num_ranks, degree : int
    hops : int
        Predicted ``T_L / alpha`` of one allgather.
    tau : Fraction
        Predicted ``T_B / (M/B)`` of one allgather.
    exact : bool
        Whether ``tau`` is exact (else an upper bound).
    bfb_optimal : bool
        The BFB schedule is BW-optimal and has ``hops = D`` (usable in products).
    self_loops : bool
        The graph (as defined by the seed) has self-loops.
    recipe : tuple
        How to build it (see ``build_candidate``).
    """

    name: str
    num_ranks: int
    degree: int
    hops: int
    tau: Fraction
    exact: bool
    bfb_optimal: bool
    self_loops: bool
    recipe: tuple

    def allreduce_us(self, size: int, alpha: Fraction, bandwidth: Fraction) -> Fraction:
        """``2 (hops alpha + tau M/B)`` in us (M bytes, B GB/s)."""
        return 2 * (self.hops * alpha + self.tau * Fraction(size) / (bandwidth * 1000))


def _bw_opt(n: int) -> Fraction:
    return Fraction(n - 1, n)


def moore_hops(n: int, d: int) -> int:
    """``min{k : 1 + d + ... + d^k >= N}`` (Def 9, directed Moore bound)."""
    k, total, layer = 0, 1, 1
    while total < n:
        layer *= d
        total += layer
        k += 1
        if d == 1 and k > n:
            break
    return k


def _pareto(cands: list[Candidate]) -> list[Candidate]:
    out: list[Candidate] = []
    for c in sorted(cands, key=lambda c: (c.hops, c.tau, not c.exact, _depth(c.recipe), c.name)):
        if not out or c.tau < out[-1].tau:
            out.append(c)
    best_bfb = min((c for c in cands if c.bfb_optimal), key=lambda c: (c.hops, c.name), default=None)
    if best_bfb is not None and best_bfb not in out:
        out.append(best_bfb)
    return out


def _depth(recipe: tuple) -> int:
    """Number of expansions in a recipe (ties prefer plain base graphs)."""
    return sum(1 + _depth(r) for r in recipe[1:] if isinstance(r, tuple) and r and isinstance(r[0], str))


def _diameter_circulant(n: int, offsets: tuple[int, ...]) -> int:
    """Diameter of the undirected circulant (each offset both ways)."""
    return max(_circulant_distances(n, offsets + tuple(-o for o in offsets)))


#: Rank counts up to which the finder searches one-way circulants, and the
#: most offset sets it tries (every set holding offset 1: any set with an
#: offset prime to N is one of those scaled, the same graph).
DIRECTED_CIRCULANT_RANKS = 32
DIRECTED_CIRCULANT_SETS = 5000


def directed_circulant_offsets(n: int, d: int) -> tuple[int, ...] | None:
    """The ``d`` offsets of the one-way circulant ``i -> i + o (mod n)``
    with the least diameter, then the least total distance (the first such
    set in order), or None outside the searched sizes.

    A one-way circulant can beat the undirected ones where ``n`` and ``d``
    are both odd (an undirected circulant has even degree): 9 ranks of
    degree 3 reach the bound row's 2 hops with offsets 1, 3, 4.

    >>> directed_circulant_offsets(9, 3), directed_circulant_offsets(5, 3)
    ((1, 3, 4), (1, 2, 3))

    Complexity: at most ``DIRECTED_CIRCULANT_SETS`` sets of one BFS of
    ``n d`` arcs each.
    """
    if not 2 <= d < n - 1 or n > DIRECTED_CIRCULANT_RANKS \
            or math.comb(n - 2, d - 1) > DIRECTED_CIRCULANT_SETS:
        return None
    best: tuple[tuple[int, int], tuple[int, ...]] | None = None
    for rest in itertools.combinations(range(2, n), d - 1):
        offsets = (1, *rest)
        dist = _circulant_distances(n, offsets)  # offset 1 reaches every rank
        key = (max(dist), sum(dist))
        if best is None or key < best[0]:
            best = (key, offsets)
    return best[1] if best else None


def _circulant_distances(n: int, steps: tuple[int, ...]) -> list[int]:
    """Hops from rank 0 to each rank when rank ``x`` links to ``x + s``
    for each step ``s`` (mod n; -1: unreached)."""
    dist = [-1] * n
    dist[0] = 0
    frontier = [0]
    while frontier:
        nxt = []
        for x in frontier:
            for step in steps:
                y = (x + step) % n
                if dist[y] < 0:
                    dist[y] = dist[x] + 1
                    nxt.append(y)
        frontier = nxt
    return dist


def _directed_circulant(n: int, offsets: tuple[int, ...], bandwidth: object = 1) -> Topology:
    arcs = [(i, (i + o) % n) for i in range(n) for o in offsets]
    name = f"dcirculant-{n}-" + "-".join(map(str, offsets))
    return generative.from_arcs(name, n, arcs, bandwidth, "<colc find>")


@lru_cache(maxsize=None)
def _bfb_tau(kind: str, a: int, b: int) -> tuple[int, Fraction]:
    topo = generative.de_bruijn(a, b) if kind == "debruijn" else families.generalized_kautz(b, a, 1)
    sol = generate_bfb(topo)
    return sol.num_steps, sol.tau(a)


def _bases(n: int, d: int) -> list[Candidate]:
    out: list[Candidate] = []
    bw = _bw_opt(n)

    def add(name: str, hops: int, tau: Fraction, opt: bool, loops: bool, recipe: tuple) -> None:
        out.append(Candidate(name, n, d, hops, tau, True, opt, loops, recipe))

    if n == d + 1:
        add(f"K{n}", 1, bw, True, False, ("complete", n))
    elif n >= 2 and d > n - 1:  # every pair joined by m links, d - m (n - 1) ports spare
        m = d // (n - 1)
        used = m * (n - 1)
        name = f"K{n}*{m}" if m > 1 else f"K{n}"
        spare = "" if used == d else f" ({used} of {d} ports)"
        add(name + spare, 1, bw * Fraction(d, used), used == d, False, ("complete", n, m))
    if n == 2 * d and d >= 2:
        add(f"K({d},{d})", 2, bw, True, False, ("bipartite", n))
    for dims in range(2, 8):
        q = round(n ** (1 / dims))
        for qq in (q - 1, q, q + 1):
            if qq >= 2 and qq ** dims == n and dims * (qq - 1) == d:
                add(f"H({dims},{qq})", dims, bw, True, False, ("hamming", dims, qq))
    if d == 4 and n > 6:
        m = math.ceil((-1 + math.sqrt(2 * n - 1)) / 2)
        if m + 1 < n - m - 1:
            offs = (m, m + 1)
            add(f"C({n},{{{m},{m + 1}}})", _diameter_circulant(n, offs), bw, True, False,
                ("circulant", n, offs))
    offsets = directed_circulant_offsets(n, d)
    if offsets is not None:
        sol = generate_bfb(_directed_circulant(n, offsets))
        tau = sol.tau(d)
        add(f"DC({n},{{{','.join(map(str, offsets))}}})", sol.num_steps, tau, tau == bw, False,
            ("dcirculant", n, offsets))
    if d % 2 == 0 and n >= 3:
        add(f"BiRing({d},{n})", n // 2, bw, True, False, ("biring", d, n))
    if n >= 2:
        add(f"UniRing({d},{n})", n - 1, bw, True, False, ("uniring", d, n))
    if d == 4:
        for key in generative.DISTANCE_REGULAR:
            label = generative.DISTANCE_REGULAR[key][0]
            if label.endswith(f"N={n}"):
                g = generative.distance_regular(key)
                hops = generate_bfb(g).num_steps
                add(f"DistReg({key})", hops, bw, True, False, ("distreg", key))
    if n > d >= 2 and n <= MAX_BFB_BASE:
        hops, tau = _bfb_tau("kautz", d, n)
        loops = n % (d + 1) != 0
        add(f"Pi({d},{n})", hops, tau, tau == bw, loops, ("kautz", d, n))
    k = round(math.log(n, d)) if d >= 2 and n >= 2 else 0
    if k >= 2 and d ** k == n and n <= MAX_BFB_BASE:
        hops, tau = _bfb_tau("debruijn", d, k)
        add(f"DBJ({d},{k})", hops, tau, False, True, ("debruijn", d, k))
    return out


def _uses_every_port(recipe: tuple, d: int) -> bool:
    """Whether the recipe's graph uses all ``d`` ports of every node.

    A complete graph may leave ports spare (K4 on 3 of 5); its line graph
    then has fewer nodes than the ``(n, d)`` it is sought for (one node per
    link), and its degree expansion leaves the spare ports idle with a tau
    the expansion's formula does not give, so the expansions skip it.  A
    product's factors are BW-optimal, which a graph with spare ports never
    is, so a product uses every port.
    """
    kind = recipe[0]
    if kind == "complete":
        n, m = recipe[1], (recipe[2] if len(recipe) > 2 else 1)
        return m * (n - 1) == d
    if kind == "line":
        return _uses_every_port(recipe[1], d)
    if kind in ("degree", "power"):  # the factor's ports, d / copies or d / power
        return d % recipe[2] == 0 and _uses_every_port(recipe[1], d // recipe[2])
    return True


@lru_cache(maxsize=None)
def frontier(n: int, d: int) -> tuple[Candidate, ...]:
    """Pareto frontier (plus the best BW-optimal BFB candidate) at ``(n, d)``."""
    cands = _bases(n, d)
    if d >= 2 and n % d == 0 and n // d >= 2:
        for c in frontier(n // d, d):
            if c.self_loops or not _uses_every_port(c.recipe, d):
                continue
            # Cor 10.1: L of an optimal BFB schedule with |N+(u)| > 1 is optimal BFB.
            exact = c.exact and c.recipe[0] not in ("degree", "power", "uniring")
            cands.append(Candidate(f"L({c.name})", n, d, c.hops + 1, c.tau + Fraction(1, c.num_ranks),
                                   exact, False, False, ("line", c.recipe)))
    for copies in range(2, d + 1):
        if d % copies or n % copies or n // copies < 2:
            continue
        for c in frontier(n // copies, d // copies):
            if c.self_loops or not _uses_every_port(c.recipe, d // copies):
                continue
            tau = c.tau + Fraction(copies - 1, copies * c.num_ranks)
            cands.append(Candidate(f"({c.name})*{copies}", n, d, c.hops + 1, tau, c.exact, False,
                                   False, ("degree", c.recipe, copies)))
    for power in range(2, 12):
        base = round(n ** (1 / power))
        for b in (base - 1, base, base + 1):
            if b >= 2 and b ** power == n and d % power == 0:
                for c in frontier(b, d // power):
                    tau = c.tau * Fraction(b, b - 1) * Fraction(n - 1, n)
                    cands.append(Candidate(f"({c.name})^{power}", n, d, power * c.hops, tau, c.exact,
                                           c.bfb_optimal, c.self_loops, ("power", c.recipe, power)))
    for n1 in range(2, math.isqrt(n) + 1):
        if n % n1:
            continue
        for d1 in range(1, d):
            for a in frontier(n1, d1):
                for b in frontier(n // n1, d - d1):
                    if a.bfb_optimal and b.bfb_optimal:
                        cands.append(Candidate(f"{a.name} x {b.name}", n, d, a.hops + b.hops,
                                               _bw_opt(n), True, True, False,
                                               ("product", a.recipe, b.recipe)))
    return tuple(_pareto(cands))


def build_candidate(recipe: tuple, bandwidth: Fraction = Fraction(1)) -> Topology:
    """Build the topology of a recipe with ``bandwidth`` GB/s per link."""
    kind = recipe[0]
    simple: dict[str, Callable[..., Topology]] = {
        "complete": lambda n, m=1: _parallel(families.complete(n, bandwidth), m),
        "bipartite": lambda n: families.complete_bipartite(n, bandwidth),
        "hamming": lambda a, q: generative.hamming(a, q, bandwidth),
        "circulant": lambda n, offs: families.circulant(n, list(offs), bandwidth),
        "dcirculant": lambda n, offs: _directed_circulant(n, offs, bandwidth),
        "biring": lambda d, m: generative.biring(d, m, bandwidth),
        "uniring": lambda d, m: generative.uniring(d, m, bandwidth),
        "distreg": lambda key: generative.distance_regular(key, bandwidth),
        "kautz": lambda d, n: families.generalized_kautz(n, d, bandwidth),
        "debruijn": lambda d, k: generative.de_bruijn(d, k, bandwidth),
    }
    if kind in simple:
        return simple[kind](*recipe[1:])
    if kind == "line":
        return line_graph(build_candidate(recipe[1], bandwidth))
    if kind == "degree":
        return degree_expansion(build_candidate(recipe[1], bandwidth), recipe[2])
    if kind == "power":
        return cartesian_power(build_candidate(recipe[1], bandwidth), recipe[2])
    return cartesian_product(build_candidate(recipe[1], bandwidth), build_candidate(recipe[2], bandwidth))


def _parallel(topo: Topology, m: int) -> Topology:
    """``topo`` with every link ``m`` times (parallel links of its bandwidth)."""
    if m == 1:
        return topo
    return dataclasses.replace(topo, name=f"{topo.name}*{m}",
                               links=tuple(link for link in topo.links for _ in range(m)))


@dataclass(frozen=True)
class AlltoallFigures:
    """All-to-all figures of one candidate (seed 001 A.1.5, Table 3.4).

    Attributes
    ----------
    mcf : float
        ``f`` of LP (A.1) with unit links; when ``exact`` is False, the
        distance bound instead (the LP was too large: an upper bound on f).
    exact : bool
    diameter : int
    """

    mcf: float
    exact: bool
    diameter: int

    def time_us(self, size: int, ranks: int, degree: int, bandwidth: Fraction) -> float:
        """All-to-all time for ``size`` bytes per rank: ``(M / B) d / (N f)``
        (links of ``B/d``; no latency term, as the seed's tables).

        >>> round(AlltoallFigures(8.01e-4, True, 5).time_us(1 << 20, 1024, 4, Fraction(25, 2)), 1)
        409.1
        """
        if not self.mcf:
            return 0.0
        return float(size / (bandwidth * 1000)) * degree / (ranks * self.mcf)


@dataclass(frozen=True)
class FindResult:
    """The finder's answer (see ``find_topology``)."""

    frontier: tuple[Candidate, ...]
    chosen: Candidate
    bound_hops: int
    bound_tau: Fraction
    size: int
    alpha: Fraction
    bandwidth: Fraction
    alltoall: tuple[AlltoallFigures, ...] = ()
    alltoall_share: Fraction = Fraction(0)
    alltoall_size: int = 1 << 20

    def alltoall_us(self, i: int) -> float:
        """All-to-all time of frontier candidate ``i`` at ``alltoall_size`` per rank."""
        c = self.frontier[i]
        return self.alltoall[i].time_us(self.alltoall_size, c.num_ranks, c.degree,
                                        self.bandwidth)

    def table(self) -> str:
        """The frontier as text, one candidate per line, the chosen one starred."""
        rows = [f"{'':2}{'topology':40} {'hops':>4} {'tau':>8} {'allreduce_us':>13} "
                f"{'mcf_f':>10} {'alltoall_us':>12} {'diam':>4}"]
        for i, c in enumerate(self.frontier):
            mark = "* " if c is self.chosen else "  "
            tau = f"{float(c.tau):.4f}" + ("" if c.exact else "+")
            us = float(c.allreduce_us(self.size, self.alpha, self.bandwidth))
            a = self.alltoall[i]
            f = f"{a.mcf:.4g}" + ("" if a.exact else "+")
            rows.append(f"{mark}{c.name:40} {c.hops:>4} {tau:>8} {us:>13.1f} {f:>10} "
                        f"{self.alltoall_us(i):>12.1f} {a.diameter:>4}")
        lb = 2 * (self.bound_hops * self.alpha + self.bound_tau * self.size / (self.bandwidth * 1000))
        moore = float(_moore_mcf(self.chosen.num_ranks, self.chosen.degree))
        a2a_lb = AlltoallFigures(moore, True, self.bound_hops).time_us(
            self.alltoall_size, self.chosen.num_ranks, self.chosen.degree, self.bandwidth)
        rows.append(f"  {'(bound)':40} {self.bound_hops:>4} {float(self.bound_tau):>8.4f} "
                    f"{float(lb):>13.1f} {moore:>10.4g} {a2a_lb:>12.1f} {self.bound_hops:>4}")
        rows.append("hops = latency steps of the BFB schedule; tau = its bandwidth time in "
                    "units of M/B (M bytes per rank, B egress GB/s; + = an upper bound); "
                    "allreduce_us = 2 (hops alpha + tau M/B) at --size; mcf_f = all-to-all "
                    "throughput f of LP (A.1), unit links (+ = the distance bound, the LP "
                    "being too large); alltoall_us = (M/B) d / (N f) at --alltoall-size; "
                    "diam = diameter; * = chosen")
        return "\n".join(rows) + "\n"

    def records(self) -> list[dict]:
        """One JSON-ready object per candidate (``colc find --json``)."""
        out = []
        for i, c in enumerate(self.frontier):
            a = self.alltoall[i]
            out.append({"name": c.name, "ranks": c.num_ranks, "degree": c.degree,
                        "hops": c.hops, "tau": float(c.tau), "tau_exact": c.exact,
                        "allreduce_us": float(c.allreduce_us(self.size, self.alpha,
                                                             self.bandwidth)),
                        "mcf": a.mcf, "mcf_exact": a.exact,
                        "alltoall_us": self.alltoall_us(i), "diameter": a.diameter,
                        "chosen": c is self.chosen})
        return out

    def topology(self) -> Topology:
        """The chosen topology, links of ``B/d`` GB/s, ranks renamed ``r0..``."""
        topo = build_candidate(self.chosen.recipe, self.bandwidth / self.chosen.degree)
        rename = {x: f"r{i}" for i, x in enumerate(topo.ranks)}
        return Topology(
            self.chosen.name, tuple(Node(rename[n.id], "gpu") for n in topo.nodes),
            tuple(Link(rename[lk.src], rename[lk.dst], lk.bandwidth, lk.latency) for lk in topo.links),
            source="colc find",
        )

    def yaml(self) -> str:
        """Explicit-form YAML of ``topology()`` (``colc compile`` reads it),
        under comment lines with the point it was chosen at: ``--alpha`` is
        a hop latency of the ranking, not a link's (colc's simulator takes
        its hop latencies from the machine model), so it is recorded there.

        >>> r = find_topology(8, 2, mcf_lp=False)
        >>> print(r.yaml().splitlines()[1])
        # chosen for allreduce at 1M per rank: alpha 10 us per hop, 12.5 GB/s egress per rank,
        """
        from colc.frontends.yaml_writer import topology_to_yaml

        c = self.chosen
        mix = (f", all-to-all at {_bytes(self.alltoall_size)} weighted "
               f"{float(self.alltoall_share):g}" if self.alltoall_share else "")
        head = [f"# written by colc find --ranks {c.num_ranks} --degree {c.degree}",
                f"# chosen for allreduce at {_bytes(self.size)} per rank: alpha "
                f"{float(self.alpha):g} us per hop, {float(self.bandwidth):g} GB/s egress per "
                f"rank,",
                f"# {c.hops} hops, tau {float(c.tau):.4f}{mix}; alpha is the ranking's, not a "
                f"link latency"]
        return "\n".join(head) + "\n" + topology_to_yaml(self.topology())


def _bytes(n: int) -> str:
    """``1M``, ``64K``, ``3000 bytes``: a size with its unit.

    >>> _bytes(1 << 20), _bytes(3000)
    ('1M', '3000 bytes')
    """
    from colc.sizes import format_size

    text = format_size(n)
    return text if text[-1:].isalpha() else f"{text} bytes"


def find_topology(
    ranks: int,
    degree: int,
    *,
    size: int = 1 << 20,
    alpha: Fraction | int | str = 10,
    bandwidth: Fraction | int | str = Fraction(25, 2),
    alltoall_share: Fraction | int | str = 0,
    alltoall_size: int = 1 << 20,
    mcf_lp: bool = False,
    jobs: int | None = None,
) -> FindResult:
    """Search bases and expansions for ``(ranks, degree)`` and pick one.

    Parameters
    ----------
    ranks, degree : int
    size : int
        Allreduce message size in bytes (default 1 MiB).
    alpha : number
        Per-hop latency in us (default 10).
    bandwidth : number
        Node egress bandwidth ``B`` in GB/s (default 12.5 = 100 Gbps).
    alltoall_share : number
        Weight of the all-to-all time (at ``alltoall_size`` bytes per rank)
        against the allreduce time in the ranking, 0..1 (the seed's
        workload: ``(1 - w) allreduce + w all-to-all``; default 0).
    alltoall_size : int
        Bytes per rank of the all-to-all column (default 1 MiB, Table 3.4).
    mcf_lp : bool
        Solve LP (A.1) for every frontier candidate however large (HiGHS's
        first-order PDLP above ``mcf.MAX_FULL_COLUMNS``: 10 minutes or more per
        1024-rank candidate of degree 4, over 25 for L^3(C(16,{3,4})));
        default: the LP up to ``BOUND_COLUMNS`` columns or on vertex-transitive
        graphs, the distance bound above.
    jobs : int or None
        Processes the candidates' LPs run on with ``mcf_lp`` (None: every CPU).

    Returns
    -------
    FindResult

    Raises
    ------
    SpecError
        Impossible targets (``ranks < 2``, ``degree < 1``, non-positive
        numbers) or no candidate.

    Examples
    --------
    >>> r = find_topology(12, 4)
    >>> r.chosen.name, r.chosen.hops
    ('C(12,{2,3})', 2)
    """
    src = "colc find"
    if not 2 <= ranks <= MAX_RANKS:
        raise SpecError(src, f"--ranks must be from 2 to {MAX_RANKS} (the most colc handles), "
                        f"got {ranks}")
    if not 1 <= degree <= MAX_FIND_DEGREE:
        raise SpecError(src, f"--degree must be from 1 to {MAX_FIND_DEGREE} links per rank, "
                        f"got {degree}")
    if size < 1:
        raise SpecError(src, f"--size must be >= 1 byte, got {size}")
    if alltoall_size < 1:
        raise SpecError(src, f"--alltoall-size must be >= 1 byte, got {alltoall_size}")
    a, b = Fraction(str(alpha)), Fraction(str(bandwidth))
    if not 0 <= a <= MAX_LATENCY:
        raise SpecError(src, f"--alpha must be from 0 to {float(MAX_LATENCY):g} microseconds, "
                        f"got {_short(a)}")
    if b <= 0:
        raise SpecError(src, f"--bandwidth must be > 0 GB/s, got {_short(b)}")
    if not MIN_BANDWIDTH <= b / degree <= MAX_BANDWIDTH:
        raise SpecError(src, f"--bandwidth {_short(b)} GB/s over {degree} links is "
                        f"{_short(b / degree)} GB/s a link; colc takes {float(MIN_BANDWIDTH):g} "
                        f"to {float(MAX_BANDWIDTH):g}")
    share = Fraction(str(alltoall_share))
    if not 0 <= share <= 1:
        raise SpecError(src, f"--alltoall-share must be between 0 and 1, got {alltoall_share}")
    front = frontier(ranks, degree)
    if not front:
        raise SpecError(src, f"no topology with {ranks} ranks and degree {degree} in the search space")
    if mcf_lp:
        from colc.forked import fork_map

        figures = tuple(fork_map(exact_alltoall_figures, front, jobs))
    else:
        figures = tuple(alltoall_figures(c) for c in front)

    def cost(i: int) -> tuple:
        c = front[i]
        a2a = figures[i].time_us(alltoall_size, c.num_ranks, c.degree, b)
        mixed = (1 - share) * float(c.allreduce_us(size, a, b)) + float(share) * a2a
        return (mixed, c.hops, c.name)

    chosen = front[min(range(len(front)), key=cost)]
    return FindResult(front, chosen, moore_hops(ranks, degree), _bw_opt(ranks), size, a, b,
                      figures, share, alltoall_size)



def _short(x: Fraction) -> str:
    """``x`` for a message, however large or small (``float`` overflows past
    1e308 and rounds to 0 below 1e-323).

    >>> _short(-Fraction(10) ** 400), _short(Fraction(1, 10 ** 400)), _short(Fraction(5, 2))
    ('about -1e400', 'about 1e-400', '2.5')
    """
    try:
        shown = f"{float(x):g}"
    except OverflowError:
        shown = ""
    if x == 0 or shown not in ("", "0", "-0"):
        return shown
    return f"about {approx(x)}"

@lru_cache(maxsize=64)
def alltoall_figures(c: Candidate) -> AlltoallFigures:
    """MCF throughput (LP (A.1), unit links) and diameter of a candidate's graph;
    the distance bound where the LP is too large to solve here."""
    from colc.compiler.alltoall.mcf import BOUND_COLUMNS, alltoall_mcf, distance_mcf, fabric
    from colc.compiler.alltoall.mcf import rank_translations

    topo = build_candidate(c.recipe)
    diameter = _diameter(topo)
    _, edges, _ = fabric(topo)
    if rank_translations(topo) is not None or topo.num_ranks * len(edges) <= BOUND_COLUMNS:
        return AlltoallFigures(alltoall_mcf(topo, unit=True).f, True, diameter)
    return AlltoallFigures(distance_mcf(topo, unit=True), False, diameter)


def exact_alltoall_figures(c: Candidate) -> AlltoallFigures:
    """``alltoall_figures`` with LP (A.1) solved whatever its size (first-order
    above ``MAX_FULL_COLUMNS``); the distance bound only past ``PDLP_MAX_COLUMNS``."""
    from colc.compiler.alltoall.mcf import alltoall_mcf, distance_mcf

    topo = build_candidate(c.recipe)
    diameter = _diameter(topo)
    try:
        return AlltoallFigures(alltoall_mcf(topo, unit=True).f, True, diameter)
    except InfeasibleError:  # past PDLP_MAX_COLUMNS
        return AlltoallFigures(distance_mcf(topo, unit=True), False, diameter)


def _diameter(topo: Topology) -> int:
    """Largest hop count between two ranks (all-pairs BFS in scipy)."""
    from colc.compiler.alltoall.mcf import rank_distances

    return int(rank_distances(topo).max())


def _moore_mcf(n: int, d: int) -> Fraction:
    from colc.compiler.alltoall.mcf import moore_mcf

    return moore_mcf(n, d)


def check_prediction(c: Candidate) -> tuple[int, Fraction]:
    """BFB steps and tau measured on the built graph (tests and ``--verify``),
    tau in units of the ``c.degree`` ports' bandwidth (a candidate may leave
    some spare: K5 on 5 ports)."""
    topo = build_candidate(c.recipe)
    sol = generate_bfb(topo)
    node_bw = max(sum(v for (a, _), v in rank_capacity(topo).items() if a == r)
                  for r in range(topo.num_ranks))
    return sol.num_steps, sol.tau(max(node_bw, c.degree))
