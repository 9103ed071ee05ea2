"""TACCL topology ("profile") JSON and communication-sketch JSON frontend.

Topology forms (``taccl/examples/topo``; peer survey section 2.2):

* custom: ``{"name", "gpus_per_node": N, "links": [[..]] (links[dst][src] =
  1 when a link exists), "betas": [[..]] or "invbws": [[..]], "alpha",
  "nics_per_node", "remote_alpha", "remote_beta", "remote_invbw"}``;
* named profiles without ``links``: ``name`` starting with ``NDv2`` (the
  DGX-1 hybrid cube-mesh, ``node_betas_list = [fast, slow]`` for the
  double/single NVLink pairs), ``DGX2`` or ``HubAndSpoke`` (one NVSwitch,
  ``node_betas_list[0]``).

Costs are microseconds per MB, so a beta ``b`` is ``1000 / b`` GB/s (for
``invbws``, ``invbw - alpha`` is used as the beta).  A profile whose name
ends in another size (TACCL's ``NDv2_1KB``, ``NDv2_32KB``) holds costs per
chunk of that size, scaled at will for TACCL's solver (its INPUT_GUIDE), so
only their ratios carry over: it is read the same way, with a warning in
``Topology.notes``.  With a sketch file,
``nnodes`` boxes are built (ranks box-major, ids ``b{b}g{i}``); boxes are
joined by one switch ``ib`` with each GPU's share of the node's NICs
(``nics_per_node * 1000 / remote_beta / gpus_per_node`` GB/s).  The other
sketch fields steer TACCL's solver and are checked for shape only.

Example
-------
>>> import json, tempfile, os
>>> d = tempfile.mkdtemp(); p = os.path.join(d, "t.json")
>>> _ = open(p, "w").write(json.dumps({"name": "HubAndSpoke_1MB", "gpus_per_node": 4,
...     "alpha": 0.3, "node_betas_list": [40], "node_invbws_list": [40.3]}))
>>> load_taccl_topology(p).capacity()[("b0g0", "b0nvs")]
Fraction(25, 1)
"""

from __future__ import annotations

import re
from fractions import Fraction

from colc.errors import SpecError
from colc.ir.topology import Link, Node, Topology

from ._json import load_json, matrix
from ._values import FieldError, fraction_value, show, str_value
from .limits import MAX_BANDWIDTH, MIN_BANDWIDTH, approx, check_ranks
from .validate import validate_topology

#: The DGX-1 / NDv2 NVLink pattern: 2 = double (fast) link, 1 = single (slow).
NDV2_PATTERN = (
    (0, 2, 1, 1, 2, 0, 0, 0), (2, 0, 1, 2, 0, 1, 0, 0), (1, 1, 0, 2, 0, 0, 2, 0),
    (1, 2, 2, 0, 0, 0, 0, 1), (2, 0, 0, 0, 0, 2, 1, 1), (0, 1, 0, 0, 2, 0, 1, 2),
    (0, 0, 2, 0, 1, 1, 0, 2), (0, 0, 0, 1, 1, 2, 2, 0),
)

_MAX_NODES = 4096

#: A size at the end of a profile's name (TACCL's examples: ``NDv2_1KB``).
_SIZE_SUFFIX = re.compile(r"[_-](\d+)\s*([KM]?B)$", re.IGNORECASE)


def _bw(beta: object, path: str, field: str) -> Fraction:
    """GB/s of a beta (us per MB), within the bandwidths colc takes."""
    bw = Fraction(1000) / fraction_value(beta, path=path, field=field)
    if not MIN_BANDWIDTH <= bw <= MAX_BANDWIDTH:
        shown = approx(beta) if isinstance(beta, Fraction) else show(beta)
        raise FieldError(path, field, f"{shown} us/MB is {approx(bw)} GB/s; colc takes "
                         f"{approx(MIN_BANDWIDTH)} to {approx(MAX_BANDWIDTH)} GB/s")
    return bw


