"""Shared property checks every schedule generator must pass."""

from __future__ import annotations

from colc.backends.verify import verify_text
from colc.backends.msccl_xml import emit_msccl_xml
from colc.compiler.lowering.lower_to_program import (
    MAX_THREADBLOCKS,
    LoweringOptions,
    lower_to_program,
)
from colc.ir.check_chunks import check_schedule
from colc.ir.chunks import Schedule
from colc.ir.core import Protocol
from colc.ir.program import Program
from colc.ir.topology import Topology


def validate_schedule(topo: Topology, sched: Schedule, protocol: Protocol = Protocol.SIMPLE,
                      lower: bool = True) -> str | None:
    """Prove ``sched`` on ``topo`` and, with ``lower``, verify its MSCCL XML.

    Returns the XML text (or None when not lowered); fails the test on any problem.
    """
    if not lower:
        problems = check_schedule(sched, topo)
        assert problems == [], problems[:5]
        return None
    return _proved_and_verified(topo, sched, protocol, MAX_THREADBLOCKS)[1]


def validated_program(topo: Topology, sched: Schedule, protocol: Protocol = Protocol.SIMPLE,
                      max_threadblocks: int = MAX_THREADBLOCKS) -> Program:
    """``sched`` proved on ``topo`` and lowered within ``max_threadblocks``
    (default: the runtime's limit), its MSCCL XML verified.

    Returns
    -------
    Program
        The lowered program, for a test to measure without lowering it again.
    """
    return _proved_and_verified(topo, sched, protocol, max_threadblocks)[0]


def _proved_and_verified(topo: Topology, sched: Schedule, protocol: Protocol,
                         max_threadblocks: int) -> tuple[Program, str]:
    """``sched`` proved, lowered and its XML verified: the program and the text."""
    problems = check_schedule(sched, topo)
    assert problems == [], problems[:5]
    program = lower_to_program(sched, LoweringOptions(protocol=protocol,
                                                      max_threadblocks=max_threadblocks,
                                                      inplace=sched.inplace,
                                                      outofplace=sched.outofplace))
    text = emit_msccl_xml(program)
    report = verify_text(text, "<test>", backend="msccl")
    assert report.ok, report.errors[:5]
    return program, text


def slow_simple_past_256m(monkeypatch, factor: float = 10.0):
    """Make the simulator predict Simple files ``factor`` times slower past 256
    MiB (where the portfolio ranks Simple alone), and return the real
    ``Compiler.simulate`` so a test can restore it."""
    import dataclasses

    from colc.compiler import pipeline

    real = pipeline.Compiler.simulate

    def slow(self, variant, size, program=None):
        res = real(self, variant, size, program)
        if variant.protocol is Protocol.SIMPLE and size > 256 << 20:
            res = dataclasses.replace(res, algbw=res.algbw / factor)
        return res

    monkeypatch.setattr(pipeline.Compiler, "simulate", slow)
    return real
