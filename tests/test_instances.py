"""``--instances``: every generator's schedule stays correct when replicated."""

from __future__ import annotations

import dataclasses
import os

import pytest

from colc.cli import main
from colc.compiler.algorithms import ALGORITHMS, load_optional_algorithms
from colc.compiler.lowering.replicate_instances import replicate_instances
from colc.frontends.families import ring, torus
from colc.ir.check_chunks import check_schedule
from colc.ir.core import Collective

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize("coll", list(Collective)[:3], ids=lambda c: c.value)
@pytest.mark.parametrize("name,topo", [("bfb", torus([3, 3], 10)),
                                       ("ring", ring(5, 10, bidirectional=True)),
                                       ("trees", ring(4, 10, bidirectional=True))])
def test_replicated_schedules_stay_correct_in_both_modes(name, topo, coll) -> None:
    load_optional_algorithms()
    sched = ALGORITHMS[name](topo, coll, None)
    for inplace in (True, False):
        one = dataclasses.replace(sched, inplace=inplace, outofplace=not inplace)
        assert check_schedule(one) == []
        for copies in (2, 3):
            assert check_schedule(replicate_instances(one, copies)) == []


def test_bfb_allreduce_two_instances_out_of_place(tmp_path, capsys) -> None:
    """Issue 10: multi-instance BFB allreduce failed verification out-of-place.
    The summary says how many instances the file holds (it did not)."""
    out = tmp_path / "ar.xml"
    topo = os.path.join(REPO, "examples", "torus-3x5.yaml")
    assert main([topo, "--algorithm", "bfb", "--instances", "2", "--outofplace",
                 "-o", str(out)]) == 0
    assert " x2 instances, allreduce, 15 ranks" in capsys.readouterr().err
    assert main(["verify", "-q", str(out)]) == 0


def test_more_instances_than_channels_are_refused_before_replicating() -> None:
    from colc.compiler.lowering.replicate_instances import replicate_instances
    from colc.compiler.rings.ring import ring_schedule
    from colc.errors import ColcError

    sched = ring_schedule(ring(4, 25), Collective.ALLGATHER)
    assert len(replicate_instances(sched, 32).ops) == 32 * len(sched.ops)
    with pytest.raises(ColcError, match="at most 32, got 33: each instance takes channels"):
        replicate_instances(sched, 33)
