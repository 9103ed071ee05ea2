"""Real-machine frontends: NCCL topology XML, msccl-tools JSON, TACCL JSON, YAML writer."""

from __future__ import annotations

import json
import os
import re
from fractions import Fraction

import pytest

from colc.errors import ColcError, SpecError
from colc.frontends.detect import foreign_loader
from colc.frontends.families import dgx_a100
from colc.frontends.msccl_tools_json import load_msccl_tools_topology
from colc.frontends.nccl_topo_xml import load_nccl_topo, parse_nccl_topo, topology_from_mapping
from colc.frontends.taccl_json import load_taccl_sketch, load_taccl_topology
from colc.frontends.yaml_topology import parse_topology_text
from colc.frontends.yaml_writer import topology_to_yaml

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "real")
DGX = os.path.join(DATA, "dgx-a100.nccl.xml")


def _structure(t):
    return t.ranks, {(n.id, n.kind, n.multicast) for n in t.nodes}, t.capacity()


# --------------------------------------------------------------------------- NCCL XML


@pytest.mark.parametrize("boxes", [1, 2, 3])
def test_dgx_a100_dump_equals_family(boxes: int) -> None:
    t = load_nccl_topo(DGX, boxes=boxes)
    assert _structure(t) == _structure(dgx_a100(boxes))
    assert t.nodes == dgx_a100(boxes).nodes and t.links == dgx_a100(boxes).links


def test_yaml_wrapper_equals_family() -> None:
    t = foreign_loader(os.path.join(DATA, "dgx-a100-2boxes.yaml"))()
    assert t == dgx_a100(2)


def test_dump_takes_its_gpus_cost_model_whatever_its_name(tmp_path) -> None:
    """The same dump named node0.xml took the generic model (the name
    decided) and compiled to another file; its GPUs' sm="80" now decides."""
    from colc.ir.runtime_model import model_for

    renamed = tmp_path / "node0.xml"
    renamed.write_bytes(open(DGX, "rb").read())
    t = load_nccl_topo(str(renamed), boxes=2)
    assert t.hardware == "a100" and model_for(t).name == "a100"
    h100 = tmp_path / "node1.xml"
    h100.write_text(open(DGX).read().replace('sm="80"', 'sm="90"'))
    assert model_for(load_nccl_topo(str(h100))).name == "h100"
    mixed = tmp_path / "node2.xml"
    mixed.write_text(open(DGX).read().replace('sm="80"', 'sm="90"', 1))
    assert model_for(load_nccl_topo(str(mixed))).name == "generic"


def test_dgx_a100_dump_compiles_like_family() -> None:
    pipeline = pytest.importorskip("colc.compiler.pipeline")
    from colc.ir.core import Collective

    def outcome(topo, opts) -> str:
        try:
            return pipeline.compile_topology(topo, opts).text
        except ColcError as err:  # the same refusal for both is the same outcome
            return f"error: {err}"

    dump = load_nccl_topo(DGX, boxes=2, name="dgx-a100-2")
    runs = [("auto", Collective.ALLGATHER)] + [
        ("ring", c) for c in (Collective.ALLGATHER, Collective.REDUCESCATTER, Collective.ALLREDUCE)]
    for algorithm, coll in runs:
        opts = pipeline.CompileOptions(algorithm=algorithm, collective=coll,
                                       rank_sizes=(16 << 20,))
        assert outcome(dump, opts) == outcome(dgx_a100(2), opts)


def test_nccl_bandwidth_model() -> None:
    t = load_nccl_topo(DGX, boxes=2, nvlink_bandwidth="nccl")
    assert t.capacity()[("b0g0", "b0nvs")] == 240  # 12 links x 20 GB/s (SM80)
    assert t.capacity()[("b1g3", "ib1")] == 25  # 200 Gb/s HDR


NVS_PCI = ('<system version="1"><cpu numaid="0" arch="x86_64" vendor="GenuineIntel">'
           '<pci busid="0000:c4:00.0" class="0x068000" link_speed="" link_width="0"/>'
           '{gpus}</cpu></system>')


def _gpu(dev: int, sm: int = 90, links: str = "", rank: str | None = None) -> str:
    r = f' rank="{rank if rank is not None else dev}"' if rank != "" else ""
    return (f'<pci busid="0000:0{dev}:00.0" class="0x030200" link_speed="32.0 GT/s PCIe" '
            f'link_width="16"><gpu dev="{dev}" sm="{sm}"{r} gdr="1">{links}</gpu></pci>')


