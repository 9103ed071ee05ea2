"""Reading an input file safely: regular files only, size-limited, text checked.

Every frontend reads its file through ``read_input``: a directory, a device
such as ``/dev/zero``, a named pipe or a socket is refused before anything is
read (reading them could block or never end), and a file larger than
``MAX_FILE_BYTES`` is refused with its size.  ``decode_text`` turns the
bytes into text for the YAML reader: UTF-8 only, and no NUL or other
control character (YAML forbids them), each reported with its line.

Example
-------
>>> decode_text(b"name: a\\nnodes: [\\x00]\\n", "t.yaml")
Traceback (most recent call last):
...
colc.errors.SpecError: t.yaml:2: error: a NUL byte (U+0000) in column 9: not a text file; \
YAML allows no control characters besides tab and line breaks
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
from collections.abc import Iterator
from typing import BinaryIO

from colc.errors import SpecError

from .limits import MAX_FILE_BYTES

#: Characters YAML does not allow in a document (the YAML 1.1 printable set, inverted).
_NOT_PRINTABLE = re.compile(
    "[^\x09\x0A\x0D\x20-\x7E\x85\xA0-\uD7FF\uE000-\uFFFD\U00010000-\U0010FFFF]"
)

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISSOCK, "a socket"),
)


#: The lists ``recording_reads`` fills, innermost last.
_RECORDERS: list[list[str]] = []


@contextlib.contextmanager
def recording_reads() -> Iterator[list[str]]:
    """A list that collects the path of every file ``read_input`` reads
    while the block runs (a wrapper's NCCL dump, a TACCL sketch), so that
    no output replaces an input the topology came from.

    >>> with recording_reads() as paths:
    ...     _ = read_input(__file__)
    >>> paths == [__file__]
    True
    """
    paths: list[str] = []
    _RECORDERS.append(paths)
    try:
        yield paths
    finally:
        _RECORDERS.remove(paths)


def read_input(path: str, max_bytes: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of a regular file of at most ``max_bytes`` bytes.

    Parameters
    ----------
    path : str
        The file.
    max_bytes : int
        Size limit (default ``MAX_FILE_BYTES``, 16 MiB).

    Returns
    -------
    bytes
        The whole file.

    Raises
    ------
    SpecError
        Missing or unreadable, not a regular file, or too large.
    """
    check_input(path, max_bytes)  # before opening: opening a FIFO or socket could block
    for paths in _RECORDERS:
        paths.append(path)
    try:
        fh = open_nonblocking(path)
    except OSError as err:
        raise SpecError(path, f"cannot read file: {err.strerror or err}") from None
    try:
        with fh:
            _check_regular(path, os.fstat(fh.fileno()), max_bytes)
            data = fh.read(max_bytes + 1)
    except OSError as err:
        raise SpecError(path, f"cannot read file: {err.strerror or err}") from None
    if len(data) > max_bytes:
        raise _too_large(path, len(data), max_bytes, at_least=True)
    return data


class NonBlockingReader:
    """A file opened for reading bytes without blocking (``open_nonblocking``):
    ``read`` raises ``BlockingIOError`` where the file has no data yet (a
    buffered reader returns None there)."""

    def __init__(self, fh: BinaryIO) -> None:
        self._fh = fh

    def __enter__(self) -> NonBlockingReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self._fh.close()

    def fileno(self) -> int:
        """The file descriptor."""
        return self._fh.fileno()

    def read(self, size: int = -1) -> bytes:
        """Up to ``size`` bytes (all with -1), as ``BufferedReader.read``."""
        return self._had(self._fh.read(size))

    @staticmethod
    def _had(data: bytes | None) -> bytes:
        if data is None:
            raise BlockingIOError(errno.EAGAIN, "no data without waiting (a kernel file that "
                                  "waits for data, such as /proc/kmsg)")
        return data


def open_nonblocking(path: str) -> NonBlockingReader:
    """``path`` opened for reading bytes without blocking: a kernel file that
    looks regular but waits for data (``/proc/kmsg``) gives an ``OSError``
    at once, where ``open`` and ``read`` would wait forever (a folder scan of
    ``colc verify /proc`` or ``colc TOPO -o /proc/``).  Regular files read
    as usual.

    Raises
    ------
    OSError
        Missing or unreadable.
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    return NonBlockingReader(os.fdopen(os.open(path, flags), "rb", closefd=True))


def check_input(path: str, max_bytes: int = MAX_FILE_BYTES) -> None:
    """Refuse what ``read_input`` refuses, without reading the file.

    Parameters
    ----------
    path : str
        The file.
    max_bytes : int
        Size limit.

    Raises
    ------
    SpecError
        Missing, not a regular file, or too large.
    """
    try:
        st = os.stat(path)
    except OSError as err:
        raise SpecError(path, f"cannot read file: {err.strerror or err}") from None
    _check_regular(path, st, max_bytes)


def _check_regular(path: str, st: os.stat_result, max_bytes: int) -> None:
    if not stat.S_ISREG(st.st_mode):
        kind = next((name for test, name in _KINDS if test(st.st_mode)), "not a regular file")
        raise SpecError(path, f"is {kind}, not a regular file; colc reads regular files "
                        f"only (save the data to a file first)")
    if st.st_size > max_bytes:
        raise _too_large(path, st.st_size, max_bytes)


def _too_large(path: str, size: int, max_bytes: int, *, at_least: bool = False) -> SpecError:
    more = "at least " if at_least else ""
    return SpecError(path, f"file is {more}{_size(size)}; colc reads input files of at most "
                     f"{_size(max_bytes)} (is it the right file?)")


def _size(n: int) -> str:
    return f"{n / (1 << 20):.4g} MiB ({n} bytes)" if n >= 1 << 20 else f"{n} bytes"


def decode_text(data: bytes, path: str) -> str:
    """UTF-8 bytes -> text, refusing invalid UTF-8 and control characters.

    Parameters
    ----------
    data : bytes
        The file's content.
    path : str
        For the message.

    Returns
    -------
    str
        The text.

    Raises
    ------
    SpecError
        Invalid UTF-8 or a character YAML forbids; the message gives the line.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise SpecError(path, f"not UTF-8 text ({err.reason} at byte {err.start}); save the "
                        f"file as UTF-8", line) from None
    check_text(text, path)
    return text


def check_text(text: str, path: str) -> None:
    """Refuse a NUL or another control character that YAML forbids.

    Parameters
    ----------
    text : str
        The document.
    path : str
        For the message.

    Raises
    ------
    SpecError
        Naming the character, its line and column.
    """
    bad = _NOT_PRINTABLE.search(text)
    if bad is None:
        return
    pos = bad.start()
    line = text.count("\n", 0, pos) + 1
    column = pos - (text.rfind("\n", 0, pos) + 1) + 1
    code = ord(bad.group())
    what = "a NUL byte" if code == 0 else "a control character"
    raise SpecError(path, f"{what} (U+{code:04X}) in column {column}: not a text file; YAML "
                    f"allows no control characters besides tab and line breaks", line)
