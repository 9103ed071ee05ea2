"""The main job's options, its variants and its result: typed and immutable.

``CompileOptions`` holds the CLI's flags; a ``Variant`` is one way to build
a file (algorithm, chunking, protocol, lowering budget); ``CompileResult``
is what ``compile_topology`` returns.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from colc.compiler.runtime_limits import DEFAULT_THREADBLOCKS
from colc.ir.chunks import Schedule
from colc.ir.core import Collective, Protocol
from colc.ir.oneccl import ThreadSchedule
from colc.ir.program import Program
from colc.ir.simulate import SimResult


@dataclass(frozen=True, slots=True)
class CompileOptions:
    """Options of the main job; field names match the CLI flags."""

    algorithm: str = "auto"
    collective: Collective = Collective.ALLREDUCE
    protocol: Protocol = Protocol.SIMPLE
    inplace: bool | None = None  # None: whatever the schedule is correct for
    outofplace: bool | None = None
    instances: int = 1
    min_bytes: int = 0
    max_bytes: int = 0
    backend: str = "msccl"
    verify_each: bool = False
    machine: str | None = None  # cost-model preset; None: from the topology
    chunks: int | None = None  # chunks per shard; None: try the algorithm's chunkings
    balance: bool = True  # balance-lanes pass (False: the plain lowering)
    dtype_bytes: int = 4
    rank_sizes: tuple[int, ...] = ()  # sizes to rank files at; () = from the window
    # (protocol, lo, hi): the sizes of ``rank_sizes`` each protocol is ranked at
    # (the portfolio's ranges); () = every size, whatever the protocol
    protocol_ranges: tuple[tuple[Protocol, int, int], ...] = ()
    comment: str = ""
    jobs: int = 0  # processes for lowering and simulation; 0: every available CPU
    executor: str = "local"  # "local" (forked processes) or "dask" (a dask.distributed cluster)
    scheduler: str = ""  # dask scheduler address; "": COLC_DASK_SCHEDULER or a local cluster
    max_threadblocks: int = DEFAULT_THREADBLOCKS  # per GPU; 0: the GPU's own limit
    # False: schedules are not proved (``colc analyze``'s predictions; the
    # program and its simulation do not depend on the proofs, and a compiler
    # built so refuses to print a file)
    prove: bool = True


@dataclass(frozen=True, slots=True)
class Variant:
    """One way to build a file."""

    algorithm: str
    chunks: int | None = None
    protocol: Protocol = Protocol.SIMPLE
    budget: int = 0  # threadblocks its lowering may take; 0: the compiler's budget
    #: sends and receives on separate threadblocks: rails plans its lanes for
    #: about half the budget (``Compiler.plan_budget``); the algorithms the
    #: pipeline balances (``direct`` all-to-all) keep their schedule and
    #: balance-lanes plans it for the whole budget, unpaired
    unpaired: bool = False

    @property
    def label(self) -> str:
        """``algorithm[/chunks]/protocol`` (``/unpaired`` for an unpaired
        lowering, ``/tbN`` when lowered for a smaller budget)."""
        mid = f"/c{self.chunks}" if self.chunks is not None else ""
        tail = ("/unpaired" if self.unpaired else "") + (f"/tb{self.budget}" if self.budget else "")
        return f"{self.algorithm}{mid}/{self.protocol.value}{tail}"


@dataclass(frozen=True, slots=True)
class CompileResult:
    """Everything the main job produced.

    ``algbw`` is the bandwidth-only figure of the schedule (GB/s); ``predicted``
    maps message sizes to the simulator's results for the written file.
    """

    schedule: Schedule | None
    program: Program | None
    text: str
    algorithm: str
    algbw: Fraction
    notes: tuple[str, ...] = ()
    predicted: tuple[tuple[int, SimResult], ...] = ()
    variant: Variant | None = None
    #: oneCCL threads written directly (``THREAD_ALGORITHMS``; ``schedule`` and
    #: ``program`` are then None)
    threads: ThreadSchedule | None = None