def test_nvswitch_found_through_pci_class_and_h100_peak() -> None:
    link = '<nvlink target="0000:c4:00.0" count="18"/>'
    t = parse_nccl_topo(NVS_PCI.format(gpus=_gpu(0, links=link) + _gpu(1, links=link)), "h.xml")
    assert t.capacity()[("b0g1", "b0nvs")] == 450


def test_gpu_order_by_rank() -> None:
    a = _gpu(0, 80, '<nvlink target="0000:01:00.0" count="4" tclass="0x030200"/>', rank="1")
    b = _gpu(1, 80, '<nvlink target="0000:00:00.0" count="4" tclass="0x030200"/>', rank="0")
    xml = f'<system version="1"><cpu numaid="0" arch="x86_64" vendor="x">{a}{b}</cpu></system>'
    t = parse_nccl_topo(xml, "p.xml")
    assert t.capacity()[("b0g0", "b0g1")] == 100


def test_fewer_nics_than_gpus_gives_nic_nodes() -> None:
    link = '<nvlink target="0000:c4:00.0" count="2" tclass="0x068000"/>'
    nic = ('<pci busid="0000:09:00.0" class="0x020000" link_speed="16.0 GT/s PCIe" '
           'link_width="16"><nic><net name="mlx5_0" dev="0" speed="100000"/></nic></pci>')
    xml = NVS_PCI.format(gpus=_gpu(0, 80, link) + _gpu(1, 80, link) + nic)
    t = parse_nccl_topo(xml, "n.xml", boxes=2)
    cap = t.capacity()
    assert cap[("b0nic0", "ib0")] == Fraction(25, 2)
    assert cap[("b0g1", "b0nic0")] == 48  # PCIe Gen5 x16 = 16 * 240 / 80
    assert t.switches == ("b0nvs", "b0nic0", "b1nvs", "b1nic0", "ib0")


def test_skeleton_is_rejected_with_missing_gpus() -> None:
    with pytest.raises(SpecError) as info:
        load_nccl_topo(os.path.join(DATA, "ndv4-skeleton.nccl.xml"))
    msg = str(info.value)
    assert "no <gpu> elements" in msg and "0001:00:00.0" in msg and "0002:00:00.0" in msg
    assert "NCCL_TOPO_DUMP_FILE" in msg and "\n" not in msg


@pytest.mark.parametrize(("xml", "expect"), [
    ("<system version='1'><cpu>", "malformed XML"),
    ("<topology/>", "expected <system>"),
    ("<system/>", "'version' missing"),
    (NVS_PCI.format(gpus=_gpu(0) + _gpu(1)), "have no <nvlink>"),
    (NVS_PCI.format(gpus=_gpu(0, links='<nvlink target="0000:07:00.0" count="2" '
                                       'tclass="0x030200"/>')), "not in the file"),
    (NVS_PCI.format(gpus=_gpu(0, links='<nvlink target="0000:c4:00.0" count="x"/>')),
     "'count' must be an integer"),
    (NVS_PCI.format(gpus=_gpu(0, links='<nvlink target="0000:c4:00.0" count="0"/>')),
     "count must be >= 1"),
    (NVS_PCI.format(gpus=_gpu(0, links='<nvlink target="0000:99:00.0"/>')), "unknown target"),
    (NVS_PCI.format(gpus=_gpu(0, 50, '<nvlink target="0000:c4:00.0"/>')), "has no NVLink"),
    (NVS_PCI.format(gpus=_gpu(0, links='<nvlink target="0000:c4:00.0"/>')
                    + _gpu(1, links='<nvlink target="0000:c4:00.0"/>', rank="0")),
     "two <gpu> elements with rank=0"),
    (NVS_PCI.format(gpus=_gpu(0, links='<nvlink target="0000:c4:00.0"/>')
                    + _gpu(1, links='<nvlink target="0000:c4:00.0"/>', rank="")),
     "has no 'rank'"),
    ('<?xml version="1.0"?><!DOCTYPE s [<!ENTITY a "aaaa">]><system version="&a;"/>',
     "DOCTYPE"),
    ('<?xml version="1.0"?><!DOCTYPE s [<!ENTITY a SYSTEM "http://example.com/x">]>'
     '<system version="&a;"/>', "DOCTYPE declarations are not allowed"),
])
def test_nccl_malformed(xml: str, expect: str) -> None:
    with pytest.raises(SpecError) as info:
        parse_nccl_topo(xml, "bad.xml")
    assert expect in str(info.value)
    assert str(info.value).startswith("bad.xml")


def test_nccl_multibox_needs_nics() -> None:
    link = '<nvlink target="0000:c4:00.0"/>'
    with pytest.raises(SpecError, match="boxes cannot be connected"):
        parse_nccl_topo(NVS_PCI.format(gpus=_gpu(0, links=link)), "x.xml", boxes=2)


