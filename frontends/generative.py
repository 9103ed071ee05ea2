"""Generative direct-connect families beyond ``families`` (seed 001 A.6, Table A.3).

Every builder returns a ``Topology`` of ranks ``r0..r{N-1}`` (no switches)
with ``bandwidth`` GB/s per directed link:

* ``hamming(n, q)``: H(n, q) = K_q^{box n}, degree n(q-1), duplex;
* ``uniring(d, m)``: m-cycle with d parallel arcs per hop, directed;
* ``biring(d, m)``: m-cycle with d/2 parallel duplex links per hop (even d);
* ``de_bruijn(d, n)``: DBJ(d, n), arcs ``x1..xn -> x2..xn a`` (self-loops
  skipped, as BFB ignores them);
* ``kautz(d, n)``: K(d, n) = Pi_{d, d^{n+1} + d^n} = L^n(K_{d+1});
* ``directed_circulant(d)``: ``i -> i+1..i+d (mod d+2)`` (Table A.3; the
  seed omits the definition, this reading has diameter 2);
* ``distance_regular(name)``: the constructible graphs of Table A.2;
* ``twisted_torus``: not defined in the seeds, raises ``UnsupportedError``.

Impossible parameters raise ``SpecError`` naming the parameter.
Complexity: linear in the number of links.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from fractions import Fraction

import networkx as nx

from colc.errors import SpecError, UnsupportedError
from colc.ir.topology import Link, Node, Topology


def _bw(bandwidth: object, source: str) -> Fraction:
    try:
        bw = Fraction(str(bandwidth)) if not isinstance(bandwidth, Fraction) else bandwidth
    except (ValueError, ZeroDivisionError):
        raise SpecError(source, f"bandwidth must be a positive number, got {bandwidth!r}") from None
    if bw <= 0:
        raise SpecError(source, f"bandwidth must be > 0, got {bandwidth!r}")
    return bw


def _need(ok: bool, source: str, msg: str) -> None:
    if not ok:
        raise SpecError(source, msg)


def from_arcs(name: str, n: int, arcs: Iterable[tuple[int, int]], bandwidth: object,
              source: str) -> Topology:
    """Topology of ranks ``r0..r{n-1}`` from directed arcs (self-loops dropped)."""
    bw = _bw(bandwidth, source)
    links = tuple(Link(f"r{a}", f"r{b}", bw) for a, b in arcs if a != b)
    return Topology(name, tuple(Node(f"r{i}", "gpu") for i in range(n)), links, source=source)


def _undirected(g: nx.Graph) -> list[tuple[int, int]]:
    label = {v: i for i, v in enumerate(sorted(g.nodes, key=repr))}
    arcs = []
    for a, b in sorted(g.edges, key=repr):
        arcs += [(label[a], label[b]), (label[b], label[a])]
    return sorted(arcs)


def hamming(n: int, q: int, bandwidth: object = 1) -> Topology:
    """Hamming graph H(n, q): words of length n over q symbols, adjacent at distance 1."""
    src = "<family hamming>"
    _need(n >= 1, src, f"n must be >= 1, got {n}")
    _need(q >= 2, src, f"q must be >= 2, got {q}")
    _need(q ** n <= 1 << 16, src, f"q^n = {q ** n} ranks is too many")
    words = list(itertools.product(range(q), repeat=n))
    index = {w: i for i, w in enumerate(words)}
    arcs = [(index[w], index[w[:k] + (a,) + w[k + 1:]])
            for w in words for k in range(n) for a in range(q) if a != w[k]]
    return from_arcs(f"hamming-{n}-{q}", len(words), arcs, bandwidth, src)


def uniring(d: int, m: int, bandwidth: object = 1) -> Topology:
    """UniRing(d, m): directed m-cycle, d parallel arcs per hop."""
    src = "<family uniring>"
    _need(d >= 1, src, f"d must be >= 1, got {d}")
    _need(m >= 2, src, f"m must be >= 2, got {m}")
    arcs = [(i, (i + 1) % m) for i in range(m) for _ in range(d)]
    return from_arcs(f"uniring-{d}-{m}", m, arcs, bandwidth, src)


def biring(d: int, m: int, bandwidth: object = 1) -> Topology:
    """BiRing(d, m): m-cycle with d/2 parallel duplex links per hop (d even)."""
    src = "<family biring>"
    _need(d >= 2 and d % 2 == 0, src, f"d must be even and >= 2, got {d}")
    _need(m >= 3, src, f"m must be >= 3, got {m}")
    arcs = [arc for i in range(m) for _ in range(d // 2)
            for arc in ((i, (i + 1) % m), ((i + 1) % m, i))]
    return from_arcs(f"biring-{d}-{m}", m, arcs, bandwidth, src)


def de_bruijn(d: int, n: int, bandwidth: object = 1) -> Topology:
    """de Bruijn DBJ(d, n): d^n ranks, ``x -> (x d + a) mod d^n``."""
    src = "<family de-bruijn>"
    _need(d >= 2, src, f"d must be >= 2, got {d}")
    _need(n >= 1, src, f"n must be >= 1, got {n}")
    size = d ** n
    _need(size <= 1 << 16, src, f"d^n = {size} ranks is too many")
    arcs = [(x, (x * d + a) % size) for x in range(size) for a in range(d)]
    return from_arcs(f"de-bruijn-{d}-{n}", size, arcs, bandwidth, src)


def kautz(d: int, n: int, bandwidth: object = 1) -> Topology:
    """Kautz K(d, n) as Pi_{d, m} with ``m = d^{n+1} + d^n`` (Def 16)."""
    src = "<family kautz>"
    _need(d >= 1, src, f"d must be >= 1, got {d}")
    _need(n >= 0, src, f"n must be >= 0, got {n}")
    m = d ** (n + 1) + d ** n
    _need(m <= 1 << 16, src, f"{m} ranks is too many")
    arcs = [(x, (-d * x - a) % m) for x in range(m) for a in range(1, d + 1)]
    return from_arcs(f"kautz-{d}-{n}", m, arcs, bandwidth, src)


def directed_circulant(d: int, bandwidth: object = 1) -> Topology:
    """Directed circulant of Table A.3: ``i -> i+1 .. i+d (mod d+2)``."""
    src = "<family directed-circulant>"
    _need(d >= 1, src, f"d must be >= 1, got {d}")
    m = d + 2
    arcs = [(i, (i + a) % m) for i in range(m) for a in range(1, d + 1)]
    return from_arcs(f"directed-circulant-{d}", m, arcs, bandwidth, src)


def twisted_torus(*_args: object, **_kwargs: object) -> Topology:
    """Not available: the seeds use the twisted torus but never define it."""
    raise UnsupportedError("twisted torus: the seeds do not define its wiring (inventory 1.13)")


# --------------------------------------------------------------------------- distance-regular


def _kneser_odd(k: int) -> nx.Graph:
    sets = [frozenset(c) for c in itertools.combinations(range(2 * k - 1), k - 1)]
    return nx.Graph([(a, b) for a, b in itertools.combinations(sets, 2) if not a & b])


def _doubled_odd(k: int) -> nx.Graph:
    small = [frozenset(c) for c in itertools.combinations(range(2 * k - 1), k - 1)]
    big = [frozenset(c) for c in itertools.combinations(range(2 * k - 1), k)]
    return nx.Graph([(("s", tuple(sorted(a))), ("b", tuple(sorted(b))))
                     for a in small for b in big if a < b])


def _distance3(g: nx.Graph) -> nx.Graph:
    dist = dict(nx.all_pairs_shortest_path_length(g))
    return nx.Graph([(a, b) for a in g for b in g if a < b and dist[a][b] == 3])


def _k55_minus_matching() -> nx.Graph:
    return nx.Graph([(("a", i), ("b", j)) for i in range(5) for j in range(5) if i != j])


def _pg2_3_incidence() -> nx.Graph:
    q = 3
    pts = set()
    for v in itertools.product(range(q), repeat=3):
        if any(v):
            first = next(x for x in v if x)
            inv = pow(first, -1, q)
            pts.add(tuple(x * inv % q for x in v))
    pts_l = sorted(pts)
    return nx.Graph([(("p", p), ("l", line)) for p in pts_l for line in pts_l
                     if sum(a * b for a, b in zip(p, line, strict=True)) % q == 0])


def _gq22_tutte8() -> nx.Graph:
    duads = [frozenset(c) for c in itertools.combinations(range(6), 2)]
    synthemes = {frozenset(s) for s in itertools.combinations(duads, 3)
                 if len(frozenset().union(*s)) == 6}
    return nx.Graph([(("d", tuple(sorted(d))), ("s", tuple(sorted(tuple(sorted(x)) for x in s))))
                     for s in synthemes for d in s])


def _ag24_minus_class() -> nx.Graph:
    # GF(4) = {0, 1, w, w+1} as 0..3 with XOR addition, w^2 = w + 1.
    def mul(a: int, b: int) -> int:
        r = 0
        for i in range(2):
            if b >> i & 1:
                r ^= a << i
        return r ^ 0b111 if r & 0b100 else r

    pts = list(itertools.product(range(4), repeat=2))
    lines = set()
    for m in range(4):  # y = m x + c; the vertical class x = c is dropped
        for c in range(4):
            lines.add(frozenset((x, mul(m, x) ^ c) for x in range(4)))
    return nx.Graph([(("p", p), ("l", tuple(sorted(line)))) for line in lines for p in line])


DISTANCE_REGULAR: dict[str, tuple[str, Callable[[], nx.Graph]]] = {
    "octahedron": ("J(4,2), N=6", nx.octahedral_graph),
    "paley-9": ("H(2,3), N=9", lambda: nx.cartesian_product(nx.complete_graph(3), nx.complete_graph(3))),
    "k55-minus-matching": ("K5,5 - I, N=10", _k55_minus_matching),
    "heawood-distance-3": ("N=14", lambda: _distance3(nx.heawood_graph())),
    "petersen-line": ("N=15", lambda: nx.line_graph(nx.petersen_graph())),
    "hypercube-4": ("Q4, N=16", lambda: nx.hypercube_graph(4)),
    "heawood-line": ("N=21", lambda: nx.line_graph(nx.heawood_graph())),
    "pg23-incidence": ("N=26", _pg2_3_incidence),
    "ag24-minus-class": ("DistReg(4,32), N=32", _ag24_minus_class),
    "odd-4": ("O4, N=35", lambda: _kneser_odd(4)),
    "tutte8-line": ("N=45", lambda: nx.line_graph(_gq22_tutte8())),
    "doubled-odd-4": ("N=70", lambda: _doubled_odd(4)),
}


def distance_regular(name: str, bandwidth: object = 1) -> Topology:
    """A degree-4 distance-regular graph of seed Table A.2, duplex.

    Raises
    ------
    SpecError
        Unknown name (the message lists the known ones).
    """
    src = "<family distance-regular>"
    if name not in DISTANCE_REGULAR:
        raise SpecError(src, f"unknown distance-regular graph {name!r}; known: "
                        + ", ".join(DISTANCE_REGULAR))
    g = DISTANCE_REGULAR[name][1]()
    return from_arcs(f"distreg-{name}", g.number_of_nodes(), _undirected(g), bandwidth, src)
