"""Read an MSCCL algorithm XML exactly as msccl-executor-nccl's parser does.

Implements ``shared/reference/msccl-xml-runtime.md`` sections 1-2 (and the
parser-side rows of section 5): the hand-written tokenizer (only ' ', '\\n',
'\\r' between elements; one space between attributes, each extra space an
empty attribute; double-quoted values; comments; 16 attributes per element;
name and value length limits; no ``<?xml?>``), ``strtol(s, NULL, 0)``
integers (garbage is an error here, the runtime silently reads 0), the
metadata parse of the first element, required attributes per element,
enumerations, and the per-rank stored-node limit.  Checks the typed IR can
express (tb ids, channels, peers, cnt, offsets, nop chains, ...) are run by
``colc.ir.load_checks`` on the resulting ``Program``.

Input: the text of one file.  Output: a ``ReadResult`` holding the
``Program`` (None when a required value is unusable), diagnostics with line
numbers, and the line of every threadblock and step (the IR holds none).
Complexity: O(len(text)).
"""

from __future__ import annotations

import re
from bisect import bisect_left
from dataclasses import dataclass, field, replace
from functools import lru_cache

from colc.ir.core import Buffer, Collective, Protocol
from colc.ir.diagnostics import Diagnostic, error, warning
from colc.ir.load_checks import (
    CHECKED_FIELDS,
    MAX_STEPS,
    NO_THREADBLOCK,
    USED_FIELDS,
    LoadedProgram,
    load_program,
    sort_diagnostics,
)
from colc.ir.program import Loc, Program, RankProgram, Step, StepKind, Threadblock

MAX_ATTRS = 16  # MAX_ATTR_COUNT
MAX_NODES = 4096  # MAX_NODES (stored nodes per rank)
MAX_SUBS = 1024  # MAX_SUBS: children the reader keeps per element, unchecked (runtime notes 1)
MAX_NAME = 255  # MAX_STR_LEN
INT16_MAX = 32767

PROTOCOLS = {"Simple": Protocol.SIMPLE, "LL": Protocol.LL, "LL128": Protocol.LL128}
COLLECTIVES = {"allreduce": Collective.ALLREDUCE, "allgather": Collective.ALLGATHER,
               "reducescatter": Collective.REDUCESCATTER, "broadcast": Collective.BROADCAST,
               "reduce": Collective.REDUCE, "alltoall": Collective.ALLTOALL}
RUNTIME_ONLY_COLLECTIVES = ("alltoall", "alltoallv", "send", "recv", "gather", "scatter")
#: How an error names a ``coll`` of ``RUNTIME_ONLY_COLLECTIVES`` (``colc
#: verify DIR`` tells such a file from a broken one by it).
UNSUPPORTED_COLL = "accepted by the runtime but not supported by colc verify"
STEP_TYPES = {"s": StepKind.SEND, "r": StepKind.RECV, "rcs": StepKind.RECV_COPY_SEND,
              "rrs": StepKind.RECV_REDUCE_SEND, "rrc": StepKind.RECV_REDUCE_COPY,
              "rrcs": StepKind.RECV_REDUCE_COPY_SEND, "cpy": StepKind.COPY,
              "re": StepKind.REDUCE, "nop": StepKind.NOP}
BUFFERS = {"i": Buffer.INPUT, "o": Buffer.OUTPUT, "s": Buffer.SCRATCH}

ALGO_ATTRS = ("nchunksperloop", "nchannels", "ngpus", "proto", "coll", "minBytes", "maxBytes",
              "inplace", "outofplace")
GPU_ATTRS = ("id", "i_chunks", "o_chunks", "s_chunks")
TB_ATTRS = ("id", "send", "recv", "chan")
STEP_ATTRS = ("s", "type", "srcbuf", "srcoff", "dstbuf", "dstoff", "cnt", "depid", "deps",
              "hasdep")
KNOWN_ATTRS = {"algo": set(ALGO_ATTRS) | {"name"}, "gpu": set(GPU_ATTRS), "tb": set(TB_ATTRS),
               "step": set(STEP_ATTRS)}

#: The runtime's reader ends a value at '"' only, whichever quote opened it (parser.cc:44-48).
OPENED_BY_APOSTROPHE = "a value opened with \"'\" ends only at the next '\"' in the runtime"
#: The child each stored element stores (the handlers of parser.cc:211-240); the
#: runtime skips any other child, and every child of an element it skips.
_STORED_CHILD = {"algo": "gpu", "gpu": "tb", "tb": "step"}

