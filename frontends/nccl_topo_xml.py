"""NCCL topology XML frontend (``NCCL_TOPO_FILE`` / ``NCCL_TOPO_DUMP_FILE``).

An NCCL dump describes ONE node (box).  colc reads it and replicates it
``boxes`` times; boxes are joined by InfiniBand switches ``ib0..ib{P-1}``
(P = ``ib_planes``, clamped to the number of NICs per box) because the dump
says nothing about the fabric.  Multi-box is requested with the
``boxes``/``ib_planes`` arguments (CLI ``--boxes``) or with a YAML wrapper
read by ``topology_from_mapping``::

    nccl_topo: dgx-a100.xml   # relative to the YAML file
    boxes: 2
    ib_planes: 2              # optional, default 2
    nvlink_bandwidth: peak    # optional: peak (default) or nccl
    name: my-cluster          # optional

Model (grammar of NCCL ``src/graph/xml.cc``/``topo.cc``; peer survey section 3):

* every ``<gpu>`` is a rank, ordered by its ``rank`` attribute (or by
  ``dev`` when no GPU has one); node id ``b{box}g{i}``, ``i`` the GPU's
  position in that order;
* ``<nvlink target tclass count>``: to another GPU of the file, a directed
  GPU -> GPU link; to an NVSwitch (``tclass`` 0x068000, or a target ``<pci>``
  of that class) it adds to the GPU's NVSwitch link: one switch
  ``b{box}nvs`` per box (as NCCL, all NVSwitches collapse into one), duplex;
  NVLinks to CPUs are ignored.  RCCL's dumps write ``<xgmi target tclass
  count>`` instead, read the same way (an AMD GPU is one with a ``gcn``:
  MI200 ``gfx90a``/``910``, MI300 ``gfx940-942``; its ``sm`` is not read),
  at ``count`` times the per-link xGMI bandwidth (``peak``: MI200 50, MI300
  64 GB/s; ``nccl``: RCCL's 36 and 48).  Bandwidth is ``count`` times the per-link
  bandwidth of the GPU's ``sm``: ``peak`` uses the per-direction data rate of
  the NVLink generation (P100 20, V100/A100/H100 25, GA10x 14.0625, B200 50
  GB/s), ``nccl`` uses NCCL's effective numbers (SM60 18, SM70/80 20, SM86
  12, SM90 20.6, SM100 40.1);
* every ``<net>`` with a ``dev`` is a NIC of ``speed`` Mb/s (<= 0 or missing:
  10000, as NCCL reads it, with a note when boxes use it) = ``speed / 8000``
  GB/s; GPUs of several kinds (``sm``, ``gcn``) get no cost model of their
  own, with a note (``Topology.notes``, warnings on the command line).  GPUs take the nearest unassigned NIC in
  the PCI tree in rank order; left-over NICs go to their nearest GPU.  When
  every NIC has a GPU of its own the NIC is modelled as the link
  GPU <-> ``ib{k % P}`` (k = the NIC's position by ``dev``); otherwise (fewer
  NICs than GPUs) as a node ``b{box}nic{k}`` joined to each GPU that uses it
  by that GPU's PCIe bandwidth (``link_width * code / 80``) and to the IB
  switch by its speed;
* PCIe peer-to-peer between GPUs and CPU interconnects are not modelled.

A vendor skeleton (``<cpu>``/``<pci>`` only, GPUs and NICs filled in by NCCL
at run time) is rejected with a message listing the GPU-class PCI devices
that lack a ``<gpu>``.  Parsing is safe: 16 MiB limit, no DTD, no entities,
no network.

Example
-------
>>> xml = '''<system version="1"><cpu numaid="0" arch="x86_64" vendor="AuthenticAMD">
...  <pci busid="0000:07:00.0" class="0x030200" link_speed="16.0 GT/s PCIe" link_width="16">
...   <gpu dev="0" sm="80" rank="0" gdr="1"><nvlink target="0000:0f:00.0" count="12"
...     tclass="0x030200"/></gpu></pci>
...  <pci busid="0000:0f:00.0" class="0x030200" link_speed="16.0 GT/s PCIe" link_width="16">
...   <gpu dev="1" sm="80" rank="1" gdr="1"><nvlink target="0000:07:00.0" count="12"
...     tclass="0x030200"/></gpu></pci></cpu></system>'''
>>> t = parse_nccl_topo(xml, "pair.xml")
>>> t.ranks, t.capacity()[("b0g0", "b0g1")]
(('b0g0', 'b0g1'), Fraction(300, 1))
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

from lxml import etree

from colc.errors import SpecError
from colc.ir.topology import Link, Node, Topology

from ._values import FieldError, int_value, show, str_value
from colc.safe_xml import parse_xml

from ._input import read_input
from .limits import MAX_BANDWIDTH, MIN_BANDWIDTH, MAX_FILE_BYTES, approx, check_ranks
from .validate import validate_topology

#: Largest NCCL topology file read (bytes).
MAX_BYTES = MAX_FILE_BYTES
#: Longest integer attribute, characters (``0x`` and 16 hex digits: a bus id or
#: a 64-bit mask; no real value is longer).
MAX_INT_CHARS = 18

#: Compute capability -> the machine preset of that GPU (``runtime_model``).
SM_MACHINES = {80: "a100", 90: "h100"}
#: An RCCL dump's GPU family (by its ``gcn``, ``gfx`` and features dropped)
#: and the machine whose cost model fits it ("": none, the name decides).
GCN_FAMILIES = {"90a": "mi200", "910": "mi200", "940": "mi300", "941": "mi300",
                "942": "mi300"}
FAMILY_MACHINES = {"mi200": "mi250", "mi300": ""}
#: Per-xGMI-link, per-direction peak bandwidth (GB/s): MI250's 50 (as the
#: ``mi250`` family), MI300's 64 (896 GB/s over 7 links, both directions).
XGMI_PEAK = {"mi200": Fraction(50), "mi300": Fraction(64)}
#: RCCL's per-xGMI-link bandwidth (``src/graph/topo.h``: MI200 36, gfx94x 48).
XGMI_RCCL = {"mi200": Fraction(36), "mi300": Fraction(48)}
#: PCI class of an NVSwitch.
NVSWITCH_CLASS = 0x068000

#: Per-NVLink, per-direction peak bandwidth (GB/s) by SM generation.
NVLINK_PEAK = {60: Fraction(20), 70: Fraction(25), 80: Fraction(25), 86: Fraction(225, 16),
               90: Fraction(25), 100: Fraction(50)}
#: NCCL's per-NVLink bandwidth (``src/graph/topo.h``).
NVLINK_NCCL = {60: Fraction(18), 70: Fraction(20), 80: Fraction(20), 86: Fraction(12),
               90: Fraction(103, 5), 100: Fraction(401, 10)}

#: PCIe ``link_speed`` (GT/s) -> NCCL's per-lane code; bw = width * code / 80 GB/s.
PCI_SPEED_CODE = {Fraction(5, 2): 15, Fraction(5): 30, Fraction(8): 60, Fraction(16): 120,
                  Fraction(32): 240, Fraction(64): 480}

_MAX_BOXES = 4096


@dataclass
class _Gpu:
    el: etree._Element
    busid: str
    dev: int
    rank: int | None
    sm: int
    family: str = ""  # an AMD GPU's (``GCN_FAMILIES``); "" for NVIDIA
    #: its ``<nvlink>`` (NVIDIA) or ``<xgmi>`` (AMD, RCCL's dumps) elements
    nvlinks: list[etree._Element] = field(default_factory=list)


@dataclass
class _Net:
    el: etree._Element
    dev: int
    bandwidth: Fraction
    anchor: etree._Element  # the element whose position in the PCI tree counts


def load_nccl_topo(path: str, *, boxes: int = 1, ib_planes: int = 2,
                   nvlink_bandwidth: str = "peak", name: str | None = None,
                   boxes_field: str = "boxes") -> Topology:
    """Read an NCCL topology XML file (see the module docstring).

    Parameters
    ----------
    path : str
        The XML file.
    boxes : int
        Copies of the node, joined by IB switches when >= 2.
    ib_planes : int
        IB switches (rails) between boxes.
    nvlink_bandwidth : {"peak", "nccl"}
        Per-link NVLink bandwidth table.
    name : str or None
        Topology name (default: file stem, with ``-x{boxes}`` when boxes > 1).
    boxes_field : str
        What gave ``boxes``, for messages: a wrapper's field, or ``--boxes``.

    Returns
    -------
    Topology
        Validated.

    Raises
    ------
    SpecError
        Unreadable, unsafe or malformed file, or a file without the GPUs or
        links colc needs.
    """
    return parse_nccl_topo(read_input(path, MAX_BYTES), path, boxes=boxes,
                           ib_planes=ib_planes, nvlink_bandwidth=nvlink_bandwidth, name=name,
                           boxes_field=boxes_field)


def topology_from_mapping(mapping: Mapping[str, object], path: str,
                          lines: Mapping[str, int] | None = None) -> Topology:
    """Build a topology from the YAML wrapper ``{nccl_topo: file.xml, boxes: N, ...}``.

    Parameters
    ----------
    mapping : mapping
        Keys ``nccl_topo`` (required; relative to ``path``'s folder), ``boxes``,
        ``ib_planes``, ``nvlink_bandwidth``, ``name``.
    path : str
        The YAML file, for messages and relative paths.
    lines : mapping of str to int, optional
        Line of each key.

    Returns
    -------
    Topology

    Raises
    ------
    SpecError
        Unknown or invalid key, or a problem in the XML file.
    """
    lines = lines or {}
    allowed = ("boxes", "ib_planes", "name", "nccl_topo", "nvlink_bandwidth")
    for key in mapping:
        if key not in allowed:
            raise FieldError(path, str(key), f"unknown key; allowed: {', '.join(allowed)}",
                             lines.get(str(key)))
    if "nccl_topo" not in mapping:
        raise SpecError(path, "field 'nccl_topo': missing")
    xml = str_value(mapping["nccl_topo"], path=path, field="nccl_topo",
                    line=lines.get("nccl_topo"))
    xml_path = str(Path(path).parent / xml)
    boxes = int_value(mapping.get("boxes", 1), path=path, field="boxes", minimum=1,
                      maximum=_MAX_BOXES, line=lines.get("boxes"))
    planes = int_value(mapping.get("ib_planes", 2), path=path, field="ib_planes", minimum=1,
                       maximum=64, line=lines.get("ib_planes"))
    model = mapping.get("nvlink_bandwidth", "peak")
    if model not in ("peak", "nccl"):
        raise FieldError(path, "nvlink_bandwidth", f"must be 'peak' or 'nccl', got {show(model)}",
                         lines.get("nvlink_bandwidth"))
    name = mapping.get("name")
    if name is not None:
        name = str_value(name, path=path, field="name", line=lines.get("name"))
    return load_nccl_topo(xml_path, boxes=boxes, ib_planes=planes, nvlink_bandwidth=str(model),
                          name=name if name is not None else Path(path).stem)


def parse_nccl_topo(text: str | bytes, path: str = "<string>", *, boxes: int = 1,
                    ib_planes: int = 2, nvlink_bandwidth: str = "peak",
                    name: str | None = None, boxes_field: str = "boxes") -> Topology:
    """Parse NCCL topology XML text; see ``load_nccl_topo``.

    Parameters
    ----------
    text : str or bytes
        The document.
    path : str
        File name for messages.
    boxes, ib_planes, nvlink_bandwidth, name, boxes_field
        As in ``load_nccl_topo``.

    Returns
    -------
    Topology

    Raises
    ------
    SpecError
        As in ``load_nccl_topo``.
    """
    boxes = int_value(boxes, path=path, field=boxes_field, minimum=1, maximum=_MAX_BOXES)
    ib_planes = int_value(ib_planes, path=path, field="ib_planes", minimum=1, maximum=64)
    if nvlink_bandwidth not in ("peak", "nccl"):
        raise FieldError(path, "nvlink_bandwidth", f"must be 'peak' or 'nccl', got "
                         f"{show(nvlink_bandwidth)}")
    root = parse_xml(text, path, MAX_BYTES)
    peak = nvlink_bandwidth == "peak"
    box = _Box.parse(root, path, NVLINK_PEAK if peak else NVLINK_NCCL,
                     XGMI_PEAK if peak else XGMI_RCCL)
    check_ranks(boxes * len(box.gpus), path=path, field=boxes_field,
                detail=f"{boxes} boxes x {len(box.gpus)} GPUs = ")
    stem = Path(path).stem if not path.startswith("<") else "nccl-topo"
    topo_name = name or (stem if boxes == 1 else f"{stem}-x{boxes}")
    topo = box.build(boxes, ib_planes, topo_name, path)
    validate_topology(topo, path, ranks_from="<gpu> elements",
                      fewer=" (--boxes N joins N copies of this box)" if boxes == 1 else "")
    return topo


# --------------------------------------------------------------------------- one box


def _attr_int(el: etree._Element, attr: str, path: str, *, required: bool = True,
              default: int | None = None, minimum: int | None = 0) -> int | None:
    """``el``'s integer attribute ``attr`` (decimal or 0x hex), at least
    ``minimum`` (ids, counts and classes are never negative; None: any)."""
    raw = el.get(attr)
    if raw is None:
        if required:
            raise SpecError(path, f"<{el.tag}>: attribute '{attr}' missing", el.sourceline)
        return default
    text = raw.strip()
    try:
        if not text.isascii() or len(text) > MAX_INT_CHARS:
            raise ValueError
        value = int(text, 0) if text.lower().startswith("0x") else int(text)
    except ValueError:
        raise SpecError(path, f"<{el.tag}>: attribute '{attr}' must be an integer of at most "
                        f"{MAX_INT_CHARS} ASCII digits, got {show(raw)}", el.sourceline) from None
    if minimum is not None and value < minimum:
        raise SpecError(path, f"<{el.tag}>: attribute '{attr}' must be {minimum} or more, got "
                        f"{show(raw)}", el.sourceline)
    return value


def _in_range(bw: Fraction, el: etree._Element, attr: str, path: str) -> Fraction:
    """``bw``, the bandwidth ``el``'s attribute ``attr`` gives, if a link may
    carry it (``MIN_BANDWIDTH`` .. ``MAX_BANDWIDTH`` GB/s); else the error
    names the element, its line and the attribute."""
    if MIN_BANDWIDTH <= bw <= MAX_BANDWIDTH:
        return bw
    raise SpecError(path, f"<{el.tag}> {attr}={show(el.get(attr))} gives {approx(bw)} GB/s; a "
                    f"link carries {approx(MIN_BANDWIDTH)} to {approx(MAX_BANDWIDTH)} GB/s",
                    el.sourceline)


def _unmodelled(gpu: _Gpu) -> str:
    """Why none of ``gpu``'s links is modelled: the classes they go to."""
    classes = sorted({nv.get("tclass") or "?" for nv in gpu.nvlinks})
    return (f"<gpu dev=\"{gpu.dev}\">: none of its {len(gpu.nvlinks)} <{gpu.nvlinks[0].tag}> "
            f"links goes to a GPU (class 0x03xxxx) or an NVSwitch (0x068000) (tclass "
            f"{', '.join(classes)}), so colc has no link from it to the other GPUs")


def _busid(raw: str | None) -> str:
    return (raw or "").strip().lower()


def _pci_bandwidth(el: etree._Element | None, path: str) -> Fraction:
    """NCCL's PCIe bandwidth of a ``<pci>``: width * code / 80 GB/s (Gen4 x16 = 24)."""
    if el is None:
        return Fraction(24)
    words = (el.get("link_speed") or "").split()
    number = words and re.fullmatch(r"[0-9]{1,4}(\.[0-9]{1,4})?", words[0])
    code = PCI_SPEED_CODE.get(Fraction(words[0])) if number else None
    width = _attr_int(el, "link_width", path, required=False, default=16) or 16
    return Fraction(width * (code or 120), 80)


def _amd_family(gcn: str, el: etree._Element, path: str) -> str:
    """``GCN_FAMILIES``' family of an RCCL dump's ``gcn`` (``910``, ``gfx90a``,
    ``gfx942:sramecc+:xnack-``).

    >>> _amd_family("gfx942:sramecc+:xnack-", None, "x.xml"), _amd_family("910", None, "x.xml")
    ('mi300', 'mi200')
    """
    key = gcn.strip().lower().split(":")[0].removeprefix("gfx")
    if key not in GCN_FAMILIES:
        raise SpecError(path, f"<gpu>: gcn={show(gcn)}: colc knows the xGMI bandwidth of "
                        f"MI200 (gfx90a) and MI300 (gfx940-942) GPUs only",
                        None if el is None else el.sourceline)
    return GCN_FAMILIES[key]


def _nvlink_bw(table: Mapping[int, Fraction], sm: int, gpu: _Gpu, path: str) -> Fraction:
    if sm == 86:
        return table[86]
    for gen in (100, 90, 80, 70, 60):
        if sm >= gen:
            return table[gen]
    raise SpecError(path, f"<gpu dev=\"{gpu.dev}\">: sm={sm} has no NVLink (needs sm >= 60)",
                    gpu.el.sourceline)


#: A schedule colc writes, given where a topology goes: what takes it.
_ALGORITHM_FILES = {
    "algo": "; this is an MSCCL algorithm file, a schedule: colc verify checks it and colc "
            "simulate FILE --topo TOPOLOGY times it",
    "oneccl_schedule": "; this is a oneCCL schedule colc wrote: colc verify checks it"}


class _Box:
    """What one NCCL file says about one node."""

    def __init__(self, path: str, table: Mapping[int, Fraction],
                 xgmi: Mapping[str, Fraction]) -> None:
        self.path = path
        self.table = table
        self.xgmi = xgmi
        self.gpus: list[_Gpu] = []
        self.nets: list[_Net] = []
        self.pci_class: dict[str, int] = {}
        self.bare_gpu_pcis: list[etree._Element] = []
        self.slow_nets: list[tuple] = []  # NICs without a speed: (line, name, dev)

    @classmethod
    def parse(cls, root: etree._Element, path: str, table: Mapping[int, Fraction],
              xgmi: Mapping[str, Fraction]) -> _Box:
        if root.tag != "system":
            raise SpecError(path, f"root element is <{root.tag}>, expected <system> (an NCCL "
                            f"topology file){_ALGORITHM_FILES.get(root.tag, '')}",
                            root.sourceline)
        if root.get("version") is None:
            raise SpecError(path, "<system>: attribute 'version' missing", root.sourceline)
        box = cls(path, table, xgmi)
        for el in root.iter():
            if not isinstance(el.tag, str):
                continue
            if el.tag == "pci":
                box._pci(el)
            elif el.tag == "gpu":
                box._gpu(el)
            elif el.tag == "net":
                box._net(el)
        box._check()
        return box

    def _pci(self, el: etree._Element) -> None:
        busid = _busid(el.get("busid"))
        if not busid:
            raise SpecError(self.path, "<pci>: attribute 'busid' missing", el.sourceline)
        cls_ = _attr_int(el, "class", self.path) or 0
        self.pci_class[busid] = cls_
        if cls_ >> 16 == 0x03 and not any(c.tag == "gpu" for c in el if isinstance(c.tag, str)):
            self.bare_gpu_pcis.append(el)

    def _gpu(self, el: etree._Element) -> None:
        parent = el.getparent()
        if parent is None or parent.tag != "pci":
            raise SpecError(self.path, "<gpu> must be inside the <pci> of its device",
                            el.sourceline)
        dev = _attr_int(el, "dev", self.path)
        sm = _attr_int(el, "sm", self.path)
        rank = _attr_int(el, "rank", self.path, required=False)
        gcn = el.get("gcn")
        family = "" if gcn is None else _amd_family(gcn, el, self.path)
        gpu = _Gpu(el, _busid(parent.get("busid")), dev or 0, rank, sm or 0, family)
        tag = "xgmi" if family else "nvlink"
        gpu.nvlinks = [c for c in el if isinstance(c.tag, str) and c.tag == tag]
        self.gpus.append(gpu)

    def _net(self, el: etree._Element) -> None:
        dev = _attr_int(el, "dev", self.path, required=False)
        if dev is None:
            return  # NCCL ignores nets without dev
        speed = _attr_int(el, "speed", self.path, required=False, default=0, minimum=None) or 0
        if speed <= 0:  # noted once boxes use the NICs (``build``, ``_slow_nets_note``)
            self.slow_nets.append((el.sourceline, el.get("name", ""), dev))
            speed = 10000
        nic = el.getparent()
        anchor = nic.getparent() if nic is not None and nic.getparent() is not None else el
        bw = _in_range(Fraction(speed, 8000), el, "speed", self.path)
        self.nets.append(_Net(el, dev, bw, anchor))

    def _check(self) -> None:
        if not self.gpus:
            missing = ", ".join(_busid(p.get("busid")) for p in self.bare_gpu_pcis)
            hint = (f"; GPU-class PCI devices without a <gpu> child: {missing}" if missing
                    else "")
            raise SpecError(self.path, "no <gpu> elements: this is a CPU/PCI skeleton (as "
                            "cloud vendors ship; NCCL adds GPUs, NVLinks and NICs by detection)"
                            f"{hint}. Dump the full topology on the machine with "
                            "NCCL_TOPO_DUMP_FILE=<file> and pass that file")
        with_rank = [g for g in self.gpus if g.rank is not None]
        if with_rank and len(with_rank) != len(self.gpus):
            g = next(g for g in self.gpus if g.rank is None)
            raise SpecError(self.path, f"<gpu dev=\"{g.dev}\"> has no 'rank' while other GPUs "
                            "have one", g.el.sourceline)
        key = "rank" if with_rank else "dev"
        self.gpus.sort(key=lambda g: (g.rank if with_rank else g.dev))
        seen: dict[int, _Gpu] = {}
        for g in self.gpus:
            k = g.rank if with_rank else g.dev
            if k in seen:
                raise SpecError(self.path, f"two <gpu> elements with {key}={k}", g.el.sourceline)
            seen[k or 0] = g
        devs: dict[int, _Gpu] = {}
        for g in sorted(self.gpus, key=lambda g: g.el.sourceline or 0):
            if g.dev in devs:
                raise SpecError(self.path, f"<gpu dev=\"{g.dev}\">: dev {g.dev} is also the <gpu> "
                                f"on line {devs[g.dev].el.sourceline}'s; NCCL numbers its GPUs "
                                "apart", g.el.sourceline)
            devs[g.dev] = g
        first: dict[str, _Gpu] = {}
        for g in sorted(self.gpus, key=lambda g: g.el.sourceline or 0):
            if g.busid in first:
                raise SpecError(self.path, f"<gpu dev=\"{g.dev}\"> is in the <pci> of busid "
                                f"{g.busid}, as <gpu dev=\"{first[g.busid].dev}\"> on line "
                                f"{first[g.busid].el.sourceline}: two GPUs share a PCI busid",
                                g.el.sourceline)
            first[g.busid] = g
        if len(self.gpus) > 1:
            lonely = [g for g in self.gpus if not g.nvlinks]
            if lonely:
                names = ", ".join(f"dev {g.dev} ({g.busid})" for g in lonely)
                tag = "xgmi" if lonely[0].family else "nvlink"
                raise SpecError(self.path, f"GPU(s) {names} have no <{tag}>: colc models "
                                "NVLink, xGMI and NIC links only (PCIe peer-to-peer is not "
                                f"modelled); dump the topology with {tag} links detected",
                                lonely[0].el.sourceline)
        self.nets.sort(key=lambda n: (n.dev, n.el.sourceline or 0))
        for a, b in zip(self.nets, self.nets[1:], strict=False):
            if a.dev == b.dev:
                raise SpecError(self.path, f"<net dev=\"{b.dev}\">: dev {b.dev} is also the <net> "
                                f"on line {a.el.sourceline}'s; NCCL numbers its NICs apart",
                                b.el.sourceline)

    # -- links ---------------------------------------------------------------
    def nvlink_edges(self) -> tuple[list[tuple[int, int, Fraction]], dict[int, Fraction]]:
        """GPU -> GPU links (by index) and per-GPU NVSwitch bandwidth."""
        index = {g.busid: i for i, g in enumerate(self.gpus)}
        direct: list[tuple[int, int, Fraction]] = []
        to_switch: dict[int, Fraction] = {}
        for i, g in enumerate(self.gpus):
            per_link = (self.xgmi[g.family] if g.family
                        else _nvlink_bw(self.table, g.sm, g, self.path))
            for nv in g.nvlinks:
                target = _busid(nv.get("target"))
                if not target:
                    raise SpecError(self.path, f"<{nv.tag}>: attribute 'target' missing",
                                    nv.sourceline)
                count = _attr_int(nv, "count", self.path, required=False, default=1,
                                  minimum=None) or 0
                if count < 1:
                    raise SpecError(self.path, f"<{nv.tag} target=\"{target}\">: count must be "
                                    f">= 1, got {count}", nv.sourceline)
                tclass = _attr_int(nv, "tclass", self.path, required=False)
                if tclass is None or (g.family and target in index):
                    # an xGMI link joins two GPUs, whatever class the dump gives the
                    # target (an MI300X is a processing accelerator, 0x1200)
                    tclass = 0x030000 if target in index else self.pci_class.get(target)
                if tclass == NVSWITCH_CLASS:
                    to_switch[i] = _in_range(to_switch.get(i, Fraction(0)) + count * per_link,
                                             nv, "count", self.path)
                elif tclass is not None and tclass >> 16 == 0x03:
                    if target not in index:
                        raise SpecError(self.path, f"<{nv.tag} target=\"{target}\"> names a GPU "
                                        "that is not in the file", nv.sourceline)
                    if index[target] == i:
                        raise SpecError(self.path, f"<{nv.tag}> from a GPU to itself",
                                        nv.sourceline)
                    direct.append((i, index[target],
                                   _in_range(count * per_link, nv, "count", self.path)))
                elif tclass is None:
                    raise SpecError(self.path, f"<{nv.tag} target=\"{target}\">: unknown target "
                                    "(no 'tclass' and no <pci> with that busid)", nv.sourceline)
                # other classes (CPU, P9 NVLink) are not modelled
            if len(self.gpus) > 1 and i not in to_switch and all(d[0] != i for d in direct):
                raise SpecError(self.path, _unmodelled(g), g.nvlinks[0].sourceline)
        return direct, to_switch

    def nic_plan(self) -> tuple[dict[int, list[int]], bool]:
        """Map NIC position -> GPU indices using it; and whether NICs are per-GPU."""
        nics = self.nets
        users: dict[int, list[int]] = {k: [] for k in range(len(nics))}
        if not nics:
            return users, True
        dist = [[_tree_distance(g.el.getparent(), n.anchor) for n in nics] for g in self.gpus]
        if len(nics) >= len(self.gpus):
            free = set(range(len(nics)))
            for i in range(len(self.gpus)):
                k = min(free, key=lambda k: (dist[i][k], k))
                free.discard(k)
                users[k].append(i)
            for k in sorted(free):
                i = min(range(len(self.gpus)), key=lambda i: (dist[i][k], i))
                users[k].append(i)
            return users, True
        for i in range(len(self.gpus)):
            k = min(range(len(nics)), key=lambda k: (dist[i][k], k))
            users[k].append(i)
        return users, False

    def build(self, boxes: int, planes: int, name: str, path: str) -> Topology:
        direct, to_switch = self.nvlink_edges()
        users, per_gpu = self.nic_plan()
        if boxes > 1 and not self.nets:
            raise SpecError(path, "no <net> with a 'dev' (NIC): boxes cannot be connected; "
                            f"{boxes} boxes were requested")
        planes = max(1, min(planes, len(self.nets)))
        nodes: list[Node] = []
        links: list[Link] = []

        def duplex(u: str, v: str, bw: Fraction) -> None:
            links.append(Link(u, v, bw))
            links.append(Link(v, u, bw))

        for b in range(boxes):
            gid = [f"b{b}g{i}" for i in range(len(self.gpus))]
            nodes.extend(Node(g, "gpu") for g in gid)
            if to_switch:
                nodes.append(Node(f"b{b}nvs", "switch"))
                for i, g in enumerate(gid):
                    if i in to_switch:
                        duplex(g, f"b{b}nvs", to_switch[i])
            for i, j, bw in direct:
                links.append(Link(gid[i], gid[j], bw))
            if boxes > 1 and not per_gpu:
                nodes.extend(Node(f"b{b}nic{k}", "nic") for k in users)
        if boxes > 1:
            nodes.extend(Node(f"ib{p}", "switch", net=True) for p in range(planes))
            for b in range(boxes):
                for k, gpus in users.items():
                    ib = f"ib{k % planes}"
                    bw = self.nets[k].bandwidth
                    if per_gpu:
                        for i in gpus:
                            duplex(f"b{b}g{i}", ib, bw)
                        continue
                    nic = f"b{b}nic{k}"
                    for i in gpus:
                        duplex(f"b{b}g{i}", nic, _pci_bandwidth(self.gpus[i].el.getparent(),
                                                                path))
                    duplex(nic, ib, bw)
        hardware = self.hardware()
        notes = [] if len(self._kinds()) == 1 else [self._kinds_note()]
        if boxes > 1 and self.slow_nets:
            notes.append(self._slow_nets_note())
        return Topology(name, tuple(nodes), tuple(links), path, hardware=hardware,
                        notes=tuple(notes))

    def _slow_nets_note(self) -> str:
        """One note for the NICs read without a speed (a dump of 8 gave 8 lines)."""
        line, name, dev = self.slow_nets[0]
        if len(self.slow_nets) == 1:
            what = f'<net name="{name}" dev="{dev}"> has'
        else:
            devs = ", ".join(str(d) for _, _, d in self.slow_nets)
            what = f"{len(self.slow_nets)} <net> elements (dev {devs}) have"
        return (f"{self.path}:{line}: {what} no speed above 0; read as NCCL reads it, "
                f"10000 Mb/s (1.25 GB/s); give the NIC's speed in Mb/s if it is faster")

    def _kinds(self) -> set[str]:
        return {FAMILY_MACHINES[g.family] if g.family else SM_MACHINES.get(g.sm, "")
                for g in self.gpus}

    def hardware(self) -> str:
        """The machine whose cost model fits the dump's GPUs (``SM_MACHINES``
        by their ``sm``, an AMD GPU's by its ``gcn``: ``FAMILY_MACHINES``; all
        alike), else "" (the name decides, ``model_for``)."""
        kinds = self._kinds()
        return kinds.pop() if len(kinds) == 1 else ""

    def _kinds_note(self) -> str:
        """The note for GPUs of several kinds (no one cost model)."""
        which = sorted({f"gcn {g.el.get('gcn')}" if g.family else f"sm {g.sm}"
                        for g in self.gpus})
        return (f"{self.path}: GPUs of different kinds ({', '.join(which)}): no one "
                f"machine's cost model fits them, so the topology's name picks one (generic "
                f"if it names none)")


def _tree_distance(a: etree._Element | None, b: etree._Element | None) -> int:
    """Edges between two elements of the XML tree (PCI hops, roughly)."""
    if a is None or b is None:
        return 1 << 20
    tree = a.getroottree()
    pa = tree.getpath(a).split("/")
    pb = tree.getpath(b).split("/")
    common = 0
    for x, y in zip(pa, pb):
        if x != y:
            break
        common += 1
    return len(pa) + len(pb) - 2 * common
