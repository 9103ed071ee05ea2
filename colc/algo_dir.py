"""Writing a portfolio into an ``MSCCL_ALGO_DIR`` (``colc TOPO -o DIR/``,
``colc.write_portfolio``).

Input: a verified ``Portfolio`` and a folder.  Output: its files in the
folder, all or none (``colc.output.write_outputs``), and a ``Written``
naming them, the older colc files removed and what else in the folder gets
in their way.

* File names carry the collective, the rank count and the mode when only
  one (``Window.filename``), so portfolios for several job sizes and modes
  share one folder.
* Earlier colc files (named ``colc-*.xml``, with colc's first line) that
  the runtime could match to the same calls as a new one (same collective
  and rank count, a mode in common: ``verify_dir.same_calls`` on their
  ``<algo>`` tag) are removed in the same all-or-none step; files for other
  rank counts, collectives or modes stay.
* Other files that would overlap the new windows, or that the runtime
  cannot parse (it then fails to load the whole folder), are named
  (``verify_dir.folder_conflicts``), not touched.
* A file of the user's (its first line not colc's) where a new file's
  name falls is refused, and so is a symbolic link: colc chose the
  name, so a link planted in a shared folder must not send the write
  elsewhere (a single file named by the user follows its link,
  ``colc.output``).
* Folders the write creates are removed again when it fails.

Complexity: one read of each ``<algo>`` tag of the folder (its first 64 KiB)
and the files' sizes written.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from colc.errors import ColcError

#: Bytes of a file read for its first line (colc's provenance comment, a
#: few hundred characters).
LINE_BYTES = 4096


@dataclass(frozen=True, slots=True)
class Written:
    """What ``write_portfolio`` did: the files written (window order), the
    older colc files removed, and one line per other file in the way."""

    folder: str
    names: tuple[str, ...]
    removed: tuple[str, ...]
    conflicts: tuple[str, ...]


def write_portfolio(portfolio, folder: str, *, inputs: Sequence[str] = ()) -> Written:
    """Write ``portfolio``'s files into ``folder`` (see module docstring).

    Parameters
    ----------
    portfolio : colc.compiler.portfolio.Portfolio
    folder : str
        Created if missing (with its missing parents).
    inputs : sequence of str
        Files the portfolio was built from: never replaced.

    Returns
    -------
    Written

    Raises
    ------
    ColcError
        The folder cannot be created or used, a file cannot be written or an
        older one removed (the folder is then as it was).
    """
    from colc.backends.verify_dir import folder_conflicts, selection_of
    from colc.output import write_outputs

    check_folder(folder)
    created = _missing_levels(folder)  # removed again if the write fails
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as err:
        _remove_levels(created)
        raise ColcError(f"{folder}: error: cannot create the folder: {err.strerror}") from None
    collective = portfolio.windows[0].program.collective.value
    names = [w.filename(i, collective) for i, w in enumerate(portfolio.windows)]
    linked = [n for n in names if os.path.islink(os.path.join(folder, n))]
    if linked:  # colc picked the name, not the user: a planted link must not redirect it
        _remove_levels(created)
        raise ColcError(f"{os.path.join(folder, linked[0])}: error: is a symbolic link; a "
                        f"portfolio file is not written through a link (remove it)")
    foreign = [n for n in names if not _replaceable(os.path.join(folder, n))]
    if foreign:  # a user's own file under a name colc picked: not colc's to replace
        _remove_levels(created)
        raise ColcError(f"{os.path.join(folder, foreign[0])}: error: exists and colc did not "
                        f"write it (its first line does not say so); a portfolio file does "
                        f"not replace it (move it away or write the portfolio elsewhere)")
    ours = {n: selection_of(w.program) for n, w in zip(names, portfolio.windows, strict=True)}
    stale = _stale_files(folder, ours)
    conflicts = folder_conflicts(folder, ours, set(stale))
    try:  # all or none: a failure leaves the folder as it was
        write_outputs([(os.path.join(folder, name), w.text)
                       for name, w in zip(names, portfolio.windows, strict=True)],
                      inputs=inputs, remove=[os.path.join(folder, n) for n in stale])
    except BaseException:
        _remove_levels(created)
        raise
    return Written(folder, tuple(names), tuple(stale), tuple(conflicts))


def check_folder(folder: str) -> None:
    """Refuse a portfolio folder colc could not create or use (before the
    build, which takes minutes at scale)."""
    if os.path.islink(folder) and not os.path.exists(folder):
        raise ColcError(f"{folder}: error: is a symbolic link to a missing folder")
    if os.path.exists(folder):
        if not os.path.isdir(folder):
            raise ColcError(f"{folder}: error: exists and is not a directory")
        return
    parent = os.path.dirname(_missing_levels(folder)[-1])
    if not os.path.isdir(parent) or not os.access(parent, os.W_OK | os.X_OK):
        raise ColcError(f"{folder}: error: cannot create the folder in {parent}")


def _missing_levels(folder: str) -> list[str]:
    """The folders ``os.makedirs(folder)`` would create, deepest first."""
    out = []
    path = os.path.abspath(folder)
    while not os.path.lexists(path):
        out.append(path)
        path = os.path.dirname(path)
    return out


def _remove_levels(levels: list[str]) -> None:
    """Remove the (empty) folders a failed portfolio write created, deepest first."""
    for path in levels:
        try:
            os.rmdir(path)
        except OSError:
            return


def _written_by_colc(path: str) -> bool:
    """Whether ``path``'s first line is colc's (``generated by colc``)."""
    from colc.frontends._input import open_nonblocking

    try:
        with open_nonblocking(path) as fh:
            first = fh.read(LINE_BYTES).split(b"\n", 1)[0]
        return "generated by colc" in first.decode("utf-8", "replace")
    except OSError:
        return False


def _replaceable(path: str) -> bool:
    """Whether a portfolio file may be written at ``path``: nothing is
    there, or an earlier file of colc's (other kinds of file are refused by
    ``write_outputs``)."""
    return not os.path.isfile(path) or _written_by_colc(path)


def _stale_files(folder: str, ours: dict) -> list[str]:
    """Earlier colc portfolio files (named ``colc-...xml``, with colc's first
    line) the runtime could match to the same calls as one of ``ours``
    (``verify_dir.same_calls``): they would overlap the new ones.  Files for
    other rank counts, collectives or modes stay."""
    from colc.backends.verify_dir import header_selection, same_calls

    out = []
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        if name in ours or not name.startswith("colc-") or not name.endswith(".xml"):
            continue
        if os.path.islink(path) or not os.path.isfile(path):
            continue
        if not _written_by_colc(path):  # a user's, or unreadable: named among the conflicts
            continue
        theirs = header_selection(path)
        if theirs is not None and any(same_calls(s, theirs) for s in ours.values()):
            out.append(name)
    return out


__all__ = ["Written", "check_folder", "write_portfolio"]