_TOKEN_END = re.compile(r"[= >/\n\r]")
_BLANK = re.compile(r"[ \n\r]*")
# A tag that the runtime's tokenizer reads exactly like a real XML parser would.
_PLAIN_TAG = re.compile(
    r'<([A-Za-z_][A-Za-z0-9_]{0,200})((?: [A-Za-z_][A-Za-z0-9_]{0,200}="[^"]{0,255}")*)(/?)>')
_PLAIN_ATTR = re.compile(r' ([A-Za-z_][A-Za-z0-9_]*)="([^"]*)"')
_STRTOL = re.compile(r"[ \t\n\v\f\r]*([+-]?)(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)")


# --------------------------------------------------------------------- tokens
@dataclass(slots=True)
class XmlNode:
    """An element as the runtime's tokenizer sees it (attributes beyond 16 dropped)."""

    name: str
    attrs: list[tuple[str, str]]
    single: bool
    offset: int
    dropped: int = 0
    children: list[XmlNode] = field(default_factory=list)
    index: dict[str, str] | None = None


class _Syntax(Exception):
    def __init__(self, msg: str, offset: int) -> None:
        super().__init__(msg)
        self.msg = msg
        self.offset = offset


class _Lexer:
    """``mscclXmlGetNode`` and friends (parser.cc:18-160) over a string."""

    def __init__(self, text: str, notes: dict[str, tuple[int, str]]) -> None:
        self.text = text
        self.pos = 0
        self.notes = notes  # what the runtime takes that XML does not, first of each kind
        self.apostrophe = -1  # where the last value opened with "'" and holding one starts
        # one object per distinct (key, value): a 1024-rank file repeats most
        # of its millions of attributes, and the tree is held whole
        self.pairs: dict[tuple[str, str], tuple[str, str]] = {}

    def _eof(self) -> _Syntax:
        return _Syntax("unexpected end of file", len(self.text))

    def token(self, allow_value: bool) -> tuple[str, str | None, str]:
        text, start = self.text, self.pos
        m = _TOKEN_END.search(text, start)
        if m is None:
            raise self._eof()
        end = m.start()
        name, c = text[start:end], text[end]
        # The runtime fails when its 255-byte name buffer index reaches 254.
        if len(name) >= (MAX_NAME if c == "=" else MAX_NAME - 1):
            raise _Syntax(f"name {name[:20]!r}... too long (max {MAX_NAME})", start)
        self.pos = end + 1
        if c != "=":
            return name, None, c
        if not allow_value:
            raise _Syntax(f"unexpected value with name {name!r} (tab or '=' inside a tag name?)",
                          start)
        return (name, *self._value())

    def _value(self) -> tuple[str, str]:
        """``mscclXmlGetValue`` (parser.cc:26-52): a value opens with '"' or
        "'" and ends at the next '"', whichever opened it."""
        text, pos = self.text, self.pos
        if pos >= len(text):
            raise self._eof()
        if text[pos] not in "\"'":
            raise _Syntax(f"expected (double) quote, got {text[pos]!r}", pos)
        q = text.find('"', pos + 1)
        if q < 0 and text[pos] == "'":  # named here, not at the end of file it runs to
            raise _Syntax(f"{OPENED_BY_APOSTROPHE} (none follows)", pos)
        if q < 0 or q + 1 >= len(text):
            raise self._eof()
        value = text[pos + 1:q]
        if len(value) > MAX_NAME:
            hint = f" ({OPENED_BY_APOSTROPHE})" if text[pos] == "'" else ""
            raise _Syntax(f"value of {len(value)} characters overflows the runtime's "
                          f"{MAX_NAME + 1}-byte buffer{hint}", pos)
        if text[pos] == "'":
            if "'" in value:  # it ran past the "'" meant to end it
                self.apostrophe = pos
            self.notes.setdefault("'", (pos, f"a value opened with \"'\" ends at the next "
                                            f"'\"' in the runtime's reader: {value!r}"))
        self.pos = q + 2
        return value, text[q + 1]

    def _skip_comment(self, start: str, nxt: str) -> None:
        window = "..."
        for ch in start + nxt:
            window = window[1:] + ch
        if window == "-->":
            return
        idx = (window[1:] + self.text[self.pos:]).find("-->")
        if idx < 0:
            raise _Syntax("unterminated comment", self.pos)
        self.pos += idx + 1

    def node(self) -> XmlNode | tuple[str, int] | None:
        """Next element, ``("close-name", offset)`` for a closing tag, None at EOF."""
        text = self.text
        while True:
            self.pos = _BLANK.match(text, self.pos).end()
            if self.pos >= len(text):
                return None
            start = self.pos
            m = _PLAIN_TAG.match(text, start)
            if m is not None:
                found = _PLAIN_ATTR.findall(m.group(2))
                attrs = list(map(self.pairs.setdefault, found, found))
                if len(attrs) <= MAX_ATTRS:
                    self.pos = m.end()
                    return XmlNode(m.group(1), attrs, m.group(3) == "/", start)
            if text[start] != "<":
                raise _Syntax(f"expecting '<', got {text[start]!r} (only ' ', '\\n', '\\r' may "
                              "separate elements)", start)
            self.pos += 1
            name, _, c = self.token(False)
            if name.startswith("!--"):
                self._skip_comment(name[3:], c)
                continue
            if name == "" and c == "/":
                name, _, c = self.token(False)
                if c != ">":
                    raise _Syntax(f"unexpected trailing {c!r} in closing tag {name}", start)
                return (name, start)
            return self._open(name, c, start)

    def _open(self, name: str, c: str, start: int) -> XmlNode:
        node = XmlNode(name, [], False, start)
        while c == " ":
            key, value, c = self.token(True)
            if len(node.attrs) < MAX_ATTRS:
                node.attrs.append((key, value or ""))
            else:
                node.dropped += 1
        if c == "/":
            node.single = True
            _, _, c = self.token(False)
        if c != ">":
            raise self._unclosed(name, c, start)
        return node

    def _unclosed(self, name: str, c: str, start: int) -> _Syntax:
        """The error for a tag whose attributes end at ``c``, not '>' or '/>'."""
        if self.apostrophe > start:  # a value that ran on, named where it began
            return _Syntax(f"expected '>', got {c!r} in <{name}> ({OPENED_BY_APOSTROPHE})",
                           self.apostrophe)
        hint = ("the runtime does not support an <?xml ...?> declaration"
                if name.startswith("?") else "newline or tab inside a tag?")
        return _Syntax(f"expected '>', got {c!r} in <{name}> ({hint})", self.pos - 1)


