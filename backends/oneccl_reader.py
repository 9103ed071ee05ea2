"""oneCCL XML reader: a file of colc's oneCCL format back into a ThreadSchedule.

The document is parsed safely (size limit, no DTD or entities, no network),
validated against ``oneccl.rng``, then checked for what a schema cannot say:
rank ids ``0..nranks-1`` and thread ids ``0..n-1`` in document order,
instruction ``i`` equal to its position, peers in range and not the rank
itself, and ``sync`` targets that exist.  Every problem is a ``SpecError``
naming the file and line.  Semantics (message matching, bounds, deadlock,
races, postcondition) are the verifier's job: ``colc.ir.interpret_oneccl``.

Example
-------
>>> doc = '''<oneccl_schedule version="1" name="x" coll="allreduce" nranks="1" nchunks="1"
...   inplace="1" outofplace="0" min_bytes="0" max_bytes="0" eager_depth="2">
...   <rank id="0" input_chunks="1" output_chunks="1" scratch_chunks="0"/>
... </oneccl_schedule>'''
>>> read_oneccl_xml(doc, "x.oneccl.xml").collective
<Collective.ALLREDUCE: 'allreduce'>
"""

from __future__ import annotations

import io

from lxml import etree

from colc.errors import SpecError
from colc.ir.core import Collective
from colc.ir.oneccl import Instr, InstrKind, RankThreads, Region, Thread, ThreadSchedule

from colc.safe_xml import check_xml_bytes, read_bytes_limited

from .oneccl_xml import MAX_STREAM_BYTES, schema_error, schema_for_oneccl

#: Elements one ``<rank>`` may hold (its tree is built whole: about 2 KB of
#: memory each); a 1024-rank hop-relay all-to-all holds about 4200.
MAX_RANK_ELEMENTS = 1_000_000


def load_oneccl_xml(path: str) -> ThreadSchedule:
    """Read and check a oneCCL XML file.

    Parameters
    ----------
    path : str
        The file.

    Returns
    -------
    ThreadSchedule

    Raises
    ------
    SpecError
        Unreadable, too large, malformed, or inconsistent file.
    """
    return read_oneccl_xml(read_bytes_limited(path, MAX_STREAM_BYTES), path)


def read_oneccl_xml(text: str | bytes, path: str = "<string>") -> ThreadSchedule:
    """Parse, validate and check a oneCCL XML document.

    The document is read rank by rank (``lxml.etree.iterparse``): each
    ``<rank>`` is validated against the schema under a copy of the root's
    attributes, turned into ``RankThreads`` and dropped, so memory follows the
    schedule, not the parse tree (a 1024-rank all-to-all of 316 MB would need
    about 10 GB of tree).

    Parameters
    ----------
    text : str or bytes
        The document.
    path : str
        File name for messages.

    Returns
    -------
    ThreadSchedule

    Raises
    ------
    SpecError
        Malformed XML, schema violation, or an inconsistent id, index, peer
        or sync target (with its line).
    """
    raw = check_xml_bytes(text, path, MAX_STREAM_BYTES)
    root = None
    ranks: list[RankThreads] = []
    depth = elements = 0
    events = etree.iterparse(io.BytesIO(raw), events=("start", "end"), resolve_entities=False,
                             no_network=True, huge_tree=False, load_dtd=False,
                             dtd_validation=False)
    try:
        for event, el in events:
            if event == "start":
                depth += 1
                elements += 1
                if elements > MAX_RANK_ELEMENTS:
                    raise SpecError(path, f"a <rank> holds more than {MAX_RANK_ELEMENTS} "
                                    "elements; colc reads at most that many", el.sourceline)
                root = el if root is None else root
                continue
            depth -= 1
            if depth == 1 and isinstance(el.tag, str):
                ranks.append(_streamed_rank(root, el, len(ranks), path))
                elements = 0
    except etree.XMLSyntaxError as err:
        msg = (str(err.msg or err) or "syntax error").splitlines()[0]
        raise SpecError(path, f"malformed XML: {msg}", err.lineno or None) from None
    _check_document(root, path)
    if not ranks:  # the schema's own words for a root without ranks
        _validate(_skeleton(root), path)
    nranks = int(root.get("nranks"))
    if len(ranks) != nranks:
        raise SpecError(path, f"nranks is {nranks} but {len(ranks)} <rank> elements are given",
                        root.sourceline)
    return ThreadSchedule(
        name=root.get("name"),
        collective=Collective(_token(root, "coll")),
        nranks=nranks,
        nchunks=int(root.get("nchunks")),
        inplace=_token(root, "inplace") == "1",
        outofplace=_token(root, "outofplace") == "1",
        min_bytes=int(root.get("min_bytes")),
        max_bytes=int(root.get("max_bytes")),
        eager_depth=int(root.get("eager_depth")),
        ranks=tuple(ranks),
    )


