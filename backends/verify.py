"""Verify a runtime file: dispatch to the MSCCL or oneCCL verifier.

Input: file text and its path.  Output: a ``VerifyReport`` (``ok``,
``errors``, ``warnings``, ``summary``).  The backend is chosen by the
caller, else by content (``<algo`` = MSCCL).
"""

from __future__ import annotations

from dataclasses import dataclass

from colc.errors import ColcError, SpecError

MAX_FILE_BYTES = 256 * 1024 * 1024
#: Bytes read to tell the format (``detect_backend`` looks at the first element).
HEAD_BYTES = 8192


@dataclass(frozen=True, slots=True)
class VerifyReport:
    """Outcome of a verification."""

    ok: bool
    errors: tuple[str, ...]
    warnings: tuple[str, ...]
    summary: str = ""
    program: object | None = None  # the MSCCL ``Program`` when the file parsed


def detect_backend(text: str, path: str = "") -> str:
    r"""``msccl`` or ``oneccl`` from the first element of the file, past a
    byte-order mark, the XML declaration, comments and processing
    instructions in any order; where that element is neither ``<algo`` nor
    ``<oneccl`` (or there is none), from the name ``path`` ends with
    (``.oneccl.xml``, as ``colc`` names oneCCL files), so the messages
    are the intended format's.

    >>> detect_backend('\ufeff<?xml version="1.0"?>\n<!-- a -->\n<oneccl coll="allgather">')
    'oneccl'
    >>> detect_backend('<!-- <oneccl> --><algo name="x">')
    'msccl'
    """
    head = text[:4096].lstrip("\ufeff \t\r\n")
    while head.startswith(("<!--", "<?")):
        close = "-->" if head.startswith("<!--") else "?>"
        end = head.find(close)
        head = head[end + len(close):].lstrip() if end >= 0 else ""
    if head.startswith(("<oneccl", "<algo")):
        return "oneccl" if head.startswith("<oneccl") else "msccl"
    return "oneccl" if path.lower().endswith(".oneccl.xml") else "msccl"


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
    return Verifier().text(text, path, backend)


class Verifier:
    """``verify_text`` and ``verify_file`` over several files in turn.

    MSCCL files go through one ``MscclVerifier``, so a file whose program
    runs like the previous MSCCL file's (a portfolio's LL and LL128 windows
    of one schedule) is read and load-checked but not run again; its
    summary names the file whose runs it shares.  oneCCL files are verified
    on their own.
    """

    def __init__(self, budget: int | None = None) -> None:
        from colc.backends.msccl_verify import MscclVerifier

        self._msccl = MscclVerifier()
        self.budget = budget  # threadblocks per GPU an MSCCL file may take (--max-threadblocks)

    def text(self, text: str, path: str, backend: str | None = None) -> VerifyReport:
        """Verify ``text`` read from ``path``: ``verify_text`` (the same
        parameters and report) in this verifier's sequence."""
        content = detect_backend(text)  # the first element's format; else MSCCL
        backend = backend or detect_backend(text, path)
        problem = not_a_schedule(text, path)
        if problem:
            return VerifyReport(False, (problem,), (), "", None)
        if backend == "oneccl":
            from colc.backends.oneccl_verify import verify_oneccl_text

            report = verify_oneccl_text(text, path)
        else:
            report = self._msccl.verify(text, path)
        program = getattr(report, "program", None)
        warnings = tuple(str(w) for w in report.warnings)
        if backend != "oneccl" and program is not None and report.ok:
            from colc.ir.simulate import iteration_warnings, selection_warnings

            warnings += (tuple(selection_warnings(program)) + tuple(iteration_warnings(program))
                         + residency_warnings(program) + rooted_warnings(program))
        summary = getattr(report, "summary", "") or (_summary(program) if program else "")
        if backend == "oneccl" and report.ok and report.schedule is not None:
            from colc.ir.simulate import selection_warnings

            summary = _thread_summary(report.schedule)
            warnings += tuple(selection_warnings(report.schedule))
        if getattr(report, "twin", ""):
            summary += f"; the same steps as {report.twin}, whose runs it shares"
        errors = tuple(str(e) for e in report.errors)
        over = budget_errors(program, self.budget) if backend != "oneccl" else ()
        if self.budget is not None and backend == "oneccl":
            warnings += ("--max-threadblocks: a oneCCL file has threads per rank, not "
                         "threadblocks; not checked",)
        errors += over
        if content == "oneccl" != backend and not report.ok:  # --backend msccl on oneCCL
            errors = ("a oneCCL file (its first element) read as MSCCL, which cannot parse "
                      "it; verify it as oneCCL (drop --backend msccl)",) + errors
        return VerifyReport(bool(report.ok) and not over, errors, warnings, summary, program)

    def file(self, path: str, backend: str | None = None) -> VerifyReport:
        """Read ``path`` within ``verify_file``'s limits and verify it.

        Parameters
        ----------
        path : str
        backend : {"msccl", "oneccl"} or None
            None: detect from the file's first kilobytes.

        Returns
        -------
        VerifyReport

        Raises
        ------
        ColcError
            The file cannot be read, is too large or is not UTF-8.
        """
        return self.text(*_read_text(path, backend))


