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
folder's own errors and warnings).  Complexity: the verifier per file, on
several processes for large folders (runs of neighbouring files of near
sizes, ``_neighbours``, each on one process so twins share their runs),
plus O(F^2) window comparisons for F files.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

from colc.backends.verify import Verifier, VerifyReport
from colc.errors import ColcError


@dataclass(frozen=True, slots=True)
class DirReport:
    """Outcome of ``verify_dir`` (the files' reports hold no program)."""

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


#: Bytes of files from which a folder's files are verified on several
#: processes (below, forking costs more than it saves).
PARALLEL_BYTES = 16 << 20
#: Neighbouring files whose sizes differ by at most this are verified on one
#: process in turn, so one with the other's steps shares its runs (a
#: portfolio's LL and LL128 windows differ only in their ``<algo>`` tag).
TWIN_BYTES = 4096


@dataclass(frozen=True, slots=True)
class _Selection:
    """What the runtime matches a file on (collective, ranks, modes, window)."""

    collective: str
    ngpus: int
    modes: tuple[str, ...]
    window: tuple[int, float]


def verify_dir(folder: str, jobs: int | None = None) -> DirReport:
    """Verify every file of ``folder`` and the windows between them (module docstring).

    Parameters
    ----------
    folder : str
    jobs : int, optional
        Processes for the files (default ``default_jobs()``) once they hold
        ``PARALLEL_BYTES``; the report does not depend on it.

    Returns
    -------
    DirReport
        Its files' reports without their programs (a folder of 1024-rank
        files would hold gigabytes).

    Raises
    ------
    ColcError
        ``folder`` is not a readable directory.
    """
    from colc.forked import fork_map

    names = _loaded_names(folder)
    sizes = [_size(os.path.join(folder, n)) for n in names]
    groups = _neighbours(sizes)
    if sum(sizes) < PARALLEL_BYTES:
        jobs = 1

    def verify(group: list[int]) -> list[tuple]:
        verifier = Verifier()  # a file with its neighbour's steps is not run twice
        return [_verify_one(verifier, folder, names[i]) for i in group]

    files, errors, warnings = [], [], []
    seen: dict[tuple[str, int, str], list[tuple[str, int, float]]] = {}
    for found in fork_map(verify, groups, jobs):
        for name, report, selection, problem in found:
            if problem:
                errors.append(problem)
            if report is None:
                continue
            files.append((name, report))
            for mode in selection.modes if selection else ():
                key = (selection.collective, selection.ngpus, mode)
                _check_windows(name, selection.window, seen.setdefault(key, []), key,
                               errors, warnings)
    if not files and not errors:
        warnings.append("no algorithm file: the runtime loads none from this folder and runs "
                        "NCCL's own algorithms")
    return DirReport(folder, tuple(files), tuple(errors), tuple(warnings))


def _loaded_names(folder: str) -> list[str]:
    """The entries of ``folder`` the runtime opens, sorted: regular files and
    symbolic links, whatever they point to (it reads the directory entry's
    type, ``DT_REG`` or ``DT_LNK``), so a dangling link or a link to a
    folder fails the load like an unreadable file; folders, FIFOs, sockets
    and devices it skips."""
    try:
        with os.scandir(folder) as entries:
            return sorted(e.name for e in entries
                          if e.is_symlink() or e.is_file(follow_symlinks=False))
    except OSError as err:
        raise ColcError(f"{folder}: error: cannot list: {err.strerror}") from None


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0  # reported when it is read


def _neighbours(sizes: list[int]) -> list[list[int]]:
    """Indices in order, in runs of neighbours whose sizes differ by at most
    ``TWIN_BYTES`` (only a grouping for the processes: the verifier decides)."""
    groups: list[list[int]] = []
    for i, size in enumerate(sizes):
        if groups and abs(size - sizes[groups[-1][-1]]) <= TWIN_BYTES:
            groups[-1].append(i)
        else:
            groups.append([i])
    return groups


def _verify_one(verifier: Verifier, folder: str, name: str) -> tuple:
    """``(name, report without its program or None, _Selection or None, error or "")``."""
    path = os.path.join(folder, name)
    if os.path.islink(path) and not os.path.isfile(path):
        what = "a folder" if os.path.isdir(path) else (
            "nothing" if not os.path.lexists(os.path.realpath(path)) else "no regular file")
        return (name, None, None, f"{name}: a symbolic link to {what} "
                f"({os.readlink(path)}); the runtime opens every link of the folder and "
                "fails to load it")
    try:
        report = verifier.file(path, backend="msccl")
    except ColcError as err:  # "folder/name: error: why" -> "name: why"
        why = str(err).removeprefix(f"{path}: error: ")
        return name, None, None, f"{name}: {why} (the runtime would fail to load the folder)"
    program = report.program
    if program is None:
        return (name, report, None, f"{name}: not an MSCCL algorithm file; the runtime parses "
                "every file of the folder and fails on it")
    modes = tuple(m for m, on in (("in-place", program.inplace),
                                  ("out-of-place", program.outofplace)) if on)
    selection = _Selection(program.collective.value, program.ngpus, modes, _window(program))
    return name, replace(report, program=None), selection, ""


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