def source_lines(text: str | bytes, wanted: set[tuple[int, int | None, int | None]]
                 ) -> dict[tuple[int, int | None, int | None], int]:
    """The 1-based lines of the ``<rank>`` (key ``(rank, None, None)``),
    thread (``(rank, thread, None)``) and instruction (``(rank, thread,
    instr)``) elements in ``wanted``, of a document ``read_oneccl_xml``
    accepted: a second pass, made only for the verifier's findings (a map of
    every instruction would cost hundreds of MB on a 1024-rank file).

    Parameters
    ----------
    text : str or bytes
        The document.
    wanted : set of tuple
        The keys to find.

    Returns
    -------
    dict
        Key -> line, for the keys of ``wanted`` the document has.

    Examples
    --------
    >>> doc = '<s>\\n<rank id="0">\\n<thread id="0">\\n<copy i="0"/></thread></rank></s>'
    >>> source_lines(doc, {(0, 0, 0), (0, None, None)})
    {(0, None, None): 2, (0, 0, 0): 4}
    """
    raw = text.encode() if isinstance(text, str) else text
    out: dict[tuple[int, int | None, int | None], int] = {}
    depth, rank, thread = 0, -1, -1
    for event, el in etree.iterparse(io.BytesIO(raw), events=("start", "end"),
                                     resolve_entities=False, no_network=True,
                                     huge_tree=False, load_dtd=False):
        if event == "end":
            depth -= 1
            if depth == 1:
                el.clear()  # a rank read: drop its tree
            continue
        depth += 1
        if not isinstance(el.tag, str):
            continue
        if depth == 2:
            rank = int(el.get("id", -1))
            key = (rank, None, None)
        elif depth == 3:
            thread = int(el.get("id", -1))
            key = (rank, thread, None)
        elif depth == 4:
            key = (rank, thread, int(el.get("i", -1)))
        else:
            continue
        if key in wanted:
            out[key] = el.sourceline
    return out


def _check_document(root: etree._Element, path: str) -> None:
    """What the per-rank validation cannot see: a DTD (in a document not in
    UTF-8, the byte scan misses it) and text beside the root's comments and
    processing instructions, which stay in the root when its ranks leave."""
    info = root.getroottree().docinfo
    if info.doctype or info.internalDTD is not None:
        raise SpecError(path, "DOCTYPE declarations are not allowed", 1)
    texts = [root.text] + [c.tail for c in root]
    if any(t and t.strip() for t in texts):
        raise SpecError(path, "does not match the oneCCL XML schema: text inside "
                        "<oneccl_schedule>", root.sourceline)


def _skeleton(root: etree._Element) -> etree._Element:
    """A root element with ``root``'s tag, attributes and leading text, no children."""
    doc = etree.Element(root.tag, dict(root.attrib))
    doc.text = root.text
    doc.sourceline = root.sourceline
    return doc


def _streamed_rank(root: etree._Element, el: etree._Element, index: int,
                   path: str) -> RankThreads:
    """Validate one finished child of the root and read it as a rank (it is
    moved out of the document)."""
    doc = _skeleton(root)
    doc.text = None
    doc.append(el)  # moves it (and its tail) out of the document being parsed
    _validate(doc, path)
    rank = int(el.get("id"))
    nranks = int(root.get("nranks"))
    if rank != index:
        raise SpecError(path, f"rank id {rank}: expected {index} (ranks must be "
                        "listed in order 0..nranks-1)", el.sourceline)
    if rank >= nranks:
        raise SpecError(path, f"rank id {rank}: nranks is {nranks}", el.sourceline)
    return _rank(el, rank, nranks, path)