def load_taccl_topology(path: str, sketch: str | None = None, nnodes: int | None = None
                        ) -> Topology:
    """Read a TACCL topology JSON file, optionally with its sketch.

    Parameters
    ----------
    path : str
        Topology ("profile") JSON.
    sketch : str or None
        Communication-sketch JSON; gives the number of nodes.
    nnodes : int or None
        Number of nodes, overriding the sketch (``--boxes``, named so in
        messages).

    Returns
    -------
    Topology
        Validated.

    Raises
    ------
    SpecError
        Malformed JSON or a missing/invalid field (named in the message).
    """
    doc = load_json(path)
    if not isinstance(doc, dict):
        raise SpecError(path, "top level must be a JSON object")
    nodes_field = "gpus_per_node" if nnodes is None else "--boxes"
    if nnodes is None:
        nnodes = load_taccl_sketch(sketch) if sketch is not None else 1
    if isinstance(nnodes, bool) or not isinstance(nnodes, int) or not 1 <= nnodes <= _MAX_NODES:
        raise SpecError(path, f"--boxes must be an integer in 1..{_MAX_NODES}, got {nnodes!r}")
    if "name" not in doc:
        raise SpecError(path, "field 'name': missing")
    name = str_value(doc["name"], path=path, field="name")
    gpn = doc.get("gpus_per_node")
    if isinstance(gpn, bool) or not isinstance(gpn, int) or not 1 <= gpn <= 1024:
        raise SpecError(path, f"field 'gpus_per_node': must be an integer in 1..1024, got {gpn!r}")
    check_ranks(nnodes * gpn, path=path, field=nodes_field,
                detail=f"{nnodes} nodes x {gpn} GPUs = ")
    intra, hub = _intra(doc, name, gpn, path)
    nodes: list[Node] = []
    links: list[Link] = []
    for b in range(nnodes):
        ids = [f"b{b}g{i}" for i in range(gpn)]
        nodes += [Node(g, "gpu") for g in ids]
        if hub is not None:
            nodes.append(Node(f"b{b}nvs", "switch"))
            for g in ids:
                links += [Link(g, f"b{b}nvs", hub), Link(f"b{b}nvs", g, hub)]
        links += [Link(ids[s], ids[d], bw) for s, d, bw in intra]
    share = _nic_share(doc, path, gpn)  # checked on one node too: --boxes makes more
    if nnodes > 1:
        if share is None:
            raise SpecError(path, "field 'remote_beta': missing (needed for more than one node)")
        nodes.append(Node("ib", "switch", net=True))
        for b in range(nnodes):
            for i in range(gpn):
                links += [Link(f"b{b}g{i}", "ib", share), Link("ib", f"b{b}g{i}", share)]
    topo = Topology(name if nnodes == 1 else f"{name}-x{nnodes}", tuple(nodes), tuple(links),
                    path, notes=_size_notes(name, path, links))
    validate_topology(topo, path, ranks_from="field 'gpus_per_node'",
                      fewer=" (--boxes N, or a sketch's nnodes, joins N nodes)")
    return topo


def profile_size(name: str) -> str | None:
    """The chunk size a TACCL profile's name ends with (``NDv2_32KB``), if any.

    Only B, KB and MB count (a name ending in ``80GB`` names a GPU's memory),
    and 1024KB is 1MB.

    >>> profile_size("NDv2_32KB"), profile_size("DGX2-1mb"), profile_size("custom")
    ('32KB', '1MB', None)
    >>> profile_size("NDv4_A100_80GB"), profile_size("x_1024KB")
    (None, '1MB')
    """
    found = _SIZE_SUFFIX.search(name)
    if not found:
        return None
    number, unit = int(found.group(1)), found.group(2).upper()
    if (unit, number) in (("KB", 1024), ("B", 1 << 20)):
        return "1MB"
    return f"{number}{unit}"


def _size_notes(name: str, path: str, links: list[Link]) -> tuple[str, ...]:
    """A warning for a profile measured at another size than 1 MB: its costs
    are per chunk of that size and scaled for TACCL's solver, so only their
    ratios carry over (TACCL's INPUT_GUIDE)."""
    size = profile_size(name)
    if size is None or size == "1MB":
        return ()
    rates = sorted({link.bandwidth for link in links}, reverse=True)
    shown = ", ".join(approx(r) for r in rates[:3]) + (", ..." if len(rates) > 3 else "")
    return (f"{path}: TACCL profile '{name}' has costs for {size} chunks, which TACCL scales "
            f"at will; colc reads them as microseconds per MB, so its links run at {shown} "
            f"GB/s: the schedules follow the links' ratios, but predicted GB/s and size "
            f"windows are only right for a 1MB profile (or a YAML topology)",)


