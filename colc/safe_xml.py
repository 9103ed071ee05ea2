"""Safe parsing of untrusted XML (shared by the XML frontends and the oneCCL backend).

lxml with entity resolution, DTD loading and network access off, no huge
trees, a byte limit checked before parsing, and any DOCTYPE rejected, so a
file can neither expand entities (billion laughs) nor read other files.
"""

from __future__ import annotations


from lxml import etree

from colc.errors import SpecError


def safe_parser() -> etree.XMLParser:
    """An lxml parser with entities, DTDs, network access and huge trees off."""
    return etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=False,
                           load_dtd=False, dtd_validation=False)


def read_bytes_limited(path: str, max_bytes: int) -> bytes:
    """Read a file of at most ``max_bytes`` bytes.

    Parameters
    ----------
    path : str
        The file.
    max_bytes : int
        Size limit.

    Returns
    -------
    bytes

    Raises
    ------
    SpecError
        Unreadable, not a regular file (a device, a FIFO), or too large.
    """
    from colc.frontends._input import read_input  # regular files only, size first

    return read_input(path, max_bytes)


def check_xml_bytes(data: str | bytes, path: str, max_bytes: int) -> bytes:
    """The document as bytes, refused when too large or carrying a DOCTYPE
    (colc's own refusal, before libxml2 words one of its own).  Parameters as
    ``parse_xml``; the streaming oneCCL reader calls it before ``iterparse``.

    Returns
    -------
    bytes

    Raises
    ------
    SpecError
    """
    raw = data.encode("utf-8") if isinstance(data, str) else data
    if len(raw) > max_bytes:
        raise SpecError(path, f"file is {len(raw)} bytes; at most {max_bytes} are accepted")
    doctype = raw.find(b"<!DOCTYPE")
    if doctype >= 0:
        raise SpecError(path, "DOCTYPE declarations are not allowed",
                        raw.count(b"\n", 0, doctype) + 1)
    return raw


def parse_xml(data: str | bytes, path: str, max_bytes: int) -> etree._Element:
    """Parse untrusted XML and return its root element.

    Parameters
    ----------
    data : str or bytes
        The document.
    path : str
        File name for messages.
    max_bytes : int
        Size limit.

    Returns
    -------
    lxml.etree._Element

    Raises
    ------
    SpecError
        Too large, not well-formed, or carrying a DOCTYPE.
    """
    raw = check_xml_bytes(data, path, max_bytes)
    try:
        root = etree.fromstring(raw, safe_parser())
    except etree.XMLSyntaxError as err:
        msg = str(err.msg or err).splitlines()[0]
        raise SpecError(path, f"malformed XML: {msg}", err.lineno or None) from None
    tree = root.getroottree()
    if tree.docinfo.doctype or tree.docinfo.internalDTD is not None:
        raise SpecError(path, "DOCTYPE declarations are not allowed", 1)
    return root
