"""MSCCL executor XML printer: ``Program`` -> text, one-to-one, no decisions.

Output form (what the executor's hand-written parser accepts, runtime notes
section 1): no XML prolog, one tag per line, two-space indentation, single
spaces between attributes, double-quoted values, every required attribute in
a fixed order, ``-1`` for unused offsets and dependencies, positional ``s``.
The text ends with a newline.  Deterministic: the same program gives the
same bytes.
"""

from __future__ import annotations

import re

from colc.ir.core import Buffer
from colc.ir.program import Program, Step, StepKind, Threadblock

#: Runtime mnemonics of the step kinds.
STEP_MNEMONIC = {
    StepKind.SEND: "s",
    StepKind.RECV: "r",
    StepKind.RECV_COPY_SEND: "rcs",
    StepKind.RECV_REDUCE_SEND: "rrs",
    StepKind.RECV_REDUCE_COPY: "rrc",
    StepKind.RECV_REDUCE_COPY_SEND: "rrcs",
    StepKind.COPY: "cpy",
    StepKind.REDUCE: "re",
    StepKind.NOP: "nop",
}
#: Runtime letters of the buffers.
BUFFER_LETTER = {Buffer.INPUT: "i", Buffer.OUTPUT: "o", Buffer.SCRATCH: "s"}


def emit_msccl_xml(program: Program) -> str:
    """Print ``program`` in the MSCCL executor dialect.

    Parameters
    ----------
    program : Program

    Returns
    -------
    str
        The whole file, newline-terminated.
    """
    p = program
    lines = [f"<!-- {comment_line(p.comment)} -->"] if p.comment else []
    lines += [
        f'<algo name="{_name(p.name)}" proto="{p.protocol.value}" nchannels="{p.nchannels}" '
        f'nchunksperloop="{p.nchunks}" ngpus="{p.ngpus}" coll="{p.collective.value}" '
        f'inplace="{int(p.inplace)}" outofplace="{int(p.outofplace)}" '
        f'minBytes="{p.min_bytes}" maxBytes="{p.max_bytes}">'
    ]
    for rank in p.ranks:
        lines.append(f'  <gpu id="{rank.rank}" i_chunks="{rank.input_chunks}" '
                     f'o_chunks="{rank.output_chunks}" s_chunks="{rank.scratch_chunks}">')
        for tb in rank.threadblocks:
            lines.extend(_threadblock(tb))
        lines.append("  </gpu>")
    lines.append("</algo>")
    return "\n".join(lines) + "\n"


#: Characters XML 1.0 does not allow anywhere, a comment included.
NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def comment_line(text: str) -> str:
    """One line the runtime's comment skipper accepts (no ``--``, no newline)
    and XML too (no character XML forbids: a NUL byte in the API's
    ``comment=`` went into the file, where the oneCCL printer dropped it).

    >>> comment_line("a -- b\x01c-")
    'a - - bc'
    """
    flat = " ".join(NOT_XML.sub("", text).split())
    while "--" in flat:
        flat = flat.replace("--", "- -")
    return flat.rstrip("-")


def _name(name: str) -> str:
    """Keep the name short and free of characters the runtime parser mishandles."""
    safe = "".join(c if c.isalnum() or c in "-_.+" else "_" for c in name)
    return safe[:120] or "colc"


def _threadblock(tb: Threadblock) -> list[str]:
    out = [f'    <tb id="{tb.id}" send="{_int(tb.send)}" recv="{_int(tb.recv)}" chan="{tb.channel}">']
    out.extend(_step(s, step) for s, step in enumerate(tb.steps))
    out.append("    </tb>")
    return out


def _step(s: int, step: Step) -> str:
    depid, deps = step.dep if step.dep is not None else (-1, -1)
    return (f'      <step s="{s}" type="{STEP_MNEMONIC[step.kind]}" '
            f'srcbuf="{BUFFER_LETTER[step.src.buffer]}" srcoff="{_int(step.src.offset)}" '
            f'dstbuf="{BUFFER_LETTER[step.dst.buffer]}" dstoff="{_int(step.dst.offset)}" '
            f'cnt="{step.count}" depid="{depid}" deps="{deps}" hasdep="{int(step.has_dep)}"/>')


def _int(v: int | None) -> int:
    return -1 if v is None else v
