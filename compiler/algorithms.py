"""The schedule generators ``--algorithm`` names, and what each builds.

Input: a topology, a collective and a chunking (chunks per root shard; None:
the generator's own).  Output: a chunk schedule, not yet proved (the
pipeline proves it, ``pipeline._modes``).  ``ALGORITHMS`` maps a name to its
generator; those that live in other modules register on first use
(``load_optional_algorithms``), so importing the pipeline stays cheap.
``CHUNKINGS`` lists the chunkings a large-message file tries per algorithm
(``choose_variants`` narrows them by scale).  The tree generators keep their
packings per topology (``functools.lru_cache``): one packing serves every
chunking and collective.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

from colc.compiler.rings.ring import ring_schedule
from colc.compiler.runtime_limits import DEFAULT_THREADBLOCKS
from colc.ir.chunks import Schedule
from colc.ir.core import Collective
from colc.ir.runtime_model import model_for
from colc.ir.topology import Topology

from colc.errors import UnsupportedError

#: ``generator(topology, collective, chunks)``; ``chunks`` None = the algorithm's own.
Generator = Callable[[Topology, Collective, "int | None"], Schedule]

#: Schedule generators by ``--algorithm`` name (optional ones load lazily).
ALGORITHMS: dict[str, Generator] = {"ring": lambda t, c, chunks=None: ring_schedule(t, c, chunks)}

#: Copies of ``ring``'s rings: powers of two keep files selectable.
RING_COPIES = (2, 4, 8, 16)

#: Chunkings tried for one large-message file, per algorithm (chunks per root
#: shard; None: the generator's own).  Powers of two keep files selectable.
#: rails' 2 comes last (the first is ``colc analyze``'s representative): it
#: wins LL at 1 MiB (DGX A100 x8 allgather 17.9 GB/s against 14.9 with 4)
#: and Simple at 1 GiB on 16 boxes (140.6 against 128.3: its relays lag
#: less); 16 wins reduce-scatter at 128 MiB and allreduce at 1 GiB on two.
#: rings2d's 4 (last, likewise) is its crossing allreduce on eight MI250
#: boxes (both halves on 16 rings within 64 steps; 58.9 GB/s at 1 GiB
#: against rails' 29.2) and its crossing allgather there at 1M and 16M.
#: ring's chunks are copies of its rings (``auto`` tries those that can
#: help, ``choose_variants.ring_copies``);
#: nccl-rings' chunks are its rings: 32 where they fit the budget (a
#: reduce-scatter ring of up to 65 ranks takes one threadblock; DGX A100 x8
#: at 128 MiB, LL128: 157.1 GB/s against 144.9 with the crossing form).
CHUNKINGS: dict[str, tuple[int | None, ...]] = {
    "ring": (None, *RING_COPIES), "bfb": (None, 16, 4, 1), "trees": (16, 32, 64),
    "trees-rated": (16, 32, 64), "hier": (16, 32, 64),
    "rings2d": (8, 16, 32, 4), "dimrings": (None, 2), "rails": (4, 8, 16, 2),
    "nccl-rings": (None, 32)}

#: Algorithms that build all-to-all (``compiler/alltoall/``), and their
#: chunkings for it (rails: None sends one network message per rail peer and
#: box, 1 and 2 one per block or half block as soon as it is gathered).  No other algorithm
#: builds it, and these build nothing else (``rails`` builds both).
ALLTOALL_ALGORITHMS = frozenset({"direct", "rails", "mcf", "mcf-hops"})
#: rails' 2 wins 1 GiB on DGX A100 x4 (28.8 GB/s against 28.1 with 1).
#: mcf's 2 keeps the relays within 32 threadblocks where 8 chunks per block
#: need more lanes (torus 8x8: 33, 96.5% of the LP with 2 at 25 threadblocks;
#: hypercube 6: 37).
ALLTOALL_CHUNKINGS: dict[str, tuple[int | None, ...]] = {"direct": (1,), "rails": (None, 1, 2),
                                                         "mcf": (None, 2), "mcf-hops": (None, 2)}


def builds(algorithm: str, collective: Collective) -> bool:
    """Whether ``algorithm`` builds ``collective`` at all (all-to-all has its own).

    >>> builds("rails", Collective.ALLTOALL), builds("ring", Collective.ALLTOALL)
    (True, False)
    >>> builds("direct", Collective.ALLGATHER)
    False
    """
    if collective is Collective.ALLTOALL:
        return algorithm in ALLTOALL_ALGORITHMS
    return algorithm not in ALLTOALL_ALGORITHMS - {"rails"}

def available_algorithms() -> list[str]:
    """Names accepted by ``--algorithm`` (``auto`` included)."""
    load_optional_algorithms()
    return ["auto", *sorted({*ALGORITHMS, *THREAD_ALGORITHMS})]


#: Algorithms lowered straight to oneCCL threads (no chunk schedule, no
#: threadblock program): a routed all-to-all past what MSCCL's threadblocks
#: hold (``compiler/alltoall/hop_relay.py``).
THREAD_ALGORITHMS = frozenset({"hop-relay"})


def load_optional_algorithms() -> None:
    """Register the generators that live in other modules."""
    if "trees" in ALGORITHMS:
        return
    from colc.compiler.alltoall.direct import direct_schedule
    from colc.compiler.alltoall.routed import mcf_hops_schedule, mcf_schedule
    from colc.compiler.bfb.algorithm import bfb_schedule_for
    from colc.compiler.rings.dimrings import dimrings_schedule
    from colc.compiler.rings.nccl_baseline import nccl_rings_schedule
    from colc.compiler.rings.rings2d import rings2d_schedule

    ALGORITHMS["trees"] = _trees
    ALGORITHMS["trees-rated"] = _rated_trees
    ALGORITHMS["hier"] = _hier
    ALGORITHMS["bfb"] = bfb_schedule_for
    ALGORITHMS["rings2d"] = rings2d_schedule
    ALGORITHMS["dimrings"] = dimrings_schedule
    ALGORITHMS["rails"] = _rails
    ALGORITHMS["nccl-rings"] = nccl_rings_schedule
    ALGORITHMS["direct"] = direct_schedule
    ALGORITHMS["mcf"] = mcf_schedule
    ALGORITHMS["mcf-hops"] = mcf_hops_schedule


def box_switches(topo: Topology) -> bool:
    """Whether some switch is inside a box (an NVSwitch), not a network switch."""
    return any(not n.is_compute and not n.is_network for n in topo.nodes)


def meshed_boxes(topo: Topology) -> bool:
    """Whether boxes joined by a network have no switch of their own and are
    joined inside by links between their ranks (MI250)."""
    if box_switches(topo) or not any(n.is_network for n in topo.nodes):
        return False
    rank_of = topo.rank_of
    return any(link.src in rank_of and link.dst in rank_of for link in topo.links)


@functools.lru_cache(maxsize=8)
def _tree_packing(topo: Topology, transposed: bool):
    from colc.compiler.trees.generate_trees import pack_trees, transpose

    target = transpose(topo) if transposed else topo
    return pack_trees(target, spread=box_switches(topo))


@functools.lru_cache(maxsize=8)
def _shallow_packing(topo: Topology):
    from colc.compiler.trees.shallow_trees import shallow_packing

    return shallow_packing(topo)


def _rails(topo: Topology, collective: Collective, chunks: int | None = None,
           budget: int = DEFAULT_THREADBLOCKS, unpaired: bool = False,
           simple: bool = False) -> Schedule:
    """Rail-aligned schedules: ``compiler/hierarchical/rails/``, all-to-all in
    ``compiler/alltoall/rails_alltoall.py``."""
    if collective is Collective.ALLTOALL:
        from colc.compiler.alltoall.rails_alltoall import rails_alltoall_schedule

        return rails_alltoall_schedule(topo, collective, chunks, budget=budget)
    from colc.compiler.hierarchical.rails import rails_schedule

    return rails_schedule(topo, collective, chunks, budget=budget, unpaired=unpaired,
                          simple=simple)


def _trees(topo: Topology, collective: Collective, chunks: int | None = None) -> Schedule:
    """ForestColl trees (optimal packing; shallow by spread splitting behind box switches;
    on directed topologies reductions run on in-trees, packed on the transpose)."""
    return _packed_trees(_tree_packing, topo, collective, chunks)


def _rated_trees(topo: Topology, collective: Collective, chunks: int | None = None) -> Schedule:
    """ForestColl trees packed on the links' rated bandwidths (``rate_links``:
    what the runtime reaches on each link, by the topology's cost model)."""
    return _packed_trees(_rated_packing, topo, collective, chunks)


