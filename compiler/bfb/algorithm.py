"""``--algorithm bfb``: BFB schedule generation + lowering to the chunk IR.

Input invariant: a direct-connect ``Topology`` (no switches), strongly
connected.  Output invariant: a chunk ``Schedule`` with dependencies inferred
from program order (``infer-dependencies``), proved by the pipeline.

Chain: ``generate_bfb`` (LP per node and step, seed 001 section 3.6.1 and
A.5) -> ``bfb_to_schedule`` (discretization A.5.2, reversal or transpose for
reduce-scatter, A.2) -> ``infer_dependencies``.
"""

from __future__ import annotations

from colc.compiler.bfb.schedule import generate_bfb
from colc.compiler.bfb.to_chunks import bfb_to_schedule
from colc.compiler.lowering.infer_dependencies import infer_dependencies
from colc.errors import UnsupportedError
from colc.ir.chunks import Schedule
from colc.ir.core import Collective
from colc.ir.topology import Topology

NAME = "bfb"


def bfb_schedule_for(topo: Topology, collective: Collective,
                     chunks: int | None = None) -> Schedule:
    """BFB schedule of ``collective`` on ``topo`` (see module docstring).

    ``chunks`` fixes the chunks per shard (seed 001 A.5.2 rounding; e.g. a
    power of two so the runtime selects the file at power-of-two sizes);
    None: the exact LCM when small, else the best rounding.

    Raises
    ------
    UnsupportedError
        On topologies with switches (BFB is for direct-connect fabrics).
    """
    if topo.has_switches:
        raise UnsupportedError("bfb needs a direct-connect topology (this one has switches); "
                               "use --algorithm trees or --algorithm ring")
    sched = bfb_to_schedule(generate_bfb(topo), topo, collective, chunks_per_shard=chunks)
    return infer_dependencies(sched)
