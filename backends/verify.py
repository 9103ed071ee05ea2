"""Verify a runtime file: dispatch to the MSCCL or oneCCL verifier.

Input: file text and its path.  Output: a ``VerifyReport`` (``ok``,
``errors``, ``warnings``, ``summary``).  The backend is chosen by the
caller, else by content (``<algo`` = MSCCL).
"""

from __future__ import annotations

from dataclasses import dataclass

from colc.errors import ColcError

MAX_FILE_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class VerifyReport:
    """Outcome of a verification."""

    ok: bool
    errors: tuple[str, ...]
    warnings: tuple[str, ...]
    summary: str = ""
    program: object | None = None  # the MSCCL ``Program`` when the file parsed


def detect_backend(text: str) -> str:
    """``msccl`` or ``oneccl`` from the first element of the file."""
    head = text.lstrip()[:4096]
    while head.startswith("<!--"):
        end = head.find("-->")
        head = head[end + 3:].lstrip() if end >= 0 else ""
    if head.startswith("<?xml"):
        head = head[head.find("?>") + 2:].lstrip()
    return "oneccl" if head.startswith("<oneccl") else "msccl"


def verify_text(text: str, path: str, backend: str | None = None) -> VerifyReport:
    """Verify ``text`` (read from ``path``) on the runtime's terms.

    Parameters
    ----------
    text : str
    path : str
        Used in messages only.
    backend : {"msccl", "oneccl"} or None
        None: detect from the content.

    Returns
    -------
    VerifyReport
    """
    backend = backend or detect_backend(text)
    if backend == "oneccl":
        from colc.backends.oneccl_verify import verify_oneccl_text as verify
    else:
        from colc.backends.msccl_verify import verify_msccl_text as verify
    report = verify(text, path)
    program = getattr(report, "program", None)
    summary = getattr(report, "summary", "") or (_summary(program) if program else "")
    return VerifyReport(bool(report.ok), tuple(str(e) for e in report.errors),
                        tuple(str(w) for w in report.warnings), summary, program)


def _summary(program) -> str:
    """What was verified: collective, ranks, protocol, modes, window, resources."""
    modes = "+".join(m for m, on in (("in-place", program.inplace),
                                      ("out-of-place", program.outofplace)) if on) or "no mode"
    hi = "unlimited" if program.max_bytes == 0 else str(program.max_bytes)
    depth = program.protocol.fifo_depth
    return (f"{program.collective.value}, {program.ngpus} ranks, {program.protocol.value}, "
            f"{modes}, window {program.min_bytes}..{hi} bytes, {program.nchannels} channels, "
            f"{program.max_threadblocks} threadblocks per GPU (SMs held during a call), "
            f"nchunksperloop {program.nchunks}; executed at FIFO depth {depth}")


def verify_file(path: str, backend: str | None = None) -> VerifyReport:
    """Read ``path`` and verify it (see ``verify_text``).

    MSCCL files are read up to ``MAX_FILE_BYTES`` (the reader builds the whole
    tree); oneCCL files up to the oneCCL reader's own limit, which streams
    rank by rank.
    """
    from colc.backends.oneccl_xml import MAX_XML_BYTES
    from colc.safe_xml import read_bytes_limited

    data = read_bytes_limited(path, max(MAX_FILE_BYTES, MAX_XML_BYTES))  # regular, size first
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ColcError(f"{path}: error: not UTF-8 text (byte {err.start})") from err
    backend = backend or detect_backend(text)
    if backend != "oneccl" and len(data) > MAX_FILE_BYTES:
        raise ColcError(f"{path}: error: file is {len(data)} bytes; colc reads MSCCL files "
                        f"of at most {MAX_FILE_BYTES >> 20} MiB ({MAX_FILE_BYTES} bytes)")
    return verify_text(text, path, backend)
