"""``colc verify``: decide whether an MSCCL XML file is loadable and correct.

Input: the text of an MSCCL algorithm file (or an already built
``Program``).  Output: a ``VerifyReport``; ``ok`` is True exactly when there
is no error.  Steps (``shared/reference/msccl-xml-runtime.md``):

1. parse like the runtime (sections 1, 2, 5: ``colc.backends.msccl_reader``);
2. if the file loads, interpret it (section 4: ``colc.ir.interpret``) in every
   mode the file declares (``inplace=1`` with aliasing, ``outofplace=1``
   without), at the protocol's FIFO depth (Simple 2, LL/LL128 8 calls).  When
   that run deadlocks it is repeated with unbounded FIFOs to tell a capacity
   deadlock from a structural one.  A run without deadlock is not repeated:
   with monotone flags and FIFOs, deadlock freedom at depth k implies it at
   any larger depth, and data results and races do not depend on the depth.

Complexity: that of the reader plus at most four interpreter runs; the
modes run on forked processes at once for large programs (``PARALLEL_STEPS``).
Files verified in turn (``MscclVerifier``) skip the runs of a file whose
program ``runs_alike`` the previous clean one's: O(steps) to compare.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from colc.backends.msccl_reader import read_msccl
from colc.forked import default_jobs, fork_map
from colc.ir.core import runtime_bytes
from colc.ir.diagnostics import Diagnostic, error, warning
from colc.ir.interpret import interpret
from colc.ir.load_checks import LoadedProgram, load_program, slots_problem
from colc.ir.program import Program

#: Steps from which the aliasing modes are interpreted on separate processes
#: (below, forking costs more than it saves).
PARALLEL_STEPS = 20000


@dataclass(frozen=True, slots=True)
class VerifyReport:
    """Outcome of a verification.

    ``errors`` and ``warnings`` are one-line strings naming rank, tb and step
    where known; ``diagnostics`` holds the same findings as records.
    """

    path: str
    ok: bool
    errors: tuple[str, ...]
    warnings: tuple[str, ...]
    diagnostics: tuple[Diagnostic, ...]
    program: Program | None
    twin: str = ""  # the earlier file whose runs this file's would repeat (``MscclVerifier``)


def verify_program(program: Program,
                   locate: Callable[[Diagnostic], Diagnostic] | None = None,
                   loaded: LoadedProgram | None = None,
                   jobs: int | None = None) -> list[Diagnostic]:
    """Load-check and interpret ``program`` in every mode it declares.

    Parameters
    ----------
    program : Program
    locate : callable, optional
        Adds file lines to diagnostics (``ReadResult.locate``).
    loaded : LoadedProgram, optional
        ``load_program(program)`` when already computed.
    jobs : int, optional
        Processes for the modes (in-place, out-of-place run at once); default:
        ``default_jobs()`` for programs of ``PARALLEL_STEPS`` steps or more,
        else 1.  The findings are the same in the same order.

    Returns
    -------
    list of Diagnostic
        Without duplicates, in a deterministic order.
    """
    if loaded is None:
        loaded = load_program(program)
    return _unique(list(loaded.diagnostics) + run_findings(program, loaded, jobs), locate)


def run_findings(program: Program, loaded: LoadedProgram,
                 jobs: int | None = None) -> list[Diagnostic]:
    """What running ``program`` in its modes finds beyond ``loaded``'s diagnostics.

    Parameters
    ----------
    program : Program
    loaded : LoadedProgram
        ``load_program(program)``.
    jobs : int, optional
        As in ``verify_program``.

    Returns
    -------
    list of Diagnostic
        Empty when the runtime would not load the program (nothing runs) or
        when every run ends as the collective should; not yet located.
    """
    if not loaded.runnable:
        return []
    too_many = slots_problem(program.collective, program.nchunks, program.ranks)
    if too_many:  # refused before its buffers are allocated
        return [error(too_many)]
    found = header_findings(program)
    modes = [m for m, on in ((True, program.inplace), (False, program.outofplace)) if on]
    depth = program.protocol.fifo_depth

    def run(inplace: bool) -> list[Diagnostic]:
        diags = interpret(program, fifo_depth=depth, inplace=inplace, loaded=loaded)
        if any(d.message.startswith("deadlock") for d in diags):
            diags += _unbounded_rerun(program, loaded, inplace, depth, diags)
        return diags

    steps = sum(len(tb.steps) for rp in program.ranks for tb in rp.threadblocks)
    if jobs is None:
        jobs = default_jobs() if steps >= PARALLEL_STEPS else 1
    known = {str(d) for d in loaded.diagnostics}
    for diags in fork_map(run, modes, jobs):
        found.extend(d for d in diags if str(d) not in known)
    return found


def header_findings(program: Program) -> list[Diagnostic]:
    """What the ``<algo>`` tag's selection fields alone make of ``program``.

    The runtime compares a call's size (``size_t``) with minBytes and
    maxBytes (``int64``) unsigned (``runtime_bytes``): a negative minBytes
    is never met, a negative maxBytes is no limit in effect.

    Parameters
    ----------
    program : Program

    Returns
    -------
    list of Diagnostic
        Errors where the runtime never selects the file (no mode, an empty
        window), a warning for a negative maxBytes; not yet located.

    Examples
    --------
    >>> from colc.ir.core import Collective, Protocol
    >>> p = Program("x", Collective.ALLGATHER, Protocol.LL, 1, 2, 2, True, True, 0, -1, ())
    >>> [str(d)[:24] for d in header_findings(p)]
    ['maxBytes -1 is negative:']
    """
    found: list[Diagnostic] = []
    if not (program.inplace or program.outofplace):
        found.append(error("inplace=0 and outofplace=0: the runtime never selects this "
                           "algorithm"))
    lo, hi = runtime_bytes(program.min_bytes), runtime_bytes(program.max_bytes)
    if program.min_bytes < 0:
        found.append(error(f"minBytes {program.min_bytes} is negative: the runtime compares it "
                           f"with a call's size unsigned, as {lo}, so it never selects this "
                           f"algorithm"))
    elif hi and hi < lo:  # as colc refuses to write
        found.append(error(f"maxBytes {program.max_bytes} < minBytes {program.min_bytes}: the "
                           f"runtime never selects this algorithm"))
    if program.max_bytes < 0:
        found.append(warning(f"maxBytes {program.max_bytes} is negative: the runtime compares "
                             f"it with a call's size unsigned, as {hi}, so no upper limit is "
                             f"in effect (write 0 for no limit)"))
    return found


def _unique(found: list[Diagnostic],
            locate: Callable[[Diagnostic], Diagnostic] | None) -> list[Diagnostic]:
    seen: set[str] = set()
    unique = []
    for d in found:
        if locate is not None:
            d = locate(d)
        key = f"{d.severity.value} {d}"
        if key not in seen:
            seen.add(key)
            unique.append(d)
    return unique


def runs_alike(a: Program, b: Program) -> bool:
    """Whether the interpreter runs ``a`` and ``b`` alike.

    They are the same program but for name, comment, size window and a
    protocol of the same FIFO depth (a portfolio's LL and LL128 windows of
    one schedule).  None of those fields reaches ``load_program`` or
    ``interpret``; the protocol only through its FIFO depth (and in the
    message of a deadlock, which is a finding: such a run is never shared).

    Parameters
    ----------
    a, b : Program

    Returns
    -------
    bool
        O(steps) to decide.
    """
    return a.protocol.fifo_depth == b.protocol.fifo_depth and a == replace(
        b, name=a.name, comment=a.comment, protocol=a.protocol, min_bytes=a.min_bytes,
        max_bytes=a.max_bytes)


def _unbounded_rerun(program: Program, loaded: LoadedProgram, inplace: bool, depth: int,
                     finite: list[Diagnostic]) -> list[Diagnostic]:
    """Findings of an unbounded-FIFO run that the finite run did not already make."""
    mode = "in-place" if inplace else "out-of-place"
    known = {str(d) for d in finite}
    out = []
    deadlocked = False
    for d in interpret(program, fifo_depth=None, inplace=inplace, loaded=loaded):
        deadlocked = deadlocked or d.message.startswith("deadlock")
        if str(d).replace("FIFO depth unbounded", f"FIFO depth {depth}") not in known:
            out.append(d)
    if not deadlocked:
        out.append(error(f"the deadlock ({mode}) is caused by the FIFO depth {depth} of "
                         f"{program.protocol.value}: with unbounded FIFOs the schedule completes"))
    return out


class MscclVerifier:
    """``colc verify`` over files in turn (a portfolio, an ``MSCCL_ALGO_DIR``).

    Every file is read and load-checked, and its ``<algo>`` tag checked
    (``header_findings``).  A file whose program ``runs_alike`` the previous
    file's, whose runs found nothing, is not run again: the interpreter
    would repeat the same steps to the same end (a 1024-rank file's two runs
    take about 40 s).  Its report names that file (``VerifyReport.twin``).
    Holds one program between files.
    """

    def __init__(self) -> None:
        self._clean: tuple[str, Program] | None = None

    def verify(self, text: str, path: str) -> VerifyReport:
        """Verify one file.

        Parameters
        ----------
        text : str
            Contents of the file.
        path : str
            Named in messages, and in ``twin`` by a later file.

        Returns
        -------
        VerifyReport
            As ``verify_msccl_text``'s, with ``twin`` the earlier file whose
            runs it shares ("" when it was run).
        """
        res = read_msccl(text, path)
        diags = list(res.diagnostics)
        twin = ""
        program, clean = res.program, self._clean
        self._clean = None
        if res.runnable and program is not None and res.loaded is not None:
            if clean is not None and runs_alike(clean[1], program):
                # the runs are the clean file's; the window is this file's own
                twin, found = clean[0], header_findings(program)
                runs_clean = True
            else:
                found = run_findings(program, res.loaded)
                header = {str(d) for d in header_findings(program)}
                runs_clean = all(str(d) in header for d in found)
            known = {str(x) for x in diags}
            for d in _unique(found, res.locate):
                if str(d) not in known:
                    known.add(str(d))
                    diags.append(d)
            if runs_clean:
                self._clean = (twin or path, clean[1] if twin else program)
        errors = tuple(str(d) for d in diags if d.is_error)
        warnings = tuple(str(d) for d in diags if not d.is_error)
        return VerifyReport(path, not errors, errors, warnings, tuple(diags), program, twin)


def verify_msccl_text(text: str, path: str) -> VerifyReport:
    """Verify one MSCCL algorithm file.

    Parameters
    ----------
    text : str
        Contents of the file.
    path : str
        Used in messages only.

    Returns
    -------
    VerifyReport

    Examples
    --------
    >>> verify_msccl_text('<algo name="x">', "x.xml").errors
    ('unterminated <algo> [line 1]',)
    """
    return MscclVerifier().verify(text, path)
