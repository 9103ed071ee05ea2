"""colc: a compiler for collective-communication schedules.

Layers (each a sub-package): ``colc.frontends`` parse topologies, ``colc.ir``
holds the typed immutable IRs and their checkers, ``colc.compiler`` holds the
passes, ``colc.backends`` print (and read back) runtime files.
"""

__version__ = "0.1.0"
