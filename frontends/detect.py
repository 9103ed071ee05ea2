"""Pick the frontend for a non-colc-YAML topology input by its content.

``foreign_loader(path, boxes)`` returns a zero-argument loader, or None for
colc's own YAML (explicit or family form):

* XML whose root is ``<system>``: NCCL topology (``nccl_topo_xml``), ``boxes``
  copies;
* YAML with a top-level ``nccl_topo`` key: the NCCL wrapper (``boxes`` on the
  command line overrides the file's);
* JSON with ``"msccl_type": "topology"``: msccl-tools;
* JSON with ``gpus_per_node``: TACCL topology (``boxes`` = its ``nnodes``);
  a sketch beside it named ``<stem>.sketch.json`` is used when present.

Only regular files up to ``MAX_FILE_BYTES`` (16 MiB) are looked at: a
directory, a device (``/dev/zero``), a named pipe or a larger file is refused
before it is opened, so detection never blocks or reads without end.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from colc.errors import SpecError
from colc.ir.topology import Topology

from ._input import check_input, decode_text, open_nonblocking, read_input
from ._json import load_json
from ._values import show
from .msccl_tools_json import load_msccl_tools_topology
from .nccl_topo_xml import load_nccl_topo, topology_from_mapping
from .taccl_json import load_taccl_sketch, load_taccl_topology
from .yaml_topology import load_topology, top_level

_HEAD = 4096
#: A key only msccl-tools or TACCL JSON has (a colc YAML file may be JSON too).
_JSON_KEY = re.compile(r'"(msccl_type|gpus_per_node|nnodes)"\s*:')
#: The NCCL wrapper's key at the top level, in block or flow style, quoted or not.
_WRAPPER_KEY = re.compile(r"""^[ \t{,]*["']?nccl_topo["']?[ \t]*:""", re.M)  # linear: no \n


def _head(path: str) -> str:
    check_input(path)  # a regular file of at most 16 MiB: opening it cannot block
    try:
        with open_nonblocking(path) as fh:
            return fh.read(_HEAD).decode("utf-8-sig", errors="replace")  # BOM dropped
    except OSError as err:
        raise SpecError(path, f"cannot read file: {err.strerror or err}") from None


def foreign_loader(path: str, boxes: int | None = None) -> Callable[[], Topology] | None:
    """A loader for ``path`` if it is not colc YAML.

    Parameters
    ----------
    path : str
        The input file.
    boxes : int or None
        Boxes for single-box inputs (NCCL dump, TACCL profile).

    Returns
    -------
    callable or None
        Calling it reads the file and returns a validated ``Topology``.

    Raises
    ------
    SpecError
        The file is missing, not a regular file, or larger than 16 MiB.
    """
    head = _head(path)
    text = re.sub(r"^\s*(<\?xml[^>]*\?>\s*)?(<!--.*?-->\s*)*", "", head, flags=re.S)
    if text.startswith("<"):
        return lambda: load_nccl_topo(path, boxes=boxes or 1, boxes_field="--boxes")
    whole = decode_text(read_input(path), path)  # at most 16 MiB; keys may come late
    if head.lstrip().startswith("{") and (path.lower().endswith(".json")
                                          or _JSON_KEY.search(whole)):
        return lambda: _json_loader(path, boxes)
    if _WRAPPER_KEY.search(whole):
        return lambda: _wrapper(path, boxes)
    return None


def _json_loader(path: str, boxes: int | None) -> Topology:
    doc = load_json(path)
    if isinstance(doc, dict) and doc.get("msccl_type") == "topology":
        if boxes is not None:
            raise SpecError(path, "--boxes does not apply to an msccl-tools topology "
                            "(it lists every rank already)")
        return load_msccl_tools_topology(path)
    if isinstance(doc, dict) and "gpus_per_node" in doc:
        sketch = Path(path).with_suffix("").as_posix() + ".sketch.json"
        if not Path(sketch).exists():
            return load_taccl_topology(path, None, boxes)
        if boxes is not None and (said := load_taccl_sketch(sketch)) != boxes:
            # its internode links and symmetry name the sketch's count, as a wrapper's do
            raise SpecError(sketch, f"field 'nnodes': the sketch says {said} and --boxes says "
                            f"{boxes}; change the sketch, or drop --boxes")
        return load_taccl_topology(path, sketch, boxes)
    if isinstance(doc, dict) and "nnodes" in doc:
        raise SpecError(path, "this is a TACCL communication sketch; pass the TACCL topology "
                        "file (its sketch is read from <stem>.sketch.json beside it)")
    if isinstance(doc, dict) and ("family" in doc or "nodes" in doc):
        if boxes is not None:
            raise SpecError(path, "--boxes applies to single-box inputs (an NCCL topology "
                            "dump, a TACCL profile); colc's own form sets \"boxes\" in a "
                            "family file")
        return load_topology(path)  # colc's own form written as JSON (YAML reads it)
    if isinstance(doc, dict) and "nccl_topo" in doc:  # the NCCL wrapper written as JSON
        return _wrapper(path, boxes)
    raise SpecError(path, "unrecognised JSON topology: expected msccl-tools "
                    "(\"msccl_type\": \"topology\"), TACCL (\"gpus_per_node\") or colc's "
                    "own form (\"family\" or \"nodes\")")


def _wrapper(path: str, boxes: int | None) -> Topology:
    """The NCCL wrapper; ``--boxes`` stands for its ``boxes:`` where it has
    none, and is refused where it says another number (the file's ``name``
    would go on naming the other count)."""
    doc, lines = top_level(decode_text(read_input(path), path), path)
    if "boxes" in doc and type(doc["boxes"]) is not int:  # noqa: E721 (a bool is no count)
        boxes = None  # the file's own value is refused as it stands, not hidden by --boxes
    if boxes is not None and "boxes" in doc and doc["boxes"] != boxes:
        raise SpecError(path, f"field 'boxes': the file says {show(doc['boxes'])} and --boxes "
                        f"says {boxes}; change the file, or drop --boxes",
                        lines.get("boxes"))
    if boxes is not None:
        doc = {**doc, "boxes": boxes}
    return topology_from_mapping(doc, path, lines)
