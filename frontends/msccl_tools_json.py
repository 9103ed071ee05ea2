"""msccl-tools (SCCL) topology JSON frontend.

Format (``msccl/serialization.py``; peer survey section 2.1)::

    {"msccl_type": "topology", "name": "MyTopo",
     "links":    [[0,1,1,1],[1,0,1,1],[1,1,0,1],[1,1,1,0]],
     "switches": [[[0],[1,2,3],1,"node_0_out"], [[1,2,3],[0],1,"node_0_in"]]}

``links[dst][src]`` is an integer multiplicity (rows are DESTINATIONS); a
switch ``[srcs, dsts, bw, name]`` caps at ``bw`` the traffic from all of
``srcs`` to all of ``dsts``; switches over the same ranks are one switch at
the smallest cap, a pair under two switches crosses both (the first's
output feeds the second's input, ``_layers``: msccl-tools' hub and spoke),
and other overlaps are refused.  colc model: ranks ``r0..r{n-1}`` (kind gpu);
``src -> dst`` at ``multiplicity * unit`` GB/s (``unit`` = 1 by default; the
format has no physical unit).  A switch becomes a node named after it: with
one source or one destination, ``src -> switch`` and ``switch -> dst`` links
of ``bw * unit``; otherwise two nodes ``<name>.in -> <name>.out`` joined by
one ``bw * unit`` link carry the shared cap.  Pairs covered by a switch use
it instead of their direct link.  Per-pair multiplicities inside a switch are
not modelled beyond the switch cap.

Example
-------
>>> import json, tempfile, os
>>> d = tempfile.mkdtemp(); p = os.path.join(d, "t.json")
>>> _ = open(p, "w").write(json.dumps({"msccl_type": "topology", "name": "ring3",
...     "links": [[0, 0, 1], [1, 0, 0], [0, 1, 0]]}))
>>> load_msccl_tools_topology(p).capacity()[("r0", "r1")]
Fraction(1, 1)
"""

from __future__ import annotations

from fractions import Fraction

from colc.errors import SpecError
from colc.ir.topology import Link, Node, Topology

from ._json import load_json, matrix
from ._values import FieldError, fraction_value, show, str_value
from .limits import bandwidth_value, check_ranks
from .validate import validate_topology