#: Names of the topology formats colc reads, which ``colc verify`` is
#: sometimes given by mistake.
_TOPOLOGY_SUFFIXES = (".yaml", ".yml", ".json")


def not_a_schedule(text: str, path: str, command: str = "colc verify") -> str:
    """Why ``text`` is no algorithm file at all ('' when it may be one).

    An MSCCL or oneCCL file starts with an XML element, and a topology
    given by mistake is named so (it read as an XML error at line 1).

    Parameters
    ----------
    text, path : str
        The file's text and name.
    command : str
        The command given it, named in the message.

    Returns
    -------
    str

    >>> not_a_schedule("family: ring", "r.yaml", "colc simulate").split(":")[0]
    'this is not an algorithm file but, by its name or first line, a topology (YAML or JSON)'
    >>> not_a_schedule("<algo/>", "a.xml")
    ''
    """
    head = text.lstrip("\ufeff \t\r\n")
    if not head or head.startswith("<"):
        return ""
    if path.lower().endswith(_TOPOLOGY_SUFFIXES) or head.startswith(("{", "#", "name:")):
        return ("this is not an algorithm file but, by its name or first line, a topology "
                f"(YAML or JSON): {command} takes the XML files colc writes; compile it "
                f"first (colc {path} -o OUT.xml)")
    return "not an algorithm file: an MSCCL or oneCCL file starts with an XML element ('<')"


def residency_warnings(program) -> tuple[str, ...]:
    """A warning when ``program`` takes more threadblocks per GPU than some
    GPU colc models runs at once: the runtime launches them as one grid
    whose blocks wait on each other, so all must be resident, and on a
    GPU with fewer SMs (CUs) the call hangs.

    >>> from colc.ir.program import Program
    >>> from colc.ir.core import Collective, Protocol
    >>> p = Program("x", Collective.ALLGATHER, Protocol.SIMPLE, 1, 2, 2, True, True, 0, 0, ())
    >>> residency_warnings(p)
    ()
    """
    from colc.ir.runtime_model import A100, H100, MI250

    tbs = program.max_threadblocks
    gpus = (("A100", A100), ("H100", H100), ("MI250 GCD", MI250))
    short = [f"{name} ({m.max_threadblocks})" for name, m in gpus if m.max_threadblocks < tbs]
    if not short:
        return ()
    fits = [f"{name} ({m.max_threadblocks})" for name, m in gpus if m.max_threadblocks >= tbs]
    return (f"{tbs} threadblocks per GPU: more than {', '.join(short)} hold at once; the "
            f"runtime needs every threadblock of a rank resident, so the call hangs on those "
            f"GPUs (it fits: {', '.join(fits) or 'none of them'})",)


def rooted_warnings(program) -> tuple[str, ...]:
    """Warnings for a broadcast or reduce file: the runtime ignores the
    call's root when it selects a file, so it runs this one for every root,
    while its steps (proved for root 0) serve one; and with Simple the
    runtime's host and kernel cut such a call differently (1 against 4
    chunk steps).

    >>> from colc.ir.program import Program
    >>> from colc.ir.core import Collective, Protocol
    >>> p = Program("x", Collective.BROADCAST, Protocol.LL, 1, 2, 2, True, True, 0, 0, ())
    >>> len(rooted_warnings(p))
    1
    """
    from colc.ir.core import Collective, Protocol

    if program.collective not in (Collective.BROADCAST, Collective.REDUCE):
        return ()
    coll = program.collective.value
    out = (f"{coll}: the runtime selects a file whatever the call's root, and this one is "
           f"proved for root 0: a {coll} from another root runs it too and gets wrong data",)
    if program.protocol is Protocol.SIMPLE:
        out += (f"{coll} with Simple: the runtime's host plans such a call with 1 chunk step and "
                f"its kernel runs 4, so their step counts disagree (use LL or LL128)",)
    return out