def parse_tree(text: str, notes: dict[str, tuple[int, str]] | None = None) -> list[XmlNode]:
    """Tokenize ``text`` into top-level elements like ``mscclXmlLoadSub``.

    Parameters
    ----------
    text : str
        The whole file.
    notes : dict, optional
        Receives, by kind, the first ``(offset, message)`` of what the
        runtime's reader takes and an XML parser would refuse: a value
        opened with "'", a closing tag of another name inside an element
        the runtime skips.

    Raises
    ------
    _Syntax
        On the first syntax error, as the runtime stops there.
    """
    notes = {} if notes is None else notes
    lexer = _Lexer(text, notes)
    roots: list[XmlNode] = []
    stack: list[tuple[XmlNode, bool]] = []  # open elements, whether some rank stores each
    ngpus = None
    while True:
        item = lexer.node()
        if item is None:
            if stack:
                raise _Syntax(f"unterminated <{stack[-1][0].name}>", stack[-1][0].offset)
            return roots
        if isinstance(item, tuple):
            _close(stack, *item, notes)
            continue
        if not stack and not roots:
            ngpus = _ngpus(item)
        (stack[-1][0].children if stack else roots).append(item)
        if not item.single:
            stack.append((item, _stored(item, stack[-1] if stack else None, ngpus)))


def _close(stack: list[tuple[XmlNode, bool]], name: str, offset: int,
           notes: dict[str, tuple[int, str]]) -> None:
    """Close the innermost open element by ``</name>`` as the runtime does.

    An element some rank stores must be closed by its own name.  The runtime
    skips any other element in the node slot that each element it reads
    next overwrites, the closing tag included, and compares that tag's name
    with the slot's own (parser.cc:173-174, 186, 206): any name closes an
    element it skips.
    """
    if not stack:
        raise _Syntax(f"unexpected closing tag </{name}>", offset)
    node, stored = stack.pop()
    if name == node.name:
        return
    if stored:
        raise _Syntax(f"mismatched closing tag: <{node.name}> closed by </{name}>", offset)
    notes.setdefault("</", (offset, f"</{name}> closes <{node.name}>: the runtime skips "
                                    f"<{node.name}> and takes any closing tag there"))


