"""``colc verify DIR``: an MSCCL_ALGO_DIR as the runtime loads it."""

from __future__ import annotations

import os

from colc.cli import main


def _portfolio(tmp_path) -> str:
    topo = tmp_path / "ring.yaml"
    topo.write_text("family: ring\nranks: 4\nbandwidth: 10\nbidirectional: true\n")
    out = tmp_path / "algos"
    assert main([str(topo), "--collective", "allgather", "-o", str(out) + "/"]) == 0
    return str(out)


def test_portfolio_folder_verifies(tmp_path, capsys) -> None:
    folder = _portfolio(tmp_path)
    capsys.readouterr()
    assert main(["verify", folder]) == 0
    out = capsys.readouterr().out
    assert "do not overlap" in out and out.count(": OK (") == len(os.listdir(folder)) + 1


def test_overlap_shadow_and_foreign_files_are_reported(tmp_path, capsys) -> None:
    folder = _portfolio(tmp_path)
    names = sorted(os.listdir(folder))
    last = open(os.path.join(folder, names[-1])).read()
    # a copy of the unlimited window that sorts last: wholly shadowed, overlapping
    with open(os.path.join(folder, "zz-copy.xml"), "w") as fh:
        fh.write(last)
    capsys.readouterr()
    assert main(["verify", folder]) == 1
    out = capsys.readouterr().out
    assert "zz-copy.xml: window" in out and "overlaps" in out and "never used" in out
    os.unlink(os.path.join(folder, "zz-copy.xml"))
    with open(os.path.join(folder, "README"), "w") as fh:
        fh.write("notes")
    assert main(["verify", folder]) == 1
    assert "README: not an MSCCL algorithm file" in capsys.readouterr().out
