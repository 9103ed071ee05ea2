"""The README's examples run as written (issue 10).

* Every YAML block is a topology colc reads and compiles.
* Every ``colc`` command of the README's shell blocks runs, from a folder
  where ``examples/`` is the repository's, in the order written (later
  commands read what earlier ones wrote), and exits 0.  Commands on the
  two-box DGX example take minutes in all, so ``make test`` runs the others
  and ``make examples`` (``COLC_EXAMPLES=all``, run by ``.ci/run``) runs all.

``docs/api.md`` runs as doctests in ``make test``.
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

import pytest

from colc.cli import main
from colc.frontends import parse_topology_text

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
ALL = os.environ.get("COLC_EXAMPLES") == "all"
#: Topologies whose commands take minutes: run by ``make examples`` only.
SLOW = ("examples/dgx-a100-2.yaml",)


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README, flags=re.S)


def _commands() -> list[str]:
    out = []
    for block in _blocks("sh"):
        for line in block.splitlines():
            line = line.split("#", 1)[0].strip()
            if line.startswith("colc "):
                out.append(line)
    return out


def test_readme_has_examples():
    assert len(_blocks("yaml")) >= 1 and len(_commands()) >= 5


@pytest.mark.parametrize("text", _blocks("yaml"), ids=lambda t: t.split("\n")[0][:30])
def test_readme_yaml_compiles(tmp_path, capsys, text):
    topo = parse_topology_text(text, "README.md")
    assert topo.num_ranks >= 2
    path = tmp_path / "t.yaml"
    path.write_text(text, encoding="utf-8")
    assert main([str(path), "-o", str(tmp_path / "o.xml")]) == 0, capsys.readouterr().err
    assert main(["verify", str(tmp_path / "o.xml")]) == 0


def test_readme_commands_run(tmp_path, monkeypatch, capsys):
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    monkeypatch.chdir(tmp_path)
    ran = 0
    written: set[str] = set()
    for line in _commands():
        argv = shlex.split(line)[1:]
        needs = [a for a in argv if a.endswith(".xml") and a not in written
                 and argv.index(a) > 0 and argv[argv.index(a) - 1] != "-o"]
        if not ALL and (any(s in line for s in SLOW) or needs):
            continue  # slow, or reads a file only a slow command writes
        rc = main(argv)
        err = capsys.readouterr().err
        assert rc == 0, f"{line}\n{err}"
        if "-o" in argv:
            written.add(argv[argv.index("-o") + 1])
        ran += 1
    assert ran >= (len(_commands()) if ALL else 1)
