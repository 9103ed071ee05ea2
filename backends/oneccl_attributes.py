"""Name the attribute a oneCCL XML file gets wrong, from the schema itself.

RelaxNG reports a bad attribute as "Element rank failed to validate
attributes", naming neither the attribute nor what it should hold.  This
module reads the attribute patterns of ``oneccl.rng`` (a value, a choice
of values, or a string with a pattern or a length limit, possibly behind
``<ref>``) and checks an element's attributes against them, so the reader
can say which attribute is missing, unknown or malformed and what the
schema wants.

Input: an element of a document the schema rejected.  Output: the first
problem with its attributes as one phrase, or None (the schema's own
message then stands).  Cost: linear in the element's attributes; the
schema's table is built once.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

from lxml import etree

from colc.safe_xml import safe_parser

_RNG = "{http://relaxng.org/ns/structure/1.0}"

#: Readable names of the schema's shared patterns.
_NAMED = {
    "natural": "a whole number 0 or more (decimal, no sign or leading zero, at most 10 "
               "digits)",
    "positive": "a whole number 1 or more (decimal, no sign or leading zero, at most 10 "
                "digits)",
    "bytes": "a byte count (decimal, no sign or leading zero, at most 18 digits)",
    "flag": "0 or 1",
}


class _Pattern:
    """What one attribute may hold: values, or a string pattern and length."""

    def __init__(self, values: tuple[str, ...] | None, regex: str | None,
                 max_length: int | None, name: str | None) -> None:
        self.values = values
        self.regex = re.compile(regex) if regex is not None else None
        self.max_length = max_length
        self.name = name

    def accepts(self, text: str) -> bool:
        if self.values is not None:  # an untyped <value> is a token: spaces collapse
            return " ".join(text.split()) in self.values
        if self.regex is not None and not self.regex.fullmatch(text):
            return False
        return self.max_length is None or len(text) <= self.max_length

    def wants(self) -> str:
        if self.name in _NAMED:
            return _NAMED[self.name]
        if self.values is not None:
            return " or ".join(self.values) if len(self.values) <= 2 else \
                "one of " + ", ".join(self.values)
        if self.max_length is not None:
            return f"text of at most {self.max_length} characters"
        return "text"


@cache
def _table() -> dict[str, dict[str, _Pattern]]:
    """Element name -> attribute name -> pattern, from ``oneccl.rng``."""
    data = resources.files("colc.backends").joinpath("oneccl.rng").read_bytes()
    grammar = etree.fromstring(data, safe_parser())
    defines = {d.get("name"): d for d in grammar.iter(f"{_RNG}define")}
    table: dict[str, dict[str, _Pattern]] = {}
    for element in grammar.iter(f"{_RNG}element"):
        attrs: dict[str, _Pattern] = {}
        _collect(element, defines, attrs)
        table[element.get("name")] = attrs
    return table


def _collect(node, defines: dict, attrs: dict[str, _Pattern]) -> None:
    """The attributes declared directly under ``node`` (following ``<ref>``s,
    not entering child elements)."""
    for child in node:
        if child.tag == f"{_RNG}attribute":
            attrs[child.get("name")] = _pattern(child, defines, None)
        elif child.tag == f"{_RNG}ref":
            _collect(defines[child.get("name")], defines, attrs)


def _pattern(node, defines: dict, name: str | None) -> _Pattern:
    """The pattern of an ``<attribute>`` (or ``<define>``) body."""
    body = [c for c in node if isinstance(c.tag, str)]
    if len(body) == 1 and body[0].tag == f"{_RNG}ref":
        ref = body[0].get("name")
        return _pattern(defines[ref], defines, ref)
    values = [v.text or "" for v in node.iter(f"{_RNG}value")]
    if values:
        return _Pattern(tuple(values), None, None, name)
    params = {p.get("name"): p.text for p in node.iter(f"{_RNG}param")}
    length = params.get("maxLength")
    return _Pattern(None, params.get("pattern"), int(length) if length else None, name)


def attribute_problem(element: etree._Element) -> str | None:
    """The first problem with ``element``'s attributes, as the schema sees it.

    Parameters
    ----------
    element : lxml.etree._Element
        An element of a oneCCL XML document.

    Returns
    -------
    str or None
        For example ``"<rank> attribute id='x': expected a whole number 0
        or more ..."``; None when the attributes match the schema (or the
        element is not one the schema declares).

    Examples
    --------
    >>> from lxml import etree
    >>> attribute_problem(etree.fromstring('<sync i="0" thread="1" instr="-2"/>'))
    "<sync> attribute instr='-2': expected a whole number 0 or more (decimal, no sign or leading zero, at most 10 digits)"
    """
    want = _table().get(element.tag) if isinstance(element.tag, str) else None
    if want is None:
        return None
    for name in element.attrib:
        if name not in want:
            return f"<{element.tag}> has no attribute {name!r} (it has {', '.join(want)})"
    for name, pattern in want.items():
        text = element.get(name)
        if text is None:
            return f"<{element.tag}> lacks attribute {name!r} ({pattern.wants()})"
        if not pattern.accepts(text):
            return f"<{element.tag}> attribute {name}={text!r}: expected {pattern.wants()}"
    return None


def first_attribute_problem(root: etree._Element) -> tuple[int | None, str] | None:
    """The first element under (and including) ``root`` whose attributes the
    schema rejects: its line and ``attribute_problem``'s phrase, or None."""
    for element in root.iter():
        problem = attribute_problem(element)
        if problem is not None:
            return element.sourceline, problem
    return None
