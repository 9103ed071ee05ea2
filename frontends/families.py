"""Generative topology families: one builder per family, plus YAML dispatch.

Direct-connect families (every node is a rank, ids ``r0, r1, ...``, kind
``gpu``, ``bandwidth`` per direction in GB/s):

* ``ring`` -- ``ranks``, ``bidirectional`` (default true): duplex cycle, or a
  directed cycle ``i -> i+1`` when false.  Two ranks give one duplex link.
* ``torus`` -- ``dims``: Cartesian product of cycles; rank order is
  row-major over the coordinates (last dimension fastest).  A dimension of
  length 2 is ONE duplex link, so ``3x5`` is 4-regular and ``2x3`` 3-regular
  (seed inventory 4.6, pitfall 5.10).
* ``hypercube`` -- ``dim``: ``i ~ i xor 2^k``.
* ``complete`` -- ``ranks``: K_n.
* ``complete-bipartite`` -- ``ranks`` (even): K_{n/2,n/2}, ranks
  ``0..n/2-1`` on one side, ``n/2..n-1`` on the other.
* ``circulant`` -- ``ranks``, ``offsets``: ``i ~ i +- o (mod n)`` (Def 18).
  Offsets ``o`` and ``n-o`` are the same link, repeated offsets collapse, and
  ``o = n/2`` gives one link per pair.
* ``generalized-kautz`` -- ``ranks`` m, ``degree`` d: the DIRECTED
  Imase-Itoh graph Pi_{d,m}, arcs ``x -> (-d*x - a) mod m`` for ``a = 1..d``
  (seed inventory 1.13, Def 16).  Self-loops (present when
  ``m mod (d+1) != 0``) are skipped because a link from a node to itself
  carries nothing; such nodes have out-degree ``d-1`` while the nominal degree
  stays ``d``.

Hardware families (``boxes`` >= 1; ranks are box-major,
``rank = box * gpus_per_box + gpu``; all links duplex):

* ``dgx-a100`` -- GPUs ``b{b}g{i}`` (i = 0..7) and switch ``b{b}nvs`` per box,
  GPU <-> NVSwitch at 300 GB/s; with two or more boxes, IB switches ``ib0``
  and ``ib1`` and GPU ``b{b}g{i}`` <-> ``ib{i % 2}`` at 25 GB/s (the NIC is
  modelled as that link; seed inventory 4.2, the authors' two-rail model).
* ``dgx-h100`` -- ``b{b}g{i}`` (i = 0..7), ``b{b}nvs`` at 450 GB/s; with two
  or more boxes one IB switch ``ib`` at 50 GB/s per GPU (inventory 4.4).
  Optional ``multicast: true`` marks the NVSwitches as multicast-capable
  (NVLink SHARP).
* ``mi250`` -- ``b{b}g{i}`` (i = 0..15) wired by ``MI250_ADJACENCY``: an
  entry ``c`` is one aggregated duplex link of ``50*c`` GB/s each way; every
  GPU has 7 * 50 = 350 GB/s of xGMI egress.  With two or more boxes one IB
  switch ``ib`` at 16 GB/s per GPU (inventory 4.3).

Every family also takes ``latency`` (us, default 0) and ``name``.

Sizes are estimated from the parameters before anything is built, and a
family larger than ``colc.frontends.limits`` allows (4096 ranks, 1048576
directed links) is refused with the estimate; bandwidths must lie within
1e-6..1e9 GB/s and latencies within 0 or 1e-6..1e9 us.

Example
-------
>>> t = torus([2, 3], 10)
>>> t.num_ranks, len(t.links)
(6, 18)
>>> dgx_a100(2).switches
('b0nvs', 'b1nvs', 'ib0', 'ib1')
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Union

from colc.errors import SpecError
from colc.ir.topology import Link, Node, Topology

from ._values import FieldError, bool_value, int_value, show, str_value
from .limits import MAX_RANKS, bandwidth_value, check_links, check_ranks, count_text, latency_value

#: A bandwidth or latency as accepted by the builders.
Number = Union[int, float, str, Fraction]

#: MI250 xGMI adjacency (number of 50 GB/s links between GCDs of one box);
#: from the authors' ForestColl repository, seed inventory section 4.3.
MI250_ADJACENCY: tuple[tuple[int, ...], ...] = (
    (0, 4, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0),
    (4, 0, 0, 0, 0, 1, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0),
    (0, 0, 0, 4, 0, 0, 1, 0, 0, 1, 1, 0, 0, 0, 0, 0),
    (0, 0, 4, 0, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0),
    (2, 0, 0, 0, 0, 4, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0),
    (0, 1, 0, 0, 4, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0),
    (0, 0, 1, 0, 1, 1, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0),
    (0, 0, 0, 2, 0, 1, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0),
    (1, 0, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 2, 0, 0, 0),
    (0, 1, 1, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0, 1, 0, 0),
    (0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 1, 0),
    (0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0, 2),
    (0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 4, 1, 0),
    (0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 4, 0, 1, 1),
    (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 1, 0, 4),
    (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 1, 4, 0),
)

#: Per-link xGMI bandwidth of the MI250 (GB/s).
MI250_XGMI_BANDWIDTH = Fraction(50)


# --------------------------------------------------------------------------- helpers


class _Graph:
    """Accumulates nodes and links in insertion order."""

    def __init__(self, latency: Fraction) -> None:
        self.nodes: list[Node] = []
        self.links: list[Link] = []
        self.latency = latency

    def node(self, node_id: str, kind: str = "gpu", multicast: bool = False,
             net: bool = False) -> str:
        self.nodes.append(Node(node_id, kind, multicast, net))
        return node_id

    def arc(self, u: str, v: str, bandwidth: Fraction) -> None:
        self.links.append(Link(u, v, bandwidth, self.latency))

    def duplex(self, u: str, v: str, bandwidth: Fraction) -> None:
        self.arc(u, v, bandwidth)
        self.arc(v, u, bandwidth)

    def build(self, name: str, source: str, hardware: str = "") -> Topology:
        return Topology(name, tuple(self.nodes), tuple(self.links), source, hardware)


def _ranks(ranks: object, source: str, *, minimum: int = 2) -> int:
    """The ``ranks`` parameter: an integer >= ``minimum`` and at most ``MAX_RANKS``."""
    n = int_value(ranks, path=source, field="ranks", minimum=minimum)
    check_ranks(n, path=source, field="ranks")
    return n


def _product(values: Sequence[int]) -> tuple[int, str]:
    """Product of integers >= 2, stopping once it exceeds ``MAX_RANKS`` (so it stays small).

    Returns the product and ``""``, or a partial product above the limit and
    ``"at least "``.
    """
    n = 1
    for i, v in enumerate(values):
        n *= v
        if n > MAX_RANKS and i < len(values) - 1:
            return n, "at least "
    return n, ""


def _bandwidth(bandwidth: object, source: str) -> Fraction:
    return bandwidth_value(bandwidth, path=source, field="bandwidth")


def _latency(latency: object, source: str) -> Fraction:
    return latency_value(latency, path=source, field="latency")


def _direct_nodes(g: _Graph, n: int) -> list[str]:
    return [g.node(f"r{i}") for i in range(n)]


def _int_list(value: object, source: str, field: str, minimum: int) -> list[int]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise FieldError(source, field, f"must be a list of integers, got {show(value)}")
    if len(value) == 0:
        raise FieldError(source, field, "must be a non-empty list")
    return [
        int_value(v, path=source, field=f"{field}[{i}]", minimum=minimum)
        for i, v in enumerate(value)
    ]


# --------------------------------------------------------------------------- direct-connect


def ring(
    ranks: int,
    bandwidth: Number,
    *,
    bidirectional: bool = True,
    latency: Number = 0,
    name: str | None = None,
    source: str = "<family ring>",
) -> Topology:
    """Ring of ``ranks`` nodes.

    Parameters
    ----------
    ranks : int
        Number of ranks, >= 2.
    bandwidth : int, float, str or Fraction
        GB/s per direction of each link.
    bidirectional : bool
        Duplex links (default) or a directed cycle ``i -> i+1``.
    latency : number
        Link latency in us.
    name : str or None
        Topology name (default ``ring-<ranks>``).
    source : str
        File or origin, for messages.

    Returns
    -------
    Topology
        Ranks ``r0..r{n-1}``.
    """
    n = _ranks(ranks, source)
    bidi = bool_value(bidirectional, path=source, field="bidirectional")
    bw, lat = _bandwidth(bandwidth, source), _latency(latency, source)
    g = _Graph(lat)
    ids = _direct_nodes(g, n)
    if n == 2:
        g.duplex(ids[0], ids[1], bw)
    else:
        for i in range(n):
            if bidi:
                g.duplex(ids[i], ids[(i + 1) % n], bw)
            else:
                g.arc(ids[i], ids[(i + 1) % n], bw)
    return g.build(name or f"ring-{n}", source)


def torus(
    dims: Sequence[int],
    bandwidth: Number,
    *,
    latency: Number = 0,
    name: str | None = None,
    source: str = "<family torus>",
) -> Topology:
    """Torus: Cartesian product of cycles of the given lengths.

    Parameters
    ----------
    dims : sequence of int
        Cycle lengths, each >= 2.  A length-2 dimension is a single duplex
        link (not two parallel ones).
    bandwidth : number
        GB/s per direction of each link.
    latency : number
        Link latency in us.
    name : str or None
        Topology name (default ``torus-AxB``).
    source : str
        File or origin, for messages.

    Returns
    -------
    Topology
        Ranks ``r0..`` in row-major coordinate order (last dimension fastest).
    """
    ds = _int_list(dims, source, "dims", minimum=2)
    n, at_least = _product(ds)
    check_ranks(n, path=source, field="dims", detail=f"{len(ds)} dimensions give {at_least}")
    bw, lat = _bandwidth(bandwidth, source), _latency(latency, source)
    g = _Graph(lat)
    ids = _direct_nodes(g, n)
    strides = [math.prod(ds[k + 1:]) for k in range(len(ds))]
    for idx, coord in enumerate(itertools.product(*(range(d) for d in ds))):
        for k, d in enumerate(ds):
            if d == 2 and coord[k] == 1:
                continue
            nxt = idx + ((coord[k] + 1) % d - coord[k]) * strides[k]
            g.duplex(ids[idx], ids[nxt], bw)
    return g.build(name or "torus-" + "x".join(map(str, ds)), source)


def hypercube(
    dim: int,
    bandwidth: Number,
    *,
    latency: Number = 0,
    name: str | None = None,
    source: str = "<family hypercube>",
) -> Topology:
    """Hypercube Q_dim: ``2**dim`` ranks, ``i ~ i xor 2**k``.

    Parameters
    ----------
    dim : int
        Dimension, >= 1.
    bandwidth : number
        GB/s per direction of each link.
    latency : number
        Link latency in us.
    name : str or None
        Topology name (default ``hypercube-<dim>``).
    source : str
        File or origin, for messages.

    Returns
    -------
    Topology
        A dim-regular duplex topology.
    """
    k = int_value(dim, path=source, field="dim", minimum=1, maximum=62)
    check_ranks(1 << k, path=source, field="dim", detail=f"2^{k} = ")
    bw, lat = _bandwidth(bandwidth, source), _latency(latency, source)
    n = 1 << k
    g = _Graph(lat)
    ids = _direct_nodes(g, n)
    for i in range(n):
        for b in range(k):
            j = i ^ (1 << b)
            if i < j:
                g.duplex(ids[i], ids[j], bw)
    return g.build(name or f"hypercube-{k}", source)


def complete(
    ranks: int,
    bandwidth: Number,
    *,
    latency: Number = 0,
    name: str | None = None,
    source: str = "<family complete>",
) -> Topology:
    """Complete graph K_ranks.

    Parameters
    ----------
    ranks : int
        Number of ranks, >= 2.
    bandwidth : number
        GB/s per direction of each link.
    latency : number
        Link latency in us.
    name : str or None
        Topology name (default ``complete-<ranks>``).
    source : str
        File or origin, for messages.

    Returns
    -------
    Topology
        Every pair joined by one duplex link.
    """
    n = _ranks(ranks, source)
    check_links(n * (n - 1), path=source, field="ranks", detail=f"{n} x {n - 1} = ")
    bw, lat = _bandwidth(bandwidth, source), _latency(latency, source)
    g = _Graph(lat)
    ids = _direct_nodes(g, n)
    for i, j in itertools.combinations(range(n), 2):
        g.duplex(ids[i], ids[j], bw)
    return g.build(name or f"complete-{n}", source)


def complete_bipartite(
    ranks: int,
    bandwidth: Number,
    *,
    latency: Number = 0,
    name: str | None = None,
    source: str = "<family complete-bipartite>",
) -> Topology:
    """Complete bipartite graph K_{n/2,n/2}.

    Parameters
    ----------
    ranks : int
        Total number of ranks n, even and >= 2.
    bandwidth : number
        GB/s per direction of each link.
    latency : number
        Link latency in us.
    name : str or None
        Topology name (default ``complete-bipartite-<ranks>``).
    source : str
        File or origin, for messages.

    Returns
    -------
    Topology
        Ranks ``0..n/2-1`` each joined to every rank ``n/2..n-1``.
    """
    n = _ranks(ranks, source)
    if n % 2:
        raise FieldError(source, "ranks", f"must be even for complete-bipartite, got {n}")
    check_links(n * n // 2, path=source, field="ranks", detail=f"2 x {n // 2} x {n // 2} = ")
    bw, lat = _bandwidth(bandwidth, source), _latency(latency, source)
    g = _Graph(lat)
    ids = _direct_nodes(g, n)
    h = n // 2
    for i in range(h):
        for j in range(h, n):
            g.duplex(ids[i], ids[j], bw)
    return g.build(name or f"complete-bipartite-{n}", source)


def circulant(
    ranks: int,
    offsets: Sequence[int],
    bandwidth: Number,
    *,
    latency: Number = 0,
    name: str | None = None,
    source: str = "<family circulant>",
) -> Topology:
    """Circulant graph C(n, offsets): ``i ~ i +- o (mod n)``.

    Parameters
    ----------
    ranks : int
        Number of ranks n, >= 2.
    offsets : sequence of int
        Each in ``1..n-1``.  ``o`` and ``n-o`` denote the same link and
        repeated offsets collapse; ``o = n/2`` gives one link per pair.
        ``gcd(n, offsets)`` must be 1 (otherwise the graph is disconnected).
    bandwidth : number
        GB/s per direction of each link.
    latency : number
        Link latency in us.
    name : str or None
        Topology name (default ``circulant-<n>-<o1>-<o2>...``).
    source : str
        File or origin, for messages.

    Returns
    -------
    Topology
        A simple duplex topology.
    """
    n = _ranks(ranks, source)
    offs = _int_list(offsets, source, "offsets", minimum=1)
    for i, o in enumerate(offs):
        if o > n - 1:
            raise FieldError(source, f"offsets[{i}]", f"must be in 1..{n - 1} (ranks - 1), got {o}")
    canon = sorted({min(o, n - o) for o in offs})
    check_links(sum(n if 2 * o == n else 2 * n for o in canon), path=source, field="offsets",
                detail=f"{len(canon)} distinct offsets on {n} ranks give ")
    gcd = math.gcd(n, *canon)
    if gcd != 1:
        raise FieldError(
            source, "offsets",
            f"gcd(ranks, offsets) = {gcd}, so the circulant is disconnected "
            f"(rank 0 cannot reach rank 1)",
        )
    bw, lat = _bandwidth(bandwidth, source), _latency(latency, source)
    g = _Graph(lat)
    ids = _direct_nodes(g, n)
    for o in canon:
        for i in range(n):
            j = (i + o) % n
            if 2 * o == n and j < i:
                continue
            g.duplex(ids[i], ids[j], bw)
    return g.build(name or "circulant-" + "-".join(map(str, [n, *canon])), source)


def generalized_kautz(
    ranks: int,
    degree: int,
    bandwidth: Number,
    *,
    latency: Number = 0,
    name: str | None = None,
    source: str = "<family generalized-kautz>",
) -> Topology:
    """Generalized Kautz (Imase-Itoh) digraph Pi_{d,m}.

    Arcs ``x -> (-d*x - a) mod m`` for ``a = 1..d`` (seed inventory 1.13).
    Self-loops are skipped.

    Parameters
    ----------
    ranks : int
        Number of ranks m, > degree.
    degree : int
        Out-degree d, >= 1.
    bandwidth : number
        GB/s of each (directed) arc.
    latency : number
        Link latency in us.
    name : str or None
        Topology name (default ``generalized-kautz-<d>-<m>``).
    source : str
        File or origin, for messages.

    Returns
    -------
    Topology
        A directed topology (not duplex).
    """
    d = int_value(degree, path=source, field="degree", minimum=1)
    m = _ranks(ranks, source)
    if m <= d:
        raise FieldError(source, "ranks", f"must be > degree ({count_text(d)}), got {m}")
    check_links(m * d, path=source, field="degree", detail=f"{m} ranks x degree {d} = ")
    bw, lat = _bandwidth(bandwidth, source), _latency(latency, source)
    g = _Graph(lat)
    ids = _direct_nodes(g, m)
    for x in range(m):
        for a in range(1, d + 1):
            y = (-d * x - a) % m
            if y != x:
                g.arc(ids[x], ids[y], bw)
    return g.build(name or f"generalized-kautz-{d}-{m}", source)


# --------------------------------------------------------------------------- hardware


def _boxes(boxes: int, gpus: int, source: str) -> int:
    nb = int_value(boxes, path=source, field="boxes", minimum=1)
    check_ranks(nb * gpus, path=source, field="boxes",
                detail=f"{count_text(nb)} boxes x {gpus} GPUs = ")
    return nb


def dgx_a100(
    boxes: int,
    *,
    latency: Number = 0,
    name: str | None = None,
    source: str = "<family dgx-a100>",
) -> Topology:
    """NVIDIA DGX A100 boxes (seed inventory 4.2).

    Parameters
    ----------
    boxes : int
        Number of boxes, >= 1.
    latency : number
        Link latency in us.
    name : str or None
        Topology name (default ``dgx-a100-<boxes>``).
    source : str
        File or origin, for messages.

    Returns
    -------
    Topology
        Per box GPUs ``b{b}g0..b{b}g7`` and NVSwitch ``b{b}nvs`` (300 GB/s
        duplex per GPU); for boxes >= 2, IB switches ``ib0``/``ib1`` with
        ``b{b}g{i} <-> ib{i%2}`` at 25 GB/s.
    """
    nb = _boxes(boxes, 8, source)
    lat = _latency(latency, source)
    g = _Graph(lat)
    for b in range(nb):
        gpus = [g.node(f"b{b}g{i}") for i in range(8)]
        nvs = g.node(f"b{b}nvs", "switch")
        for gpu in gpus:
            g.duplex(gpu, nvs, Fraction(300))
    if nb > 1:
        ib = [g.node("ib0", "switch", net=True), g.node("ib1", "switch", net=True)]
        for b in range(nb):
            for i in range(8):
                g.duplex(f"b{b}g{i}", ib[i % 2], Fraction(25))
    return g.build(name or f"dgx-a100-{nb}", source, "a100")


def dgx_h100(
    boxes: int,
    *,
    multicast: bool = False,
    latency: Number = 0,
    name: str | None = None,
    source: str = "<family dgx-h100>",
) -> Topology:
    """NVIDIA DGX H100 boxes (seed inventory 4.4).

    Parameters
    ----------
    boxes : int
        Number of boxes, >= 1.
    multicast : bool
        Mark the NVSwitches as multicast-capable (NVLink SHARP).
    latency : number
        Link latency in us.
    name : str or None
        Topology name (default ``dgx-h100-<boxes>``).
    source : str
        File or origin, for messages.

    Returns
    -------
    Topology
        Per box GPUs ``b{b}g0..b{b}g7`` and NVSwitch ``b{b}nvs`` (450 GB/s
        duplex per GPU); for boxes >= 2, one IB switch ``ib`` at 50 GB/s
        duplex per GPU.
    """
    nb = _boxes(boxes, 8, source)
    mc = bool_value(multicast, path=source, field="multicast")
    lat = _latency(latency, source)
    g = _Graph(lat)
    for b in range(nb):
        gpus = [g.node(f"b{b}g{i}") for i in range(8)]
        nvs = g.node(f"b{b}nvs", "switch", multicast=mc)
        for gpu in gpus:
            g.duplex(gpu, nvs, Fraction(450))
    if nb > 1:
        ib = g.node("ib", "switch", net=True)
        for b in range(nb):
            for i in range(8):
                g.duplex(f"b{b}g{i}", ib, Fraction(50))
    return g.build(name or f"dgx-h100-{nb}", source, "h100")


def mi250(
    boxes: int,
    *,
    latency: Number = 0,
    name: str | None = None,
    source: str = "<family mi250>",
) -> Topology:
    """AMD MI250 boxes of 16 GCDs (seed inventory 4.3).

    Parameters
    ----------
    boxes : int
        Number of boxes, >= 1.
    latency : number
        Link latency in us.
    name : str or None
        Topology name (default ``mi250-<boxes>``).
    source : str
        File or origin, for messages.

    Returns
    -------
    Topology
        Per box GPUs ``b{b}g0..b{b}g15`` joined by ``MI250_ADJACENCY`` (one
        aggregated duplex link of ``50 * count`` GB/s per adjacent pair);
        for boxes >= 2, one IB switch ``ib`` at 16 GB/s duplex per GPU.
    """
    nb = _boxes(boxes, 16, source)
    lat = _latency(latency, source)
    g = _Graph(lat)
    for b in range(nb):
        gpus = [g.node(f"b{b}g{i}") for i in range(16)]
        for i, j in itertools.combinations(range(16), 2):
            count = MI250_ADJACENCY[i][j]
            if count:
                g.duplex(gpus[i], gpus[j], MI250_XGMI_BANDWIDTH * count)
    if nb > 1:
        ib = g.node("ib", "switch", net=True)
        for b in range(nb):
            for i in range(16):
                g.duplex(f"b{b}g{i}", ib, Fraction(16))
    return g.build(name or f"mi250-{nb}", source, "mi250")


# --------------------------------------------------------------------------- dispatch


@dataclass(frozen=True)
class _Family:
    builder: Callable[..., Topology]
    required: tuple[str, ...]
    optional: tuple[str, ...] = ()


#: Family name -> builder and its keys (besides ``family``, ``name``, ``latency``).
FAMILIES: dict[str, _Family] = {
    "ring": _Family(ring, ("ranks", "bandwidth"), ("bidirectional",)),
    "torus": _Family(torus, ("dims", "bandwidth")),
    "hypercube": _Family(hypercube, ("dim", "bandwidth")),
    "complete": _Family(complete, ("ranks", "bandwidth")),
    "complete-bipartite": _Family(complete_bipartite, ("ranks", "bandwidth")),
    "circulant": _Family(circulant, ("ranks", "offsets", "bandwidth")),
    "generalized-kautz": _Family(generalized_kautz, ("ranks", "degree", "bandwidth")),
    "dgx-a100": _Family(dgx_a100, ("boxes",)),
    "dgx-h100": _Family(dgx_h100, ("boxes",), ("multicast",)),
    "mi250": _Family(mi250, ("boxes",)),
}

_COMMON_KEYS = ("family", "name", "latency")


def family_keys(family: str) -> tuple[str, ...]:
    """All keys a family file may contain, sorted.

    Parameters
    ----------
    family : str
        A key of ``FAMILIES``.

    Returns
    -------
    tuple of str
        Allowed top-level keys.
    """
    fam = FAMILIES[family]
    return tuple(sorted({*_COMMON_KEYS, *fam.required, *fam.optional}))


def build_family(
    mapping: Mapping[str, object],
    path: str,
    *,
    lines: Mapping[str, int] | None = None,
    line: int | None = None,
) -> Topology:
    """Build a topology from a family description.

    Parameters
    ----------
    mapping : mapping of str to object
        The file's top-level mapping as plain Python values, e.g.
        ``{"family": "torus", "dims": [3, 5], "bandwidth": 10}``.
    path : str
        The file, for messages; its stem is the default ``name``.
    lines : mapping of str to int, optional
        1-based line of each key (and of list items as ``"dims[1]"``), so
        that errors point at the offending line.
    line : int, optional
        Line of the mapping itself (used for missing keys).

    Returns
    -------
    Topology
        The generated topology (not yet validated for connectivity).

    Raises
    ------
    SpecError
        Unknown family or key, missing key, or a parameter out of range.
    """
    lines = lines or {}
    if "family" not in mapping:
        raise SpecError(path, "field 'family': missing", line)
    fam_name = mapping["family"]
    if not isinstance(fam_name, str) or fam_name not in FAMILIES:
        raise FieldError(
            path, "family",
            f"unknown family {show(fam_name)}; known: {', '.join(sorted(FAMILIES))}",
            lines.get("family", line),
        )
    fam = FAMILIES[fam_name]
    allowed = family_keys(fam_name)
    for key in mapping:
        if key not in allowed:
            raise SpecError(
                path,
                f"unknown key '{key}' for family '{fam_name}'; allowed: {', '.join(allowed)}",
                lines.get(key, line),
            )
    for key in fam.required:
        if key not in mapping:
            raise SpecError(
                path, f"field '{key}': missing (required by family '{fam_name}')", line
            )
    kwargs: dict[str, object] = {
        k.replace("-", "_"): mapping[k] for k in (*fam.required, *fam.optional) if k in mapping
    }
    try:
        if "name" in mapping:
            kwargs["name"] = str_value(mapping["name"], path=path, field="name")
        else:
            kwargs["name"] = Path(path).stem
        if "latency" in mapping:
            kwargs["latency"] = mapping["latency"]
        return fam.builder(**kwargs, source=path)
    except FieldError as err:
        field = err.field
        at = lines.get(field, lines.get(field.split("[", 1)[0], line))
        raise err.at(path, at) from None
