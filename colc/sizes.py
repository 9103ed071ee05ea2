"""Message sizes as users write them (nccl-tests style: ``64``, ``1K``, ``16M``, ``1G``).

Suffixes are binary (K = 1024, as in nccl-tests' ``-b 1M``); ``B`` and
``iB`` endings are accepted (``1MB``, ``1MiB``).  Ranges ``lo:hi`` expand to
every power of two between them (``1K:1G``).
"""

from __future__ import annotations

import re

from colc.errors import ColcError

_UNITS = {"": 0, "K": 10, "M": 20, "G": 30, "T": 40}
_SIZE = re.compile(r"^\s*(\d+)\s*([KMGT]?)(?:I?B)?\s*$", re.IGNORECASE)
#: dtype name -> bytes per element.
DTYPES = {"fp32": 4, "float": 4, "float32": 4, "fp16": 2, "half": 2, "float16": 2,
          "bf16": 2, "bfloat16": 2}


#: The largest size accepted (1 TiB: more than any GPU's memory; a simulated
#: call of 10000T took 11 s and 680 MB, of 1000000T past 30 s and 1.9 GB).
MAX_SIZE = 1 << 40


def parse_size(text: str, what: str = "size") -> int:
    """Bytes of ``text`` (``"1M"`` -> 1048576).

    Raises
    ------
    ColcError
        Not a non-negative whole number with an optional K/M/G/T suffix, or
        above ``MAX_SIZE`` (1T).

    Examples
    --------
    >>> parse_size("16M"), parse_size("1GiB"), parse_size("512")
    (16777216, 1073741824, 512)
    """
    m = _SIZE.match(str(text))
    if not m:
        raise ColcError(f"{what}: '{text}' is not a size (write e.g. 4096, 64K, 16M, 1G)")
    size = int(m.group(1)) << _UNITS[m.group(2).upper()]
    if size > MAX_SIZE:
        raise ColcError(f"{what}: '{text}' is above {MAX_SIZE >> 40}T (no collective moves "
                        f"that much in one call; the simulator's work grows with it)")
    return size


def parse_sizes(text: str, what: str = "--sizes") -> tuple[int, ...]:
    """A comma-separated list of sizes and ``lo:hi`` power-of-two ranges, sorted.

    Examples
    --------
    >>> parse_sizes("1K:8K,1M")
    (1024, 2048, 4096, 8192, 1048576)
    """
    out: set[int] = set()
    for part in str(text).split(","):
        if ":" in part:
            lo_s, hi_s = part.split(":", 1)
            lo, hi = parse_size(lo_s, what), parse_size(hi_s, what)
            if lo <= 0 or hi < lo:
                raise ColcError(f"{what}: range '{part}' must be lo:hi with 0 < lo <= hi")
            size = lo
            while size <= hi:
                out.add(size)
                size *= 2
        else:
            size = parse_size(part, what)
            if size <= 0:
                raise ColcError(f"{what}: sizes must be positive, got '{part}'")
            out.add(size)
    if not out:
        raise ColcError(f"{what}: no size given")
    return tuple(sorted(out))


def format_size(n: int) -> str:
    """Short form: ``1048576`` -> ``1M``; non-multiples stay in bytes.

    Examples
    --------
    >>> format_size(1 << 30), format_size(1536)
    ('1G', '1536')
    """
    for unit in ("T", "G", "M", "K"):
        shift = _UNITS[unit]
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return str(n)


def dtype_bytes(name: str) -> int:
    """Element size of a dtype name (``fp32``, ``fp16``, ``bf16``)."""
    try:
        return DTYPES[name.lower()]
    except KeyError:
        raise ColcError(f"--dtype: unknown type '{name}'; choose fp32, fp16 or bf16") from None


__all__ = ["DTYPES", "dtype_bytes", "format_gbs", "format_size", "parse_size", "parse_sizes"]


def format_gbs(value: float, decimals: int = 1) -> str:
    """A GB/s figure with ``decimals`` decimals, or below 1 GB/s with as
    many significant digits, at least 2 (a 1 KiB call's 0.0348 GB/s read as
    0.0, and the next sizes' 0.14 and 0.55 as 0.1 and 0.6 beside it).

    >>> format_gbs(213.333), format_gbs(0.0348), format_gbs(0.0), format_gbs(0.145)
    ('213.3', '0.035', '0.0', '0.14')
    >>> format_gbs(0.0348, 3), format_gbs(1.25, 2), format_gbs(0.996)
    ('0.0348', '1.25', '1.0')
    """
    short = f"{value:.{max(2, decimals)}g}"
    if value == 0 or abs(float(short)) >= 1:  # 0.996 rounds to 1: as 1.0
        return f"{value:.{decimals}f}"
    return short

