"""Write a ``Topology`` as colc's explicit YAML form (``colc convert``).

Output: ``name``, ``nodes: [{id, kind[, multicast][, net]}]`` in node order (so
ranks keep their order) and ``links: [{src, dst, bandwidth[, latency][,
duplex]}]`` in link order.  Two consecutive links that are each other's
reverse with equal bandwidth and latency are written once with
``duplex: true`` (the parser expands that back to the same two links, in the
same order), so parsing the text gives back an equal ``Topology``.
Bandwidths and latencies are integers when whole, else ``"p/q"`` strings.
Ids and names are quoted with JSON string syntax (valid YAML flow scalars),
but for characters past U+FFFF, which JSON writes as a surrogate pair and
YAML would read back as two lone surrogates: those are written ``\\UXXXXXXXX``.

Example
-------
>>> from fractions import Fraction
>>> from colc.ir.topology import Link, Node, Topology
>>> t = Topology("pair", (Node("a", "gpu"), Node("b", "gpu")),
...              (Link("a", "b", Fraction(25, 2)), Link("b", "a", Fraction(25, 2))))
>>> print(topology_to_yaml(t), end="")
name: "pair"
nodes:
  - {id: "a", kind: gpu}
  - {id: "b", kind: gpu}
links:
  - {src: "a", dst: "b", bandwidth: "25/2", duplex: true}
"""

from __future__ import annotations

import json
from fractions import Fraction

from colc.ir.topology import Link, Topology


def _quoted(text: str) -> str:
    r"""``text`` as a double-quoted YAML scalar, in ASCII.

    >>> print(_quoted("e\U0001F680 \u00e9"))
    "e\U0001f680 \u00e9"
    """
    body = json.dumps(text, ensure_ascii=False)
    return "".join(c if ord(c) < 0x80 else
                   (f"\\u{ord(c):04x}" if ord(c) <= 0xFFFF else f"\\U{ord(c):08x}")
                   for c in body)


def _num(x: Fraction) -> str:
    return str(x.numerator) if x.denominator == 1 else f'"{x.numerator}/{x.denominator}"'


def _link(link: Link, duplex: bool) -> str:
    parts = [f"src: {_quoted(link.src)}", f"dst: {_quoted(link.dst)}",
             f"bandwidth: {_num(link.bandwidth)}"]
    if link.latency:
        parts.append(f"latency: {_num(link.latency)}")
    if duplex:
        parts.append("duplex: true")
    return "  - {" + ", ".join(parts) + "}"


def topology_to_yaml(topo: Topology) -> str:
    """Render ``topo`` in the explicit YAML form.

    Parameters
    ----------
    topo : Topology

    Returns
    -------
    str
        YAML text ending with a newline; deterministic.
    """
    out = [f"name: {_quoted(topo.name)}"]
    if topo.hardware:  # the machine whose cost model it takes (a hardware family's)
        out.append(f"hardware: {_quoted(topo.hardware)}")
    out.append("nodes:")
    for n in topo.nodes:
        extra = (", multicast: true" if n.multicast else "") + (", net: true" if n.net else "")
        out.append(f"  - {{id: {_quoted(n.id)}, kind: {n.kind}{extra}}}")
    out.append("links:" if topo.links else "links: []")
    links = topo.links
    i = 0
    while i < len(links):
        a = links[i]
        b = links[i + 1] if i + 1 < len(links) else None
        if (b is not None and (b.src, b.dst) == (a.dst, a.src)
                and b.bandwidth == a.bandwidth and b.latency == a.latency):
            out.append(_link(a, True))
            i += 2
        else:
            out.append(_link(a, False))
            i += 1
    return "\n".join(out) + "\n"
