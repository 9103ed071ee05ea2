"""Safe output files: atomic, never over the wrong thing, with the mode a user expects.

colc often runs as root on shared machines, so writing an output must not
damage anything else:

* a regular file (or a new name) is written to a temporary file in the same
  folder and renamed over the target, so a failed run leaves nothing
  behind and a reader never sees half a file;
* a symbolic link is followed: its target is replaced, the link stays;
* a character device, FIFO or socket (``/dev/null``, ``/dev/stdout``, a
  pipe) is opened and written in place: nothing is ever renamed over it;
  ``-`` is standard output;
* a directory, or any input file of the run (the same file, by inode), is
  refused with a one-line error;
* a new file gets the mode ``open()`` would give it (``0666`` minus the
  umask), an existing file keeps its mode (and, as root, its owner).
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
import tempfile
from collections.abc import Sequence

from colc.errors import ColcError


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def write_output(path: str, text: str, *, inputs: Sequence[str] = ()) -> None:
    """Write ``text`` to ``path`` safely (see module docstring).

    Parameters
    ----------
    path : str
        Target; ``-`` for standard output.
    text : str
    inputs : sequence of str
        Files the run read: refused as targets.

    Raises
    ------
    ColcError
        The target is a directory or an input, or its folder does not exist.
    """
    if path == "-":
        write_stdout(text)
        return
    real, st = _target(path, inputs)
    if st is not None and not stat.S_ISREG(st.st_mode):
        _write_in_place(path, real, text)
        return
    _rename([(_stage(path, real, text, st), real, path)])


def write_outputs(items: Sequence[tuple[str, str]], *, inputs: Sequence[str] = (),
                  remove: Sequence[str] = ()) -> None:
    """Write several files all or none (a portfolio's folder), and remove others.

    Every ``(path, text)`` is checked and written to a temporary file first,
    as ``write_output`` does; only when all are written are the files of
    ``remove`` set aside (renamed to hidden names beside them) and the new
    ones renamed over their targets, so a full disk or a file size limit on
    the fifth file, or an old file that cannot be removed, leaves the folder
    as it was.  The files set aside are deleted last.

    Parameters
    ----------
    items : sequence of (str, str)
        Targets (regular files or new names) and their texts.
    inputs : sequence of str
        Files the run read: refused as targets.
    remove : sequence of str
        Older files to delete with the same all-or-none rule.

    Raises
    ------
    ColcError
        A target is a directory, an input or not a regular file, its folder
        does not exist, a file cannot be written or an old one removed.
    """
    staged: list[tuple[str, str, str]] = []
    try:
        for path, text in items:
            real, st = _target(path, inputs)
            if st is not None and not stat.S_ISREG(st.st_mode):
                raise ColcError(f"{path}: error: is not a regular file")
            staged.append((_stage(path, real, text, st), real, path))
    except BaseException:
        _unlink(staged)
        raise
    aside: list[tuple[str, str | None]] = []  # (old file, its hidden name)
    try:
        for path in remove:
            hidden = _hidden_name(path)
            aside.append((path, hidden))  # before the rename: an interrupt restores it
            _set_aside(path, hidden)
        _rename(staged)
    except BaseException:
        _restore(aside)
        _unlink(staged)
        raise
    for _, hidden in aside:
        _drop(hidden)


def _hidden_name(path: str) -> str:
    """A new hidden name beside ``path``."""
    folder = os.path.dirname(path) or "."
    while True:
        hidden = os.path.join(folder, f".colc-{os.urandom(6).hex()}.old")
        if not os.path.lexists(hidden):
            return hidden


def _set_aside(path: str, hidden: str) -> None:
    """Rename ``path`` to ``hidden`` (``_hidden_name``)."""
    try:
        os.rename(path, hidden)
    except OSError as err:
        raise ColcError(f"{path}: error: cannot remove the older file: {err.strerror}") from None


def _rename(staged: list[tuple[str, str, str]]) -> None:
    """Rename each ``(temporary, target, path as given)`` over its target, all or none.

    A rename within one folder fails only if the folder changes under the
    run.  The targets renamed before it then get their old texts back (each
    existing target is first kept under a hard link beside it; a file system
    without hard links keeps no copy) or, if they were new, are removed; the
    temporaries left (also on an interrupt) are removed."""
    # (target, its old text's link; None: no copy; "": the target was new)
    done: list[tuple[str, str | None]] = []
    k = 0
    try:
        for k, (tmp, real, path) in enumerate(staged):
            # listed before the rename: restoring a target not yet renamed is harmless
            done.append((real, _keep(real) if len(staged) > 1 else None))
            os.replace(tmp, real)
        k = len(staged)
    except OSError as err:
        _restore(done)
        done = []
        raise ColcError(f"{staged[k][2]}: error: cannot write: {err.strerror}") from None
    except BaseException:
        _restore(done)
        done = []
        raise
    finally:
        _unlink(staged[k:])
        for _, old in done:
            _drop(old)


def _keep(real: str) -> str | None:
    """A hard link to the existing file ``real`` beside it ("": a new name,
    None: the file system makes no link)."""
    if not os.path.lexists(real):
        return ""
    link = _hidden_name(real)
    try:
        os.link(real, link)
    except OSError:
        return None
    return link


def _restore(done: list[tuple[str, str | None]]) -> None:
    """Undo the renames of ``done``, last first."""
    for real, old in reversed(done):
        with contextlib.suppress(OSError):
            if old == "":
                os.unlink(real)
            elif old is not None:  # else its new text stays: no copy was kept
                os.replace(old, real)
                if os.path.lexists(old) and _same_file(old, real):
                    os.unlink(old)  # a rename between two links of one file does nothing


def _drop(old: str | None) -> None:
    if old:
        with contextlib.suppress(OSError):
            os.unlink(old)


def _unlink(staged: list[tuple[str, str, str]]) -> None:
    for tmp, _, _ in staged:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def check_target(path: str, inputs: Sequence[str] = ()) -> None:
    """Refuse, before any work, an output ``write_output`` would refuse
    after it: a directory, an input, or a name in a folder that does not
    exist.

    Parameters
    ----------
    path : str
        The output file's name (not ``-``).
    inputs : sequence of str
        The command's input files.

    Raises
    ------
    ColcError
        Naming the output and the problem.
    """
    real, _ = _target(path, inputs)
    folder = os.path.dirname(real) or "."
    if not os.path.isdir(folder):
        raise ColcError(f"{path}: error: output folder {folder} does not exist")


def _target(path: str, inputs: Sequence[str]) -> tuple[str, os.stat_result | None]:
    """``path`` resolved, and its status (None: a new name); refuses inputs and folders."""
    real = os.path.realpath(path)
    for inp in inputs:
        if _same_file(inp, real):
            raise ColcError(f"{path}: error: refusing to overwrite the input file {inp}")
    try:
        st: os.stat_result | None = os.stat(real)
    except FileNotFoundError:
        st = None
        # /dev/stdout on a pipe: /proc/self/fd/1 links to 'pipe:[...]', no
        # path, but the kernel opens the link itself: written in place
        with contextlib.suppress(OSError):
            there = os.stat(path)
            if not stat.S_ISREG(there.st_mode) and not stat.S_ISDIR(there.st_mode):
                return path, there
    except OSError as err:
        raise ColcError(f"{path}: error: cannot use as output: {err.strerror}") from None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise ColcError(f"{path}: error: is a directory (give a file name)")
    return real, st


def write_stdout(text: str) -> None:
    """Write ``text`` to standard output, every byte or ``BrokenPipeError``.

    Parameters
    ----------
    text : str

    Raises
    ------
    BrokenPipeError
        The reader stopped before the end (``colc TOPO | head``): ``cli.main``
        exits 141.  A buffered write of a large string (``sys.stdout.write``)
        returns quietly after a pipe takes part of it (CPython 3.11), so the
        bytes go to the descriptor directly; a standard output with none (a
        test's capture) is written as a stream.
    """
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    sys.stdout.flush()
    _write_all(fd, text.encode(sys.stdout.encoding or "utf-8", sys.stdout.errors or "strict"))


def _write_all(fd: int, data: bytes) -> None:
    """Every byte of ``data`` to ``fd`` (a pipe may take part of a write)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _write_in_place(path: str, real: str, text: str) -> None:
    """Devices, FIFOs and sockets: write through them, never rename over them."""
    try:
        fd = os.open(real, os.O_WRONLY | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0))
        try:
            _write_all(fd, text.encode("utf-8"))
        finally:
            os.close(fd)
    except BrokenPipeError:
        raise  # its reader stopped (-o /dev/stdout | head): cli.main's quiet 141
    except OSError as err:
        raise ColcError(f"{path}: error: cannot write: {err.strerror}") from None


def _stage(path: str, real: str, text: str, st: os.stat_result | None) -> str:
    """``text`` in a new temporary file beside ``real``, with the mode the
    target keeps or gets (and, as root, its owner); returns the temporary's path."""
    folder = os.path.dirname(real) or "."
    if not os.path.isdir(folder):
        raise ColcError(f"{path}: error: output folder {folder} does not exist")
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".colc-", suffix=".tmp")
    except OSError as err:
        raise ColcError(f"{path}: error: cannot write in {folder}: {err.strerror}") from None
    try:
        mode = stat.S_IMODE(st.st_mode) if st is not None else 0o666 & ~_umask()
        os.fchmod(fd, mode)
        if st is not None and os.geteuid() == 0:
            with contextlib.suppress(OSError):
                os.fchown(fd, st.st_uid, st.st_gid)
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
    except BaseException as err:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(err, OSError):  # a full disk, a file size limit: nothing written
            raise ColcError(f"{path}: error: cannot write: {err.strerror}") from None
        raise
    return tmp


__all__ = ["write_output", "write_outputs"]
