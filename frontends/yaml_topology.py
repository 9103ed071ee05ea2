"""YAML topology frontend: file in, validated ``Topology`` out.

Two forms are accepted.  The explicit form lists nodes and directed links::

    name: ring-4                      # optional, default: file stem
    nodes:
      - {id: g0, kind: gpu}           # gpu|cpu|npu|compute are ranks, in file order
      - {id: sw0, kind: switch}       # switch|nic forward; switches may say multicast: true
      - {id: ib, kind: switch, net: true}  # a network switch: NET transport (NIC-proxied)
    links:
      - {src: g0, dst: sw0, bandwidth: 25}                          # directed, GB/s
      - {src: g1, dst: g2, bandwidth: 25, duplex: true, latency: 1.5}  # both ways; us

A link listed twice is two parallel links (their bandwidths add).  The family
form names a generator from ``colc.frontends.families``::

    family: torus
    dims: [3, 5]
    bandwidth: 10

Numbers (``bandwidth``, ``latency``) may be integers, decimals or strings
holding a fraction such as ``"25/2"``; they are stored exactly as
``Fraction`` (a float goes through its decimal text, so 12.5 is 25/2).

Every problem raises ``SpecError`` (or ``TopologyError`` for an unreachable
rank) whose message is one line ``path:LINE: error: field 'links[3].bandwidth':
must be > 0, got -5``.  Line numbers come from the YAML node tree
(``yaml.compose``), so each mapping, list item and key knows where it starts.

Inputs are bounded before anything big is built (``colc.frontends.limits``):
a regular file of at most 16 MiB in UTF-8 without control characters; YAML
of at most 1,000,000 values with aliases expanded and 32 levels of nesting
(``colc.frontends._yaml_guard``); at most 4096 ranks, 16384 nodes and
1048576 directed links; bandwidths from 1e-6 to 1e9 GB/s whose largest is at
most 1e9 times their greatest common divisor; latencies 0 or from 1e-6 to
1e9 us; and at least 2 ranks.

Example
-------
>>> t = parse_topology_text('''
... nodes: [{id: a, kind: gpu}, {id: b, kind: gpu}]
... links: [{src: a, dst: b, bandwidth: "25/2", duplex: true}]
... ''', "pair.yaml")
>>> t.name, t.ranks, t.capacity()[("b", "a")]
('pair', ('a', 'b'), Fraction(25, 2))
"""

from __future__ import annotations

import re
from fractions import Fraction
from pathlib import Path

import yaml

from colc.errors import SpecError
from colc.ir.topology import COMPUTE_KINDS, SWITCH_KINDS, Link, Node, Topology

from ._input import decode_text, read_input
from ._values import FieldError, bool_value, clip, show, str_value
from ._yaml_guard import compose_node, one_line, yaml_error
from .families import build_family
from .limits import bandwidth_value, check_links, check_nodes, check_ranks, latency_value
from .validate import remember_node_lines, validate_topology

_INT, _FLOAT = "tag:yaml.org,2002:int", "tag:yaml.org,2002:float"
#: A plain integer YAML 1.1 reads as octal (a leading 0); one with a colon
#: it reads in base 60.  A topology means neither.
_OCTAL = re.compile(r"[-+]?0[0-7_]+$")
#: The tag YAML resolves a plain ``<<`` key to (a merge of mappings).
_MERGE = "tag:yaml.org,2002:merge"
_EXPLICIT_KEYS = ("name", "hardware", "nodes", "links")
#: What ``hardware:`` may name: the machines of the hardware families, whose
#: runtime cost model the topology then takes (``Topology.hardware``).
HARDWARE = ("a100", "h100", "mi250")
_NODE_KEYS = ("id", "kind", "multicast", "net")
_LINK_KEYS = ("src", "dst", "bandwidth", "duplex", "latency")
_KINDS = tuple(sorted(COMPUTE_KINDS | SWITCH_KINDS))


def load_topology(path: str) -> Topology:
    """Read, parse and validate a topology file.

    Parameters
    ----------
    path : str
        A YAML file in the explicit or the family form.

    Returns
    -------
    Topology
        The validated topology; ``source`` is ``path``.

    Raises
    ------
    SpecError
        Unreadable file (or not a regular file, or larger than 16 MiB), not
        UTF-8 text, malformed or unbounded YAML, or an invalid field (the
        message names the file, the line and the field).
    TopologyError
        Some rank cannot reach another rank.
    """
    return parse_topology_text(decode_text(read_input(path), path), path)


