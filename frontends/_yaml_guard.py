"""Bounded YAML reading: refuse what would not fit before PyYAML builds it.

PyYAML composes a whole document into a node tree and constructs values from
it.  Three inputs make that unbounded: aliases (``*a``) that refer to lists
full of aliases (a "billion laughs" document: a few lines that expand to
billions of values wherever a value is rendered, merged or walked), deep
nesting (``[[[[...`` recurses in the composer: ``RecursionError``, or a crash
in LibYAML's composer) and huge scalars.  ``check_events`` walks the parser's
event stream first (the parser is a state machine, flat in memory and
stack) and stops at the first of:

* more than ``MAX_YAML_VALUES`` values, counting every alias as the size of
  what it refers to (so expansion is bounded, whatever later walks it);
* an alias to a collection that contains it (a recursive structure), or
  to no anchor at all;
* nesting deeper than ``MAX_YAML_DEPTH``;
* a scalar longer than ``MAX_SCALAR_CHARS``.

The message names the field (``links[3].src``) and its line.  LibYAML
(``CSafeLoader``) is used when PyYAML has it, else the pure-Python loader.
The limits are colc's own, whatever the library: a document LibYAML refuses
(it has limits of its own, which change between PyYAML wheels) is walked
again with the pure-Python parser, so every message, syntax errors
included, has one wording whichever parser is installed.

Example
-------
>>> bomb = "a: &a [x, x]\\nb: &b [*a, *a]\\nc: [*b, *b]\\n"
>>> check_events(bomb, "t.yaml", max_values=16)
Traceback (most recent call last):
...
colc.errors.SpecError: t.yaml:3: error: field 'c[0]': alias *b makes the document \
more than 16 YAML values (aliases count as what they refer to, so nested aliases \
multiply: an alias bomb); write the values out, or use fewer aliases
"""

from __future__ import annotations

from dataclasses import dataclass

import yaml

from colc.errors import SpecError

from ._input import check_text
from ._values import clip
from .limits import MAX_FILE_BYTES, MAX_SCALAR_CHARS, MAX_YAML_DEPTH, MAX_YAML_VALUES

#: The loader class: LibYAML's when available (much faster), else pure Python.
Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

_NODE_EVENTS = (yaml.ScalarEvent, yaml.AliasEvent, yaml.CollectionStartEvent)


@dataclass
class _Open:
    """A collection whose end event has not come yet."""

    is_map: bool
    field: str
    anchor: str | None
    start: int
    items: int = 0
    key: str = "?"

    def child_field(self) -> str:
        """Field name of the node about to be read in this collection."""
        if not self.is_map:
            return f"{self.field}[{self.items}]"
        if self.items % 2 == 0:  # a key: report the mapping itself
            return self.field
        return f"{self.field}.{self.key}" if self.field else self.key


