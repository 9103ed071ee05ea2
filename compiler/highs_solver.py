"""HiGHS without its banner: the first ``highspy.Highs()`` of a process prints a
copyright line to file descriptor 1, which would corrupt ``colc TOPO`` (XML on
standard output) and ``colc analyze --json``.  ``new_highs`` builds the first
one with descriptor 1 pointed at ``os.devnull`` and turns solver output off."""

from __future__ import annotations

import os
import sys

import highspy

_BANNER_SHOWN = False


def new_highs() -> highspy.Highs:
    """A ``highspy.Highs`` with ``output_flag`` off; never writes to standard output."""
    global _BANNER_SHOWN
    if not _BANNER_SHOWN:
        sys.stdout.flush()
        saved = os.dup(1)
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, 1)
            h = highspy.Highs()
        finally:
            os.dup2(saved, 1)
            os.close(saved)
            os.close(devnull)
        _BANNER_SHOWN = True
    else:
        h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    return h


__all__ = ["new_highs"]