def load_msccl_tools_topology(path: str, unit: object = 1) -> Topology:
    """Read an msccl-tools topology JSON file.

    Parameters
    ----------
    path : str
        The file.
    unit : number
        GB/s per unit of multiplicity.

    Returns
    -------
    Topology
        Validated.

    Raises
    ------
    SpecError
        Malformed JSON or a field of the wrong shape (named in the message).
    """
    doc = load_json(path)
    if not isinstance(doc, dict):
        raise SpecError(path, "top level must be a JSON object")
    if doc.get("msccl_type") != "topology":
        raise SpecError(path, f"field 'msccl_type': must be \"topology\", got "
                        f"{doc.get('msccl_type')!r}")
    bw_unit = fraction_value(unit, path=path, field="unit")
    links = doc.get("links")
    if links is None:
        raise SpecError(path, "field 'links': missing")
    if not isinstance(links, list):
        raise SpecError(path, "field 'links': must be a list of lists")
    check_ranks(len(links), path=path, field="links")
    m = matrix(links, path, "links")
    n = len(m)
    mult = [[_count(m[d][s], path, f"links[{d}][{s}]") for s in range(n)] for d in range(n)]
    for r in range(n):
        if mult[r][r]:  # was ignored: a number where the user meant another rank's?
            raise FieldError(path, f"links[{r}][{r}]", f"a rank's link to itself must be 0, got "
                             f"{mult[r][r]}")
    covered: set[tuple[int, int]] = set()
    nodes = [Node(f"r{i}", "gpu") for i in range(n)]
    extra: list[Link] = []
    switches = doc.get("switches", [])
    if not isinstance(switches, list):
        raise SpecError(path, "field 'switches': must be a list")
    used: set[str] = {nd.id for nd in nodes}
    merged = _merged_switches(switches, n, path)
    role, chains = _layers(merged, path)
    hubs = []
    for (k, srcs, dsts, bw, name), kind in zip(merged, role, strict=True):
        cap = bandwidth_value(bw * bw_unit, path=path, field=f"switches[{k}][2]")
        if len(srcs) == 1 or len(dsts) == 1:
            names = [_fresh(name, used)]
            nodes.append(Node(names[0], "switch"))
            hub_in = hub_out = names[0]
        else:
            hub_in, hub_out = _fresh(name + ".in", used), _fresh(name + ".out", used)
            nodes += [Node(hub_in, "switch"), Node(hub_out, "switch")]
            extra.append(Link(hub_in, hub_out, cap))
        hubs.append((hub_in, hub_out, cap))
        if kind != "second":  # a second switch's traffic comes from the first ones
            extra += [Link(f"r{s}", hub_in, cap) for s in srcs]
        if kind != "first":
            extra += [Link(hub_out, f"r{d}", cap) for d in dsts]
        covered |= {(s, d) for s in srcs for d in dsts}
    extra += [Link(hubs[a][1], hubs[b][0], min(hubs[a][2], hubs[b][2])) for a, b in chains]
    direct = [Link(f"r{s}", f"r{d}", bandwidth_value(mult[d][s] * bw_unit, path=path,
                                                       field=f"links[{d}][{s}]"))
              for s in range(n) for d in range(n)
              if s != d and mult[d][s] > 0 and (s, d) not in covered]
    name = str_value(doc["name"], path=path, field="name") if "name" in doc else "msccl"
    topo = Topology(name, tuple(nodes), tuple(direct + extra), path)
    validate_topology(topo, path, ranks_from="field 'links' (a row per rank)")
    return topo


def _merged_switches(switches: list, n: int, path: str
                     ) -> list[tuple[int, list[int], list[int], int, str]]:
    """The switches as ``(index, srcs, dsts, bw, name)``, those over the same ranks
    merged into one at the smallest cap (msccl-tools' distributed hub and
    spoke with two copies writes a box's out-switch and the other box's
    in-switch so)."""
    out: dict[tuple[tuple[int, ...], tuple[int, ...]], list] = {}
    for k, sw in enumerate(switches):
        f = f"switches[{k}]"
        if not isinstance(sw, list) or len(sw) != 4:
            raise SpecError(path, f"field '{f}': must be [srcs, dsts, bw, name]")
        srcs = _ranks(sw[0], n, path, f + "[0]")
        dsts = _ranks(sw[1], n, path, f + "[1]")
        bw = _count(sw[2], path, f + "[2]")
        if bw <= 0:
            raise SpecError(path, f"field '{f}[2]': switch bandwidth must be > 0, got {bw}")
        name = str_value(sw[3], path=path, field=f + "[3]") if sw[3] else f"switch{k}"
        key = (tuple(srcs), tuple(dsts))
        if key in out:
            out[key][3] = min(out[key][3], bw)
            continue
        out[key] = [k, srcs, dsts, bw, name]
    return [tuple(v) for v in out.values()]


