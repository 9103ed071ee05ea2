"""Golden cases: ``tests/cases/<name>.yaml`` -> ``golden/<backend>/<name>.xml``."""

from __future__ import annotations

import glob
import os

import yaml

from colc.cli import load_any_topology
from colc.compiler.pipeline import CompileOptions, compile_topology
from colc.ir.core import Collective, Protocol

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CASES = sorted(glob.glob(os.path.join(REPO, "tests", "cases", "*.yaml")))


def case_name(path: str) -> str:
    return os.path.splitext(os.path.basename(path))[0]


def compile_case(path: str) -> tuple[str, str]:
    """Compile a case; returns (golden path, text)."""
    with open(path, encoding="utf-8") as fh:
        case = yaml.safe_load(fh)
    topo = load_any_topology(os.path.join(REPO, case["topology"]))
    backend = case.get("backend", "msccl")
    opts = CompileOptions(
        algorithm=case.get("algorithm", "ring"),
        collective=Collective(case.get("collective", "allreduce")),
        protocol=Protocol(case.get("protocol", "Simple")),
        instances=int(case.get("instances", 1)),
        chunks=case.get("chunks"), rank_sizes=(1 << 20,),
        backend=backend, verify_each=True)
    ext = "oneccl.xml" if backend == "oneccl" else "xml"
    golden = os.path.join(REPO, "golden", backend, f"{case_name(path)}.{ext}")
    return golden, compile_topology(topo, opts).text
