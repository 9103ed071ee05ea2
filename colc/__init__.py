"""colc: a compiler for collective-communication schedules.

Layers (each a sub-package): ``colc.frontends`` parse topologies, ``colc.ir``
holds the typed immutable IRs and their checkers, ``colc.compiler`` holds the
passes, ``colc.backends`` print (and read back) runtime files.
"""

__version__ = "0.1.0"


def __getattr__(name: str):
    """``colc.compile``, ``colc.load_topology``, ``colc.portfolio``,
    ``colc.write_portfolio``, ``colc.errors`` (loaded on first use)."""
    if name in _API:
        from colc import api

        return getattr(api, name)
    if name == "errors":  # ``except colc.errors.ColcError`` after ``import colc`` (docs/api.md)
        import colc.errors

        return colc.errors
    raise AttributeError(f"module 'colc' has no attribute {name!r}")


#: The Python API (docs/api.md), loaded on first use.
_API = ("compile", "load_topology", "portfolio", "write_portfolio", "Compiled")


def __dir__() -> list[str]:
    """The module's names and the lazily loaded API's, for tab completion."""
    return sorted({*globals(), *_API, "errors"})