class _Walk:
    """State of one pass over the events."""

    def __init__(self, path: str, max_values: int) -> None:
        self.path = path
        self.max_values = max_values
        self.total = 0
        self.stack: list[_Open] = []
        self.sizes: dict[str, int] = {}
        self.open_anchors: set[str] = set()

    def error(self, event: yaml.Event, field: str, problem: str) -> SpecError:
        where = f"field '{clip(field)}': " if field else ""
        line = event.start_mark.line + 1 if event.start_mark is not None else None
        return SpecError(self.path, where + problem, line)

    def node(self, event: yaml.Event) -> None:
        """One scalar, alias or collection start."""
        parent = self.stack[-1] if self.stack else None
        field = parent.child_field() if parent is not None else ""
        if isinstance(event, yaml.AliasEvent):
            self.alias(event, field)
        else:
            self.count(event, field, 1, "")
            if isinstance(event, yaml.ScalarEvent):
                self.scalar(event, field)
            else:
                self.open(event, field)
        if parent is not None:
            if parent.is_map and parent.items % 2 == 0:
                value = event.value if isinstance(event, yaml.ScalarEvent) else "?"
                parent.key = value[:40]
            parent.items += 1

    def count(self, event: yaml.Event, field: str, size: int, why: str) -> None:
        self.total += size
        if self.total > self.max_values:
            raise self.error(event, field, why or (
                f"more than {self.max_values:,} YAML values; colc reads at most that many "
                f"(describe repeated structure with a family, e.g. 'family: torus')"))

    def alias(self, event: yaml.AliasEvent, field: str) -> None:
        name = event.anchor
        if name in self.open_anchors:
            raise self.error(event, field, f"alias *{name} refers to a collection that "
                             f"contains it (a recursive structure); colc cannot read it")
        size = self.sizes.get(name)
        if size is None:
            raise self.error(event, field, f"alias *{name} has no anchor &{name} before it "
                             f"in this document")
        self.count(event, field, size, (
            f"alias *{name} makes the document more than {self.max_values:,} YAML values "
            f"(aliases count as what they refer to, so nested aliases multiply: an alias "
            f"bomb); write the values out, or use fewer aliases"))

    def scalar(self, event: yaml.ScalarEvent, field: str) -> None:
        if len(event.value) > MAX_SCALAR_CHARS:
            raise self.error(event, field, f"a value of {len(event.value):,} characters; "
                             f"colc accepts at most {MAX_SCALAR_CHARS}")
        if event.anchor is not None:
            self.sizes[event.anchor] = 1

    def open(self, event: yaml.CollectionStartEvent, field: str) -> None:
        if len(self.stack) >= MAX_YAML_DEPTH:
            raise self.error(event, field, f"nested more than {MAX_YAML_DEPTH} levels deep; "
                             f"a topology file needs a few (is a bracket not closed?)")
        self.stack.append(_Open(isinstance(event, yaml.MappingStartEvent), field,
                                event.anchor, self.total - 1))
        if event.anchor is not None:
            self.open_anchors.add(event.anchor)

    def close(self) -> None:
        done = self.stack.pop()
        if done.anchor is not None:
            self.open_anchors.discard(done.anchor)
            self.sizes[done.anchor] = self.total - done.start


def check_events(
    text: str, path: str, *, max_values: int = MAX_YAML_VALUES, loader: type | None = None,
) -> type:
    """Refuse YAML whose node tree would be too large, too deep or recursive.

    Parameters
    ----------
    text : str
        The document (any number of documents: all are walked).
    path : str
        For messages.
    max_values : int
        Most values, aliases expanded (default ``MAX_YAML_VALUES``).
    loader : type, optional
        The parser to walk with (default ``Loader``).  Whatever it is, a
        document it cannot parse is walked again with the pure-Python
        parser, whose findings and messages are colc's: the limits above
        are checked first, then the syntax is reported in one wording.

    Returns
    -------
    type
        The loader class that read the document: ``loader``, or the
        pure-Python one when ``loader`` refused it (later stages compose
        with the same parser, so it decides what is valid).

    Raises
    ------
    SpecError
        The first limit broken, naming the field and its line; or malformed
        YAML.
    """
    first = Loader if loader is None else loader
    try:
        _walk_events(text, path, max_values, first)
        return first
    except yaml.YAMLError:
        # LibYAML stops on limits of its own (since PyYAML 6.0.4's wheel:
        # flow nesting past 1000 levels, found while its scanner looks ahead
        # for a simple key, before the first event reaches the walk).  The
        # pure-Python parser has none of them and yields events as it goes,
        # so the diagnosis, and its wording, is the same whatever LibYAML
        # is underneath.
        _walk_events(text, path, max_values, yaml.SafeLoader)
        return yaml.SafeLoader


def _walk_events(text: str, path: str, max_values: int, loader: type) -> None:
    """One pass of ``_Walk`` over the events of ``loader``'s parser.

    A parser error propagates as it is, except from the pure-Python parser,
    whose errors become the one-line ``SpecError``.
    """
    walk = _Walk(path, max_values)
    try:
        for event in yaml.parse(text, Loader=loader):
            if isinstance(event, _NODE_EVENTS):
                walk.node(event)
            elif isinstance(event, yaml.CollectionEndEvent):
                walk.close()
            elif isinstance(event, yaml.DocumentStartEvent):
                walk.sizes.clear()  # anchors do not carry over to the next document
    except yaml.MarkedYAMLError as err:
        if loader is not yaml.SafeLoader:
            raise
        raise yaml_error(path, err) from None
    except yaml.YAMLError as err:
        if loader is not yaml.SafeLoader:
            raise
        raise SpecError(path, f"malformed YAML: {one_line(str(err))}") from None


