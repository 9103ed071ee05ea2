"""One error hierarchy for colc.

``ColcError`` and its subclasses are user-facing: the CLI prints their message
on one line and exits with status 1.  ``InternalError`` is a separate base for
broken invariants inside colc; the CLI reports it as an internal error
(exit 3).
"""

from __future__ import annotations


class ColcError(Exception):
    """Base of every error caused by the user's input or request."""


class SpecError(ColcError):
    """A malformed or inconsistent input file.

    Parameters
    ----------
    path : str
        The file the problem is in.
    msg : str
        What is wrong, naming the field.
    line : int or None
        1-based line number, when known.
    """

    def __init__(self, path: str, msg: str, line: int | None = None) -> None:
        self.path = path
        self.line = line
        self.msg = msg
        where = f"{path}:{line}" if line is not None else path
        super().__init__(f"{where}: error: {msg}")


class TopologyError(ColcError):
    """A topology that is well-formed but unusable (not connected, ...)."""


class InfeasibleError(ColcError):
    """No schedule satisfies the request (limits, LP infeasible, ...)."""


class UnsupportedError(ColcError):
    """A valid request that colc does not implement."""


class VerificationError(ColcError):
    """A schedule or runtime file that fails verification.

    Parameters
    ----------
    diagnostics : sequence of str
        One line each, naming rank, threadblock and step where known.
    """

    def __init__(self, diagnostics: list[str] | tuple[str, ...], header: str = "") -> None:
        self.diagnostics = tuple(diagnostics)
        first = self.diagnostics[0] if self.diagnostics else "verification failed"
        more = f" (and {len(self.diagnostics) - 1} more)" if len(self.diagnostics) > 1 else ""
        super().__init__(f"{header}{first}{more}")


class InternalError(Exception):
    """A broken invariant inside colc: a bug, never the user's fault."""
