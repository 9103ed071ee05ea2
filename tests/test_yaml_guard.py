"""The YAML limits are colc's own, whatever YAML library is installed (issue 21).

PyYAML 6.0.4's LibYAML stops flow nesting past 1000 levels in its scanner,
before colc's event walk sees the 33rd level; the message then was
LibYAML's.  Every case here runs with LibYAML's loader (when PyYAML has it)
and with the pure-Python one, and both must give the same line.
"""

from __future__ import annotations

import pytest
import yaml

from colc.errors import SpecError
from colc.frontends import parse_topology_text
from colc.frontends._yaml_guard import check_events, safe_load
from colc.frontends.limits import MAX_YAML_DEPTH

LOADERS = [yaml.SafeLoader] + ([yaml.CSafeLoader] if hasattr(yaml, "CSafeLoader") else [])


def _message(text: str, loader: type) -> str:
    with pytest.raises(SpecError) as info:
        check_events(text, "t.yaml", loader=loader)
    return str(info.value)


@pytest.mark.parametrize("depth", [MAX_YAML_DEPTH + 1, 999, 1000, 1001, 5000])
@pytest.mark.parametrize("loader", LOADERS, ids=lambda c: c.__name__)
def test_flow_nesting_is_refused_by_colc(depth: int, loader: type) -> None:
    text = "family: ring\nranks: " + "[" * depth + "]" * depth + "\n"
    msg = _message(text, loader)
    assert msg.startswith("t.yaml:2: error: field 'ranks[0][0]")
    assert msg.endswith(f"nested more than {MAX_YAML_DEPTH} levels deep; a topology file "
                        f"needs a few (is a bracket not closed?)")


@pytest.mark.parametrize("loader", LOADERS, ids=lambda c: c.__name__)
def test_unclosed_deep_nesting_is_refused_by_colc(loader: type) -> None:
    text = "family: ring\nranks: " + "[" * 3000 + "\n"
    assert f"nested more than {MAX_YAML_DEPTH} levels deep" in _message(text, loader)


@pytest.mark.parametrize("loader", LOADERS, ids=lambda c: c.__name__)
def test_block_nesting_is_refused_by_colc(loader: type) -> None:
    text = "".join(f"{' ' * i}k{i}:\n" for i in range(MAX_YAML_DEPTH + 2)) + " " * 40 + "x\n"
    assert f"nested more than {MAX_YAML_DEPTH} levels deep" in _message(text, loader)


def test_nesting_at_the_limit_is_read() -> None:
    depth = MAX_YAML_DEPTH - 1  # the top-level mapping is one level
    value = safe_load("a: " + "[" * depth + "1" + "]" * depth + "\n", "t.yaml")
    value = value["a"]
    for _ in range(depth):
        value = value[0]
    assert value == 1
    with pytest.raises(SpecError, match="nested more than"):
        safe_load("a: " + "[" * (depth + 1) + "1" + "]" * (depth + 1) + "\n", "t.yaml")


@pytest.mark.parametrize("text,line,words", [
    ("name: [unclosed\n", 2, "malformed YAML: "),
    ("nodes:\n\t- {id: g0}\n", 2, "malformed YAML: "),
    ("a: \"open\n", 2, "malformed YAML: "),
    ("a: 1\nb: *nowhere\n", 2, "field 'b': alias *nowhere has no anchor &nowhere before it"),
])
def test_messages_do_not_depend_on_the_loader(text: str, line: int, words: str) -> None:
    messages = {_message(text, loader) for loader in LOADERS}
    assert len(messages) == 1, messages
    (msg,) = messages
    assert msg.startswith(f"t.yaml:{line}: error: ") and words in msg, msg


def test_anchors_do_not_carry_over_documents() -> None:
    text = "a: &x 1\n---\nb: *x\n"
    for loader in LOADERS:
        assert "alias *x has no anchor &x" in _message(text, loader)


def test_composer_messages_do_not_depend_on_libyaml() -> None:
    # LibYAML's composer says "found duplicate anchor;", the pure-Python one
    # names the anchor: colc composes a document LibYAML refuses again.
    text = "family: ring\nranks: &a 4\nbandwidth: &a 10\n"
    with pytest.raises(SpecError) as info:
        parse_topology_text(text, "t.yaml")
    msg = str(info.value)
    assert msg.startswith("t.yaml:3: error: malformed YAML: ") and "'a'" in msg, msg
    with pytest.raises(SpecError) as again:
        safe_load(text, "t.yaml")
    assert str(again.value) == msg