def test_nccl_size_limit(tmp_path, monkeypatch) -> None:
    from colc.frontends import nccl_topo_xml
    big = tmp_path / "big.xml"
    big.write_bytes(b"<system version='1'>" + b" " * 100 + b"</system>")
    monkeypatch.setattr(nccl_topo_xml, "MAX_BYTES", 50)
    with pytest.raises(SpecError, match="at most 50"):
        nccl_topo_xml.load_nccl_topo(str(big))


def test_wrapper_errors(tmp_path) -> None:
    p = str(tmp_path / "w.yaml")
    with pytest.raises(SpecError, match="'nccl_topo': missing"):
        topology_from_mapping({"boxes": 2}, p)
    with pytest.raises(SpecError, match="unknown key"):
        topology_from_mapping({"nccl_topo": "x.xml", "gpus": 2}, p)
    with pytest.raises(SpecError, match="boxes"):
        topology_from_mapping({"nccl_topo": "x.xml", "boxes": 0}, p)
    with pytest.raises(SpecError, match="cannot read"):
        topology_from_mapping({"nccl_topo": "missing.xml"}, p)


@pytest.mark.parametrize("text", [
    "{nccl_topo: %(x)s, boxes: 2, name: dgx-a100-2}\n",  # flow style
    '"nccl_topo": %(x)s\nboxes: 2\nname: dgx-a100-2\n',  # a quoted key
    "#\n" * 2000 + "nccl_topo: %(x)s\nboxes: 2\nname: dgx-a100-2\n",  # past 4 KiB
    "  nccl_topo: %(x)s\n  boxes: 2\n  name: dgx-a100-2\n",  # an indented document
])
def test_yaml_wrapper_in_any_yaml_spelling(tmp_path, text) -> None:
    """The wrapper was found only as a plain ``nccl_topo:`` at the start of a
    line in the first 4 KiB; other spellings were read as colc YAML and its
    key called unknown."""
    path = tmp_path / "w.yaml"
    path.write_text(text % {"x": DGX})
    assert foreign_loader(str(path))() == dgx_a100(2)


def test_wrapper_detection_is_linear_in_blank_lines(tmp_path) -> None:
    """The wrapper key was searched with whitespace that spans lines: 30,000
    blank lines took 7 s, a megabyte of them hours."""
    import time

    path = tmp_path / "blank.yaml"
    path.write_text("\n" * 1_000_000 + "family: ring\nranks: 3\nbandwidth: 1\n")
    t0 = time.perf_counter()
    assert foreign_loader(str(path)) is None  # colc YAML
    assert time.perf_counter() - t0 < 5


def test_yaml_wrapper_refuses_duplicate_keys(tmp_path) -> None:
    path = tmp_path / "w.yaml"
    path.write_text(f"nccl_topo: {DGX}\nboxes: 2\nboxes: 3\n")
    with pytest.raises(SpecError, match=r"w.yaml:3: error: duplicate key 'boxes' \(first at "
                       r"line 2\)"):
        foreign_loader(str(path))()


def test_merge_keys_resolve_as_yaml_does(tmp_path) -> None:
    """A merge at the top level was malformed YAML, and a link's own key
    overriding a merged one a duplicate; two of a mapping's own keys still
    are."""
    two = "nodes: [{id: a, kind: gpu}, {id: b, kind: gpu}]\n"
    top = parse_topology_text(f"name: m\n<<: {{{two[:-1]}, links: [{{src: a, dst: b, "
                              "bandwidth: 10, duplex: true}]}\n", "m.yaml")
    links = parse_topology_text(two + "links:\n  - &l {src: a, dst: b, bandwidth: 10}\n"
                                "  - {<<: *l, src: b, dst: a}\n", "m.yaml")
    assert top.capacity() == links.capacity() and top.name == "m"
    with pytest.raises(SpecError, match=r"m.yaml:4: error: field 'links\[1\]': duplicate key "
                       r"'dst' \(first at line 4\)"):
        parse_topology_text(two + "links:\n  - &l {src: a, dst: b, bandwidth: 10}\n"
                            "  - {<<: *l, src: b, dst: a, dst: b}\n", "m.yaml")
    # a merged mapping flattened inside another, then used again by alias
    nested = parse_topology_text(
        two + "links:\n  - {<<: &m {<<: {src: a, dst: b, bandwidth: 10}, src: b, dst: a}, "
        "bandwidth: 20}\n  - *m\n  - {src: a, dst: b, bandwidth: 5}\n", "m.yaml")
    assert [(x.src, x.dst, x.bandwidth) for x in nested.links] == [
        ("b", "a", 20), ("b", "a", 10), ("a", "b", 5)]


