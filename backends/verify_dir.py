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

import math
import os
import re
from dataclasses import dataclass, replace

from colc.backends.msccl_reader import COLLECTIVES, UNSUPPORTED_COLL
from colc.backends.verify import MAX_FILE_BYTES, Verifier, VerifyReport, detect_backend
from colc.errors import ColcError
from colc.frontends._input import open_nonblocking
from colc.ir.core import runtime_bytes


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
    return _runtime_window(program.min_bytes, program.max_bytes)


def _runtime_window(min_bytes: int, max_bytes: int) -> tuple[int, float]:
    """``[minBytes, maxBytes]`` as the runtime compares them (``runtime_bytes``:
    unsigned, so a negative maxBytes is no limit in effect and a negative
    minBytes is never met); an unlimited top is ``inf``.

    >>> _runtime_window(0, 0), _runtime_window(-1, -1)[0] == (1 << 64) - 1
    ((0, inf), True)
    """
    hi = runtime_bytes(max_bytes)
    return runtime_bytes(min_bytes), float("inf") if hi == 0 else hi


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
class Selection:
    """What the runtime matches a file on (collective, ranks, modes, window,
    and its nchunksperloop: a call's element count must be a multiple of
    it, runtime notes 4.1)."""

    collective: str
    ngpus: int
    modes: tuple[str, ...]
    window: tuple[int, float]
    nchunks: int = 1


def verify_dir(folder: str, jobs: int | None = None, budget: int | None = None) -> DirReport:
    """Verify every file of ``folder`` and the windows between them (module docstring).

    Parameters
    ----------
    folder : str
    jobs : int, optional
        Processes for the files (default ``default_jobs()``) once they hold
        ``PARALLEL_BYTES``; the report does not depend on it.
    budget : int, optional
        Threadblocks per GPU a file may take (``--max-threadblocks``).

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
        verifier = Verifier(budget)  # a file with its neighbour's steps is not run twice
        return [_verify_one(verifier, folder, names[i]) for i in group]

    files, errors, warnings = [], [], []
    seen: dict[tuple[str, int, str], list[tuple[str, int, float, int]]] = {}
    for found in fork_map(verify, groups, jobs):
        for name, report, selection, problem, note in found:
            if problem:
                errors.append(problem)
            if note:
                warnings.append(note)
            if report is None:
                continue
            files.append((name, report))
            for mode in selection.modes if selection else ():
                key = (selection.collective, selection.ngpus, mode)
                _check_windows(name, selection, seen.setdefault(key, []), key, errors, warnings)
    uncovered: dict[tuple[str, int, str], list[str]] = {}  # the modes of each gap
    for (coll, ngpus, mode), spans in sorted(seen.items()):
        gaps = _gaps([(lo, hi) for _, lo, hi, _n in spans])
        if gaps:
            where = ", ".join(_show(lo, hi) for lo, hi in gaps)
            uncovered.setdefault((coll, ngpus, where), []).append(mode)
    warnings += [f"no file for {coll}, {ngpus} ranks, {' and '.join(modes)} at {where} bytes: "
                 f"NCCL's own algorithm runs there"
                 for (coll, ngpus, where), modes in uncovered.items()]
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
    """``(name, report without its program or None, Selection or None, error
    or "", warning or "")``."""
    path = os.path.join(folder, name)
    if os.path.islink(path) and not os.path.isfile(path):
        what = "a folder" if os.path.isdir(path) else (
            "nothing" if not os.path.lexists(os.path.realpath(path)) else "no regular file")
        return (name, None, None, f"{name}: a symbolic link to {what} "
                f"({os.readlink(path)}); the runtime opens every link of the folder and "
                "fails to load it", "")
    if _oneccl_content(path):
        return (name, None, None, f"{name}: a oneCCL file; the MSCCL runtime parses every file "
                "of the folder and fails on it (verify oneCCL files one by one: colc verify "
                "FILE)", "")
    try:
        report = verifier.file(path, backend="msccl")
    except ColcError as err:  # "folder/name: error: why" -> "name: why"
        why = str(err).removeprefix(f"{path}: error: ")
        return name, None, None, f"{name}: {why} (the runtime would fail to load the folder)", ""
    program = report.program
    if program is None and report.errors and all(UNSUPPORTED_COLL in e for e in report.errors):
        coll = (_algo_attrs(path) or {}).get("coll", "?")
        return (name, None, None, "", f"{name}: not checked: colc verify checks coll "
                f"{', '.join(COLLECTIVES)}, not {coll!r}; the runtime loads the folder with it "
                "and never selects it for those")
    if program is None:  # its errors once, in the folder's line (they were listed twice)
        why = "; ".join(report.errors) or "not an MSCCL algorithm file"
        return (name, None, None, f"{name}: {why}; the runtime parses every file of the folder "
                "and fails on it", "")
    return name, replace(report, program=None), selection_of(program), "", ""


def _oneccl_content(path: str) -> bool:
    """Whether the file's first element is oneCCL's root (its name aside)."""
    try:
        with open_nonblocking(path) as fh:
            head = fh.read(4096).decode("utf-8", "replace")
    except OSError:
        return False  # reported when it is read
    return detect_backend(head) == "oneccl"


def selection_of(program) -> Selection:
    """What the runtime matches ``program``'s file on."""
    modes = tuple(m for m, on in (("in-place", program.inplace),
                                  ("out-of-place", program.outofplace)) if on)
    return Selection(program.collective.value, program.ngpus, modes, _window(program),
                     program.nchunks)


