"""The versions colc runs with: its dependencies and the C libraries inside them.

Error texts and limits of the libraries underneath (LibYAML's nesting limit,
lxml's messages, HiGHS's statuses) change between releases; ``colc
--version`` and the test suite's last line name the versions so that a
change of behaviour can be traced to a change of dependency.

Example
-------
>>> text = describe()
>>> text.startswith("Python ") and "PyYAML " in text and "highspy " in text
True
"""

from __future__ import annotations

import platform
from importlib import metadata

#: Distributions whose behaviour colc depends on, in the order printed.
DISTRIBUTIONS = ("PyYAML", "lxml", "highspy", "networkx", "networkit", "numpy", "scipy",
                 "Jinja2")


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "missing"


def _libyaml() -> str:
    """LibYAML's version inside PyYAML, or 'pure Python' without it."""
    try:
        import yaml

        if not getattr(yaml, "__with_libyaml__", False):
            return "pure Python"
        from yaml import _yaml

        return f"LibYAML {_yaml.get_version_string()}"
    except ImportError:
        return "pure Python"


def dependency_versions() -> list[tuple[str, str]]:
    """(name, version) of Python and every dependency in ``DISTRIBUTIONS``.

    Returns
    -------
    list of (str, str)
        ``("PyYAML", "6.0.4 (LibYAML 0.2.5)")``-style pairs; ``"missing"`` for
        a distribution that is not installed.
    """
    pairs = [("Python", platform.python_version())]
    for dist in DISTRIBUTIONS:
        version = _version(dist)
        if dist == "PyYAML" and version != "missing":
            version = f"{version} ({_libyaml()})"
        pairs.append((dist, version))
    return pairs


def describe() -> str:
    """One line: ``Python 3.11.7, PyYAML 6.0.4 (LibYAML 0.2.5), lxml 6.1.3, ...``.

    Returns
    -------
    str
        The versions of ``dependency_versions``, comma-separated.
    """
    return ", ".join(f"{name} {version}" for name, version in dependency_versions())