def checked_loader(text: str, path: str) -> yaml.SafeLoader:
    """A safe loader over ``text``, after every check above passed.

    Parameters
    ----------
    text : str
        The document.
    path : str
        For messages.

    Returns
    -------
    yaml.SafeLoader
        A ``Loader`` (dispose it when done).

    Raises
    ------
    SpecError
        Too large, a forbidden character, or a limit of ``check_events``.
    """
    if len(text) > MAX_FILE_BYTES:
        raise SpecError(path, f"the document has {len(text):,} characters; colc reads at most "
                        f"{MAX_FILE_BYTES:,}")
    check_text(text, path)
    loader = check_events(text, path)
    try:
        return loader(text)
    except yaml.YAMLError as err:
        raise SpecError(path, f"malformed YAML: {one_line(str(err))}") from None


def compose_node(text: str, path: str) -> tuple[yaml.Node | None, yaml.SafeLoader]:
    """The node tree of ``text`` after ``checked_loader``'s checks, and its loader.

    A document LibYAML's composer refuses (a duplicate anchor, say) is
    composed again by the pure-Python one, so the message is the same
    whichever parser PyYAML has.

    Parameters
    ----------
    text : str
        The document (exactly one).
    path : str
        For messages.

    Returns
    -------
    (yaml.Node or None, yaml.SafeLoader)
        The root (None for an empty document) and the loader that built it,
        to construct values from its nodes (dispose it when done).

    Raises
    ------
    SpecError
        A limit broken, or malformed YAML (with its line).
    """
    loader = checked_loader(text, path)
    if type(loader) is not yaml.SafeLoader:
        try:
            return loader.get_single_node(), loader
        except yaml.YAMLError:
            loader.dispose()
            loader = yaml.SafeLoader(text)
    try:
        return loader.get_single_node(), loader
    except yaml.MarkedYAMLError as err:
        loader.dispose()
        raise yaml_error(path, err) from None
    except yaml.YAMLError as err:
        loader.dispose()
        raise SpecError(path, f"malformed YAML: {one_line(str(err))}") from None


def safe_load(text: str, path: str) -> object:
    """``yaml.safe_load`` with the checks of ``checked_loader``.

    Parameters
    ----------
    text : str
        The document.
    path : str
        For messages.

    Returns
    -------
    object
        The plain Python value.

    Raises
    ------
    SpecError
        A limit broken, or malformed YAML (with its line).
    """
    node, loader = compose_node(text, path)
    try:
        return None if node is None else loader.construct_document(node)
    except yaml.MarkedYAMLError as err:
        raise yaml_error(path, err) from None
    except (yaml.YAMLError, ValueError) as err:
        raise SpecError(path, f"malformed YAML: {one_line(str(err))}") from None
    finally:
        loader.dispose()


def one_line(text: str) -> str:
    """``text`` with every run of whitespace (newlines included) made one space."""
    return " ".join(text.split())


def yaml_error(path: str, err: yaml.MarkedYAMLError) -> SpecError:
    """A PyYAML syntax error as a one-line ``SpecError`` with its line.

    Parameters
    ----------
    path : str
        For the message.
    err : yaml.MarkedYAMLError
        The parser's error.

    Returns
    -------
    SpecError
        ``path:LINE: error: malformed YAML: ...``.
    """
    mark = err.problem_mark or err.context_mark
    line = mark.line + 1 if mark is not None else None
    msg = one_line(err.problem or "")
    context = one_line(err.context or "")
    if context and not context.startswith("while") and err.context_mark is not None:
        # "found duplicate anchor 'a'; first occurrence" + "second occurrence"
        where = f" at line {err.context_mark.line + 1}"
        msg = f"{context}{where}, {msg}" if msg else context + where
    elif context:
        msg = f"{msg} ({context})" if msg else context
    return SpecError(path, f"malformed YAML: {msg or 'syntax error'}", line)
