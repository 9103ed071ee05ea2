"""Allreduce trees on directed fabrics (issue 20, part 2; seed 001 ch. 4, B).

Reduce-scatter runs on spanning in-arborescences (out-arborescences of the
transposed graph, reversed), allgather on out-arborescences; the bound is
``1 / (1/rs + 1/ag)`` of the two cut bounds, and the B.7 LP where it is
built.
"""

from __future__ import annotations

from fractions import Fraction

import pytest

from colc.compiler import algorithms
from colc.compiler.estimate_bandwidth import schedule_algbw
from colc.compiler.pipeline import CompileOptions, compile_topology
from colc.compiler.trees.generate_trees import exact_bounds, is_symmetric, transpose
from colc.frontends.families import generalized_kautz, ring
from colc.ir.check_chunks import check_schedule
from colc.ir.core import Collective
from colc.ir.topology import Link

DIRECTED = [generalized_kautz(12, 2, 25), generalized_kautz(24, 3, 25),
            ring(7, 25, bidirectional=False)]


@pytest.mark.parametrize("topo", DIRECTED, ids=lambda t: t.name)
@pytest.mark.parametrize("chunks", [None, 16])
def test_directed_allreduce_reaches_its_bound(topo, chunks) -> None:
    assert not is_symmetric(topo)
    bounds = exact_bounds(topo)
    trees = bounds["allreduce_trees"]
    assert trees == 1 / (1 / bounds["reducescatter"] + 1 / bounds["allgather"])
    if bounds["allreduce_lp"] is not None:  # the trees are a feasible point of the LP
        assert float(bounds["allreduce_lp"]) >= float(trees) * (1 - 1e-6)
    bound = bounds["allreduce_lp"] or trees
    sched = algorithms._trees(topo, Collective.ALLREDUCE, chunks)
    assert check_schedule(sched, topo) == []
    assert schedule_algbw(sched, topo) >= Fraction(97, 100) * bound


def test_reduce_phase_uses_in_trees_when_the_transpose_differs() -> None:
    """A ring whose two directions have different bandwidths: reduce-scatter's
    bound is the transposed graph's, and the allreduce bound combines both."""
    topo = ring(5, 10)
    links = tuple(Link(lk.src, lk.dst, lk.bandwidth * (2 if lk.src < lk.dst else 1))
                  if lk.src.startswith("r") else lk for lk in topo.links)
    skew = topo.__class__(**{**{f: getattr(topo, f) for f in topo.__dataclass_fields__},
                             "links": links})
    assert not is_symmetric(skew)
    bounds = exact_bounds(skew)
    back = exact_bounds(transpose(skew))
    assert bounds["reducescatter"] == back["allgather"]
    sched = algorithms._trees(skew, Collective.ALLREDUCE, None)
    assert check_schedule(sched, skew) == []
    assert schedule_algbw(sched, skew) == bounds["allreduce_trees"]


def test_auto_writes_the_directed_tree_allreduce_on_kautz(tmp_path) -> None:
    result = compile_topology(generalized_kautz(12, 2, 25),
                              CompileOptions(collective=Collective.ALLREDUCE))
    assert result.algorithm.startswith("trees/") and result.program.max_threadblocks <= 32
