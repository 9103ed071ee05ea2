"""Limits on topology inputs, and the checks that enforce them up front.

colc computes with exact numbers and builds per-rank-pair tables, so an input
that is too large or whose numbers are too extreme would not fail cleanly
later: it would run out of memory, overflow a float, or run for hours.  The
frontends check these limits before building anything big and say the limit
(and what the input would have cost) in the message.

Sizes

* ``MAX_RANKS`` = 4096 ranks.  A schedule for N ranks moves at least
  ``N*(N-1)`` shards and several passes keep N x N tables, so the work grows
  with the square of N (4096 ranks: 16.8 million shard transfers).
* ``MAX_NODES`` = 16384 nodes (ranks, switches and NICs).
* ``MAX_LINKS`` = 1048576 directed links (a complete graph of 1024 ranks).

Numbers

* bandwidth: from ``MIN_BANDWIDTH`` = 1e-6 to ``MAX_BANDWIDTH`` = 1e9 GB/s;
* latency: 0, or from ``MIN_LATENCY`` = 1e-6 to ``MAX_LATENCY`` = 1e9 us;
* ``MAX_BANDWIDTH_SCALE`` = 1e9: the passes write every bandwidth as an
  integer multiple of the bandwidths' greatest common divisor; the largest
  multiple may be at most 1e9.  This bounds the ratio between the largest
  and the smallest bandwidth (at most 1e9) and the number of significant
  digits (``12.3456789012345`` next to ``25`` needs a unit of 1e-13).

Files (the YAML reader, ``colc.frontends._yaml_guard``)

* ``MAX_FILE_BYTES`` = 16 MiB for every input format;
* ``MAX_YAML_VALUES`` = 1,000,000 YAML values (scalars, lists, mappings)
  after expanding aliases, so an alias bomb is refused before it expands;
* ``MAX_YAML_DEPTH`` = 32 levels of nesting (a topology needs 4);
* ``MAX_SCALAR_CHARS`` = 1024 characters in one value, ``MAX_NAME_CHARS``
  = 256 in a name or node id, ``MAX_NUMBER_CHARS`` = 64 in a number.

Example
-------
>>> check_ranks(2500, path="t.yaml", field="dims")
>>> try:
...     check_ranks(65536, path="t.yaml", field="ranks", line=2)
... except SpecError as err:
...     print(err)
t.yaml:2: error: field 'ranks': 65536 ranks: colc handles at most 4096 ranks (a schedule \
moves at least N*(N-1) shards: 4,294,901,760 here, 16,773,120 at the limit); model fewer \
ranks, e.g. one rail or a subset of the boxes
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

from colc.errors import SpecError

from ._values import FieldError, clip, fraction_value, show

#: Most ranks (compute nodes) of a topology.
MAX_RANKS = 1 << 12
#: Most nodes (ranks, switches and NICs) of a topology.
MAX_NODES = 4 * MAX_RANKS
#: Most directed links of a topology (a duplex link counts twice).
MAX_LINKS = 1 << 20

#: Smallest and largest link bandwidth, GB/s.
MIN_BANDWIDTH = Fraction(1, 10**6)
MAX_BANDWIDTH = Fraction(10**9)
#: Smallest non-zero and largest link latency, us.
MIN_LATENCY = Fraction(1, 10**6)
MAX_LATENCY = Fraction(10**9)
#: Largest bandwidth / greatest common divisor of all bandwidths.
MAX_BANDWIDTH_SCALE = 10**9

#: Largest input file, bytes (every format).
MAX_FILE_BYTES = 16 * 1024 * 1024
#: Most YAML values in one file, aliases expanded.
MAX_YAML_VALUES = 1_000_000
#: Deepest YAML nesting.
MAX_YAML_DEPTH = 32
#: Longest YAML scalar, characters.
MAX_SCALAR_CHARS = 1024

_SUGGEST_RANKS = "model fewer ranks, e.g. one rail or a subset of the boxes"


def count_text(n: int) -> str:
    """An integer for a message: digits grouped, astronomically large ones abbreviated.

    Parameters
    ----------
    n : int
        A count.

    Returns
    -------
    str
        ``"65536"``, ``"4,294,901,760"``, or ``"about 1e400"`` beyond 10**15.
    """
    if abs(n) < 100_000:
        return str(n)
    if abs(n) < 10**15:
        return f"{n:,}"
    return f"about {approx(Fraction(n))}"


def approx(x: Fraction) -> str:
    """A short decimal rendering of an exact number of any size.

    Parameters
    ----------
    x : Fraction
        The number (need not fit a float).

    Returns
    -------
    str
        ``"12.5"``, ``"1e-6"``, ``"1e400"``, ``"3.33e-301"``.

    Examples
    --------
    >>> approx(Fraction(10**400)), approx(Fraction(1, 10**6)), approx(Fraction(25, 2))
    ('1e400', '1e-6', '12.5')
    >>> approx(Fraction(10**9)), exact_text(Fraction(123456789, 10**7)), exact_text(Fraction(7, 3))
    ('1e9', '12.3456789', '7/3')
    """
    if x == 0:
        return "0"
    sign = "-" if x < 0 else ""
    x = abs(x)
    exp = math.floor(math.log10(x.numerator) - math.log10(x.denominator))
    mant = x / Fraction(10) ** exp
    while mant >= 10:
        mant, exp = mant / 10, exp + 1
    while mant < 1:
        mant, exp = mant * 10, exp - 1
    if -4 <= exp < 6:
        return f"{sign}{float(x):.6g}"
    digits = f"{float(mant):.3g}"
    if digits == "10":  # 9.9996 rounds up
        digits, exp = "1", exp + 1
    return f"{sign}{digits}e{exp}"


def exact_text(x: Fraction) -> str:
    """An exact number as the user would write it: ``12.5``, ``7/3``; cut when long.

    Parameters
    ----------
    x : Fraction
        The number.

    Returns
    -------
    str
        A finite decimal when ``x`` has one, else ``p/q``; at most 40 characters.
    """
    den, twos, fives = x.denominator, 0, 0
    while den % 2 == 0:
        den, twos = den // 2, twos + 1
    while den % 5 == 0:
        den, fives = den // 5, fives + 1
    if den != 1:
        return clip(f"{x.numerator}/{x.denominator}", 40)
    places = max(twos, fives)
    digits = str(abs(x.numerator) * 10**places // x.denominator).rjust(places + 1, "0")
    sign = "-" if x < 0 else ""
    text = f"{digits[:len(digits) - places]}.{digits[len(digits) - places:]}" if places else digits
    return clip(sign + text, 40)


def check_ranks(n: int, *, path: str, field: str, line: int | None = None,
                detail: str = "") -> None:
    """Refuse more than ``MAX_RANKS`` ranks, with the work they would cost.

    Parameters
    ----------
    n : int
        Ranks the input describes.
    path, field : str
        For the message.
    line : int or None
        Line for the message.
    detail : str
        How ``n`` came about, e.g. ``"2^16 = "`` or ``"1000 boxes x 8 GPUs = "``.

    Raises
    ------
    FieldError
        If ``n > MAX_RANKS``.
    """
    if n <= MAX_RANKS:
        return
    raise FieldError(
        path, field,
        f"{detail}{count_text(n)} ranks: colc handles at most {MAX_RANKS} ranks (a schedule "
        f"moves at least N*(N-1) shards: {count_text(n * (n - 1))} here, "
        f"{count_text(MAX_RANKS * (MAX_RANKS - 1))} at the limit); {_SUGGEST_RANKS}",
        line,
    )


def check_nodes(n: int, *, path: str, field: str, line: int | None = None) -> None:
    """Refuse more than ``MAX_NODES`` nodes (ranks, switches and NICs).

    Parameters
    ----------
    n : int
        Nodes the input describes.
    path, field : str
        For the message.
    line : int or None
        Line for the message.

    Raises
    ------
    FieldError
        If ``n > MAX_NODES``.
    """
    if n <= MAX_NODES:
        return
    raise FieldError(
        path, field,
        f"{count_text(n)} nodes: colc handles at most {MAX_NODES} nodes (ranks, switches "
        f"and NICs; at most {MAX_RANKS} ranks); {_SUGGEST_RANKS}, or merge switches",
        line,
    )


def check_links(n: int, *, path: str, field: str, line: int | None = None,
                detail: str = "") -> None:
    """Refuse more than ``MAX_LINKS`` directed links.

    Parameters
    ----------
    n : int
        Directed links the input describes (a duplex link counts twice).
    path, field : str
        For the message.
    line : int or None
        Line for the message.
    detail : str
        How ``n`` came about, e.g. ``"1025 x 1024 = "``.

    Raises
    ------
    FieldError
        If ``n > MAX_LINKS``.
    """
    if n <= MAX_LINKS:
        return
    raise FieldError(
        path, field,
        f"{detail}{count_text(n)} directed links: colc handles at most {MAX_LINKS:,} (every "
        f"pass walks every link; a complete graph of 1024 ranks is the limit); merge parallel "
        f"links into one with their summed bandwidth, or {_SUGGEST_RANKS}",
        line,
    )


def bandwidth_value(value: object, *, path: str, field: str,
                    line: int | None = None) -> Fraction:
    """A link bandwidth in GB/s: a number from ``MIN_BANDWIDTH`` to ``MAX_BANDWIDTH``.

    Parameters
    ----------
    value : int, float, str or Fraction
        As accepted by ``fraction_value``.
    path, field : str
        For the message.
    line : int or None
        Line for the message.

    Returns
    -------
    Fraction
        The exact bandwidth.

    Raises
    ------
    FieldError
        Not a number, or out of range.
    """
    bw = fraction_value(value, path=path, field=field, minimum="positive", line=line)
    if not MIN_BANDWIDTH <= bw <= MAX_BANDWIDTH:
        raise FieldError(path, field, f"must be between {approx(MIN_BANDWIDTH)} and "
                         f"{approx(MAX_BANDWIDTH)} GB/s, got {show(value)}", line)
    return bw


def latency_value(value: object, *, path: str, field: str, line: int | None = None) -> Fraction:
    """A link latency in us: 0, or a number from ``MIN_LATENCY`` to ``MAX_LATENCY``.

    Parameters
    ----------
    value : int, float, str or Fraction
        As accepted by ``fraction_value``.
    path, field : str
        For the message.
    line : int or None
        Line for the message.

    Returns
    -------
    Fraction
        The exact latency.

    Raises
    ------
    FieldError
        Not a number, or out of range.
    """
    lat = fraction_value(value, path=path, field=field, minimum="nonnegative", line=line)
    if lat and not MIN_LATENCY <= lat <= MAX_LATENCY:
        raise FieldError(path, field, f"must be 0 or between {approx(MIN_LATENCY)} and "
                         f"{approx(MAX_LATENCY)} us, got {show(value)}", line)
    return lat


def check_bandwidth_scale(bandwidths: Sequence[Fraction], *, path: str,
                          where: Sequence[tuple[str, int | None]]) -> None:
    """Require every bandwidth to be a multiple of a unit at most ``MAX_BANDWIDTH_SCALE`` small.

    The passes scale capacities to integers (bandwidth / gcd of all
    bandwidths); those integers must stay below ``MAX_BANDWIDTH_SCALE``.
    The check stops at the first link that breaks it, so the numbers it
    handles stay small.

    Parameters
    ----------
    bandwidths : sequence of Fraction
        Every link's bandwidth, each within the per-link range.
    path : str
        For the message.
    where : sequence of (str, int or None)
        For each bandwidth, how to name it (``"field 'links[3].bandwidth'"``,
        ``"link 3 (a -> b)"``) and its line.

    Raises
    ------
    SpecError
        Naming the link that makes the scale too large.
    """
    if not bandwidths:
        return
    lo = min(range(len(bandwidths)), key=bandwidths.__getitem__)
    hi = max(range(len(bandwidths)), key=bandwidths.__getitem__)
    if bandwidths[hi] > bandwidths[lo] * MAX_BANDWIDTH_SCALE:
        raise SpecError(
            path, f"{where[lo][0]}: bandwidth {approx(bandwidths[lo])} GB/s is more than "
            f"{approx(Fraction(MAX_BANDWIDTH_SCALE))} times smaller than the "
            f"{approx(bandwidths[hi])} GB/s of {_at(where[hi])}; colc computes with exact "
            f"numbers and handles a ratio of at most {approx(Fraction(MAX_BANDWIDTH_SCALE))} "
            f"between the largest and the smallest bandwidth (drop or raise the slow link)",
            where[lo][1],
        )
    top, unit = bandwidths[hi], Fraction(0)
    for i, bw in enumerate(bandwidths):
        unit = _gcd(unit, bw)
        if top > unit * MAX_BANDWIDTH_SCALE:
            raise SpecError(
                path, f"{where[i][0]}: bandwidth {exact_text(bw)} GB/s has too many significant "
                f"digits: with the bandwidths before it, the common unit is {approx(unit)} GB/s "
                f"and the largest bandwidth {approx(top)} GB/s would be more than "
                f"{approx(Fraction(MAX_BANDWIDTH_SCALE))} units; round the bandwidths "
                f"(e.g. to 3 decimals)",
                where[i][1],
            )


def _at(where: tuple[str, int | None]) -> str:
    name, line = where
    return f"{name} (line {line})" if line is not None else name


def _gcd(a: Fraction, b: Fraction) -> Fraction:
    """Greatest common divisor of two non-negative rationals (``gcd(0, b) = b``)."""
    return Fraction(math.gcd(a.numerator * b.denominator, b.numerator * a.denominator),
                    a.denominator * b.denominator)
