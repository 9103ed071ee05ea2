"""Tests for colc.frontends: YAML parsing, families, validation, bad input."""

from __future__ import annotations

from collections import Counter
from fractions import Fraction
from pathlib import Path

import pytest

from colc.errors import ColcError, SpecError, TopologyError
from colc.frontends import check_switch_balance, load_topology, parse_topology_text
from colc.frontends import families as fam
from colc.frontends.families import MI250_ADJACENCY, build_family
from colc.frontends.validate import validate_topology
from colc.ir.topology import Link, Node, Topology

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def out_degrees(t: Topology) -> Counter[str]:
    """Number of distinct out-neighbours per node."""
    return Counter(u for (u, _v) in t.capacity())


def is_symmetric(t: Topology) -> bool:
    cap = t.capacity()
    return all(cap.get((v, u)) == c for (u, v), c in cap.items())


def write(tmp_path: Path, name: str, text: str) -> str:
    p = tmp_path / name
    p.write_text(text)
    return str(p)


# --------------------------------------------------------------------------- families


def test_torus_3x5() -> None:
    t = fam.torus([3, 5], 10)
    assert t.num_ranks == 15 and not t.switches
    assert set(out_degrees(t).values()) == {4}
    assert len(t.links) == 15 * 4
    assert is_symmetric(t)
    assert set(t.capacity().values()) == {Fraction(10)}
    # row-major, last dimension fastest: r0 ~ r1, r4 (wrap), r5, r10 (wrap)
    nbrs = sorted(v for (u, v) in t.capacity() if u == "r0")
    assert nbrs == ["r1", "r10", "r4", "r5"]


def test_torus_length_two_dimension_is_one_link() -> None:
    t = fam.torus([2, 3], 10)
    assert t.num_ranks == 6
    assert set(out_degrees(t).values()) == {3}
    assert t.capacity()[("r0", "r3")] == 10  # not 20: one link, not two
    t3 = fam.torus([3, 3, 2], 1)
    assert set(out_degrees(t3).values()) == {5}


def test_hypercube() -> None:
    t = fam.hypercube(3, "25/2")
    assert t.num_ranks == 8 and len(t.links) == 24
    assert set(out_degrees(t).values()) == {3}
    assert t.capacity()[("r5", "r4")] == Fraction(25, 2)


def test_ring() -> None:
    bi = fam.ring(5, 1)
    assert len(bi.links) == 10 and set(out_degrees(bi).values()) == {2}
    uni = fam.ring(5, 1, bidirectional=False)
    assert len(uni.links) == 5 and ("r4", "r0") in uni.capacity()
    assert not is_symmetric(uni)
    two = fam.ring(2, 3)
    assert two.capacity() == {("r0", "r1"): 3, ("r1", "r0"): 3}


def test_complete_and_bipartite() -> None:
    k5 = fam.complete(5, 1)
    assert set(out_degrees(k5).values()) == {4} and len(k5.links) == 20
    k44 = fam.complete_bipartite(8, 1)
    assert set(out_degrees(k44).values()) == {4}
    assert all((int(u[1:]) < 4) != (int(v[1:]) < 4) for (u, v) in k44.capacity())


def test_circulant() -> None:
    c = fam.circulant(7, [2, 3], 1)
    assert set(out_degrees(c).values()) == {4} and is_symmetric(c)
    # o and n-o are the same link; repeats collapse
    assert fam.circulant(7, [2, 5, 2], 1).capacity() == fam.circulant(7, [2], 1).capacity()
    # o == n/2 gives a single link per pair
    c8 = fam.circulant(8, [1, 4], 1)
    assert set(out_degrees(c8).values()) == {3}
    assert c8.capacity()[("r0", "r4")] == 1