# --------------------------------------------------------------------------- msccl-tools JSON


def test_msccl_tools_ring_and_switches() -> None:
    t = load_msccl_tools_topology(os.path.join(DATA, "msccl-ring4.json"))
    assert t.ranks == ("r0", "r1", "r2", "r3")
    assert set(t.capacity()) == {("r0", "r1"), ("r1", "r2"), ("r2", "r3"), ("r3", "r0")}
    h = load_msccl_tools_topology(os.path.join(DATA, "msccl-hub.json"), unit=25)
    cap = h.capacity()
    assert ("r0", "r1") not in cap  # covered by node_0_out
    assert cap[("r0", "node_0_out")] == 25 and cap[("node_0_in", "r0")] == 25
    assert cap[("r1", "r2")] == 25


def test_json_with_a_byte_order_mark_reads_as_without(tmp_path) -> None:
    """A UTF-8 BOM (Windows editors write one) is allowed in JSON as in YAML:
    the file is recognised as msccl-tools JSON, not read as YAML."""
    src = os.path.join(DATA, "msccl-ring4.json")
    bom = tmp_path / "bom.json"
    bom.write_bytes(b"\xef\xbb\xbf" + open(src, "rb").read())
    loader = foreign_loader(str(bom))
    assert loader is not None
    assert loader().capacity() == load_msccl_tools_topology(src).capacity()


@pytest.mark.parametrize("name", ["ring4", "ring4.JSON", "ring4.txt"])
def test_pretty_printed_json_is_told_by_its_keys(tmp_path, name) -> None:
    """Indented msccl-tools JSON (``{`` alone on the first line) was taken
    for JSON only when named ``.json``; otherwise colc YAML called its
    ``msccl_type`` unknown."""
    src = os.path.join(DATA, "msccl-ring4.json")
    path = tmp_path / name
    path.write_text(json.dumps(json.load(open(src)), indent=2))
    assert foreign_loader(str(path))().capacity() == load_msccl_tools_topology(src).capacity()


def test_colc_family_and_the_wrapper_written_as_json(tmp_path) -> None:
    """A .json file in colc's own form was 'unrecognised JSON topology', and
    so was the NCCL wrapper written as JSON; --boxes on the former names
    the family file's own boxes."""
    path = tmp_path / "ring.json"
    path.write_text('{"family": "ring", "ranks": 3, "bandwidth": 1}')
    assert foreign_loader(str(path))().num_ranks == 3
    with pytest.raises(SpecError, match="--boxes applies to single-box inputs"):
        foreign_loader(str(path), boxes=2)()
    wrapper = tmp_path / "w.json"
    wrapper.write_text(json.dumps({"nccl_topo": DGX, "boxes": 2, "name": "dgx-a100-2"}))
    assert foreign_loader(str(wrapper))() == dgx_a100(2)


@pytest.mark.parametrize(("doc", "expect"), [
    ("[1, 2]", "JSON object"),
    ('{"msccl_type": "algorithm"}', "msccl_type"),
    ('{"msccl_type": "topology"}', "'links': missing"),
    ('{"msccl_type": "topology", "links": [[0, 1], [1]]}', "2x2 matrix"),
    ('{"msccl_type": "topology", "links": [[0, -1], [1, 0]]}', "links[0][1]"),
    ('{"msccl_type": "topology", "links": [[0, 1], [1, 0]], "switches": [[[0], [5], 1, "s"]]}',
     "switches[0][1]"),
    ('{"msccl_type": "topology", "links": [[0, 1], [1, 0]], "switches": [[[0], [1], 0, "s"]]}',
     "must be > 0"),
    ('{"msccl_type": "topology", "links": [[0, 1], [0, 0]]}', "cannot be reached"),
    ('{"msccl_type": "topology",\n "links": [[0, 1], [1, 0]],,}', ":2: error: malformed JSON"),
])
def test_msccl_tools_malformed(tmp_path, doc: str, expect: str) -> None:
    p = tmp_path / "t.json"
    p.write_text(doc)
    with pytest.raises(ColcError) as info:
        load_msccl_tools_topology(str(p))
    assert expect in str(info.value)


# --------------------------------------------------------------------------- TACCL JSON


def test_taccl_ndv2_with_sketch() -> None:
    t = load_taccl_topology(os.path.join(DATA, "taccl-ndv2.json"),
                            os.path.join(DATA, "taccl-ndv2.sketch.json"))
    cap = t.capacity()
    assert t.num_ranks == 16
    assert cap[("b0g0", "b0g1")] == Fraction(1000, 23)  # double NVLink (fast)
    assert cap[("b1g0", "b1g2")] == Fraction(1000, 46)  # single NVLink (slow)
    assert cap[("b0g5", "ib")] == Fraction(1000, 105) / 8