def _intra(doc: dict, name: str, gpn: int, path: str
           ) -> tuple[list[tuple[int, int, Fraction]], Fraction | None]:
    """Intra-node links (src, dst, GB/s) and the NVSwitch bandwidth, if any."""
    if "links" in doc:
        m = matrix(doc["links"], path, "links", gpn)
        if "betas" in doc:
            costs = matrix(doc["betas"], path, "betas", gpn)
            if "alpha" in doc:  # checked, not used: betas are the whole cost
                fraction_value(doc["alpha"], path=path, field="alpha", minimum="nonnegative")
            alpha = Fraction(0)
            field = "betas"
        elif "invbws" in doc:
            costs = matrix(doc["invbws"], path, "invbws", gpn)
            alpha = fraction_value(doc.get("alpha", 0), path=path, field="alpha",
                                   minimum="nonnegative")
            field = "invbws"
        else:
            raise SpecError(path, "field 'betas' (or 'invbws'): missing for a custom topology")
        out = []
        for d in range(gpn):
            for s in range(gpn):
                if m[d][s] not in (0, 1):
                    raise SpecError(path, f"field 'links[{d}][{s}]': must be 0 or 1, got "
                                    f"{m[d][s]!r}")
                if m[d][s] and s != d:
                    beta = fraction_value(costs[d][s], path=path, field=f"{field}[{d}][{s}]")
                    if beta - alpha <= 0:
                        raise SpecError(path, f"field '{field}[{d}][{s}]': must exceed alpha")
                    out.append((s, d, _bw(beta - alpha, path, f"{field}[{d}][{s}]")))
        return out, None
    betas = doc.get("node_betas_list")
    if not isinstance(betas, list) or not betas:
        raise SpecError(path, "field 'node_betas_list': missing or empty (and no 'links')")
    if name.startswith("NDv2"):
        if gpn != 8 or len(betas) < 2:
            raise SpecError(path, "NDv2 profiles need gpus_per_node 8 and node_betas_list "
                            "[fast, slow]")
        fast = _bw(betas[0], path, "node_betas_list[0]")
        slow = _bw(betas[1], path, "node_betas_list[1]")
        return [(s, d, fast if NDV2_PATTERN[s][d] == 2 else slow)
                for s in range(8) for d in range(8) if NDV2_PATTERN[s][d]], None
    if name.startswith(("DGX2", "HubAndSpoke")):
        return [], _bw(betas[0], path, "node_betas_list[0]")
    raise SpecError(path, f"field 'name': {name!r} is not a known TACCL profile (NDv2*, DGX2*, "
                    "HubAndSpoke*) and the file has no 'links' matrix")


def _nic_share(doc: dict, path: str, gpn: int) -> Fraction | None:
    """A GPU's share of its node's NICs in GB/s (``nics_per_node`` NICs of
    ``remote_beta`` us/MB over ``gpn`` GPUs), None without ``remote_beta``;
    both fields are checked wherever they are given (a profile read for one
    node was valid, the same profile with ``--boxes 2`` not)."""
    nics = doc.get("nics_per_node", 1)
    if isinstance(nics, bool) or not isinstance(nics, int) or nics < 1:
        raise SpecError(path, f"field 'nics_per_node': must be an integer >= 1, got {nics!r}")
    if "remote_beta" not in doc:
        return None
    share = _bw(doc["remote_beta"], path, "remote_beta") * nics / gpn
    if not MIN_BANDWIDTH <= share <= MAX_BANDWIDTH:
        raise FieldError(path, "remote_beta", f"{show(doc['remote_beta'])} us/MB over "
                         f"{nics} NIC(s) and {gpn} GPUs is {approx(share)} GB/s a GPU; "
                         f"colc takes {approx(MIN_BANDWIDTH)} to {approx(MAX_BANDWIDTH)}")
    return share


def load_taccl_sketch(path: str) -> int:
    """Check a TACCL communication sketch and return its ``nnodes``.

    Parameters
    ----------
    path : str
        Sketch JSON.

    Returns
    -------
    int
        Number of nodes.

    Raises
    ------
    SpecError
        Malformed JSON or fields of the wrong shape.
    """
    doc = load_json(path)
    if not isinstance(doc, dict):
        raise SpecError(path, "top level must be a JSON object")
    n = doc.get("nnodes", 1)
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= _MAX_NODES:
        raise SpecError(path, f"field 'nnodes': must be an integer in 1..{_MAX_NODES}, got {n!r}")
    intra = doc.get("intranode_sketch")
    if intra is not None:
        if not isinstance(intra, dict):
            raise SpecError(path, "field 'intranode_sketch': must be an object")
        strat = intra.get("strategy")
        if strat not in ("switch", "none", "maxmin", "minmax"):
            raise SpecError(path, f"field 'intranode_sketch.strategy': unknown {strat!r}")
    inter = doc.get("internode_sketch")
    if n > 1:
        if not isinstance(inter, dict) or inter.get("strategy") != "relay":
            raise SpecError(path, "field 'internode_sketch.strategy': must be \"relay\" when "
                            "nnodes > 1")
    return n