def test_generalized_kautz() -> None:
    t = fam.generalized_kautz(6, 2, 1)  # 6 mod 3 == 0: no self-loops
    assert set(out_degrees(t).values()) == {2}
    for x in range(6):
        want = sorted(f"r{(-2 * x - a) % 6}" for a in (1, 2))
        assert sorted(v for (u, v) in t.capacity() if u == f"r{x}") == want
    assert not is_symmetric(t)
    # Pi_{2,5}: self-loops exist (x = 3: -6-1 = -7 = 3 mod 5) and are skipped
    t5 = fam.generalized_kautz(5, 2, 1)
    assert all(lk.src != lk.dst for lk in t5.links)
    assert out_degrees(t5)["r3"] == 1
    validate_topology(t5, "pi25")


def test_dgx_a100_two_boxes() -> None:
    t = fam.dgx_a100(2)
    assert t.num_ranks == 16
    assert t.switches == ("b0nvs", "b1nvs", "ib0", "ib1")
    assert t.ranks[:8] == tuple(f"b0g{i}" for i in range(8))
    assert t.rank_of["b1g3"] == 1 * 8 + 3
    cap = t.capacity()
    assert cap[("b1g3", "b1nvs")] == cap[("b1nvs", "b1g3")] == 300
    assert cap[("b0g2", "ib0")] == cap[("ib1", "b1g5")] == 25
    assert ("b0g2", "ib1") not in cap and ("b0g0", "b1nvs") not in cap
    assert t.egress("ib0") == t.ingress("ib0") == 8 * 25
    check_switch_balance(t)
    one = fam.dgx_a100(1)
    assert one.switches == ("b0nvs",) and one.num_ranks == 8


def test_dgx_h100() -> None:
    t = fam.dgx_h100(2)
    assert t.switches == ("b0nvs", "b1nvs", "ib")
    cap = t.capacity()
    assert cap[("b0g7", "b0nvs")] == 450 and cap[("ib", "b1g0")] == 50
    assert fam.dgx_h100(1).switches == ("b0nvs",)
    assert fam.dgx_h100(1, multicast=True).node["b0nvs"].multicast


def test_mi250() -> None:
    assert all(sum(row) == 7 for row in MI250_ADJACENCY)
    t = fam.mi250(2)
    assert t.num_ranks == 32 and t.switches == ("ib",)
    assert t.rank_of["b1g0"] == 16
    cap = t.capacity()
    for gpu in t.ranks:
        xgmi = sum(c for (u, v), c in cap.items() if u == gpu and v != "ib")
        assert xgmi == 7 * 50
        assert cap[(gpu, "ib")] == cap[("ib", gpu)] == 16
    assert cap[("b0g0", "b0g1")] == 200 and cap[("b1g8", "b1g12")] == 100
    assert not any(u.startswith("b0") and v.startswith("b1") for (u, v) in cap)
    assert fam.mi250(1).switches == ()


def test_build_family_mapping() -> None:
    t = build_family({"family": "torus", "dims": [3, 5], "bandwidth": 12.5}, "x/t35.yaml")
    assert t.name == "t35" and t.capacity()[("r0", "r1")] == Fraction(25, 2)
    t = build_family({"family": "ring", "ranks": 3, "bandwidth": 1, "latency": "1/2",
                      "name": "tri"}, "r.yaml")
    assert t.name == "tri" and {lk.latency for lk in t.links} == {Fraction(1, 2)}


# --------------------------------------------------------------------------- explicit form


def test_examples_load() -> None:
    names = sorted(p.name for p in EXAMPLES.glob("*.yaml"))
    assert {"ring-4.yaml", "dgx-a100-2.yaml", "torus-3x5.yaml", "switch-tree.yaml",
            "mixed.yaml"} <= set(names)
    for name in names:
        load_topology(str(EXAMPLES / name))
    t = load_topology(str(EXAMPLES / "switch-tree.yaml"))
    assert t.num_ranks == 8 and t.switches == ("s0", "s1", "s2")
    check_switch_balance(t)
    assert load_topology(str(EXAMPLES / "torus-3x5.yaml")).num_ranks == 15