def test_boxes_option_is_named_as_the_option_and_checked_against_a_sketch() -> None:
    """Exploring as a user: ``--boxes 3000`` on an NCCL dump blamed the XML's
    "field 'boxes'", on a TACCL profile its "field 'gpus_per_node'", and
    ``--boxes 3`` beside a sketch of 2 nodes built 3 without a word."""
    with pytest.raises(SpecError, match=r"dgx-a100\.nccl\.xml: error: --boxes: 3000 boxes x 8"):
        foreign_loader(DGX, 3000)()
    with pytest.raises(SpecError, match=r"error: --boxes: 3000 nodes x \d+ GPUs"):
        foreign_loader(os.path.join(DATA, "taccl-custom.json"), 3000)()
    ndv2 = os.path.join(DATA, "taccl-ndv2.json")
    with pytest.raises(SpecError, match=r"sketch\.json: error: field 'nnodes': the sketch says "
                                        r"2 and --boxes says 3"):
        foreign_loader(ndv2, 3)()
    assert foreign_loader(ndv2, 2)().num_ranks == foreign_loader(ndv2)().num_ranks == 16


def test_taccl_custom_invbws() -> None:
    t = load_taccl_topology(os.path.join(DATA, "taccl-custom.json"))
    assert t.capacity()[("b0g1", "b0g2")] == 50  # 1000 / (20.5 - 0.5)
    assert foreign_loader(os.path.join(DATA, "taccl-custom.json"), boxes=2)().num_ranks == 6


@pytest.mark.parametrize(("doc", "expect"), [
    ('{"gpus_per_node": 2}', "'name'"),
    ('{"name": "x", "gpus_per_node": 0}', "gpus_per_node"),
    ('{"name": "Mystery", "gpus_per_node": 2}', "node_betas_list"),
    ('{"name": "Mystery", "gpus_per_node": 2, "node_betas_list": [1]}', "not a known TACCL"),
    ('{"name": "NDv2", "gpus_per_node": 4, "node_betas_list": [1, 2]}', "NDv2 profiles"),
    ('{"name": "c", "gpus_per_node": 2, "links": [[0, 1], [1, 0]]}', "'betas'"),
    ('{"name": "c", "gpus_per_node": 2, "links": [[0, 2], [1, 0]], "betas": [[0, 1], [1, 0]]}',
     "links[0][1]"),
    ('{"name": "c", "gpus_per_node": 2, "links": [[0, 1], [1, 0]], "betas": [[0, -1], [1, 0]]}',
     "betas[0][1]"),
])
def test_taccl_malformed(tmp_path, doc: str, expect: str) -> None:
    p = tmp_path / "t.json"
    p.write_text(doc)
    with pytest.raises(SpecError) as info:
        load_taccl_topology(str(p))
    assert expect in str(info.value)


@pytest.mark.parametrize(("doc", "expect"), [
    ('{"nnodes": 0}', "nnodes"),
    ('{"nnodes": 2}', "relay"),
    ('{"nnodes": 1, "intranode_sketch": {"strategy": "teleport"}}', "strategy"),
])
def test_taccl_sketch_malformed(tmp_path, doc: str, expect: str) -> None:
    p = tmp_path / "s.json"
    p.write_text(doc)
    with pytest.raises(SpecError, match=expect):
        load_taccl_sketch(str(p))


def test_detect_rejects_unknown_json_and_sketch(tmp_path) -> None:
    p = tmp_path / "x.json"
    p.write_text('{"hello": 1}')
    with pytest.raises(SpecError, match="unrecognised"):
        foreign_loader(str(p))()
    with pytest.raises(SpecError, match="sketch"):
        foreign_loader(os.path.join(DATA, "taccl-ndv2.sketch.json"))()
    y = tmp_path / "t.yaml"
    y.write_text("family: ring\nranks: 4\nbandwidth: 1\n")
    assert foreign_loader(str(y)) is None


# --------------------------------------------------------------------------- YAML writer


@pytest.mark.parametrize("load", [
    lambda: load_nccl_topo(DGX, boxes=2),
    lambda: load_msccl_tools_topology(os.path.join(DATA, "msccl-hub.json")),
    lambda: load_taccl_topology(os.path.join(DATA, "taccl-ndv2.json"),
                                os.path.join(DATA, "taccl-ndv2.sketch.json")),
    lambda: load_taccl_topology(os.path.join(DATA, "taccl-custom.json")),
])
def test_yaml_round_trip(load) -> None:
    t = load()
    text = topology_to_yaml(t)
    assert parse_topology_text(text, "x.yaml") == t
    assert text == topology_to_yaml(parse_topology_text(text, "x.yaml"))