def _packed_trees(packing: Callable, topo: Topology, collective: Collective,
                  chunks: int | None) -> Schedule:
    """The chunk schedule of ``packing(topo, transposed)``'s trees."""
    from colc.compiler.trees.generate_trees import is_symmetric, lower_packing

    directed = not is_symmetric(topo)
    flip = collective.reduces and directed  # reduce phases run on in-trees (of G^T)
    broadcast = (packing(topo, False)
                 if collective is Collective.ALLREDUCE and directed else None)
    return lower_packing(packing(topo, flip), collective, chunks_per_root=chunks,
                         piece=1, broadcast=broadcast)


def own_chunks(name: str, topo: Topology, collective: Collective) -> int | None:
    """Chunks per root of ``name``'s schedule at its own chunking (``chunks``
    None): a tree packing's ``k``, which is exact and can be large (rated
    trees on MI250 x2: 69,041); None for the other generators."""
    from colc.compiler.trees.generate_trees import is_symmetric

    packing = {"trees": _tree_packing, "trees-rated": _rated_packing}.get(name)
    if packing is None:
        return None
    directed = not is_symmetric(topo)
    k = packing(topo, collective.reduces and directed).k
    if collective is Collective.ALLREDUCE and directed:  # reduce and broadcast trees
        k = math.lcm(k, packing(topo, False).k)
    return k


def _rated_packing(topo: Topology, transposed: bool):
    # ``model_for`` reads the topology's hardware, which its equality leaves out
    return _rated_packing_on(topo, topo.hardware, transposed)


@functools.lru_cache(maxsize=8)
def _rated_packing_on(topo: Topology, hardware: str, transposed: bool):
    from colc.compiler.trees.generate_trees import pack_trees, transpose
    from colc.compiler.trees.rate_links import rate_links

    rated = rate_links(topo, model_for(topo))
    return pack_trees(transpose(rated) if transposed else rated, spread=box_switches(topo))


def _hier(topo: Topology, collective: Collective, chunks: int | None = None) -> Schedule:
    """Hierarchical shallow trees (``compiler/trees/shallow_trees.py``)."""
    from colc.compiler.trees.generate_trees import is_symmetric, lower_packing

    if collective.reduces and not is_symmetric(topo):
        raise UnsupportedError("hierarchical trees need symmetric link bandwidths")
    return lower_packing(_shallow_packing(topo), collective, chunks_per_root=chunks or 16,
                         piece=1)