def _ngpus(first: XmlNode) -> int | None:
    """The first element's ``ngpus`` as the runtime reads it, None when unusable."""
    text = next((v for k, v in first.attrs if k == "ngpus"), None)
    value, whole, _ = parse_strtol(text) if text is not None else (0, False, False)
    return value if whole else None


def _stored(node: XmlNode, parent: tuple[XmlNode, bool] | None, ngpus: int | None) -> bool:
    """Whether some rank's parse stores ``node`` (and so checks its closing tag).

    Every rank stores each top-level ``<algo>`` and its ``<gpu>`` elements,
    and its own ``<tb>`` and ``<step>`` elements (parser.cc:224-234): those
    of a ``<gpu>`` whose id is a rank of ``ngpus`` (when ``ngpus`` is
    unusable, the load fails anyway: every ``<gpu>`` counts as a rank's).
    """
    if parent is None:
        return node.name == "algo"
    owner, stored = parent
    if not stored or _STORED_CHILD.get(owner.name) != node.name:
        return False
    if owner.name != "gpu" or ngpus is None:
        return True
    ident = next((v for k, v in owner.attrs if k == "id"), None)
    return ident is None or 0 <= parse_strtol(ident)[0] < ngpus


# -------------------------------------------------------------------- values
@lru_cache(maxsize=4096)
def parse_strtol(s: str) -> tuple[int, bool, bool]:
    """``strtol(s, NULL, 0)``: (value, whole string used, octal notation used).

    Examples
    --------
    >>> parse_strtol("010"), parse_strtol("0x1f"), parse_strtol("3x")
    ((8, True, True), (31, True, False), (3, False, False))
    """
    m = _STRTOL.match(s)
    if m is None:
        return 0, False, False
    sign, digits = m.groups()
    octal = False
    if digits[:2] in ("0x", "0X"):
        value = int(digits, 16)
    elif digits[0] == "0" and len(digits) > 1:
        value = int(digits, 8)
        octal = True
    else:
        value = int(digits)
    return (-value if sign == "-" else value), m.end() == len(s), octal


@dataclass(frozen=True, slots=True)
class ReadResult:
    """What ``read_msccl`` returns.

    ``program`` is None when a required value is missing or unusable.
    ``loaded`` is ``load_program(program)``.
    ``runnable`` says the program can be interpreted: the runtime loads it,
    or it only fails in ways that hang (see ``LoadedProgram.runnable``).
    ``lines`` maps ``(rank, tb, step)`` (step None for the tb itself) to a
    1-based line.
    """

    path: str
    program: Program | None
    diagnostics: tuple[Diagnostic, ...]
    lines: dict[tuple[int, int, int | None], int]
    runnable: bool = False
    loaded: LoadedProgram | None = None

    @property
    def ok(self) -> bool:
        """Whether the runtime would load the file (no error)."""
        return self.program is not None and not any(d.is_error for d in self.diagnostics)

    def locate(self, d: Diagnostic) -> Diagnostic:
        """``d`` with its line filled in from the rank/tb/step location."""
        if d.line is not None or d.rank is None or d.tb is None:
            return d
        line = self.lines.get((d.rank, d.tb, d.step)) or self.lines.get((d.rank, d.tb, None))
        return replace(d, line=line) if line else d