def test_yaml_round_trip_past_the_basic_plane() -> None:
    """Names past U+FFFF came back as two lone surrogates (JSON's escape
    for them), and the converted file was an internal error in analyze."""
    text = ('name: "e\U0001F680 \u00e9"\nnodes: [{id: "g\U0001F6800", kind: gpu}, '
            '{id: g1, kind: gpu}]\nlinks: [{src: "g\U0001F6800", dst: g1, bandwidth: 10, '
            'duplex: true}]\n')
    t = parse_topology_text(text, "x.yaml")
    written = topology_to_yaml(t)
    assert written.isascii() and "\\U0001f680" in written
    assert parse_topology_text(written, "y.yaml") == t and t.name == "e\U0001F680 \u00e9"


def test_yaml_keeps_the_hardware_cost_model() -> None:
    """colc convert of a hardware family kept its links but dropped its machine:
    the expanded file took the generic cost model (DGX A100 x2 compiled to a
    different file, 328.6 GB/s predicted at 1G instead of 266.0).  The
    explicit form now carries ``hardware:``."""
    from colc.ir.runtime_model import model_for

    t = dgx_a100(2)
    text = topology_to_yaml(t)
    back = parse_topology_text(text, "x.yaml")
    assert back == t and back.hardware == "a100" and model_for(back).name == "a100"
    renamed = text.replace('name: "dgx-a100-2"', 'name: "cluster"', 1)
    assert model_for(parse_topology_text(renamed, "x.yaml")).name == "a100"
    with pytest.raises(SpecError, match="field 'hardware': unknown machine 'tpu'"):
        parse_topology_text(text.replace('"a100"', '"tpu"', 1), "x.yaml")


def test_convert_cli(tmp_path) -> None:
    cli = pytest.importorskip("colc.cli")
    out = tmp_path / "o.yaml"
    assert cli.main(["convert", DGX, "--boxes", "2", "-o", str(out)]) == 0
    assert parse_topology_text(out.read_text(), str(out)) == load_nccl_topo(DGX, boxes=2)


@pytest.mark.parametrize("backend", ["msccl", "oneccl"])
def test_dgx_dump_both_backends_verify(backend: str) -> None:
    pipeline = pytest.importorskip("colc.compiler.pipeline")
    from colc.backends.verify import verify_text
    from colc.ir.core import Collective
    topo = load_nccl_topo(DGX, boxes=2)
    for coll in (Collective.ALLGATHER, Collective.REDUCESCATTER, Collective.ALLREDUCE):
        opts = pipeline.CompileOptions(algorithm="ring", collective=coll, backend=backend)
        text = pipeline.compile_topology(topo, opts).text
        report = verify_text(text, f"dgx.{backend}", backend)
        assert report.ok, report.errors[:3]


def test_msccl_tools_switches_over_the_same_ranks_are_one(tmp_path) -> None:
    """msccl-tools' distributed hub and spoke (two copies) caps box 0 -> box 1
    twice, by box 0's out-switch and box 1's in-switch; every cap holds at
    once, so the two are one switch at the smaller cap (each became a path
    of its own, doubling the boxes' bandwidth: all-to-all 2 GB/s, not 1).
    A pair under two switches over other ranks is refused by name."""
    from colc.compiler.alltoall.mcf import alltoall_mcf

    def doc(switches):
        return {"msccl_type": "topology", "name": "dhs", "switches": switches,
                "links": [[0, 1, 1, 1], [1, 0, 1, 1], [1, 1, 0, 1], [1, 1, 1, 0]]}

    both = [[[0, 1], [2, 3], 1, "copy_0_out_remote"], [[2, 3], [0, 1], 1, "copy_0_in_remote"],
            [[2, 3], [0, 1], 2, "copy_1_out_remote"], [[0, 1], [2, 3], 1, "copy_1_in_remote"]]
    half = [both[0], both[1]]
    loaded = []
    for k, switches in enumerate((both, half)):
        p = tmp_path / f"t{k}.json"
        p.write_text(json.dumps(doc(switches)))
        loaded.append(load_msccl_tools_topology(str(p)))
    assert loaded[0].capacity() == loaded[1].capacity()
    assert alltoall_mcf(loaded[0]).f == pytest.approx(alltoall_mcf(loaded[1]).f)
    p = tmp_path / "overlap.json"
    p.write_text(json.dumps(doc([[[0, 1], [2, 3], 1, "a"], [[0], [2], 1, "b"]])))
    with pytest.raises(SpecError, match=r"rank 0 -> rank 2 is under switches\[0\] and "
                                        r"switches\[1\], which colc cannot chain"):
        load_msccl_tools_topology(str(p))