def _thread_summary(sched) -> str:
    """What a clean oneCCL file holds (``ThreadSchedule``), for the OK line."""
    modes = "+".join(m for m, on in (("in-place", sched.inplace),
                                     ("out-of-place", sched.outofplace)) if on)
    hi = sched.max_bytes or "unlimited"
    threads = max((len(r.threads) for r in sched.ranks), default=0)
    instrs = max((sum(len(t.instrs) for t in r.threads) for r in sched.ranks), default=0)
    return (f"oneCCL {sched.collective.value}, {sched.nranks} ranks, {modes}, window "
            f"{sched.min_bytes}..{hi} bytes, up to {_count(threads, 'thread')} and "
            f"{_count(instrs, 'instruction')} per rank, {sched.nchunks} chunks per loop; "
            f"executed at eager depth {sched.eager_depth}")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _summary(program) -> str:
    """What was verified: collective, ranks, protocol, modes, window, resources."""
    modes = "+".join(m for m, on in (("in-place", program.inplace),
                                      ("out-of-place", program.outofplace)) if on) or "no mode"
    hi = (str(program.max_bytes) if program.max_bytes > 0 else "unlimited" if
          program.max_bytes == 0 else f"unlimited (maxBytes {program.max_bytes})")
    depth = program.protocol.fifo_depth
    channels = _count(program.nchannels, "channel")
    return (f"{program.collective.value}, {program.ngpus} ranks, {program.protocol.value}, "
            f"{modes}, window {program.min_bytes}..{hi} bytes, {channels}, "
            f"{_count(program.max_threadblocks, 'threadblock')} per GPU "
            f"(SMs held during a call), "
            f"nchunksperloop {program.nchunks}; executed at FIFO depth {depth}")


def verify_file(path: str, backend: str | None = None,
                budget: int | None = None) -> VerifyReport:
    """Read ``path`` and verify it (see ``verify_text``); with ``budget``, an
    MSCCL file taking more threadblocks per GPU than that fails.

    MSCCL files are read up to ``MAX_FILE_BYTES`` (their reader builds the
    whole tree); oneCCL files up to ``MAX_STREAM_BYTES``, their reader
    streaming rank by rank.  The format is told from the file's first
    kilobytes before the rest is read.
    """
    return Verifier(budget).file(path, backend)


def budget_errors(program, budget: int | None) -> tuple[str, ...]:
    """An error when ``program`` takes more threadblocks per GPU than
    ``budget`` (``colc verify --max-threadblocks``; None: no budget).

    >>> from colc.ir.program import Program
    >>> from colc.ir.core import Collective, Protocol
    >>> p = Program("x", Collective.ALLGATHER, Protocol.SIMPLE, 1, 2, 2, True, True, 0, 0, ())
    >>> budget_errors(p, 4), budget_errors(None, 4)
    ((), ())
    """
    if budget is None or program is None or program.max_threadblocks <= budget:
        return ()
    return (f"{program.max_threadblocks} threadblocks per GPU, more than the budget of "
            f"{budget} (--max-threadblocks)",)


def _read_text(path: str, backend: str | None) -> tuple[str, str, str]:
    """``(text, path, backend)`` of the file at ``path`` (``verify_file``'s limits)."""
    from colc.backends.oneccl_xml import MAX_STREAM_BYTES
    from colc.frontends._input import check_input, open_nonblocking
    from colc.safe_xml import read_bytes_limited

    if backend is None:
        check_input(path, MAX_STREAM_BYTES)  # a regular file, size checked first
        try:
            with open_nonblocking(path) as fh:
                head = fh.read(HEAD_BYTES).decode("utf-8", errors="replace")
        except OSError as err:
            raise SpecError(path, f"cannot read file: {err.strerror or err}") from None
        backend = detect_backend(head, path)
    data = read_bytes_limited(path, MAX_STREAM_BYTES if backend == "oneccl" else MAX_FILE_BYTES)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ColcError(f"{path}: error: not UTF-8 text (byte {err.start})") from err
    return text, path, backend
