"""Refusals name the user's own option first (issue 20, part 3)."""

from __future__ import annotations

import os

import pytest

from colc.cli import main
from colc.compiler.pipeline import CompileOptions, compile_topology
from colc.errors import InfeasibleError
from colc.frontends.families import torus
from colc.ir.core import Collective

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_protocol_the_machine_lacks_is_named_before_building(tmp_path, capsys) -> None:
    topo = tmp_path / "mi250-1.yaml"
    topo.write_text("family: mi250\nboxes: 1\n")
    out = tmp_path / "x.xml"
    assert main([str(topo), "--collective", "reducescatter", "--protocol", "LL128",
                 "--instances", "3", "-o", str(out)]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("colc: error: --protocol LL128: machine mi250 has no LL128")
    assert "use --protocol Simple or LL" in err[-1] and not out.exists()


def test_chunks_that_fit_nothing_are_named_with_what_works() -> None:
    topo = torus([3, 3], 10)
    opts = CompileOptions(algorithm="bfb", chunks=64, collective=Collective.ALLREDUCE)
    with pytest.raises(InfeasibleError) as exc:
        compile_topology(topo, opts)
    text = str(exc.value)
    assert text.startswith("--chunks 64 rules out every candidate; without --chunks")
    assert "more than 71 chunks in a step" in text  # the refusal it explains follows
    variant = text.split("writes a file (")[1].split(")")[0]
    # the variant the message names is the one written without --chunks
    assert compile_topology(topo, CompileOptions(algorithm="bfb",
                                                 collective=Collective.ALLREDUCE)
                            ).algorithm == variant


@pytest.mark.parametrize("budgets,text", [
    ("-1", "--budgets must be 0 (the GPU's limit) or a positive number"),
    ("8,200", "--budgets 200 is more than the 108 threadblocks"),
])
def test_analyze_budget_refusals_name_budgets(capsys, budgets, text) -> None:
    """They named --max-threadblocks, which the user had not given."""
    ring = os.path.join(REPO, "examples", "ring-4.yaml")
    assert main(["analyze", ring, "--collective", "allgather", "--budgets", budgets]) == 1
    err = capsys.readouterr().err
    assert text in err and "--max-threadblocks" not in err, err