def test_msccl_tools_hub_and_spoke_chains_out_into_in_switches(tmp_path) -> None:
    """msccl-tools' hub and spoke caps each rank's egress (node_i_out: [i] to
    the others) and ingress (node_j_in: the others to [j]): i -> j crosses
    both, so i's out-switch feeds j's in-switch and neither reaches a rank
    alone.  On 3 ranks at 1 each, the all-to-all LP gives f = 0.5 (egress
    1 over two peers) and every link out of an out-switch enters an
    in-switch."""
    from colc.compiler.alltoall.mcf import alltoall_mcf

    n = 3
    switches = []
    for i in range(n):
        others = [j for j in range(n) if j != i]
        switches += [[[i], others, 1, f"node_{i}_out"], [others, [i], 1, f"node_{i}_in"]]
    p = tmp_path / "hub3.json"
    p.write_text(json.dumps({"msccl_type": "topology", "name": "HubAndSpoke(n=3)",
                             "links": [[0, 1, 1], [1, 0, 1], [1, 1, 0]],
                             "switches": switches}))
    topo = load_msccl_tools_topology(str(p))
    assert alltoall_mcf(topo).f == pytest.approx(0.5)
    cap = topo.capacity()
    assert {(u, v) for u, v in cap if u.endswith("_out")} == {
        (f"node_{i}_out", f"node_{j}_in") for i in range(n) for j in range(n) if i != j}
    assert {(u, v) for u, v in cap if v.startswith("r")} == {
        (f"node_{j}_in", f"r{j}") for j in range(n)}


def test_taccl_remote_beta_out_of_range_is_named(tmp_path) -> None:
    """A remote_beta whose share per GPU (over the node's NICs and GPUs) is
    below colc's least bandwidth is named by its field; it was refused
    naming an internal link ('link 32 (b0g0 -> ib)')."""
    p = tmp_path / "rb.json"
    p.write_text(json.dumps({"name": "HubAndSpokeX", "gpus_per_node": 8,
                             "node_betas_list": [40], "remote_beta": 1e9, "nics_per_node": 1}))
    with pytest.raises(SpecError, match=r"field 'remote_beta': 1000000000.0 us/MB over 1 NIC\(s\) "
                                        r"and 8 GPUs is 1.25e-7 GB/s a GPU"):
        load_taccl_topology(str(p), nnodes=2)