_ALGO_TAG = re.compile(r"<algo\b([^>]*)>")
_ATTR = re.compile(r'([A-Za-z]\w*)="([^"]*)"')
#: Bytes of a file ``header_selection`` reads first for its ``<algo>`` tag
#: (then up to ``colc verify``'s ``MAX_FILE_BYTES`` where a long comment
#: comes first).
HEAD_BYTES = 1 << 16
_DECIMAL = re.compile(r"[0-9]{1,19}")  # ASCII only: int() refuses "²", str.isdigit() not


def header_selection(path: str) -> Selection | None:
    """What the runtime matches the file at ``path`` on, from its ``<algo>``
    tag alone (in its first ``HEAD_BYTES``), without reading its steps; None
    where there is no such tag with plain decimal ``ngpus``, ``coll``,
    ``inplace``, ``outofplace``, ``minBytes`` and ``maxBytes`` (``colc
    verify`` reads the whole file).

    >>> import tempfile
    >>> with tempfile.NamedTemporaryFile("w", suffix=".xml", delete=False) as fh:
    ...     _ = fh.write('<!-- x --><algo ngpus="4" coll="allgather" inplace="0" '
    ...                  'outofplace="1" nchunksperloop="8" minBytes="0" maxBytes="-1">'
    ...                  '<gpu/></algo>')
    >>> s = header_selection(fh.name)  # maxBytes -1: no limit in effect (_runtime_window)
    >>> s.collective, s.ngpus, s.modes, s.nchunks, s.window == (0, (1 << 64) - 1)
    ('allgather', 4, ('out-of-place',), 8, True)
    """
    attrs = _algo_attrs(path)
    if attrs is None:
        return None
    keys = ("ngpus", "inplace", "outofplace", "minBytes", "maxBytes")
    signed = ("minBytes", "maxBytes")  # int64: "-1" is read unsigned (_runtime_window)
    if "coll" not in attrs or not all(
            _DECIMAL.fullmatch(attrs.get(k, "").removeprefix("-" if k in signed else ""))
            for k in keys):
        return None
    ints = {k: int(attrs[k]) for k in keys}
    modes = tuple(m for m, k in (("in-place", "inplace"), ("out-of-place", "outofplace"))
                  if ints[k])
    nchunks = attrs.get("nchunksperloop", "")  # any count where it is not plain (or missing)
    nchunks = int(nchunks) if _DECIMAL.fullmatch(nchunks) and int(nchunks) > 0 else 1
    return Selection(attrs["coll"], ints["ngpus"], modes,
                     _runtime_window(ints["minBytes"], ints["maxBytes"]), nchunks)


def _algo_attrs(path: str) -> dict[str, str] | None:
    """The attributes of the ``<algo>`` tag in the file at ``path`` (the
    first of each name, as the runtime reads them), or None without one."""
    tag = None
    try:
        with open_nonblocking(path) as fh:
            head = fh.read(HEAD_BYTES)
            tag = _ALGO_TAG.search(head.decode("utf-8", "replace"))
            if tag is None and len(head) == HEAD_BYTES:  # a long comment first: read on
                head += fh.read(MAX_FILE_BYTES)
                tag = _ALGO_TAG.search(head.decode("utf-8", "replace"))
    except OSError:
        return None
    if tag is None:
        return None
    attrs: dict[str, str] = {}
    for key, value in _ATTR.findall(tag.group(1)):
        attrs.setdefault(key, value)  # the runtime uses the first
    return attrs