class _Reader:
    """The semantic part of the runtime's parse (parser.cc:304-703, 705-790)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.newlines = [m.start() for m in re.finditer("\n", text)]
        self.diags: list[Diagnostic] = []
        self.fatal = False
        self.warned: set[tuple[str, str]] = set()
        self.lines: dict[tuple[int, int, int | None], int] = {}
        # nodes later top-level <algo>s add to every rank's parse, and to one rank's
        self.later_base = 0
        self.later_own: dict[int, int] = {}
        self.missing: set[int] = set()  # ranks without a <gpu> (reported as such)

    def line(self, offset: int) -> int:
        return bisect_left(self.newlines, offset) + 1

    def err(self, msg: str, node: XmlNode, rank: int | None = None, tb: int | None = None,
            step: int | None = None, fatal: bool = False) -> None:
        self.diags.append(error(msg, rank, tb, step, self.line(node.offset)))
        self.fatal = self.fatal or fatal

    def warn_once(self, key: tuple[str, str], msg: str, node: XmlNode) -> None:
        if key not in self.warned:
            self.warned.add(key)
            self.diags.append(warning(msg, line=self.line(node.offset)))

    # attribute access -----------------------------------------------------
    def check_attrs(self, node: XmlNode) -> None:
        known = KNOWN_ATTRS.get(node.name, set())
        if not node.dropped and len(node.attrs) == len(known) and \
                {k for k, _ in node.attrs} == known:
            return
        seen = set()
        for key, _ in node.attrs:
            if key == "":
                self.warn_once((node.name, ""), f"<{node.name}>: an extra space creates an empty "
                               "attribute that uses up one of the 16 slots", node)
            elif key in seen:
                self.warn_once((node.name, "dup " + key), f"<{node.name}>: attribute {key} "
                               "given twice; the runtime uses the first", node)
            elif key not in known:
                self.warn_once((node.name, key), f"<{node.name}>: unknown attribute {key} is "
                               "ignored by the runtime", node)
            seen.add(key)
        if node.dropped:
            self.warn_once((node.name, "#drop"), f"<{node.name}>: attributes after the "
                           f"{MAX_ATTRS}th are silently dropped by the runtime", node)

    def attr(self, node: XmlNode, key: str, loc: tuple = ()) -> str | None:
        if node.index is None:
            node.index = dict(reversed(node.attrs))  # the first occurrence wins
        v = node.index.get(key)
        if v is not None:
            return v
        self.err(f"attribute {key} of node {node.name} not found", node, *loc, fatal=True)
        return None

    def int_attr(self, node: XmlNode, key: str, loc: tuple = (), bits: int = 32) -> int | None:
        s = self.attr(node, key, loc)
        if s is None:
            return None
        value, whole, octal = parse_strtol(s)
        if not whole:
            self.err(f"{node.name} {key}={s!r} is not an integer (the runtime would silently "
                     f"read {value})", node, *loc, fatal=True)
            return None
        if not -(1 << (bits - 1)) <= value < 1 << (bits - 1):
            self.err(f"{node.name} {key}={s!r} does not fit in {bits} bits", node, *loc, fatal=True)
            return None
        if octal and value != 0:
            self.warn_once((node.name, "octal " + key), f"<{node.name}>: {key}={s!r} has a "
                           f"leading zero and is read as octal ({value})", node)
        return value

    def enum_attr(self, node: XmlNode, key: str, table: dict, loc: tuple = ()) -> object | None:
        s = self.attr(node, key, loc)
        if s is None:
            return None
        if s not in table:
            hint = " (the runtime spells it 'reducescatter')" if s == "reduce_scatter" else ""
            if key == "coll" and s in RUNTIME_ONLY_COLLECTIVES:
                hint = f" ({UNSUPPORTED_COLL})"
            self.err(f"{node.name} {key}={s!r} is not one of {', '.join(table)}{hint}", node, *loc,
                     fatal=True)
            return None
        return table[s]

    # elements --------------------------------------------------------------
    def read(self, roots: list[XmlNode]) -> Program | None:
        if not roots:
            self.diags.append(error("no <algo> element"))
            return None
        first = roots[0]
        if first.name != "algo":
            self.err(f"the first element must be <algo> (the metadata parse reads only the first "
                     f"element), got <{first.name}>", first, fatal=True)
            return None
        for other in roots[1:]:
            if other.name == "algo":
                self.later_algo(other)
            else:
                self.warn_once(("top", other.name), f"top-level <{other.name}> is ignored", other)
        return self.algo(first)

    def later_algo(self, node: XmlNode) -> None:
        """Count a later top-level ``<algo>``'s stored nodes (parser.cc:214-236).

        The runtime runs only the first ``<algo>``, but its full parse stores
        every top-level ``<algo>``, its ``<gpu>`` children and the loaded
        rank's ``<tb>`` and ``<step>`` elements, all within ``MAX_NODES``.
        """
        self.warn_once(("top", "algo"), "a second top-level <algo> is never run, but the "
                       "runtime's parser stores its nodes (counted toward MAX_NODES)", node)
        gpus = [c for c in node.children if c.name == "gpu"]
        if len(gpus) > MAX_SUBS:
            self.err(f"{len(gpus)} <gpu> elements in a later <algo>; the runtime's XML reader "
                     f"keeps at most {MAX_SUBS} children per element (MAX_SUBS)", node, fatal=True)
        self.later_base += 1 + len(gpus)
        for g in gpus:
            text = self.attr(g, "id")  # required; a value is read as strtol reads it
            rank = parse_strtol(text)[0] if text is not None else None
            if rank is not None:
                own = sum(1 + sum(1 for s in t.children if s.name == "step")
                          for t in g.children if t.name == "tb")
                self.later_own[rank] = self.later_own.get(rank, 0) + own

    def algo(self, node: XmlNode) -> Program | None:
        self.check_attrs(node)
        ints = {k: self.int_attr(node, k, bits=64 if k.endswith("Bytes") else 32)
                for k in ALGO_ATTRS if k not in ("proto", "coll")}
        proto = self.enum_attr(node, "proto", PROTOCOLS)
        coll = self.enum_attr(node, "coll", COLLECTIVES)
        ngpus = ints["ngpus"]
        gpus = [c for c in node.children if c.name == "gpu"]
        if len(gpus) > MAX_SUBS:
            self.err(f"{len(gpus)} <gpu> elements; the runtime's XML reader keeps at most "
                     f"{MAX_SUBS} children per element (MAX_SUBS) and writes past its array "
                     f"beyond that: a file holds at most {MAX_SUBS} ranks", node, fatal=True)
            return None
        if ngpus is not None and not 0 < ngpus <= MAX_SUBS:
            why = ("the runtime uses a file only for communicators of ngpus ranks: it never "
                   "runs" if ngpus <= 0 else
                   f"a file holds at most {MAX_SUBS} ranks (the runtime's XML reader keeps "
                   f"{MAX_SUBS} <gpu> elements, MAX_SUBS)")
            self.err(f"ngpus={ngpus}: {why}", node, fatal=True)
            return None
        for c in node.children:
            if c.name != "gpu":
                self.warn_once(("algo", "<" + c.name), f"<{c.name}> inside <algo> is ignored", c)
        ranks: dict[int, RankProgram] = {}
        for g in gpus:
            self.gpu(g, ngpus, len(gpus), ranks)
        if self.fatal or ngpus is None or ngpus <= 0:
            return None
        missing = [r for r in range(ngpus) if r not in ranks]
        if len(missing) > 3:  # one line, not one per rank
            self.err(f"no <gpu> for {len(missing)} of the ngpus={ngpus} ranks (ids "
                     f"{_id_ranges(missing)}): they run nothing", node)
        else:
            for r in missing:
                self.err(f"no <gpu id=\"{r}\">: rank {r} runs nothing", node, r)
        self.missing.update(missing)
        for r in missing:
            ranks[r] = RankProgram(r, 0, 0, 0, ())
        return Program(next((v for k, v in node.attrs if k == "name"), ""), coll, proto,
                       ints["nchannels"], ints["nchunksperloop"], ngpus, bool(ints["inplace"]),
                       bool(ints["outofplace"]), ints["minBytes"], ints["maxBytes"],
                       tuple(ranks[r] for r in range(ngpus)))

    def gpu(self, node: XmlNode, ngpus: int | None, n_gpus: int,
            ranks: dict[int, RankProgram]) -> None:
        rank = self.int_attr(node, "id")
        if rank is None or ngpus is None:
            return
        if not 0 <= rank < ngpus:
            self.diags.append(warning(f"<gpu id=\"{rank}\"> is not a rank of ngpus={ngpus}; "
                                      "ignored", line=self.line(node.offset)))
            return
        self.check_attrs(node)
        if rank in ranks:
            self.err(f"duplicate <gpu id=\"{rank}\"> (processed twice by the runtime)", node, rank)
            return
        loc = (rank,)
        chunks = [self.int_attr(node, k, loc) for k in GPU_ATTRS[1:]]
        tbs = []
        stored = 1 + n_gpus + self.later_base + self.later_own.get(rank, 0)
        ntbs = sum(1 for c in node.children if c.name == "tb")
        if ntbs > MAX_SUBS:
            self.err(f"{ntbs} <tb> elements for rank {rank}; the runtime's XML reader keeps at "
                     f"most {MAX_SUBS} children per element (MAX_SUBS)", node, rank)
        for c in node.children:
            if c.name != "tb":
                self.warn_once(("gpu", "<" + c.name), f"<{c.name}> inside <gpu> is ignored", c)
                continue
            stored += 1 + sum(1 for s in c.children if s.name == "step")
            tb = self.tb(c, rank)
            if tb is not None:
                tbs.append(tb)
        if stored >= MAX_NODES:
            later = " + later <algo>s' nodes" if self.later_base else ""
            self.err(f"{stored} stored XML nodes for rank {rank} (1 + #gpu + own #tb + own #step"
                     f"{later}); the runtime's parser holds fewer than {MAX_NODES}", node, rank)
        if None in chunks:
            return
        ranks[rank] = RankProgram(rank, chunks[0], chunks[1], chunks[2], tuple(tbs))

    def tb(self, node: XmlNode, rank: int) -> Threadblock | None:
        self.check_attrs(node)
        vals = [self.int_attr(node, k, (rank,)) for k in TB_ATTRS]
        if None in vals:
            return None
        tbid, send, recv, chan = vals
        self.lines.setdefault((rank, tbid, None), self.line(node.offset))
        for what, peer in (("send", send), ("recv", recv)):
            if peer < -1:
                self.err(f"{what} peer {peer} < -1", node, rank, tbid)
        steps = []
        pos = 0  # a step's position, counted over the bad steps too (they are errors)
        for c in node.children:
            if c.name != "step":
                self.warn_once(("tb", "<" + c.name), f"<{c.name}> inside <tb> is ignored", c)
                continue
            st = self.step(c, rank, tbid, pos)
            pos += 1
            c.index = None  # read: its lookup table is not needed again
            if st is not None:
                steps.append(st)
        return Threadblock(tbid, send if send >= 0 else None, recv if recv >= 0 else None, chan,
                           tuple(steps))

    def step(self, node: XmlNode, rank: int, tbid: int, pos: int) -> Step | None:
        loc = (rank, tbid, pos)
        line = self.line(node.offset)
        self.lines.setdefault(loc, line)
        if node.children:
            self.err("<step> with child elements crashes the runtime's parser", node, *loc)
        fields = _plain_step(node)
        if fields is None:
            fields = self.step_fields(node, loc)
            if fields is None:
                return None
        s, kind, srcbuf, srcoff, dstbuf, dstoff, cnt, depid, deps, hasdep = fields
        if not 0 <= s < MAX_STEPS:
            self.err(f"s={s} out of range 0..{MAX_STEPS - 1}", node, *loc)
        elif s != pos:
            self.diags.append(warning(f"s={s} is not the step's position {pos}; the runtime "
                                      "ignores s and numbers steps by position", *loc, line))
        fusable = -(1 << 15) <= dstoff <= INT16_MAX  # compared as read (parser.cc:559)
        srcoff, dstoff = (self.offset(node, loc, kind, k, off)
                          for k, off in enumerate((srcoff, dstoff)))
        if kind is not StepKind.NOP and hasdep not in (0, 1):
            self.err(f"hasdep={hasdep} must be 0 or 1", node, *loc)
        if not -(1 << 15) <= deps <= INT16_MAX and depid >= 0:
            self.err(f"deps={deps} does not fit in int16", node, *loc)
        elif not -(1 << 15) <= deps <= INT16_MAX:
            self.diags.append(warning(f"deps={deps} does not fit in int16 (unused: depid "
                                      f"{depid})", *loc, line))
        if depid < -1:  # kept in the step: fold_threadblock fuses a re only at depid -1
            fusion = (", but the runtime fuses a re into the re before it only at depid -1"
                      if kind is StepKind.REDUCE else "")
            self.diags.append(warning(f"depid={depid} < -1 waits for nothing{fusion}", *loc,
                                      line))
        dep = (depid, deps) if depid != -1 else None
        return Step(kind, Loc(srcbuf, None if srcoff == -1 else srcoff),
                    Loc(dstbuf, None if dstoff == -1 else dstoff), cnt, dep, hasdep == 1,
                    fusable)

    def offset(self, node: XmlNode, loc: tuple[int, int, int], kind: StepKind, field: int,
               off: int) -> int:
        """The ``field`` (0 src, 1 dst) offset the runtime keeps: the int16 it
        stores (parser.cc:571-575), bounds-checks where the type is checked
        (parser.cc:610-611) and reads where the type uses it."""
        kept = (off + (1 << 15)) % (1 << 16) - (1 << 15)
        if kept == off >= -1:
            return off
        name, checked = ("srcoff", "dstoff")[field], CHECKED_FIELDS[kind][field]
        where = (*loc, self.line(node.offset))
        if checked and kept < -1:
            stored = f"does not fit in int16: the runtime stores {kept}, " if kept != off else ""
            self.err(f"{name} {off} {stored}< -1 (runtime: 'Incorrect offset')", node, *loc)
        elif kept == off:  # below -1, unchecked: the interpreter judges a used one
            return off
        elif not (checked or USED_FIELDS[kind][field]):  # never read: the runtime loads the file
            self.diags.append(warning(f"{name} {off} does not fit in int16 (unused by a "
                                      f"{kind.value} step)", *where))
            return off
        else:
            self.diags.append(warning(f"{name} {off} does not fit in int16: the runtime stores "
                                      f"and uses {kept}", *where))
        return kept

    def step_fields(self, node: XmlNode, loc: tuple[int, int, int]) -> tuple | None:
        """A step's values in ``STEP_ATTRS`` order, each attribute checked and
        reported as the runtime reads it; None when one is unusable."""
        self.check_attrs(node)
        ints = {k: self.int_attr(node, k, loc) for k in STEP_ATTRS
                if k not in ("type", "srcbuf", "dstbuf")}
        kind = self.enum_attr(node, "type", STEP_TYPES, loc)
        bufs = [self.enum_attr(node, k, BUFFERS, loc) for k in ("srcbuf", "dstbuf")]
        if None in ints.values() or kind is None or None in bufs:
            return None
        return (ints["s"], kind, bufs[0], ints["srcoff"], bufs[1], ints["dstoff"], ints["cnt"],
                ints["depid"], ints["deps"], ints["hasdep"])


_PLAIN_INT = re.compile(r"-?(?:0|[1-9][0-9]{0,8})")  # decimal, |value| < 10**9: fits 32 bits


@lru_cache(maxsize=1 << 16)
def _plain_int(s: str) -> int | None:
    """``s`` as an int when ``strtol`` reads all of it the obvious way, else None."""
    return int(s) if _PLAIN_INT.fullmatch(s) else None


def _plain_step(node: XmlNode) -> tuple | None:
    """A step's values when it has exactly the ``STEP_ATTRS`` in that order,
    each a plain decimal or a known name (every file colc writes); None sends
    the step to ``_Reader.step_fields``, which reads and reports each one.

    Gives the values ``step_fields`` gives for such a step, without its
    per-attribute lookups (a 1024-rank file has about a million steps).
    """
    if node.dropped or len(node.attrs) != len(STEP_ATTRS):
        return None
    keys, values = zip(*node.attrs)
    if keys != STEP_ATTRS:
        return None
    s, kind, srcbuf, srcoff, dstbuf, dstoff, cnt, depid, deps, hasdep = values
    fields = (_plain_int(s), STEP_TYPES.get(kind), BUFFERS.get(srcbuf), _plain_int(srcoff),
              BUFFERS.get(dstbuf), _plain_int(dstoff), _plain_int(cnt), _plain_int(depid),
              _plain_int(deps), _plain_int(hasdep))
    return None if None in fields else fields


def read_msccl(text: str, path: str) -> ReadResult:
    """Parse an MSCCL algorithm file like the runtime and map it to a ``Program``.

    Parameters
    ----------
    text : str
        The whole file.
    path : str
        Only used in messages.

    Returns
    -------
    ReadResult
        ``program`` is None when a required attribute is missing or unusable
        or the syntax is broken (the runtime stops at the first syntax error,
        so does this reader).  Diagnostics include those of
        ``colc.ir.load_checks.load_program`` when a program was built.

    Examples
    --------
    >>> res = read_msccl('<?xml version="1.0"?>', "x.xml")
    >>> res.ok, str(res.diagnostics[0])[:36]
    (False, "expected '>', got '?' in <?xml> (the")
    """
    reader = _Reader(text)
    notes: dict[str, tuple[int, str]] = {}
    try:
        roots = parse_tree(text, notes)
    except _Syntax as exc:
        d = error(exc.msg, line=reader.line(exc.offset))
        return ReadResult(path, None, (d,), {})
    program = reader.read(roots)
    diags = reader.diags + [warning(msg, line=reader.line(off)) for off, msg in notes.values()]
    result = ReadResult(path, program, (), reader.lines)
    runnable = False
    if program is not None:
        loaded = load_program(program)
        runnable = loaded.runnable and not any(d.is_error for d in diags)
        diags = diags + [result.locate(d) for d in loaded.diagnostics  # a missing <gpu> once
                         if d.rank not in reader.missing or d.message != NO_THREADBLOCK]
        result = replace(result, loaded=loaded)
    return replace(result, diagnostics=tuple(sort_diagnostics(diags)), runnable=runnable)


def _id_ranges(ids: list[int]) -> str:
    """Sorted ids as ranges: ``[1, 2, 3, 7]`` -> ``'1-3, 7'``."""
    out, start = [], 0
    for k in range(1, len(ids) + 1):
        if k == len(ids) or ids[k] != ids[k - 1] + 1:
            a, b = ids[start], ids[k - 1]
            out.append(f"{a}" if a == b else f"{a}-{b}")
            start = k
    return ", ".join(out)
