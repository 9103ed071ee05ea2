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
    assert "use --protocol Simple or --protocol LL" in err[-1] and not out.exists()


def test_chunks_that_fit_nothing_are_named_with_what_works() -> None:
    topo = torus([3, 3], 10)
    opts = CompileOptions(algorithm="bfb", chunks=72, collective=Collective.ALLREDUCE)
    with pytest.raises(InfeasibleError) as exc:
        compile_topology(topo, opts)
    text = str(exc.value)
    assert text.startswith("--chunks 72 rules out every candidate; without --chunks")
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


@pytest.mark.parametrize("out", ["a.oneccl.xml", "a.xml", "dir/"])
def test_inplace_alltoall_is_one_line_before_building(tmp_path, capsys, out) -> None:
    """--inplace all-to-all listed every algorithm's failed in-place check
    (twice for mcf), and still advised --algorithm mcf; none of colc's
    all-to-all schedules is correct in place."""
    yaml = tmp_path / "t.yaml"
    yaml.write_text("family: torus\ndims: [2, 3]\nbandwidth: 10\n")
    target = str(tmp_path / out)
    assert main([str(yaml), "--collective", "alltoall", "--inplace", "-o", target]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["colc: error: --inplace: colc writes all-to-all out of place only (in place, "
                   "a rank's blocks would be overwritten by arriving ones before they leave); "
                   "drop --inplace"]
    assert not os.path.exists(target.rstrip("/"))


@pytest.mark.parametrize("args", [["-o", "pf.oneccl.xml/"], ["--backend", "oneccl", "-o", "pf/"]])
def test_a_oneccl_folder_is_refused_with_the_way_to_several_files(tmp_path, capsys, monkeypatch,
                                                                   args) -> None:
    """-o x.oneccl.xml/ silently wrote MSCCL files into a folder of that name."""
    yaml = tmp_path / "t.yaml"
    yaml.write_text("family: torus\ndims: [2, 3]\nbandwidth: 10\n")
    monkeypatch.chdir(tmp_path)
    assert main([str(yaml), "--collective", "allgather", *args]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "a folder gets a portfolio of MSCCL files" in err[0]
    assert "--min-bytes and --max-bytes" in err[0]
    assert sorted(os.listdir(tmp_path)) == ["t.yaml"]
