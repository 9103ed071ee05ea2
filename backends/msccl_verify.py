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

Complexity: that of the reader plus at most four interpreter runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from colc.backends.msccl_reader import read_msccl
from colc.ir.diagnostics import Diagnostic, error
from colc.ir.interpret import interpret
from colc.ir.load_checks import LoadedProgram, load_program
from colc.ir.program import Program


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


def verify_program(program: Program,
                   locate: Callable[[Diagnostic], Diagnostic] | None = None,
                   loaded: LoadedProgram | None = None) -> list[Diagnostic]:
    """Load-check and interpret ``program`` in every mode it declares.

    Parameters
    ----------
    program : Program
    locate : callable, optional
        Adds file lines to diagnostics (``ReadResult.locate``).
    loaded : LoadedProgram, optional
        ``load_program(program)`` when already computed.

    Returns
    -------
    list of Diagnostic
        Without duplicates, in a deterministic order.
    """
    if loaded is None:
        loaded = load_program(program)
    found: list[Diagnostic] = list(loaded.diagnostics)
    if loaded.runnable:
        modes = [m for m, on in ((True, program.inplace), (False, program.outofplace)) if on]
        if not modes:
            found.append(error("inplace=0 and outofplace=0: the runtime never selects this "
                               "algorithm"))
        depth = program.protocol.fifo_depth
        for inplace in modes:
            diags = interpret(program, fifo_depth=depth, inplace=inplace, loaded=loaded)
            found.extend(diags)
            if any(d.message.startswith("deadlock") for d in diags):
                found.extend(_unbounded_rerun(program, loaded, inplace, depth, diags))
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
    res = read_msccl(text, path)
    diags = list(res.diagnostics)
    if res.runnable and res.program is not None:
        for d in verify_program(res.program, res.locate, res.loaded):
            if str(d) not in {str(x) for x in diags}:
                diags.append(d)
    errors = tuple(str(d) for d in diags if d.is_error)
    warnings = tuple(str(d) for d in diags if not d.is_error)
    return VerifyReport(path, not errors, errors, warnings, tuple(diags), res.program)
