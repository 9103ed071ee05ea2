"""bench/trace_call.py, the tracer of one simulated call, keeps working as
the simulator's internals change (it wraps them)."""

from __future__ import annotations

import importlib.util
import pathlib

import pytest

BENCH = pathlib.Path(__file__).resolve().parent.parent / "bench" / "trace_call.py"


def _module():
    spec = importlib.util.spec_from_file_location("trace_call", BENCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _model(topo):
    from colc.ir.runtime_model import model_for
    return model_for(topo)


def test_busy_profile_bins_the_link_load() -> None:
    prof = _module().busy_profile([(0.0, 5.0, 10.0), (10.0, 10.0, 10.0), (25.0, 0.0, 10.0)],
                                  40.0, 10.0)
    assert prof == [0.5, 1.0, 0.5, 0.0, 0.0]


def test_trace_records_the_nic_and_every_step_of_the_rank(capsys) -> None:
    from colc.compiler.pipeline import CompileOptions, Variant
    from colc.frontends.families import dgx_a100
    from colc.ir.core import Collective, Protocol

    mod = _module()
    topo = dgx_a100(2)
    options = CompileOptions(collective=Collective.ALLGATHER, algorithm="rings2d")
    variant = Variant("rings2d", 16, Protocol.SIMPLE)
    out = mod.trace(topo, options, variant, 16 << 20, ("b0g0", "ib0"), 3)
    program, res = out["program"], out["result"]
    tbs = program.ranks[3].threadblocks
    # every step of every threadblock of rank 3 started once, in order,
    # within the call; every threadblock ended
    assert sorted(out["steps"]) == list(range(len(tbs)))
    for k, tb in enumerate(tbs):
        times = out["steps"][k]
        assert len(times) == len(tb.steps)
        assert times == sorted(times) and times[-1] <= res.time_us
    assert set(out["ends"]) == {tb.id for tb in tbs}
    # the NIC carried the other box's half of the buffer at most at its capacity
    prof = mod.busy_profile(out["load"], res.time_us, 50.0)
    assert 0 < max(prof) <= 1.0 + 1e-9
    # the simulator is left as it was, and recording did not change the call
    from colc.ir import simulate as sim
    assert "_rebalance" in vars(sim._Engine) and sim._Engine._rebalance.__module__ == sim.__name__
    assert sim._Simulation.resume.__qualname__ == "_Simulation.resume"
    assert sim._transmission_table.__module__ == sim.__name__
    plain = sim.simulate(program, topo, _model(topo), 16 << 20)
    assert plain.time_us == pytest.approx(res.time_us)
    assert mod.main(["--boxes", "2", "--collective", "allgather", "--chunks", "16",
                     "--size", "16", "--rank", "3"]) == 0
    text = capsys.readouterr().out
    assert "GB/s" in text and "link b0g0,ib0: first byte at" in text
    assert text.count("\n  tb") == len(tbs)