def _validate(doc: etree._Element, path: str) -> None:
    """``doc`` against the schema, the first error as a ``SpecError`` (as
    ``validate_oneccl_xml`` words it)."""
    schema = schema_for_oneccl()
    if schema.validate(doc):
        return
    raise schema_error(schema, doc, path)


def _children(el: etree._Element) -> list[etree._Element]:
    return [c for c in el if isinstance(c.tag, str)]


def _rank(el: etree._Element, rank: int, nranks: int, path: str) -> RankThreads:
    threads: list[Thread] = []
    lines: list[list[int | None]] = []
    for tel in _children(el):
        tid = int(tel.get("id"))
        if tid != len(threads):
            raise SpecError(path, f"rank {rank}: thread id {tid}: expected {len(threads)} "
                            "(threads must be numbered 0..n-1 in order)", tel.sourceline)
        instrs = []
        ilines: list[int | None] = []
        for i, iel in enumerate(_children(tel)):
            if int(iel.get("i")) != i:
                raise SpecError(path, f"rank {rank} thread {tid}: instruction i={iel.get('i')} "
                                f"is at position {i}", iel.sourceline)
            instrs.append(_instr(iel, rank, nranks, path))
            ilines.append(iel.sourceline)
        threads.append(Thread(tid, int(tel.get("channel")), int(tel.get("tmp_chunks")),
                              tuple(instrs)))
        lines.append(ilines)
    for th, ilines in zip(threads, lines):
        for i, instr in enumerate(th.instrs):
            if instr.kind is not InstrKind.SYNC:
                continue
            wt, wi = instr.wait_thread or 0, instr.wait_instr or 0
            if wt >= len(threads):
                raise SpecError(path, f"rank {rank} thread {th.id} instr {i}: sync on thread "
                                f"{wt}, but the rank has {len(threads)} threads", ilines[i])
            if wi >= len(threads[wt].instrs):
                raise SpecError(path, f"rank {rank} thread {th.id} instr {i}: sync on thread "
                                f"{wt} instr {wi}, but that thread has "
                                f"{len(threads[wt].instrs)} instructions", ilines[i])
    return RankThreads(rank, int(el.get("input_chunks")), int(el.get("output_chunks")),
                       int(el.get("scratch_chunks")), tuple(threads))


def _instr(el: etree._Element, rank: int, nranks: int, path: str) -> Instr:
    kind = InstrKind(el.tag)
    if kind is InstrKind.SYNC:
        return Instr(kind, wait_thread=int(el.get("thread")), wait_instr=int(el.get("instr")))
    cnt = int(el.get("cnt"))
    if kind in (InstrKind.SEND, InstrKind.RECV):
        peer = int(el.get("peer"))
        if peer >= nranks or peer == rank:
            why = "is the rank itself" if peer == rank else f"is not below nranks={nranks}"
            raise SpecError(path, f"rank {rank}: {kind.value} peer {peer} {why}", el.sourceline)
        buf, off = Region(_token(el, "buf")), int(el.get("off"))
        if kind is InstrKind.SEND:
            return Instr(kind, peer=peer, tag=int(el.get("tag")), src=buf, src_off=off,
                         count=cnt)
        return Instr(kind, peer=peer, tag=int(el.get("tag")), dst=buf, dst_off=off, count=cnt)
    return Instr(kind, src=Region(_token(el, "src_buf")), src_off=int(el.get("src_off")),
                 dst=Region(_token(el, "dst_buf")), dst_off=int(el.get("dst_off")), count=cnt)


def _token(el: etree._Element, name: str) -> str:
    """An attribute the schema compares as a token (surrounding spaces dropped)."""
    return " ".join(el.get(name).split())