def _layers(merged: list, path: str) -> tuple[list[str], list[tuple[int, int]]]:
    """Each switch's role and the chains between them.

    Every cap holds at once, so a pair under two switches must cross both.
    Where no pair is under two, every switch is ``"lone"``.  Otherwise the
    switches under shared pairs must form two layers (msccl-tools' hub and
    spoke: rank i's out-switch, then rank j's in-switch): a ``"first"``
    switch takes its sources' traffic and hands it to the ``"second"``
    switches it shares pairs with, which deliver it; ``(first, second)``
    chains are listed, and every pair of a chain's sources and
    destinations must be under both.  Any other overlap is refused (a
    graph of switches would let a pair take either cap, adding them).
    """
    pairs = [{(s, d) for s in srcs for d in dsts if s != d} for _, srcs, dsts, _, _ in merged]
    cover: dict[tuple[int, int], list[int]] = {}
    for i, ps in enumerate(pairs):
        for q in ps:
            cover.setdefault(q, []).append(i)
    role = ["lone"] * len(merged)
    shared = sorted({i for v in cover.values() if len(v) > 1 for i in v})
    for i in shared:
        if any(len(cover[q]) != 2 for q in pairs[i]):  # some pairs alone, or under three
            _refuse(merged, cover, min(q for q in pairs[i] if len(cover[q]) > 1), path)
    chains: list[tuple[int, int]] = []
    for start in shared:
        if role[start] != "lone":
            continue
        part, edges = _component(start, pairs, cover)
        for start_first in (True, False):
            side = _sides(start, part, edges, start_first)
            oriented = [(a, b) if side[a] else (b, a) for a, b in edges]
            if all(side[a] != side[b] and _chainable(merged[a], merged[b], pairs[a] & pairs[b])
                   for a, b in oriented):  # two layers, every chain carrying only its pairs
                break
        else:
            a, b = edges[0]
            _refuse(merged, cover, min(pairs[a] & pairs[b]), path)
        for i in part:
            role[i] = "first" if side[i] else "second"
        chains += oriented
    return role, sorted(chains)


def _component(start: int, pairs: list[set], cover: dict) -> tuple[list[int], list]:
    """The switches sharing pairs with ``start``, directly or not, and the
    shared-pair edges among them."""
    part, todo, edges = {start}, [start], set()
    while todo:
        i = todo.pop()
        for q in pairs[i]:
            for j in cover[q]:
                if j != i:
                    edges.add((min(i, j), max(i, j)))
                    if j not in part:
                        part.add(j)
                        todo.append(j)
    return sorted(part), sorted(edges)


def _sides(start: int, part: list[int], edges: list, start_first: bool) -> dict[int, bool]:
    """Two-colour ``part`` along ``edges`` (True: the first layer)."""
    side = {start: start_first}
    changed = True
    while changed:
        changed = False
        for a, b in edges:
            for x, y in ((a, b), (b, a)):
                if x in side and y not in side:
                    side[y] = not side[x]
                    changed = True
    return side


def _chainable(first: tuple, second: tuple, both: set) -> bool:
    """Whether every pair from ``first``'s sources to ``second``'s
    destinations is under both switches (so the chain carries no other)."""
    return all(s == d or (s, d) in both for s in first[1] for d in second[2])


def _refuse(merged: list, cover: dict, pair: tuple[int, int], path: str) -> None:
    names = " and ".join(f"switches[{merged[i][0]}]" for i in cover[pair])
    raise SpecError(path, f"field 'switches': rank {pair[0]} -> rank {pair[1]} is under "
                    f"{names}, which colc cannot chain (every cap holds at once; colc chains "
                    f"out-switches into in-switches whose pairs they all share, as "
                    f"msccl-tools' hub and spoke)")


def _count(v: object, path: str, field: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise SpecError(path, f"field '{field}': must be an integer >= 0, got {show(v)}")
    return v


def _ranks(v: object, n: int, path: str, field: str) -> list[int]:
    if not isinstance(v, list) or not v:
        raise SpecError(path, f"field '{field}': must be a non-empty list of ranks")
    out = []
    for r in v:
        if isinstance(r, bool) or not isinstance(r, int) or not 0 <= r < n:
            raise SpecError(path, f"field '{field}': rank {show(r)} is not in 0..{n - 1}")
        out.append(r)
    return sorted(set(out))


def _fresh(name: str, used: set[str]) -> str:
    out, k = name, 1
    while out in used:
        k += 1
        out = f"{name}~{k}"
    used.add(out)
    return out
