"""``colc verify DIR``: an ``MSCCL_ALGO_DIR`` as the runtime loads it.

The executor parses every regular file or symlink of the folder, in sorted
full-path order, with no extension filter; a file whose first element is not
``<algo`` breaks the whole load (runtime notes 4.1).  For each call it takes
the first file (in that order) whose collective, rank count, in-place or
out-of-place flag and ``[minBytes, maxBytes]`` window match.

Checks: every file verifies (``Verifier.file``: a file with the steps of
the file before it is read and load-checked, and shares its runs); no file
is unreadable or not an MSCCL algorithm; and among files of the same
(collective, ranks, mode), no two windows overlap (the later file would
never be used there) and no file is wholly shadowed by earlier ones.

Input: a folder path.  Output: a ``DirReport`` (per-file reports and the
folder's own errors and warnings).  Complexity: the verifier per file, plus
O(F^2) window comparisons for F files.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from colc.backends.verify import Verifier, VerifyReport
from colc.errors import ColcError


@dataclass(frozen=True, slots=True)
class DirReport:
    """Outcome of ``verify_dir``."""

    folder: str
    files: tuple[tuple[str, VerifyReport], ...]
    errors: tuple[str, ...]
    warnings: tuple[str, ...]

    @property
    def ok(self) -> bool:
        """No error in any file nor in the folder as a whole."""
        return not self.errors and all(r.ok for _, r in self.files)


def _window(program) -> tuple[int, float]:
    hi = float("inf") if program.max_bytes == 0 else program.max_bytes
    return program.min_bytes, hi


def _show(lo: int, hi: float) -> str:
    return f"{lo}..{'unlimited' if hi == float('inf') else int(hi)}"


def verify_dir(folder: str) -> DirReport:
    """Verify every file of ``folder`` and the windows between them (module docstring).

    Raises
    ------
    ColcError
        ``folder`` is not a readable directory.
    """
    try:
        names = sorted(os.listdir(folder))
    except OSError as err:
        raise ColcError(f"{folder}: error: cannot list: {err.strerror}") from None
    files, errors, warnings = [], [], []
    verifier = Verifier()  # a file with its neighbour's steps is not run twice
    seen: dict[tuple[str, int, str], list[tuple[str, int, float]]] = {}
    for name in names:
        path = os.path.join(folder, name)
        if not os.path.isfile(path):  # the runtime skips what is not a file or link to one
            continue
        try:
            report = verifier.file(path, backend="msccl")
        except ColcError as err:
            errors.append(f"{name}: {err} (the runtime would fail to load the folder)")
            continue
        files.append((name, report))
        program = report.program
        if program is None:
            errors.append(f"{name}: not an MSCCL algorithm file; the runtime parses every "
                          f"file of the folder and fails on it")
            continue
        for mode, on in (("in-place", program.inplace), ("out-of-place", program.outofplace)):
            if on:
                key = (program.collective.value, program.ngpus, mode)
                _check_windows(name, _window(program), seen.setdefault(key, []), key,
                               errors, warnings)
    if not files and not errors:
        warnings.append("no algorithm file: the runtime loads none from this folder and runs "
                        "NCCL's own algorithms")
    return DirReport(folder, tuple(files), tuple(errors), tuple(warnings))


def _check_windows(name: str, window: tuple[int, float], earlier: list, key: tuple,
                   errors: list[str], warnings: list[str]) -> None:
    lo, hi = window
    what = f"{key[0]}, {key[1]} ranks, {key[2]}"
    covered = []
    for other, olo, ohi in earlier:
        if olo <= hi and lo <= ohi:
            covered.append((max(lo, olo), min(hi, ohi)))
            errors.append(f"{name}: window {_show(lo, hi)} overlaps {other} "
                          f"({_show(olo, ohi)}) for {what}: the runtime uses {other} there")
    if covered and _union_covers(covered, lo, hi):
        warnings.append(f"{name}: never used for {what} (earlier files cover its whole window)")
    earlier.append((name, lo, hi))


def _union_covers(spans: list[tuple[int, float]], lo: int, hi: float) -> bool:
    at = lo
    for a, b in sorted(spans):
        if a > at:
            return False
        if b >= hi:
            return True
        at = max(at, b + 1)
    return False


__all__ = ["DirReport", "verify_dir"]
