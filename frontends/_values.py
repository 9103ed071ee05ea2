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
from fractions import Fraction
from typing import Literal

from colc.errors import SpecError


class FieldError(SpecError):
    """A ``SpecError`` about one named field.

    Parameters
    ----------
    path : str
        The file (or family source) the field belongs to.
    field : str
        Dotted/indexed field name, e.g. ``links[3].bandwidth``.
    problem : str
        What is wrong with it.
    line : int or None
        1-based line number, when known.
    """

    def __init__(self, path: str, field: str, problem: str, line: int | None = None) -> None:
        self.field = field
        self.problem = problem
        super().__init__(path, f"field '{field}': {problem}", line)

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


def show(value: object) -> str:
    """Render a user value for an error message, YAML-style.

    Parameters
    ----------
    value : object
        Any value.

    Returns
    -------
    str
        ``true``/``false`` for booleans, ``null`` for None, quoted strings,
        ``25/2`` for fractions, ``str(value)`` otherwise.
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(show(v) for v in value) + "]"
    if isinstance(value, dict):
        return "a mapping"
    return str(value)


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
        try:
            result = Fraction(value.strip())
        except (ValueError, ZeroDivisionError):
            raise FieldError(
                path, field,
                f"must be a number or a fraction like \"25/2\", got {show(value)}", line,
            ) from None
    else:
        raise FieldError(path, field, f"must be a number, got {type_name(value)}", line)
    if minimum == "positive" and result <= 0:
        raise FieldError(path, field, f"must be > 0, got {show(value)}", line)
    if minimum == "nonnegative" and result < 0:
        raise FieldError(path, field, f"must be >= 0, got {show(value)}", line)
    return result


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
        If the value is not a non-empty string.
    """
    if not isinstance(value, str):
        raise FieldError(path, field, f"must be a string, got {show(value)}", line)
    if not value.strip():
        raise FieldError(path, field, "must not be empty", line)
    return value
