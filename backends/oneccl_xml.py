"""oneCCL XML backend: threadblock Program in, CPU-thread schedule XML out.

The format is colc's own (no public oneCCL XML format exists); it is
specified in ``docs/oneccl-xml.md`` and by the RelaxNG schema
``oneccl.rng`` shipped beside this module.  Every emitted document is
validated against the schema.

Lowering (``lower_program``) is a fixed, documented mapping, one thread per
threadblock, applied step by step:

=========================  ===============================================
MSCCL step                 oneCCL instructions
=========================  ===============================================
``send``                   ``send src``
``recv``                   ``recv -> dst``
``recv_copy_send``         ``recv -> dst; send dst``
``recv_reduce_send``       ``recv -> tmp; reduce tmp += src; send tmp``
``recv_reduce_copy``       ``recv -> tmp; reduce dst += tmp`` (src == dst)
                           ``recv -> tmp; reduce tmp += src; copy tmp -> dst``
``recv_reduce_copy_send``  as ``recv_reduce_copy``, then ``send dst``
``copy`` / ``reduce``      ``copy`` / ``reduce``
``nop``                    nothing (only its dependency)
=========================  ===============================================

A step with ``count == 0`` moves nothing and lowers to nothing.  A step's
dependency ``(tb, s)`` becomes a ``sync`` on thread ``tb``'s last
instruction lowered from steps ``0..s`` (omitted when those steps lower to
nothing, or when ``tb`` is the step's own threadblock and ``s`` is earlier).
Tags: the k-th message a threadblock sends (receives) on channel ``c`` gets
tag ``k * C + c`` with ``C = max(nchannels, max channel + 1)``, so a
message is identified by ``(sender, receiver, tag)`` without FIFO order.
``eager_depth`` is the protocol's FIFO depth (2 for Simple, 8 for LL/LL128).

Example
-------
>>> from colc.ir.core import Buffer, Collective, Protocol
>>> from colc.ir.program import Loc, Program, RankProgram, Step, StepKind, Threadblock
>>> def rank(r):
...     o = lambda k: Loc(Buffer.OUTPUT, k)
...     steps = (Step(StepKind.SEND, o(r), o(r), 1), Step(StepKind.RECV, o(1 - r), o(1 - r), 1))
...     return RankProgram(r, 1, 2, 0, (Threadblock(0, 1 - r, 1 - r, 0, steps),))
>>> p = Program("ag", Collective.ALLGATHER, Protocol.SIMPLE, 1, 2, 2, True, False, 0, 0,
...             (rank(0), rank(1)))
>>> print(emit_oneccl_xml(p).splitlines()[4])
      <send i="0" peer="1" tag="0" buf="output" off="0" cnt="1"/>
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from xml.sax.saxutils import quoteattr

from lxml import etree

from colc.safe_xml import parse_xml, safe_parser

from colc.errors import InternalError, SpecError
from colc.ir.core import Buffer, buffer_extents
from colc.ir.oneccl import Instr, InstrKind, RankThreads, Region, Thread, ThreadSchedule
from colc.ir.program import Loc, Program, RankProgram, Step, StepKind, Threadblock

#: Largest oneCCL XML document parsed as one tree (bytes; about 30 times that
#: in memory): what colc prints and validates from a threadblock program.
MAX_XML_BYTES = 256 * 1024 * 1024
#: Largest oneCCL XML document the reader takes: it streams rank by rank, so
#: memory follows the schedule, not the document (a 50x50 torus dimrings
#: allgather is about 120 MB, a 1024-rank generalized Kautz all-to-all,
#: ``hop-relay``, 334 MB).
MAX_STREAM_BYTES = 1024 * 1024 * 1024

#: File-name suffix of the format.
SUFFIX = ".oneccl.xml"

#: Format version written in the root element.
FORMAT_VERSION = 1


# --------------------------------------------------------------------------- lowering


def lower_program(program: Program) -> ThreadSchedule:
    """Lower a threadblock Program to a CPU-thread schedule (see module docstring).

    Parameters
    ----------
    program : Program
        A structurally valid program: threadblock ids ``0..n-1`` per rank,
        at most one threadblock per (channel, peer, direction), send/recv
        steps only in threadblocks with that peer.

    Returns
    -------
    ThreadSchedule
        One thread per threadblock, same ids and channels.

    Raises
    ------
    InternalError
        If the program breaks one of the structural invariants above.
    """
    nchan = max([program.nchannels, 1] + [tb.channel + 1 for rp in program.ranks
                                          for tb in rp.threadblocks])
    extents = buffer_extents(program.collective, program.nchunks, program.ngpus)
    ranks = tuple(
        RankThreads(
            rank=rp.rank,
            input_chunks=extents[Buffer.INPUT],
            output_chunks=extents[Buffer.OUTPUT],
            scratch_chunks=rp.scratch_chunks,
            threads=_RankLowering(rp, nchan).threads(),
        )
        for rp in program.ranks
    )
    return ThreadSchedule(
        name=program.name,
        collective=program.collective,
        nranks=program.ngpus,
        nchunks=program.nchunks,
        inplace=program.inplace,
        outofplace=program.outofplace,
        min_bytes=program.min_bytes,
        max_bytes=program.max_bytes,
        eager_depth=program.protocol.fifo_depth,
        ranks=ranks,
    )


# A lowered instruction before sync targets are resolved: either an Instr or
# ("sync", tb, step) naming the dependency.
_Pending = Instr | tuple[str, int, int]


class _RankLowering:
    """Lowers the threadblocks of one rank; holds the per-rank lookup tables."""

    def __init__(self, rp: RankProgram, nchan: int) -> None:
        self.rp = rp
        self.nchan = nchan
        self.tbs = {tb.id: tb for tb in rp.threadblocks}
        if sorted(self.tbs) != list(range(len(rp.threadblocks))):
            raise InternalError(f"rank {rp.rank}: threadblock ids are not 0..n-1")
        seen: set[tuple[str, int, int]] = set()
        for tb in rp.threadblocks:
            for direction, peer in (("send", tb.send), ("recv", tb.recv)):
                if peer is None:
                    continue
                key = (direction, tb.channel, peer)
                if key in seen:
                    raise InternalError(
                        f"rank {rp.rank}: two threadblocks {direction} to/from rank {peer} "
                        f"on channel {tb.channel}")
                seen.add(key)

    def threads(self) -> tuple[Thread, ...]:
        pending = {tb.id: self._expand(tb) for tb in sorted(self.rp.threadblocks,
                                                            key=lambda t: t.id)}
        last: dict[tuple[int, int], int] = {}
        for tb_id, per_step in pending.items():
            n = -1
            for s, instrs in enumerate(per_step):
                n += len(instrs)
                last[(tb_id, s)] = n
        out = []
        for tb in sorted(self.rp.threadblocks, key=lambda t: t.id):
            flat: list[Instr] = []
            for per in pending[tb.id]:
                for item in per:
                    if isinstance(item, Instr):
                        flat.append(item)
                    else:
                        _, dep_tb, dep_step = item
                        flat.append(Instr(InstrKind.SYNC, wait_thread=dep_tb,
                                          wait_instr=last[(dep_tb, dep_step)]))
            tmp = max((i.count for i in flat if Region.TMP in (i.src, i.dst)), default=0)
            out.append(Thread(tb.id, tb.channel, tmp, tuple(flat)))
        return tuple(out)

    def _expand(self, tb: Threadblock) -> list[list[_Pending]]:
        sends = recvs = 0
        per_step: list[list[_Pending]] = []
        for s, step in enumerate(tb.steps):
            items: list[_Pending] = []
            if step.dep is not None and self._needs_sync(tb.id, s, step.dep):
                items.append(("sync", step.dep[0], step.dep[1]))
            if step.count > 0 and step.kind is not StepKind.NOP:
                body = _lower_step(step, self._where(tb, s))
                for instr in body:
                    if instr.kind is InstrKind.SEND:
                        instr = self._message(instr, tb, tb.send, sends, s)
                        sends += 1
                    elif instr.kind is InstrKind.RECV:
                        instr = self._message(instr, tb, tb.recv, recvs, s)
                        recvs += 1
                    items.append(instr)
            per_step.append(items)
        return per_step

    def _needs_sync(self, tb_id: int, s: int, dep: tuple[int, int]) -> bool:
        dep_tb, dep_step = dep
        target = self.tbs.get(dep_tb)
        if target is None or not 0 <= dep_step < len(target.steps):
            raise InternalError(
                f"rank {self.rp.rank} tb {tb_id} step {s}: dependency on missing step {dep}")
        if dep_tb == tb_id and dep_step < s:
            return False
        # The target's prefix lowers to nothing iff it has no dependency and
        # moves no data: then the wait is vacuous.
        return any(st.dep is not None or (st.count > 0 and st.kind is not StepKind.NOP)
                   for st in target.steps[: dep_step + 1])

    def _message(self, instr: Instr, tb: Threadblock, peer: int | None, seq: int,
                 s: int) -> Instr:
        if peer is None:
            raise InternalError(
                f"rank {self.rp.rank} tb {tb.id} step {s}: {instr.kind.value} without a peer")
        return Instr(instr.kind, peer=peer, tag=seq * self.nchan + tb.channel,
                     src=instr.src, src_off=instr.src_off, dst=instr.dst,
                     dst_off=instr.dst_off, count=instr.count)

    def _where(self, tb: Threadblock, s: int) -> str:
        return f"rank {self.rp.rank} tb {tb.id} step {s}"


def _region(loc: Loc, where: str, field: str) -> tuple[Region, int]:
    if loc.offset is None:
        raise InternalError(f"{where}: {field} offset is unset")
    return Region.of(loc.buffer), loc.offset


def _lower_step(step: Step, where: str) -> list[Instr]:
    """Data instructions of one step (peers and tags are filled in later)."""
    n = step.count
    kind = step.kind

    def send(r: Region, o: int) -> Instr:
        return Instr(InstrKind.SEND, src=r, src_off=o, count=n)

    def recv(r: Region, o: int) -> Instr:
        return Instr(InstrKind.RECV, dst=r, dst_off=o, count=n)

    def local(k: InstrKind, a: tuple[Region, int], b: tuple[Region, int]) -> Instr:
        return Instr(k, src=a[0], src_off=a[1], dst=b[0], dst_off=b[1], count=n)

    tmp = (Region.TMP, 0)
    if kind is StepKind.SEND:
        return [send(*_region(step.src, where, "src"))]
    if kind is StepKind.RECV:
        return [recv(*_region(step.dst, where, "dst"))]
    if kind is StepKind.RECV_COPY_SEND:
        d = _region(step.dst, where, "dst")
        return [recv(*d), send(*d)]
    if kind is StepKind.RECV_REDUCE_SEND:
        s = _region(step.src, where, "src")
        return [recv(*tmp), local(InstrKind.REDUCE, s, tmp), send(*tmp)]
    if kind in (StepKind.RECV_REDUCE_COPY, StepKind.RECV_REDUCE_COPY_SEND):
        s = _region(step.src, where, "src")
        d = _region(step.dst, where, "dst")
        if s == d:
            out = [recv(*tmp), local(InstrKind.REDUCE, tmp, d)]
        else:
            out = [recv(*tmp), local(InstrKind.REDUCE, s, tmp), local(InstrKind.COPY, tmp, d)]
        if kind is StepKind.RECV_REDUCE_COPY_SEND:
            out.append(send(*d))
        return out
    if kind is StepKind.COPY:
        return [local(InstrKind.COPY, _region(step.src, where, "src"),
                      _region(step.dst, where, "dst"))]
    if kind is StepKind.REDUCE:
        return [local(InstrKind.REDUCE, _region(step.src, where, "src"),
                      _region(step.dst, where, "dst"))]
    raise InternalError(f"{where}: unknown step kind {kind}")


# --------------------------------------------------------------------------- printing


def print_oneccl_xml(sched: ThreadSchedule, comment: str = "") -> str:
    """Print a thread schedule as oneCCL XML (no validation).

    Parameters
    ----------
    sched : ThreadSchedule
    comment : str
        Provenance, written as one comment line after the declaration
        (``--`` broken up, as XML requires); none when empty.

    Returns
    -------
    str
        The document: XML declaration, two-space indentation, fixed attribute
        order, trailing newline.  Deterministic.
    """
    out = ['<?xml version="1.0" encoding="UTF-8"?>']
    if comment:
        out.append(f"<!-- {_comment(comment)} -->")
    out.append(_tag("oneccl_schedule", (
        ("version", FORMAT_VERSION), ("name", sched.name), ("coll", sched.collective.value),
        ("nranks", sched.nranks), ("nchunks", sched.nchunks),
        ("inplace", int(sched.inplace)), ("outofplace", int(sched.outofplace)),
        ("min_bytes", sched.min_bytes), ("max_bytes", sched.max_bytes),
        ("eager_depth", sched.eager_depth)), close=False))
    for rt in sched.ranks:
        attrs = (("id", rt.rank), ("input_chunks", rt.input_chunks),
                 ("output_chunks", rt.output_chunks), ("scratch_chunks", rt.scratch_chunks))
        if not rt.threads:
            out.append("  " + _tag("rank", attrs))
            continue
        out.append("  " + _tag("rank", attrs, close=False))
        for th in rt.threads:
            tattrs = (("id", th.id), ("channel", th.channel), ("tmp_chunks", th.tmp_chunks))
            if not th.instrs:
                out.append("    " + _tag("thread", tattrs))
                continue
            out.append("    " + _tag("thread", tattrs, close=False))
            for i, instr in enumerate(th.instrs):
                out.append("      " + _instr_tag(i, instr))
            out.append("    </thread>")
        out.append("  </rank>")
    out.append("</oneccl_schedule>")
    return "\n".join(out) + "\n"


def _tag(name: str, attrs: tuple[tuple[str, object], ...], close: bool = True) -> str:
    body = " ".join(f"{k}={quoteattr(str(v))}" for k, v in attrs)
    return f"<{name} {body}{'/' if close else ''}>"


def _instr_tag(i: int, instr: Instr) -> str:
    k = instr.kind
    if k is InstrKind.SYNC:
        return _tag("sync", (("i", i), ("thread", instr.wait_thread), ("instr", instr.wait_instr)))
    if k is InstrKind.SEND:
        return _tag("send", (("i", i), ("peer", instr.peer), ("tag", instr.tag),
                             ("buf", _rname(instr.src)), ("off", instr.src_off),
                             ("cnt", instr.count)))
    if k is InstrKind.RECV:
        return _tag("recv", (("i", i), ("peer", instr.peer), ("tag", instr.tag),
                             ("buf", _rname(instr.dst)), ("off", instr.dst_off),
                             ("cnt", instr.count)))
    return _tag(k.value, (("i", i), ("src_buf", _rname(instr.src)), ("src_off", instr.src_off),
                          ("dst_buf", _rname(instr.dst)), ("dst_off", instr.dst_off),
                          ("cnt", instr.count)))


def _rname(region: Region | None) -> str:
    if region is None:
        raise InternalError("instruction without a buffer")
    return region.value


def _comment(text: str) -> str:
    """One line of comment text XML accepts (no ``--``, no trailing ``-``,
    no character XML forbids: a user's ``--comment "job\x01"``).

    >>> _comment("a -- b\x01c-")
    'a - - bc'
    """
    from colc.backends.msccl_xml import comment_line

    return comment_line(text)


def emit_oneccl_xml(program: Program) -> str:
    """Lower a Program and print it as schema-valid oneCCL XML.

    Parameters
    ----------
    program : Program

    Returns
    -------
    str
        The document (see ``print_oneccl_xml``).

    Raises
    ------
    InternalError
        If the program is structurally broken or the output fails the schema.
    """
    text = print_oneccl_xml(lower_program(program), program.comment)
    try:
        validate_oneccl_xml(text, f"<{program.name}{SUFFIX}>")
    except SpecError as err:
        raise InternalError(f"emitted oneCCL XML fails its schema: {err}") from None
    return text


# --------------------------------------------------------------------------- schema


@cache
def schema_for_oneccl() -> etree.RelaxNG:
    """The RelaxNG schema of the format (``oneccl.rng``), compiled once.

    Returns
    -------
    lxml.etree.RelaxNG
    """
    return _schema()


@cache
def _schema() -> etree.RelaxNG:
    data = resources.files("colc.backends").joinpath("oneccl.rng").read_bytes()
    return etree.RelaxNG(etree.fromstring(data, safe_parser()))


def parse_xml_safely(text: str | bytes, path: str, max_bytes: int = MAX_XML_BYTES
                     ) -> etree._ElementTree:
    """Parse untrusted XML (see ``colc.safe_xml.parse_xml``); returns the tree."""
    return parse_xml(text, path, max_bytes).getroottree()


def validate_oneccl_xml(text: str | bytes, path: str) -> etree._Element:
    """Parse a oneCCL XML document safely and validate it against the schema.

    Parameters
    ----------
    text : str or bytes
        The document.
    path : str
        File name for messages.

    Returns
    -------
    lxml.etree._Element
        The root element.

    Raises
    ------
    SpecError
        Malformed XML or a schema violation (first one, with its line).
    """
    tree = parse_xml_safely(text, path)
    schema = _schema()
    if not schema.validate(tree):
        raise schema_error(schema, tree.getroot(), path)
    return tree.getroot()


def schema_error(schema: etree.RelaxNG, doc: etree._Element, path: str) -> SpecError:
    """The error for ``doc``, which ``schema`` just rejected: the first bad
    attribute by name where there is one (``oneccl_attributes``: RelaxNG
    says only "failed to validate attributes"), else the schema's first
    message.

    Parameters
    ----------
    schema : lxml.etree.RelaxNG
        The schema, its error log holding the rejection.
    doc : lxml.etree._Element
        The rejected document's root.
    path : str
        File name for the message.

    Returns
    -------
    SpecError
    """
    from colc.backends.oneccl_attributes import first_attribute_problem

    found = first_attribute_problem(doc)
    if found is not None:
        line, problem = found
        return SpecError(path, f"does not match the oneCCL XML schema: {problem}", line)
    err = schema.error_log[0] if len(schema.error_log) else None
    if err is None:
        return SpecError(path, "does not match the oneCCL XML schema")
    msg = " ".join(str(err.message).split())
    return SpecError(path, f"does not match the oneCCL XML schema: {msg}", err.line or None)
