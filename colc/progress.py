"""Progress lines on stderr for long jobs (issue 11).

The pipeline reports what it is doing (``report(stage, done, total)``); a
``Progress`` prints it as one rewritten line with the stage, the count and a
time estimate, on standard error and only when standard error is a terminal
(so logs, pipes and CI output stay clean).  ``COLC_PROGRESS=0`` turns it off,
``COLC_PROGRESS=1`` forces it on.  Nothing is printed for jobs that finish
within ``QUIET_FOR`` seconds.

Example
-------
>>> import io
>>> out = io.StringIO()
>>> with active(Progress(out, enabled=True, quiet_for=0.0)):
...     report("simulating trees/c16/Simple", 1, 4)
>>> "[1/4] simulating trees/c16/Simple" in out.getvalue()
True
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator
from typing import TextIO

#: Seconds a job runs before the first progress line appears.
QUIET_FOR = 2.0


class Progress:
    """One rewritten status line (see the module docstring).

    Parameters
    ----------
    stream : text stream
        Where to write (standard error).
    enabled : bool or None
        None: when ``stream`` is a terminal, unless ``COLC_PROGRESS`` says otherwise.
    quiet_for : float
        Seconds before the first line.
    """

    def __init__(self, stream: TextIO | None = None, enabled: bool | None = None,
                 quiet_for: float = QUIET_FOR) -> None:
        self.stream = stream or sys.stderr
        env = os.environ.get("COLC_PROGRESS")
        if enabled is None:
            enabled = env == "1" or (env != "0" and _isatty(self.stream))
        self.enabled = enabled
        self.quiet_for = quiet_for
        self.start = time.monotonic()
        self.width = 0

    def update(self, stage: str, done: int, total: int) -> None:
        """Show ``stage`` as item ``done`` of ``total`` (0: unknown), with elapsed and
        remaining time."""
        if not self.enabled:
            return
        elapsed = time.monotonic() - self.start
        if elapsed < self.quiet_for:
            return
        eta, count = "", f"{done}/{total}" if total > 0 else f"step {done}"
        if 0 < done <= total and done > 1:
            eta = f", about {elapsed / (done - 1) * (total - done + 1):.0f} s left"
        line = f"colc: [{count}] {stage} ({elapsed:.0f} s{eta})"
        pad = max(0, self.width - len(line))
        self.stream.write("\r" + line + " " * pad)
        self.stream.flush()
        self.width = len(line)

    def close(self) -> None:
        """Erase the line."""
        if self.enabled and self.width:
            self.stream.write("\r" + " " * self.width + "\r")
            self.stream.flush()
            self.width = 0


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


_ACTIVE: list[Progress] = []


@contextlib.contextmanager
def active(progress: Progress) -> Iterator[Progress]:
    """Make ``progress`` receive ``report`` calls inside the ``with`` block."""
    _ACTIVE.append(progress)
    try:
        yield progress
    finally:
        _ACTIVE.remove(progress)
        progress.close()


def clear() -> None:
    """Erase the active progress line (before printing results or notes)."""
    if _ACTIVE:
        _ACTIVE[-1].close()


def report(stage: str, done: int, total: int) -> None:
    """Tell the active ``Progress`` (if any) what the job is doing."""
    if _ACTIVE:
        _ACTIVE[-1].update(stage, done, total)


__all__ = ["Progress", "active", "clear", "report"]
