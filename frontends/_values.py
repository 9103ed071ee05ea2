"""Typed coercion of user-supplied values, shared by the topology frontends.

Every helper takes the value as the user wrote it (already turned into a
Python object by YAML, or passed by a caller of a family builder), checks its
type and range, and returns a clean value.  Problems are raised as
``FieldError``, a ``SpecError`` that also remembers the field name so a caller
that knows where the field sits in the file can re-raise it with a line.

Example
-------
>>> fraction_value("25/2", path="t.yaml", field="bandwidth", minimum="positive")
Fraction(25, 2)
>>> fraction_value(12.5, path="t.yaml", field="bandwidth", minimum="positive")
Fraction(25, 2)
"""

from __future__ import annotations

import math
import re
import unicodedata
from fractions import Fraction
from typing import Literal

from colc.errors import SpecError

#: Longest string accepted as a number (``"25/2"``, ``"1e-3"``), characters.
MAX_NUMBER_CHARS = 64
#: Largest decimal exponent written in a number string (``"1e30"``).
MAX_NUMBER_EXPONENT = 1000
#: Longest name or node id, characters.
MAX_NAME_CHARS = 256
#: Longest rendering of a user value inside a message, characters.
SHOW_CHARS = 60

_EXPONENT = re.compile(r"[eE]([-+]?[0-9_]+)$")


class FieldError(SpecError):
    """A ``SpecError`` about one named field.

    Parameters
    ----------
    path : str
        The file (or family source) the field belongs to.
    field : str
        Dotted/indexed field name, e.g. ``links[3].bandwidth``, or the
        command-line option that gave the value (``--boxes``).
    problem : str
        What is wrong with it.
    line : int or None
        1-based line number, when known.
    """

    def __init__(self, path: str, field: str, problem: str, line: int | None = None) -> None:
        self.field = field
        self.problem = problem
        # an option standing for a field (--boxes for a dump's box count) is named as such
        named = f"{field}:" if field.startswith("--") else f"field '{field}':"
        super().__init__(path, f"{named} {problem}", line)

    def at(self, path: str, line: int | None) -> FieldError:
        """Return the same error re-located to ``path`` and ``line``.

        Parameters
        ----------
        path : str
            File to report.
        line : int or None
            1-based line to report.

        Returns
        -------
        FieldError
            A new error with the same field and problem.
        """
        return FieldError(path, self.field, self.problem, line)


def show(value: object, limit: int = SHOW_CHARS) -> str:
    """Render a user value for an error message, YAML-style, in bounded size.

    Parameters
    ----------
    value : object
        Any value (a list may be huge, or hold itself).
    limit : int
        Longest rendering; longer ones are cut and end in ``...``.

    Returns
    -------
    str
        ``true``/``false`` for booleans, ``null`` for None, quoted strings,
        ``25/2`` for fractions, ``str(value)`` otherwise.

    Examples
    --------
    >>> show([1, "a", None]), show("x" * 100, 10)
    ("[1, 'a', null]", "'xxxxxx...")
    """
    parts: list[str] = []
    _render(value, parts, limit + 1, 0)
    text = "".join(parts)
    return text if len(text) <= limit else text[: max(limit - 3, 0)] + "..."


def _render(value: object, parts: list[str], budget: int, depth: int) -> int:
    """Append the rendering of ``value`` to ``parts``; stop once ``budget`` chars are out."""
    if budget <= 0:
        return 0
    if isinstance(value, (list, tuple)):
        if depth > 8:
            parts.append("[...]")
            return budget - 5
        parts.append("[")
        budget -= 1
        for i, item in enumerate(value):
            if budget <= 0:
                break
            if i:
                parts.append(", ")
                budget -= 2
            budget = _render(item, parts, budget, depth + 1)
        parts.append("]")
        return budget - 1
    text = _scalar_text(value)[: budget + 1]
    parts.append(text)
    return budget - len(text)


def _scalar_text(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return repr(value[: SHOW_CHARS + 1])
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, int) and value.bit_length() > 200:
        return f"an integer of about {value.bit_length() * 3 // 10} digits"
    if isinstance(value, Fraction) and max(abs(value.numerator), value.denominator
                                           ).bit_length() > 200:
        return "a number with more than 60 digits"
    return str(value)


def clip(text: str, limit: int = SHOW_CHARS) -> str:
    """``text`` cut to ``limit`` characters (ending in ``...`` when cut), for messages.

    Parameters
    ----------
    text : str
        A user string (a key, an id).
    limit : int
        Longest result.

    Returns
    -------
    str
        The text, or its start and ``...``.
    """
    return text if len(text) <= limit else text[: max(limit - 3, 0)] + "..."