def parse_topology_text(text: str, path: str = "<string>") -> Topology:
    """Parse and validate a topology given as YAML text.

    Parameters
    ----------
    text : str
        YAML document.
    path : str
        Name used in messages and as the default topology name (its stem).

    Returns
    -------
    Topology
        The validated topology.

    Raises
    ------
    SpecError
        Malformed or unbounded YAML (see ``colc.frontends._yaml_guard``) or
        an invalid field.
    TopologyError
        Some rank cannot reach another rank.
    """
    root, loader = compose_node(text, path)
    try:
        return _Parser(path, loader).topology(root)
    finally:
        loader.dispose()


def top_level(text: str, path: str) -> tuple[dict[str, object], dict[str, int]]:
    """The top-level mapping of a YAML document (the NCCL wrapper's), with
    its keys' lines: duplicate keys refused and merge keys resolved as for
    a topology.

    Raises
    ------
    SpecError
        Malformed YAML, a duplicate key, or a top level that is not a mapping.
    """
    root, loader = compose_node(text, path)
    try:
        if not isinstance(root, yaml.MappingNode):
            raise SpecError(path, "top level must be a mapping")
        return _Parser(path, loader).values(root)
    finally:
        loader.dispose()


def _line(node: yaml.Node) -> int:
    return node.start_mark.line + 1


