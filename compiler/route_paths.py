"""Routing helpers (moved to ``colc.ir.routing`` so the runtime simulator in
``ir`` can route too); this module keeps the compiler's import path."""

from colc.ir.routing import Router

__all__ = ["Router"]
