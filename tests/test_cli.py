"""The colc command as a user runs it: outputs, errors, determinism."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from colc.cli import main

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(REPO, "examples")


def run(args: list[str], env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "colc.cli", *args], capture_output=True,
                          text=True, env={**os.environ, **(env or {})}, cwd=REPO, timeout=300)


def test_main_job_writes_verified_xml(tmp_path) -> None:
    out = tmp_path / "allreduce.xml"
    assert main([os.path.join(EXAMPLES, "ring-4.yaml"), "-o", str(out)]) == 0
    text = out.read_text()
    assert text.startswith("<algo ") and 'coll="allreduce"' in text
    assert main(["verify", str(out)]) == 0
    assert [p.name for p in tmp_path.iterdir()] == ["allreduce.xml"]  # no temp files left


@pytest.mark.parametrize("coll", ["allgather", "reducescatter", "allreduce"])
@pytest.mark.parametrize("example", sorted(f for f in os.listdir(EXAMPLES) if f.endswith(".yaml")))
def test_every_example_compiles(tmp_path, example: str, coll: str) -> None:
    out = tmp_path / "x.xml"
    rc = main([os.path.join(EXAMPLES, example), "--collective", coll, "--algorithm", "ring",
               "-o", str(out)])
    assert rc == 0
    assert main(["verify", "-q", str(out)]) == 0


def test_options_reach_the_file(tmp_path) -> None:
    out = tmp_path / "ag.xml"
    rc = main([os.path.join(EXAMPLES, "torus-3x5.yaml"), "--collective", "allgather",
               "--protocol", "LL", "--outofplace", "--instances", "2", "--min-bytes", "1024",
               "--max-bytes", "1048576", "-o", str(out)])
    assert rc == 0
    head = out.read_text().splitlines()[0]
    for attr in ('proto="LL"', 'coll="allgather"', 'inplace="0"', 'outofplace="1"',
                 'minBytes="1024"', 'maxBytes="1048576"', 'nchunksperloop="60"'):
        assert attr in head


BAD = {
    "negative bandwidth": ("nodes:\n  - {id: a, kind: gpu}\n  - {id: b, kind: gpu}\nlinks:\n"
                           "  - {src: a, dst: b, bandwidth: -5, duplex: true}\n", "bandwidth"),
    "unknown node": ("nodes:\n  - {id: a, kind: gpu}\nlinks:\n"
                     "  - {src: a, dst: zz, bandwidth: 5}\n", "zz"),
    "unknown family": ("family: moebius\nranks: 4\n", "family"),
    "malformed yaml": ("nodes: [ {id: a\n", "bad.yaml"),
    "unreachable": ("nodes:\n  - {id: a, kind: gpu}\n  - {id: b, kind: gpu}\nlinks:\n"
                    "  - {src: a, dst: b, bandwidth: 5}\n", "a"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_is_one_clean_line(tmp_path, case: str) -> None:
    text, needle = BAD[case]
    src = tmp_path / "bad.yaml"
    src.write_text(text)
    out = tmp_path / "out.xml"
    proc = run([str(src), "-o", str(out)])
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "bad.yaml" in lines[0] and needle in lines[0]
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.yaml"]


def test_missing_file_and_bad_option(tmp_path) -> None:
    proc = run([str(tmp_path / "nope.yaml"), "-o", str(tmp_path / "o.xml")])
    assert proc.returncode == 1 and "nope.yaml" in proc.stderr
    proc = run([os.path.join(EXAMPLES, "ring-4.yaml"), "--instances", "0"])
    assert proc.returncode == 1 and "instances" in proc.stderr


def test_output_is_deterministic_across_hash_seeds(tmp_path) -> None:
    texts = []
    for seed in ("0", "12345"):
        out = tmp_path / f"o{seed}.xml"
        proc = run([os.path.join(EXAMPLES, "dgx-a100-2.yaml"), "--algorithm", "ring",
                    "-o", str(out)], env={"PYTHONHASHSEED": seed})
        assert proc.returncode == 0, proc.stderr
        texts.append(out.read_bytes())
    assert texts[0] == texts[1]


def test_analyze_json(capsys) -> None:
    assert main(["analyze", os.path.join(EXAMPLES, "ring-4.yaml"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["topology"] == "ring-4" and report["ranks"] == 4
    assert set(report["bounds"]) == {"allgather", "reducescatter", "allreduce"}
    rings = [s for s in report["schedules"] if s["algorithm"] == "ring"]
    assert {s["collective"] for s in rings} == {"allgather", "reducescatter", "allreduce"}
    for s in rings:
        bound = report["bounds"][s["collective"]]["algbw"]
        assert 0 < s["algbw"] <= bound + 1e-9
    assert main(["analyze", os.path.join(EXAMPLES, "ring-4.yaml")]) == 0
    assert "allgather" in capsys.readouterr().out


def test_verify_rejects_broken_file(tmp_path) -> None:
    out = tmp_path / "a.xml"
    assert main([os.path.join(EXAMPLES, "ring-4.yaml"), "--algorithm", "ring",
                 "-o", str(out)]) == 0
    bad = tmp_path / "bad.xml"
    bad.write_text(out.read_text().replace('type="rrs"', 'type="rrc"', 1))
    assert main(["verify", str(bad)]) == 1
    tabbed = tmp_path / "tab.xml"
    tabbed.write_text(out.read_text().replace("  <gpu", "\t<gpu", 1))
    assert main(["verify", str(tabbed)]) == 1