def test_taccl_profile_of_another_size_is_read_with_a_warning(tmp_path, capsys) -> None:
    """TACCL's own NDv2 examples at 1KB and 32KB hold costs per chunk of that
    size, scaled (x100, x10) for its solver: read as microseconds per MB, as
    the 1MB profile is, their links came out 10x too fast without a word.
    The links keep their ratios (the schedule's shape) and a warning says
    what the figures rest on; a 1MB profile gets none."""
    import warnings

    import colc
    from colc.cli import main

    small = tmp_path / "ndv2-1KB.json"
    small.write_text(json.dumps({
        "name": "NDv2_1KB", "gpus_per_node": 8, "nics_per_node": 1, "alpha": 30,
        "node_betas_list": [2.24, 4.50], "node_invbws_list": [32.25, 34.50],
        "remote_alpha": 260, "remote_beta": 10.25, "remote_invbw": 270.25}))
    topo = load_taccl_topology(str(small))
    (note,) = topo.notes
    assert "'NDv2_1KB' has costs for 1KB chunks" in note and "446.429, 222.222 GB/s" in note
    assert not load_taccl_topology(os.path.join(DATA, "taccl-ndv2.json")).notes
    assert main(["convert", str(small), "-o", str(tmp_path / "t.yaml")]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err[0] == f"colc: warning: {note}" and len([e for e in err if note in e]) == 1
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        colc.load_topology(str(small))
    assert [str(w.message) for w in seen] == [note]


def _edited_dump(tmp_path, old: str, new: str) -> str:
    text = open(os.path.join(DATA, "dgx-a100.nccl.xml"), encoding="utf-8").read()
    assert old in text
    path = tmp_path / "edited.nccl.xml"
    path.write_text(text.replace(old, new, 1))
    return str(path)


def test_nccl_dump_caveats_are_warned(tmp_path) -> None:
    """A helper exploring as a GPU user hand-edited the DGX A100 dump: a NIC
    without ``speed`` (or ``speed="0"``) was read as NCCL reads it, 10 Gb/s,
    so a 200 Gb/s rail ran at 1.25 GB/s without a word; GPUs of two ``sm``
    values silently lost the A100 cost model.  Both are read as before, with
    a note (a warning on the command line)."""
    for new in ('speed="0"', ''):
        path = _edited_dump(tmp_path, 'speed="200000"', new)
        topo = load_nccl_topo(path, boxes=2)
        (note,) = topo.notes
        assert note.startswith(f"{path}:17: <net name=\"mlx5_0\" dev=\"0\"> has no speed")
        assert "10000 Mb/s (1.25 GB/s)" in note
        assert not load_nccl_topo(path).notes  # one box: no network, its NICs unused
    mixed = load_nccl_topo(_edited_dump(tmp_path, '<gpu dev="1" sm="80"', '<gpu dev="1" sm="90"'))
    assert mixed.hardware == ""
    assert [n.split(": ", 1)[1] for n in mixed.notes] == [
        "GPUs of different kinds (sm 80, sm 90): no one machine's cost model fits them, so "
        "the topology's name picks one (generic if it names none)"]
    assert not load_nccl_topo(os.path.join(DATA, "dgx-a100.nccl.xml"), boxes=2).notes
    # every NIC without a speed: one note naming them all (it was a line each)
    text = open(os.path.join(DATA, "dgx-a100.nccl.xml"), encoding="utf-8").read()
    bare = tmp_path / "bare.nccl.xml"
    bare.write_text(re.sub(r'(<net [^>]*?) speed="\d+"', r"\1", text))
    (note,) = load_nccl_topo(str(bare), boxes=2).notes
    nets = len(re.findall(r"<net ", text))
    assert re.match(rf"{re.escape(str(bare))}:\d+: {nets} <net> elements \(dev 0, 1, ", note)


def test_nccl_two_gpus_of_one_dev_are_refused(tmp_path) -> None:
    """Two ``<gpu>`` with the same ``dev`` (and their own ranks) were read;
    two NICs with one ``dev`` were refused."""
    path = _edited_dump(tmp_path, '<gpu dev="1" sm="80" rank="1"', '<gpu dev="0" sm="80" rank="1"')
    with pytest.raises(SpecError, match=r"dev 0 is also the <gpu> on line \d+'s; NCCL numbers "
                                        r"its GPUs apart"):
        load_nccl_topo(path)


def test_boxes_option_may_not_contradict_the_wrapper(tmp_path) -> None:
    """``--boxes 3`` on a wrapper saying ``boxes: 2`` built 24 ranks under the
    file's name for 2 boxes, without a word.  A contradiction is refused;
    the same number, or a wrapper without ``boxes:``, is read as before."""
    wrapper = os.path.join(DATA, "dgx-a100-2boxes.yaml")
    with pytest.raises(SpecError, match=r"dgx-a100-2boxes.yaml:3: error: field 'boxes': the "
                                        r"file says 2 and --boxes says 3"):
        foreign_loader(wrapper, boxes=3)()
    assert foreign_loader(wrapper, boxes=2)().num_ranks == 16
    bare = tmp_path / "w.yaml"
    bare.write_text(f"nccl_topo: {os.path.join(DATA, 'dgx-a100.nccl.xml')}\n")
    assert foreign_loader(str(bare), boxes=3)().num_ranks == 24
    # a wrapper's boxes of the wrong type is its own error, whatever --boxes
    # says ('"2"' with --boxes 2 was called a contradiction; true with
    # --boxes 1 was read as 1 box)
    for value, given in (('"2"', 2), ("true", 1)):
        bare.write_text(f"nccl_topo: {os.path.join(DATA, 'dgx-a100.nccl.xml')}\n"
                        f"boxes: {value}\n")
        with pytest.raises(SpecError, match=r"w.yaml:2: error: field 'boxes': must be an "
                                            r"integer, got"):
            foreign_loader(str(bare), boxes=given)()


@pytest.mark.parametrize("root,hint", [
    ('<algo name="a" nchunksperloop="1" nchannels="1" ngpus="2" proto="Simple" coll="allgather"'
     ' inplace="0"></algo>', "an MSCCL algorithm file, a schedule: colc verify checks it"),
    ('<oneccl_schedule version="1"></oneccl_schedule>', "a oneCCL schedule colc wrote"),
])
def test_a_schedule_given_as_the_topology_says_so(root: str, hint: str) -> None:
    """Exploring as a user: an algorithm file given where a topology goes got
    only "root element is <algo>, expected <system>"."""
    with pytest.raises(SpecError, match=r"expected <system> \(an NCCL topology file\); this is " +
                       re.escape(hint)):
        parse_nccl_topo(root, "x.xml")
