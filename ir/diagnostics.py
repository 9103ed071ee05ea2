"""Diagnostics: one located finding of a checker, reader or interpreter.

Input: produced by ``colc.backends.msccl_reader``, ``colc.ir.load_checks``
and ``colc.ir.interpret``.  Output: immutable records that print as one line,
``rank 1 tb 0 step 3: message``.  Location parts that are unknown are left
out; ``line`` (1-based line of an input file) is appended when known.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Severity(Enum):
    """Whether a finding makes a file unusable (error) or merely suspicious."""

    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """A finding, located by rank / threadblock / step where known.

    Parameters
    ----------
    message : str
        What is wrong, on one line.
    rank, tb, step : int or None
        Rank, threadblock id and step position (0-based, counting nops,
        document order) the finding is about.
    severity : Severity
    line : int or None
        1-based line in the input file, when the finding comes from text.

    Examples
    --------
    >>> str(Diagnostic("cnt 72 out of range", rank=1, tb=0, step=3))
    'rank 1 tb 0 step 3: cnt 72 out of range'
    """

    message: str
    rank: int | None = None
    tb: int | None = None
    step: int | None = None
    severity: Severity = Severity.ERROR
    line: int | None = None

    @staticmethod
    def labels() -> tuple[str, str]:
        """Words naming the threadblock and step parts of the location."""
        return "tb", "step"

    @property
    def is_error(self) -> bool:
        """Whether the finding is an error."""
        return self.severity is Severity.ERROR

    def __str__(self) -> str:
        tb_label, step_label = self.labels()
        parts = []
        if self.rank is not None:
            parts.append(f"rank {self.rank}")
        if self.tb is not None:
            parts.append(f"{tb_label} {self.tb}")
        if self.step is not None:
            parts.append(f"{step_label} {self.step}")
        where = " ".join(parts)
        text = f"{where}: {self.message}" if where else self.message
        if self.line is not None:
            text += f" [line {self.line}]"
        return text


def error(message: str, rank: int | None = None, tb: int | None = None,
          step: int | None = None, line: int | None = None) -> Diagnostic:
    """Shorthand for an error ``Diagnostic``."""
    return Diagnostic(message, rank, tb, step, Severity.ERROR, line)


def warning(message: str, rank: int | None = None, tb: int | None = None,
            step: int | None = None, line: int | None = None) -> Diagnostic:
    """Shorthand for a warning ``Diagnostic``."""
    return Diagnostic(message, rank, tb, step, Severity.WARNING, line)