def test_explicit_parse() -> None:
    text = """\
nodes:
  - {id: g0, kind: gpu}
  - {id: sw0, kind: switch, multicast: true}
  - {id: c1, kind: cpu}
  - {id: g2, kind: npu}
links:
  - {src: g0, dst: sw0, bandwidth: 25}
  - {src: sw0, dst: g0, bandwidth: "25/2"}
  - {src: sw0, dst: c1, bandwidth: 12.5}
  - {src: c1, dst: g2, bandwidth: 25, duplex: true, latency: 1.5}
  - {src: g2, dst: g0, bandwidth: 10}
  - {src: g2, dst: g0, bandwidth: 5}
"""
    t = parse_topology_text(text, "/some/dir/my-topo.yaml")
    assert t.name == "my-topo" and t.source == "/some/dir/my-topo.yaml"
    assert t.ranks == ("g0", "c1", "g2") and t.switches == ("sw0",)
    assert t.node["sw0"].multicast
    cap = t.capacity()
    assert cap[("sw0", "g0")] == Fraction(25, 2) == cap[("sw0", "c1")]
    assert cap[("c1", "g2")] == cap[("g2", "c1")] == 25
    assert cap[("g2", "g0")] == 15  # parallel links add
    assert ("g0", "g2") not in cap  # plain links are directed
    assert t.latency()[("g2", "c1")] == Fraction(3, 2)
    assert isinstance(t.links[0].bandwidth, Fraction)


def test_ring4_example() -> None:
    t = load_topology(str(EXAMPLES / "ring-4.yaml"))
    assert t.name == "ring-4" and t.ranks == ("g0", "g1", "g2", "g3")
    assert t.capacity()[("g3", "g0")] == 25 and t.latency()[("g1", "g0")] == Fraction(3, 2)


# --------------------------------------------------------------------------- bad input

TWO = "nodes:\n  - {id: g0, kind: gpu}\n  - {id: g1, kind: gpu}\n"

