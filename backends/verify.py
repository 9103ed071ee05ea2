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
    return VerifyReport(bool(report.ok), tuple(str(e) for e in report.errors),
                        tuple(str(w) for w in report.warnings),
                        getattr(report, "summary", ""))


def verify_file(path: str, backend: str | None = None) -> VerifyReport:
    """Read ``path`` and verify it (see ``verify_text``)."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_FILE_BYTES + 1)
    except OSError as err:
        raise ColcError(f"{path}: error: cannot read: {err.strerror}") from err
    if len(data) > MAX_FILE_BYTES:
        raise ColcError(f"{path}: error: file larger than {MAX_FILE_BYTES} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ColcError(f"{path}: error: not UTF-8 text (byte {err.start})") from err
    return verify_text(text, path, backend)