class _Parser:
    """Walks the composed YAML node tree, keeping line numbers for messages."""

    def __init__(self, path: str, loader: yaml.SafeLoader) -> None:
        self.path = path
        self.loader = loader
        self._merged: dict[int, int] = {}  # id of a flattened mapping -> its merged pairs

    # ---------------------------------------------------------------- primitives

    def value(self, node: yaml.Node) -> object:
        """Construct the plain Python value of ``node``.

        YAML 1.1 reads a plain ``010`` as octal 8 and ``1:30`` as base 60
        (90); a topology means neither, so those spellings are refused.
        """
        self._decimal(node)
        try:
            return self.loader.construct_object(node, deep=True)
        except yaml.MarkedYAMLError as err:
            raise yaml_error(self.path, err) from None
        except (ValueError, OverflowError) as err:  # e.g. a timestamp 2024-13-45
            raise SpecError(self.path, f"invalid value {node.value!r:.60}: {one_line(str(err))}",
                            _line(node)) from None

    def _decimal(self, node: yaml.Node) -> None:
        """Refuse plain numbers in ``node`` (a list's or mapping's too) that
        YAML 1.1 reads in octal or base 60."""
        stack = [node]
        while stack:
            n = stack.pop()
            if isinstance(n, yaml.SequenceNode):
                stack.extend(n.value)
            elif isinstance(n, yaml.MappingNode):
                stack.extend(v for _, v in n.value)
            elif not n.style:  # a plain scalar (the C parser's style is "", Python's None)
                base = ("a base-60" if n.tag in (_INT, _FLOAT) and ":" in n.value else
                        "an octal" if n.tag == _INT and _OCTAL.match(n.value) else "")
                if base:
                    raise SpecError(self.path, f"{n.value!r:.40} reads as {base} number in "
                                    f"YAML 1.1 ({self.loader.construct_object(n)}); write "
                                    f"the number in decimal, or quote it for a string",
                                    _line(n))

    def describe(self, node: yaml.Node) -> str:
        if isinstance(node, yaml.MappingNode):
            return "a mapping"
        if isinstance(node, yaml.SequenceNode):
            return "a list"
        return show(self.value(node))

    def mapping(
        self, node: yaml.Node, field: str, allowed: tuple[str, ...] | None, hint: str = ""
    ) -> dict[str, tuple[yaml.Node, yaml.Node]]:
        """Key -> (key node, value node); rejects non-mappings, duplicates and unknown keys.

        ``allowed=None`` admits every key (the caller checks them).
        """
        if not isinstance(node, yaml.MappingNode):
            raise FieldError(
                self.path, field, f"must be a mapping, got {self.describe(node)}", _line(node)
            )
        merged = self._flatten(node)
        out: dict[str, tuple[yaml.Node, yaml.Node]] = {}
        at: dict[str, int] = {}
        for i, (key_node, value_node) in enumerate(node.value):
            key = self.value(key_node) if isinstance(key_node, yaml.ScalarNode) else None
            if not isinstance(key, str):
                raise SpecError(
                    self.path, f"{self._in(field)}keys must be strings, got "
                    f"{self.describe(key_node)}", _line(key_node),
                )
            if key in out and at[key] >= merged:  # two of the mapping's own
                raise SpecError(
                    self.path, f"{self._in(field)}duplicate key '{clip(key)}' "
                    f"(first at line {_line(out[key][0])})", _line(key_node),
                )
            if allowed is not None and key not in allowed:
                raise SpecError(
                    self.path, f"{self._in(field)}unknown key '{clip(key)}'; allowed: "
                    f"{hint or ', '.join(allowed)}", _line(key_node),
                )
            out[key] = (key_node, value_node)  # a later merge or the own key wins
            at[key] = i
        return out

    def _flatten(self, node: yaml.MappingNode) -> int:
        """Resolve ``node``'s merge keys (``<<``) in place, as YAML does;
        returns how many pairs came from merges (they come first, and the
        mapping's own keys override them)."""
        if id(node) in self._merged:
            return self._merged[id(node)]
        for key, value in node.value:  # merged mappings first: flattening them is counted
            if key.tag == _MERGE:
                for sub in (value.value if isinstance(value, yaml.SequenceNode) else [value]):
                    if isinstance(sub, yaml.MappingNode):
                        self._flatten(sub)
        own = sum(1 for k, _ in node.value if k.tag != _MERGE)
        try:
            self.loader.flatten_mapping(node)
        except yaml.MarkedYAMLError as err:
            raise yaml_error(self.path, err) from None
        self._merged[id(node)] = len(node.value) - own
        return self._merged[id(node)]

    @staticmethod
    def _in(field: str) -> str:
        return f"field '{field}': " if field else ""

    def sequence(self, node: yaml.Node, field: str) -> list[yaml.Node]:
        if not isinstance(node, yaml.SequenceNode):
            raise FieldError(
                self.path, field, f"must be a list, got {self.describe(node)}", _line(node)
            )
        return list(node.value)

    def require(
        self, items: dict[str, tuple[yaml.Node, yaml.Node]], key: str, field: str,
        where: yaml.Node,
    ) -> yaml.Node:
        if key not in items:
            raise FieldError(self.path, field, "missing", _line(where))
        return items[key][1]

    # ---------------------------------------------------------------- forms

    def topology(self, root: yaml.Node | None) -> Topology:
        if root is None:
            raise SpecError(
                self.path, "empty file; expected a mapping with 'nodes' and 'links', "
                "or with 'family'",
            )
        if not isinstance(root, yaml.MappingNode):
            raise SpecError(
                self.path, "the file must be a mapping with 'nodes' and 'links', "
                f"or with 'family'; got {self.describe(root)}", _line(root),
            )
        self._flatten(root)
        keys = {self.value(k) for k, _ in root.value if isinstance(k, yaml.ScalarNode)}
        if "family" in keys:
            return self.family(root)
        return self.explicit(root)

    def values(self, root: yaml.Node) -> tuple[dict[str, object], dict[str, int]]:
        """The top-level mapping's values and their keys' lines (``key[i]``
        for a list's items); duplicate and non-string keys are refused, the
        caller checks the key set."""
        items = self.mapping(root, "", None)
        values: dict[str, object] = {}
        lines: dict[str, int] = {}
        for key, (key_node, value_node) in items.items():
            values[key] = self.value(value_node)
            lines[key] = _line(key_node)
            if isinstance(value_node, yaml.SequenceNode):
                for i, item in enumerate(value_node.value):
                    lines[f"{key}[{i}]"] = _line(item)
        return values, lines

    def family(self, root: yaml.MappingNode) -> Topology:
        values, lines = self.values(root)
        topo = build_family(values, self.path, lines=lines, line=_line(root))
        # Problems with a generated node can only be traced to the family line.
        node_lines = {n.id: lines["family"] for n in topo.nodes}
        validate_topology(topo, self.path, node_lines=node_lines)
        remember_node_lines(topo, node_lines)
        return topo

    def explicit(self, root: yaml.MappingNode) -> Topology:
        top = self.mapping(
            root, "", _EXPLICIT_KEYS,
            hint="name, hardware, nodes, links (explicit form) or family (family form)",
        )
        name = Path(self.path).stem
        if "name" in top:
            name = str_value(
                self.value(top["name"][1]), path=self.path, field="name",
                line=_line(top["name"][1]),
            )
        hardware = ""
        if "hardware" in top:
            hardware = str_value(
                self.value(top["hardware"][1]), path=self.path, field="hardware",
                line=_line(top["hardware"][1]),
            )
            if hardware not in HARDWARE:
                raise SpecError(self.path, f"field 'hardware': unknown machine "
                                f"{show(hardware)}; allowed: {', '.join(HARDWARE)}",
                                _line(top["hardware"][1]))
        nodes_node = self.require(top, "nodes", "nodes", root)
        links_node = self.require(top, "links", "links", root)
        nodes, node_lines = self.nodes(nodes_node)
        links, link_where = self.links(links_node, node_lines)
        topo = Topology(name, tuple(nodes), tuple(links), self.path, hardware)
        validate_topology(topo, self.path, node_lines=node_lines, link_where=link_where)
        remember_node_lines(topo, node_lines)
        return topo

    def nodes(self, seq_node: yaml.Node) -> tuple[list[Node], dict[str, int]]:
        nodes: list[Node] = []
        node_lines: dict[str, int] = {}
        items = self.sequence(seq_node, "nodes")
        check_nodes(len(items), path=self.path, field="nodes", line=_line(seq_node))
        for i, item in enumerate(items):
            f = f"nodes[{i}]"
            m = self.mapping(item, f, _NODE_KEYS)
            id_node = self.require(m, "id", f"{f}.id", item)
            node_id = str_value(self.value(id_node), path=self.path, field=f"{f}.id",
                                line=_line(id_node))
            if node_id in node_lines:
                raise FieldError(
                    self.path, f"{f}.id",
                    f"duplicate id '{node_id}' (first defined at line {node_lines[node_id]})",
                    _line(id_node),
                )
            kind_node = self.require(m, "kind", f"{f}.kind", item)
            kind = self.value(kind_node)
            if kind not in _KINDS:
                raise FieldError(
                    self.path, f"{f}.kind",
                    f"unknown kind {show(kind)}; allowed: {', '.join(_KINDS)}",
                    _line(kind_node),
                )
            multicast = False
            if "multicast" in m:
                mc_node = m["multicast"][1]
                multicast = bool_value(self.value(mc_node), path=self.path,
                                       field=f"{f}.multicast", line=_line(mc_node))
                if multicast and kind != "switch":
                    raise FieldError(
                        self.path, f"{f}.multicast",
                        f"only a switch can multicast, but '{node_id}' is a {kind}",
                        _line(mc_node),
                    )
            net = False
            if "net" in m:
                net_node = m["net"][1]
                net = bool_value(self.value(net_node), path=self.path, field=f"{f}.net",
                                 line=_line(net_node))
                if net and kind not in ("switch", "nic"):
                    raise FieldError(self.path, f"{f}.net",
                                     f"only a switch or nic can be a network node, but "
                                     f"'{node_id}' is a {kind}", _line(net_node))
            node_lines[node_id] = _line(item)
            nodes.append(Node(node_id, str(kind), multicast, net))
        if not any(n.is_compute for n in nodes):
            raise FieldError(
                self.path, "nodes",
                f"no compute node (need at least one of kind {', '.join(sorted(COMPUTE_KINDS))})",
                _line(seq_node),
            )
        check_ranks(sum(n.is_compute for n in nodes), path=self.path, field="nodes",
                    line=_line(seq_node))
        return nodes, node_lines

    def links(
        self, seq_node: yaml.Node, node_lines: dict[str, int]
    ) -> tuple[list[Link], list[tuple[str, int]]]:
        """The directed links, and for each its bandwidth field and line (for later messages)."""
        items = self.sequence(seq_node, "links")
        check_links(len(items), path=self.path, field="links", line=_line(seq_node))
        links: list[Link] = []
        where: list[tuple[str, int]] = []
        for i, item in enumerate(items):
            link, duplex = self.link(item, f"links[{i}]", node_lines)
            links.append(link)
            if duplex:
                links.append(Link(link.dst, link.src, link.bandwidth, link.latency))
            where += [(f"field 'links[{i}].bandwidth'", _line(item))] * (1 + duplex)
        check_links(len(links), path=self.path, field="links", line=_line(seq_node),
                    detail="with duplex links counted twice, ")
        return links, where

    def link(self, item: yaml.Node, f: str, node_lines: dict[str, int]) -> tuple[Link, bool]:
        """One list item of ``links``: the link and whether it is duplex."""
        m = self.mapping(item, f, _LINK_KEYS)
        ends: list[str] = []
        for key in ("src", "dst"):
            end_node = self.require(m, key, f"{f}.{key}", item)
            end = self.value(end_node)
            if not isinstance(end, str) or end not in node_lines:
                raise FieldError(self.path, f"{f}.{key}", f"unknown node {show(end)}",
                                 _line(end_node))
            ends.append(end)
        src, dst = ends
        if src == dst:
            raise FieldError(self.path, f"{f}.dst", f"a link from '{src}' to itself",
                             _line(m["dst"][1]))
        bw_node = self.require(m, "bandwidth", f"{f}.bandwidth", item)
        bandwidth = bandwidth_value(self.value(bw_node), path=self.path,
                                    field=f"{f}.bandwidth", line=_line(bw_node))
        latency = Fraction(0)
        if "latency" in m:
            lat_node = m["latency"][1]
            latency = latency_value(self.value(lat_node), path=self.path,
                                    field=f"{f}.latency", line=_line(lat_node))
        duplex = False
        if "duplex" in m:
            dup_node = m["duplex"][1]
            duplex = bool_value(self.value(dup_node), path=self.path, field=f"{f}.duplex",
                                line=_line(dup_node))
        return Link(src, dst, bandwidth, latency), duplex
