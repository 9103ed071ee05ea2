"""Reading small JSON input files with size limits and one-line errors."""

from __future__ import annotations

import json
import re

from colc.errors import SpecError

from ._input import read_input
from .limits import MAX_FILE_BYTES

#: Largest JSON topology file read (bytes).
MAX_JSON_BYTES = MAX_FILE_BYTES


def load_json(path: str) -> object:
    """Read and decode a JSON file; SpecError with the line on bad input.

    Parameters
    ----------
    path : str
        A regular file of at most ``MAX_JSON_BYTES`` bytes.

    Returns
    -------
    object
        The decoded document.

    Raises
    ------
    SpecError
        Unreadable, not a regular file, too large, not UTF-8, malformed, or an
        object names a key twice.
    """
    data = read_input(path, MAX_JSON_BYTES)
    try:  # a UTF-8 byte order mark is allowed, as in YAML
        return json.loads(data.decode("utf-8-sig"), object_pairs_hook=_unique_keys)
    except _DuplicateKey as err:
        raise SpecError(path, f"duplicate key '{err.key}' (JSON objects name each key "
                        f"once)") from None
    except UnicodeDecodeError as err:
        raise SpecError(path, f"not UTF-8 text (byte {err.start})") from None
    except json.JSONDecodeError as err:
        raise SpecError(path, f"malformed JSON: {err.msg}", err.lineno) from None
    except ValueError as err:  # an integer of more than 4300 digits
        digits = re.search(r"value has (\d+) digits", str(err))
        what = f"a number of {digits.group(1)} digits" if digits else " ".join(str(err).split())
        raise SpecError(path, f"malformed JSON: {what}; no topology value needs more than "
                        "a few") from None
    except RecursionError:
        raise SpecError(path, "malformed JSON: nested too deeply") from None


class _DuplicateKey(Exception):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique_keys(pairs: list[tuple[str, object]]) -> dict:
    """A JSON object whose keys are all different (``json``'s hook; the last
    of two equal keys would otherwise win without a word)."""
    out: dict = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def matrix(value: object, path: str, field: str, n: int | None = None) -> list[list[object]]:
    """Check a square list of lists (``n`` x ``n`` when given)."""
    if not isinstance(value, list) or not all(isinstance(r, list) for r in value):
        raise SpecError(path, f"field '{field}': must be a list of lists")
    size = len(value) if n is None else n
    if len(value) != size or any(len(r) != size for r in value):
        raise SpecError(path, f"field '{field}': must be a {size}x{size} matrix")
    return value