BAD = {
    # name: (text, line, words that must appear in the message)
    "unknown-key": (TWO + "links: []\ncolour: red\n", 5, ["colour", "allowed"]),
    "unknown-node-key": ("nodes:\n  - {id: g0, kind: gpu, speed: 1}\nlinks: []\n", 2,
                         ["nodes[0]", "speed", "allowed"]),
    "unknown-link-key": (TWO + "links:\n  - {src: g0, dst: g1, bandwidth: 1, bw: 2}\n", 5,
                         ["links[0]", "bw"]),
    "unknown-family-key": ("family: torus\ndims: [3, 3]\nbandwidth: 1\nranks: 9\n", 4,
                           ["ranks", "allowed"]),
    "unknown-family": ("family: moebius\nranks: 4\n", 1, ["'family'", "moebius"]),
    "missing-field": ("nodes:\n  - {id: g0}\nlinks: []\n", 2, ["nodes[0].kind", "missing"]),
    "missing-links": ("nodes:\n  - {id: g0, kind: gpu}\n", 1, ["'links'", "missing"]),
    "missing-family-field": ("family: torus\nbandwidth: 1\n", 1, ["'dims'", "missing"]),
    "unknown-node-in-link": (TWO + "links:\n  - {src: g0, dst: g9, bandwidth: 1}\n", 5,
                             ["links[0].dst", "g9"]),
    "negative-bandwidth": (TWO + "links:\n  - {src: g0, dst: g1, bandwidth: 1, duplex: true}\n"
                           "  - {src: g0, dst: g1,\n     bandwidth: -5}\n", 7,
                           ["links[1].bandwidth", "> 0", "-5"]),
    "zero-bandwidth": (TWO + "links:\n  - {src: g0, dst: g1, bandwidth: 0}\n", 5,
                       ["links[0].bandwidth", "> 0"]),
    "bad-fraction": (TWO + "links:\n  - {src: g0, dst: g1, bandwidth: \"25/0\"}\n", 5,
                     ["links[0].bandwidth"]),
    "family-zero-bandwidth": ("family: ring\nranks: 4\nbandwidth: 0\n", 3, ["'bandwidth'"]),
    "duplicate-ids": (TWO + "  - {id: g0, kind: switch}\nlinks: []\n", 4,
                      ["nodes[2].id", "duplicate", "g0", "line 2"]),
    "no-compute-node": ("nodes:\n  - {id: s, kind: switch}\nlinks: []\n", 2,
                        ["'nodes'", "no compute node"]),
    "unreachable": (TWO + "  - {id: g2, kind: gpu}\nlinks:\n"
                    "  - {src: g0, dst: g1, bandwidth: 1, duplex: true}\n", 4,
                    ["g2", "cannot be reached"]),
    "cannot-reach": (TWO + "links:\n  - {src: g0, dst: g1, bandwidth: 1}\n", 3,
                     ["g1", "cannot reach"]),
    "malformed-yaml": ("nodes: [\n  {id: g0, kind: gpu}\nlinks: []\n", 3, ["malformed YAML"]),
    "malformed-yaml-tab": ("nodes:\n\t- {id: g0}\n", 2, ["malformed YAML"]),
    "duplicate-key": (TWO + "links: []\nlinks: []\n", 5, ["duplicate key", "links"]),
    "torus-dim-1": ("family: torus\ndims:\n  - 3\n  - 1\nbandwidth: 1\n", 4, ["dims[1]", ">= 2"]),
    "hypercube-dim-0": ("family: hypercube\ndim: 0\nbandwidth: 1\n", 2, ["'dim'", ">= 1"]),
    "circulant-offset": ("family: circulant\nranks: 8\noffsets: [1, 8]\nbandwidth: 1\n", 3,
                         ["offsets[1]", "1..7"]),
    "circulant-disconnected": ("family: circulant\nranks: 8\noffsets: [2, 6]\nbandwidth: 1\n",
                               3, ["offsets", "gcd"]),
    "kautz-ranks": ("family: generalized-kautz\nranks: 3\ndegree: 3\nbandwidth: 1\n", 2,
                    ["'ranks'", "> degree"]),
    "kautz-degree": ("family: generalized-kautz\nranks: 3\ndegree: 0\nbandwidth: 1\n", 3,
                     ["'degree'", ">= 1"]),
    "boxes-0": ("family: mi250\nboxes: 0\n", 2, ["'boxes'", ">= 1"]),
    "dgx-bandwidth": ("family: dgx-a100\nboxes: 2\nbandwidth: 10\n", 3,
                      ["bandwidth", "allowed"]),
    "bipartite-odd": ("family: complete-bipartite\nranks: 5\nbandwidth: 1\n", 2,
                      ["'ranks'", "even"]),
    "ranks-not-int": ("family: complete\nranks: four\nbandwidth: 1\n", 2,
                      ["'ranks'", "integer"]),
    "bool-not-number": (TWO + "links:\n  - {src: g0, dst: g1, bandwidth: true}\n", 5,
                        ["links[0].bandwidth", "number"]),
    "self-link": (TWO + "links:\n  - {src: g0, dst: g0, bandwidth: 1}\n", 5, ["links[0].dst"]),
    "multicast-gpu": ("nodes:\n  - {id: g0, kind: gpu, multicast: true}\nlinks: []\n", 2,
                      ["nodes[0].multicast"]),
    "unknown-kind": ("nodes:\n  - {id: g0, kind: tpu}\nlinks: []\n", 2,
                     ["nodes[0].kind", "tpu"]),
    "not-a-mapping": ("- a\n- b\n", 1, ["mapping"]),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input(tmp_path: Path, case: str) -> None:
    text, line, words = BAD[case]
    path = write(tmp_path, f"{case}.yaml", text)
    with pytest.raises(ColcError) as info:
        load_topology(path)
    msg = str(info.value)
    assert "\n" not in msg
    assert msg.startswith(f"{path}:{line}: error: "), msg
    for word in words:
        assert word in msg, (word, msg)
    if isinstance(info.value, SpecError):
        assert info.value.path == path and info.value.line == line


def test_empty_and_missing_file(tmp_path: Path) -> None:
    path = write(tmp_path, "empty.yaml", "")
    with pytest.raises(SpecError, match=r"empty\.yaml: error: empty file"):
        load_topology(path)
    with pytest.raises(SpecError, match="cannot read file"):
        load_topology(str(tmp_path / "nope.yaml"))


def test_switch_balance(tmp_path: Path) -> None:
    path = write(tmp_path, "unbalanced.yaml", TWO + "  - {id: sw, kind: switch}\nlinks:\n"
                 "  - {src: g0, dst: sw, bandwidth: 20}\n  - {src: sw, dst: g0, bandwidth: 10}\n"
                 "  - {src: g1, dst: sw, bandwidth: 10, duplex: true}\n")
    t = load_topology(path)  # loading does not require balance
    with pytest.raises(TopologyError) as info:
        check_switch_balance(t)
    msg = str(info.value)
    assert msg.startswith(f"{path}:4: error: ") and "'sw'" in msg
    assert "30" in msg and "20" in msg
    # compute nodes are only checked on request
    bal = load_topology(str(EXAMPLES / "mixed.yaml"))
    check_switch_balance(bal)
    with pytest.raises(TopologyError, match="node 'g1'"):
        check_switch_balance(bal, all_nodes=True)


def test_validate_programmatic() -> None:
    a, b = Node("a", "gpu"), Node("b", "gpu")
    dup = Topology("d", (a, a), ())
    with pytest.raises(SpecError, match="duplicate node id 'a'"):
        validate_topology(dup, "prog")
    neg = Topology("n", (a, b), (Link("a", "b", Fraction(-1)), Link("b", "a", Fraction(1))))
    with pytest.raises(SpecError, match="bandwidth must be > 0"):
        validate_topology(neg, "prog")
    with pytest.raises(SpecError, match="no compute node"):
        validate_topology(Topology("s", (Node("s", "switch"),), ()), "prog")


def _rccl_dump(adjacency, gcn: str = "910", sm: int = 90) -> str:
    """An RCCL-style topology dump: one GCD per <pci> of class 0x038000, its
    xGMI links as ``<xgmi target count tclass>``, as RCCL writes them."""
    bus = [f"0000:{16 * (i + 1):02x}:00.0" for i in range(len(adjacency))]
    gpus = []
    for i, row in enumerate(adjacency):
        links = "".join(f'<xgmi target="{bus[j]}" count="{c}" tclass="0x038000"/>'
                        for j, c in enumerate(row) if c)
        gpus.append(f'<pci busid="{bus[i]}" class="0x038000" link_speed="32.0 GT/s PCIe" '
                    f'link_width="16"><gpu dev="{i}" sm="{sm}" gcn="{gcn}" rank="{i}" '
                    f'gdr="1">{links}</gpu></pci>')
    return f'<system version="2"><cpu numaid="0">{"".join(gpus)}</cpu></system>'


def test_rccl_dumps_are_read_with_their_xgmi_links() -> None:
    """RCCL writes GPU links as <xgmi>, not <nvlink>: an MI250 dump was
    refused ('have no <nvlink>'), and its sm="90" would have read as an
    H100.  A dump of the MI250 box's xGMI adjacency now reads as the mi250
    family's box, link for link, with its cost model; RCCL's own per-link
    figure under nvlink_bandwidth 'nccl'; an unknown GPU is named."""
    from colc.frontends.nccl_topo_xml import parse_nccl_topo
    from colc.ir.runtime_model import model_for

    text = _rccl_dump(MI250_ADJACENCY)
    topo = parse_nccl_topo(text, "mi250.xml")
    family = fam.mi250(1)
    ours = {(int(u[3:]), int(v[3:])): bw for (u, v), bw in topo.capacity().items()}
    theirs = {(int(u[3:]), int(v[3:])): bw for (u, v), bw in family.capacity().items()}
    assert ours == theirs and len(ours) == sum(1 for r in MI250_ADJACENCY for c in r if c)
    assert topo.hardware == "mi250" and model_for(topo).name == "mi250"
    rccl = parse_nccl_topo(text, "mi250.xml", nvlink_bandwidth="nccl")
    assert rccl.capacity()[("b0g0", "b0g1")] == 36 * MI250_ADJACENCY[0][1]
    mi300 = parse_nccl_topo(_rccl_dump([[0 if i == j else 1 for j in range(8)] for i in range(8)],
                                       "gfx942:sramecc+:xnack-"), "mi300.xml")
    assert mi300.capacity()[("b0g0", "b0g7")] == 64 and mi300.hardware == ""
    # an MI300X is a processing accelerator (class 0x1200): its links join GPUs all the same
    accel = _rccl_dump([[0, 1], [1, 0]], "gfx942").replace('tclass="0x038000"',
                                                           'tclass="0x120000"')
    assert parse_nccl_topo(accel, "mi300.xml").capacity()[("b0g0", "b0g1")] == 64
    with pytest.raises(SpecError, match=r"gcn='gfx1100'.*MI200 \(gfx90a\) and MI300"):
        parse_nccl_topo(_rccl_dump(MI250_ADJACENCY, "gfx1100"), "navi.xml")
    lonely = _rccl_dump([[0, 1, 0], [1, 0, 0], [0, 0, 0]])
    with pytest.raises(SpecError, match=r"dev 2 \(0000:30:00.0\) have no <xgmi>"):
        parse_nccl_topo(lonely, "three.xml")


def test_nccl_dump_errors_name_the_element_line_and_attribute() -> None:
    """A bandwidth out of range in a dump was named by colc's internal link
    ('link 0 (b0g0 -> b0nvs)'), and two GPUs of one busid or two NICs of one
    dev by neither line nor value."""
    from colc.frontends.nccl_topo_xml import parse_nccl_topo

    real = (Path(__file__).parent / "data" / "real" / "dgx-a100.nccl.xml").read_text()
    line = next(i for i, t in enumerate(real.splitlines(), 1) if 'count="' in t)
    import re

    with pytest.raises(SpecError, match=rf"^x.xml:{line}: error: <nvlink> count='999999999' "
                                        r"gives 2.5e10 GB/s; a link carries"):
        parse_nccl_topo(re.sub(r'count="\d+"', 'count="999999999"', real, count=1), "x.xml")
    with pytest.raises(SpecError, match=r"^x.xml:\d+: error: <net> speed='9{18}' gives 1.25e14"):
        parse_nccl_topo(real.replace('speed="200000"', 'speed="' + "9" * 18 + '"', 1), "x.xml",
                        boxes=2)
    bridge = real.replace('tclass="0x068000"', 'tclass="0x060400"')
    with pytest.raises(SpecError, match=r'<gpu dev="0">: none of its 6 <nvlink> links goes to a '
                                        r'GPU .* \(tclass 0x060400\)'):
        parse_nccl_topo(bridge, "x.xml")  # it was 'rank 1 cannot be reached from rank 0'
    text = _rccl_dump([[0, 1], [1, 0]])
    with pytest.raises(SpecError, match=r'x.xml:1: error: <gpu dev="1"> is in the <pci> of busid '
                                        r'0000:10:00.0, as <gpu dev="0"> on line 1'):
        parse_nccl_topo(text.replace("0000:20:00.0", "0000:10:00.0"), "x.xml")