def same_calls(a: Selection, b: Selection) -> bool:
    """Whether the runtime could match one call to both files: the same
    collective and rank count, a mode in common, and a size in both windows
    whose element count is a multiple of both files' nchunksperloop.

    >>> s = Selection("allgather", 2, ("in-place",), (0, float("inf")), 6)
    >>> same_calls(s, replace(s, nchunks=4)), same_calls(s, replace(s, window=(7, 11)))
    (True, False)
    """
    return (a.collective == b.collective and a.ngpus == b.ngpus
            and bool(set(a.modes) & set(b.modes))
            and _shared(a.window, b.window, math.lcm(a.nchunks, b.nchunks)))


def _shared(a: tuple[int, float], b: tuple[int, float], step: int) -> bool:
    """Whether windows ``a`` and ``b`` share a size of a positive multiple of
    ``step`` elements of some type (of 1 byte, the smallest: a multiple of
    ``step`` bytes)."""
    lo, hi = max(a[0], b[0], 1), min(a[1], b[1])
    return -(-lo // step) * step <= hi


def folder_conflicts(folder: str, ours: dict[str, Selection], skip: set[str]) -> list[str]:
    """What in ``folder``, besides the files ``ours`` (name -> what it is
    matched on) and ``skip``, gets in their way once they are written: a
    file the runtime fails the whole load on (no ``<algo>`` tag colc can
    read), or one it could match to the same calls as one of ``ours`` (the
    runtime takes the one sorted first).  One line per file, sorted."""
    out = []
    for name in _loaded_names(folder):
        if name in ours or name in skip:
            continue
        theirs = header_selection(os.path.join(folder, name))
        if theirs is None:
            out.append(f"{name}: no MSCCL <algo> tag colc can read; the runtime parses every "
                       f"file of the folder and fails to load all of them on one it cannot "
                       f"(colc verify {folder} checks it)")
            continue
        clashes = [m for m in sorted(ours) if same_calls(ours[m], theirs)]
        if clashes:
            what = f"{theirs.collective}, {theirs.ngpus} ranks"
            more = f" and {len(clashes) - 1} more" if len(clashes) > 1 else ""
            out.append(f"{name}: window {_show(*theirs.window)} overlaps {clashes[0]} "
                       f"({_show(*ours[clashes[0]].window)}){more} for {what}: of two files "
                       f"the runtime uses the one sorted first")
    return out


def _check_windows(name: str, selection: Selection, earlier: list, key: tuple,
                   errors: list[str], warnings: list[str]) -> None:
    """Errors for the earlier files (``(name, lo, hi, nchunks)``, appended
    to) that take calls from ``name``'s window, and a warning when they
    take all of them.  An earlier file of nchunksperloop m takes the calls
    of an element count a multiple of m only: all of ``name``'s (of n) where
    m divides n, else those of a multiple of lcm(m, n)."""
    (lo, hi), n = selection.window, selection.nchunks
    what = f"{key[0]}, {key[1]} ranks, {key[2]}"
    covered = []
    for other, olo, ohi, m in earlier:
        if not _shared((lo, hi), (olo, ohi), math.lcm(m, n)):
            continue
        some = "" if n % m == 0 else (f" at element counts of a multiple of {math.lcm(m, n)} "
                                      f"(its nchunksperloop {m}, this file's {n})")
        if not some:
            covered.append((max(lo, olo), min(hi, ohi)))
        errors.append(f"{name}: window {_show(lo, hi)} overlaps {other} "
                      f"({_show(olo, ohi)}) for {what}: the runtime uses {other} there{some}")
    if covered and _union_covers(covered, lo, hi):
        warnings.append(f"{name}: never used for {what} (earlier files cover its whole window)")
    earlier.append((name, lo, hi, n))


def _gaps(spans: list[tuple[int, float]]) -> list[tuple[int, float]]:
    """The sizes from 0 up that no span covers.

    >>> _gaps([(0, 100), (201, float("inf"))])
    [(101, 200)]
    >>> _gaps([(50, 100)])
    [(0, 49), (101, inf)]
    """
    out, at = [], 0
    for lo, hi in sorted(x for x in spans if x[0] <= x[1]):  # an empty window serves nothing
        if lo > at:
            out.append((at, lo - 1))
        at = max(at, hi + 1)
    if at != float("inf"):
        out.append((at, float("inf")))
    return out


def _union_covers(spans: list[tuple[int, float]], lo: int, hi: float) -> bool:
    at = lo
    for a, b in sorted(spans):
        if a > at:
            return False
        if b >= hi:
            return True
        at = max(at, b + 1)
    return False


__all__ = ["DirReport", "Selection", "folder_conflicts", "header_selection", "same_calls",
           "selection_of", "verify_dir"]
