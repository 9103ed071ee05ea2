"""``colc verify`` for oneCCL XML: read, then interpret (``colc.ir.interpret_oneccl``).

Input: the text of a oneCCL XML file (or a ``Program`` to lower first).
Output: a ``VerifyReport`` shaped like the MSCCL one; ``ok`` is True exactly
when there is no error.  A file the reader rejects (malformed XML, schema
violation, bad ids or references) gives one error carrying its line.
Execution runs in every declared aliasing at the file's ``eager_depth``,
and again with unbounded buffering when that deadlocks.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from colc.backends.oneccl_reader import read_oneccl_xml, source_lines
from colc.backends.oneccl_xml import lower_program
from colc.errors import SpecError
from colc.ir.diagnostics import Diagnostic, error, warning
from colc.ir.interpret_oneccl import verify_thread_schedule
from colc.ir.load_checks import slots_problem
from colc.ir.oneccl import ThreadSchedule
from colc.ir.program import Program


@dataclass(frozen=True, slots=True)
class VerifyReport:
    """Outcome of a verification (same fields as the MSCCL report, ``schedule`` for ``program``)."""

    path: str
    ok: bool
    errors: tuple[str, ...]
    warnings: tuple[str, ...]
    diagnostics: tuple[Diagnostic, ...]
    schedule: ThreadSchedule | None


def verify_oneccl_text(text: str | bytes, path: str) -> VerifyReport:
    """Verify one oneCCL XML file.

    Parameters
    ----------
    text : str or bytes
        Contents of the file.
    path : str
        Used in messages only.

    Returns
    -------
    VerifyReport

    Examples
    --------
    >>> verify_oneccl_text("<oneccl_schedule", "x.oneccl.xml").ok
    False
    """
    try:
        sched = read_oneccl_xml(text, path)
    except SpecError as err:
        diag = error(err.msg, line=err.line)
        return VerifyReport(path, False, (str(diag),), (), (diag,), None)
    too_many = slots_problem(sched.collective, sched.nchunks, sched.ranks)
    if too_many:  # refused before the interpreter allocates its buffers
        diag = error(too_many)
        return VerifyReport(path, False, (str(diag),), (), (diag,), sched)
    diags: list[Diagnostic] = _located(verify_thread_schedule(sched), text)
    if sched.max_bytes and sched.max_bytes < sched.min_bytes:  # as an MSCCL file's
        diags.append(error(f"max_bytes {sched.max_bytes} < min_bytes {sched.min_bytes}: "
                           f"the runtime never selects this algorithm"))
    errors = tuple(str(d) for d in diags if d.is_error)
    warnings = tuple(str(d) for d in diags if not d.is_error)
    return VerifyReport(path, not errors, errors, warnings, tuple(diags), sched)


def _located(diags: list[Diagnostic], text: str | bytes) -> list[Diagnostic]:
    """``diags``, each with the line of the instruction, thread or rank it
    names (the most precise one the file has), as MSCCL findings carry
    theirs."""
    def keys(d: Diagnostic) -> tuple:  # most precise first; none where it has a line
        if d.line is not None or d.rank is None:
            return ()
        return ((d.rank, d.tb, d.step), (d.rank, d.tb, None), (d.rank, None, None))

    wanted = {k for d in diags for k in keys(d)}
    if not wanted:
        return list(diags)
    lines = source_lines(text, wanted)
    out = []
    for d in diags:
        line = next((lines[k] for k in keys(d) if k in lines), None)
        out.append(d if line is None else dataclasses.replace(d, line=line))
    return out


def verify_oneccl_program(program: Program) -> list[Diagnostic]:
    """Lower a Program to oneCCL threads and verify the result (no XML round trip).

    Parameters
    ----------
    program : Program

    Returns
    -------
    list of Diagnostic
        Empty when the lowered schedule is correct.
    """
    return list(verify_thread_schedule(lower_program(program)))