def type_name(value: object) -> str:
    """A YAML-ish name for the type of ``value`` (for messages)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, (float, Fraction)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


def fraction_value(
    value: object,
    *,
    path: str,
    field: str,
    minimum: Literal["positive", "nonnegative"] = "positive",
    line: int | None = None,
) -> Fraction:
    """Convert a bandwidth/latency-like value to an exact ``Fraction``.

    Parameters
    ----------
    value : int, float, str or Fraction
        An integer, a finite float (converted through its shortest decimal
        representation, so ``12.5`` becomes ``25/2``), or a string such as
        ``"25/2"``, ``"12.5"`` or ``"1e3"``.
    path : str
        File name for the error.
    field : str
        Field name for the error.
    minimum : {"positive", "nonnegative"}
        Whether the value must be ``> 0`` or ``>= 0``.
    line : int or None
        Line for the error.

    Returns
    -------
    Fraction
        The exact value.

    Raises
    ------
    FieldError
        If the value is not a number or is out of range.
    """
    if isinstance(value, bool) or value is None:
        raise FieldError(path, field, f"must be a number, got {show(value)}", line)
    if isinstance(value, Fraction):
        result = value
    elif isinstance(value, int):
        result = Fraction(value)
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise FieldError(path, field, f"must be a finite number, got {value}", line)
        result = Fraction(str(value))
    elif isinstance(value, str):
        result = parse_number(value, path=path, field=field, line=line)
    else:
        raise FieldError(path, field, f"must be a number, got {type_name(value)}", line)
    if minimum == "positive" and result <= 0:
        raise FieldError(path, field, f"must be > 0, got {show(value)}", line)
    if minimum == "nonnegative" and result < 0:
        raise FieldError(path, field, f"must be >= 0, got {show(value)}", line)
    return result


def parse_number(text: str, *, path: str, field: str, line: int | None = None) -> Fraction:
    """``Fraction(text)``, refusing texts whose value would take long to compute
    (``MAX_NUMBER_CHARS``, ``MAX_NUMBER_EXPONENT``) or written in other digits
    than ASCII; the sign is not checked."""
    stripped = text.strip()
    if len(stripped) > MAX_NUMBER_CHARS:
        raise FieldError(path, field, f"a number of {len(stripped)} characters; at most "
                         f"{MAX_NUMBER_CHARS} are accepted", line)
    if not stripped.isascii():  # Fraction reads any script's digits, past the exponent check
        raise FieldError(path, field, f"write numbers in ASCII digits, got {show(text)}", line)
    exp = _EXPONENT.search(stripped)
    if exp is not None and "/" not in stripped:
        digits = exp.group(1).replace("_", "").replace("+", "")
        if digits.lstrip("-").isdigit() and abs(int(digits)) > MAX_NUMBER_EXPONENT:
            raise FieldError(path, field, f"exponent {digits} is out of range (at most "
                             f"{MAX_NUMBER_EXPONENT} either way), got {show(text)}", line)
    try:
        return Fraction(stripped)
    except (ValueError, ZeroDivisionError):
        raise FieldError(
            path, field, f"must be a number or a fraction like \"25/2\", got {show(text)}",
            line,
        ) from None


def int_value(
    value: object,
    *,
    path: str,
    field: str,
    minimum: int | None = None,
    maximum: int | None = None,
    line: int | None = None,
) -> int:
    """Check an integer parameter.

    Parameters
    ----------
    value : int
        The value (booleans and floats are rejected).
    path, field : str
        For the error message.
    minimum, maximum : int or None
        Inclusive bounds.
    line : int or None
        Line for the error.

    Returns
    -------
    int
        The value.

    Raises
    ------
    FieldError
        If the value is not an integer or is out of range.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise FieldError(path, field, f"must be an integer, got {show(value)}", line)
    if minimum is not None and value < minimum:
        raise FieldError(path, field, f"must be >= {minimum}, got {value}", line)
    if maximum is not None and value > maximum:
        raise FieldError(path, field, f"must be <= {maximum}, got {value}", line)
    return value


def bool_value(value: object, *, path: str, field: str, line: int | None = None) -> bool:
    """Check a boolean flag (``true``/``false``).

    Parameters
    ----------
    value : bool
        The value.
    path, field : str
        For the error message.
    line : int or None
        Line for the error.

    Returns
    -------
    bool
        The value.

    Raises
    ------
    FieldError
        If the value is not a boolean.
    """
    if not isinstance(value, bool):
        raise FieldError(path, field, f"must be true or false, got {show(value)}", line)
    return value


def str_value(value: object, *, path: str, field: str, line: int | None = None) -> str:
    """Check a non-empty string.

    Parameters
    ----------
    value : str
        The value.
    path, field : str
        For the error message.
    line : int or None
        Line for the error.

    Returns
    -------
    str
        The value.

    Raises
    ------
    FieldError
        If the value is not a non-empty string of at most ``MAX_NAME_CHARS``.
    """
    if not isinstance(value, str):
        raise FieldError(path, field, f"must be a string, got {show(value)}", line)
    if not value.strip():
        raise FieldError(path, field, "must not be empty", line)
    if len(value) > MAX_NAME_CHARS:
        raise FieldError(path, field, f"a string of {len(value)} characters; at most "
                         f"{MAX_NAME_CHARS} are accepted", line)
    bad = next((c for c in value if _unprintable(c)), None)
    if bad is not None:  # YAML escapes ("\x01", "\ud800") get past the reader's check
        raise FieldError(path, field, f"holds U+{ord(bad):04X}, a control character, "
                         "surrogate or noncharacter; names go into XML files and messages",
                         line)
    return value


def _unprintable(c: str) -> bool:
    """A character no XML file or terminal line should carry: a control
    character (tab included), a lone surrogate or a Unicode noncharacter."""
    code = ord(c)
    return (unicodedata.category(c) in ("Cc", "Cs") or 0xFDD0 <= code <= 0xFDEF
            or code & 0xFFFE == 0xFFFE)
