"""``colc analyze``'s default: one representative file per algorithm (issue 20).

The default lowers each algorithm once and simulates that file at every size
under the protocol the closed form (``compiler/estimate_time.py``) ranks
fastest; ``--search`` runs the portfolio's whole search.
"""

from __future__ import annotations

import pytest

from colc.compiler import analyze as an
from colc.compiler import pipeline
from colc.compiler.estimate_time import estimate_time
from colc.frontends.families import torus
from colc.ir.core import Collective, Protocol
from colc.ir.runtime_model import model_named

SIZES = (1 << 20, 1 << 30)


def test_default_lowers_each_algorithm_once(monkeypatch) -> None:
    lowered: list[str] = []
    real = pipeline.Compiler._lower

    def counting(self, variant, first=0):
        lowered.append(variant.label)
        return real(self, variant, first)

    def no_search(*_a, **_k):
        raise AssertionError("the default analyze ran the full search")

    monkeypatch.setattr(pipeline.Compiler, "_lower", counting)
    monkeypatch.setattr(an, "_searched", no_search)
    report = an.analyze_topology(torus([3, 4], 10), collectives=(Collective.ALLGATHER,),
                                 sizes=SIZES, jobs=1)
    simulated = [s for s in report["schedules"] if "simulated" in s]
    assert not report["search"] and len(simulated) >= 3
    assert len(lowered) == len(set(lowered)) == len(simulated)  # one lowering each
    for s in simulated:
        assert len(s["simulated"]) == len(SIZES) and s["threadblocks"] <= 32
        assert all(r["algbw"] > 0 for r in s["simulated"])
        # the row's bandwidth is the simulated file's schedule's: the simulation cannot beat it
        assert max(r["algbw"] for r in s["simulated"]) <= s["algbw"] * 1.0001


def test_search_tries_every_protocol_and_keeps_the_best_per_size() -> None:
    topo = torus([3, 4], 10)
    report = an.analyze_topology(topo, algorithms=("trees",),
                                 collectives=(Collective.ALLGATHER,), sizes=SIZES,
                                 search=True, jobs=1)
    (row,) = report["schedules"]
    assert report["search"] and row["emittable"]
    small, large = row["simulated"]
    assert small["variant"].endswith(("/LL", "/LL128")) and large["variant"].endswith("/Simple")
    quick = an.analyze_topology(topo, algorithms=("trees",),
                                collectives=(Collective.ALLGATHER,), sizes=SIZES, jobs=1)
    # the representative file is one of the searched ones, so it is never faster at 1 GiB
    assert quick["schedules"][0]["simulated"][1]["algbw"] <= large["algbw"] * 1.0001


def test_search_prefers_files_the_runtime_selects() -> None:
    """On the 3 x 5 torus at 64K bfb/c16/LL simulates fastest but the runtime
    never selects it (240 chunks per loop); the search showed it, though the
    file colc writes there delivers less."""
    topo = torus([3, 5], 10)
    report = an.analyze_topology(topo, algorithms=("bfb",), collectives=(Collective.ALLGATHER,),
                                 sizes=(64 << 10,), search=True, jobs=1)
    (row,) = report["schedules"][0]["simulated"]
    assert row["selected"], row


def test_search_ranks_ll128_past_its_range_where_simple_falls_behind(monkeypatch) -> None:
    """As the portfolio (``portfolio._falls``): past 256 MiB only Simple is
    searched, unless its best there is slower than the best one size below;
    then LL128's variants are tried at that size and kept when faster."""
    from helpers import slow_simple_past_256m

    topo = torus([3, 4], 10)
    sizes = (64 << 20, 1 << 30)
    plain = an._simulated(topo, "trees", Collective.ALLGATHER, sizes, None, 32, search=True)
    assert plain["simulated"][1]["variant"].endswith("/Simple")
    slow_simple_past_256m(monkeypatch)
    row = an._simulated(topo, "trees", Collective.ALLGATHER, sizes, None, 32, search=True)
    assert row["simulated"][1]["variant"].endswith("/LL128")
    assert row["simulated"][1]["algbw"] > plain["simulated"][1]["algbw"] / 10


def test_search_simulates_the_leading_ll128_file_past_its_range(monkeypatch) -> None:
    """Where Simple does not fall behind, past 256 MiB the search simulates
    one LL128 variant, the fastest at the largest size in LL128's range, and
    the row keeps whichever of it and the best Simple file is faster."""
    from colc.ir.core import Protocol

    seen: list[tuple[str, int, float]] = []
    real = pipeline.Compiler.simulate

    def spy(self, variant, size, program=None):
        res = real(self, variant, size, program)
        if variant.protocol is Protocol.LL128:
            seen.append((variant.label, size, res.algbw))
        return res

    monkeypatch.setattr(pipeline.Compiler, "simulate", spy)
    topo = torus([3, 4], 10)
    row = an._simulated(topo, "trees", Collective.ALLGATHER, (64 << 20, 1 << 30), None, 32,
                        search=True)
    led = max((bw, label) for label, s, bw in seen if s == 64 << 20)[1]
    late = [(label, bw) for label, s, bw in seen if s == 1 << 30]
    assert {label for label, _ in late} == {led}  # (the row may simulate it again)
    assert row["simulated"][1]["algbw"] >= round(late[0][1], 3)


def test_unproved_analysis_predicts_what_the_proved_file_does() -> None:
    """analyze skips the schedule proofs (the program and its simulation do
    not depend on them) but never prints a file from an unproved schedule."""
    from colc.errors import InternalError

    topo = torus([3, 4], 10)
    row = an._simulated(topo, "trees", Collective.ALLREDUCE, SIZES, None, 32)
    proved = pipeline.Compiler(topo, pipeline.CompileOptions(
        algorithm="trees", collective=Collective.ALLREDUCE, rank_sizes=SIZES))
    v = pipeline.variants(proved)[0]
    for size, sim in zip(SIZES, row["simulated"], strict=True):
        proto = Protocol(sim["variant"].rsplit("/", 1)[1])
        assert sim["time_us"] == round(proved.simulate_as(v, proto, size).time_us, 2)
    unproved = pipeline.Compiler(topo, pipeline.CompileOptions(
        algorithm="trees", collective=Collective.ALLREDUCE, rank_sizes=SIZES, prove=False))
    with pytest.raises(InternalError, match="not proved"):
        unproved.emit(pipeline.variants(unproved)[0])


def test_rows_do_not_depend_on_jobs() -> None:
    topo = torus([3, 4], 10)
    one = an.analyze_topology(topo, sizes=SIZES, jobs=1)
    two = an.analyze_topology(topo, sizes=SIZES, jobs=2)
    assert one == two


def test_closed_form_of_a_two_rank_exchange() -> None:
    """allgather on 2 ranks over one 10 GB/s duplex link: each rank sends M/2
    in one hop, so time = base + hop + call + (M/2) / (10 * eff) (link-bound:
    one threadblock's rate is higher)."""
    from colc.compiler.rings.ring import ring_schedule

    topo = torus([2], 10)
    sched = ring_schedule(topo, Collective.ALLGATHER)
    model = model_named("generic")
    est = estimate_time(sched, topo, model, budget=32)
    lat = model.latency(Protocol.SIMPLE)
    hops = est.chain[0] + est.chain[1]
    size = 1 << 30
    expected = lat.base + hops * (lat.hop_p2p + lat.call) + size / 1000 * (0.5 / 10)
    assert est.time_us(Protocol.SIMPLE, size) == pytest.approx(expected, rel=1e-9)
    assert est.fastest(1 << 30) is Protocol.SIMPLE and est.fastest(1 << 10) is Protocol.LL


def test_rows_sharing_a_stage_run_in_one_unit_costliest_first() -> None:
    names = ("ring", "trees", "hier", "rings2d")
    tasks = [(n, c) for n in names for c in an.DEFAULT_COLLECTIVES]
    units = an._units(tasks)
    assert sorted(i for u in units for i in u) == list(range(len(tasks)))
    by_name = {}
    for unit in units:
        by_name.setdefault(tasks[unit[0]][0], []).append(len(unit))
        assert len({tasks[i][0] for i in unit}) == 1
    assert by_name["trees"] == [3] and by_name["hier"] == [3]
    assert by_name["ring"] == [1, 1, 1] and by_name["rings2d"] == [1, 1, 1]
    weights = [sum(an._row_weight(*tasks[i]) for i in u) for u in units]
    assert weights == sorted(weights, reverse=True)
    assert tasks[units[0][0]][0] == "trees"
    # a search keeps every row apart
    assert all(len(u) == 1 for u in an._units(tasks, bundle=False))


def test_text_marks_figures_the_runtime_would_not_select(capsys) -> None:
    """colc analyze's text showed the 3 x 5 torus's allreduce figures as the
    file's, though no power-of-two size is a multiple of its 30 chunks (the
    JSON and the compile summary said so); and '1 threadblocks'."""
    import json

    from colc.cli import main

    argv = ["analyze", "examples/torus-3x5.yaml", "--collective", "allreduce", "--algorithm",
            "ring", "--sizes", "1M,1G"]
    assert main([*argv, "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["schedules"]
    assert not any(r["selected"] for r in row["simulated"])
    assert main(argv) == 0
    out = capsys.readouterr().out
    line = next(t for t in out.splitlines() if t.startswith("ring "))
    assert line.count("*") == 2 and "\n* the runtime would not select" in out
    assert main(["analyze", "examples/ring-4.yaml", "--collective", "allgather", "--algorithm",
                 "ring", "--sizes", "1M"]) == 0
    assert "would not select" not in capsys.readouterr().out


def test_analyze_names_why_hop_relay_has_no_row(capsys) -> None:
    """--algorithm hop-relay was 'unknown algorithm', though compile takes it
    and analyze's own direct row advises it."""
    import os

    from colc.cli import main

    examples = os.path.join(os.path.dirname(__file__), "..", "examples")
    assert main(["analyze", os.path.join(examples, "torus-3x5.yaml"), "--collective",
                 "alltoall", "--algorithm", "hop-relay"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "hop-relay: writes oneCCL threads" in err[0]
    assert "unknown" not in err[0]


def test_a_slow_fabric_keeps_its_bounds_and_figures() -> None:
    """Links of 1e-4 GB/s: the bound rounded to 0.00, which the per-size
    bound then read as no bandwidth limit (145 GB/s at 1M), and every
    simulated figure rounded to 0, so the report drew no curve."""
    from colc.frontends.families import ring

    report = an.analyze_topology(ring(3, "0.0001"), collectives=(Collective.ALLGATHER,),
                                 algorithms=("ring",), sizes=(1 << 20, 1 << 30))
    bound = report["bounds"]["allgather"]
    assert 2.9e-4 < bound["algbw"] < 3.1e-4
    assert all(0 < b["algbw"] <= bound["algbw"] for b in bound["by_size"])
    (row,) = [s for s in report["schedules"] if s["algorithm"] == "ring"]
    assert all(0 < r["algbw"] <= bound["algbw"] for r in row["simulated"])
    assert "0.0003" in an.format_table(report)


def test_search_rows_name_each_sizes_file() -> None:
    """With --search a row's sizes come from several files, but the row
    named one (the largest size's) beside the most threadblocks of any:
    'trees/c16/Simple ... 26 threadblocks' where that file takes 7."""
    from colc.frontends.families import hypercube

    report = an.analyze_topology(hypercube(3, 10), collectives=(Collective.ALLGATHER,),
                                 algorithms=("trees",), search=True, jobs=1)
    (row,) = [s for s in report["schedules"] if s["algorithm"] == "trees"]
    files = list(dict.fromkeys(r["variant"] for r in row["simulated"]))
    assert len(files) > 1  # the case the row's label was wrong in
    line = next(x for x in an.format_table(report).splitlines() if x.startswith("trees "))
    assert line.endswith(f"best per size: {', '.join(files)}; up to {row['threadblocks']} "
                         f"threadblocks per GPU")


@pytest.mark.parametrize("budget", [6, 32])
def test_ring_row_is_the_copies_ring_writes_within_the_budget(budget: int) -> None:
    # ring's chunkings are copies of its ring: the row shows the most copies
    # that fit, as --algorithm ring writes at 1 GiB, not one ring on 2
    from colc.frontends.families import dgx_a100

    topo = dgx_a100(1)
    report = an.analyze_topology(topo, algorithms=("ring",),
                                 collectives=(Collective.ALLGATHER,), sizes=(1 << 30,),
                                 max_threadblocks=budget, jobs=1)
    (row,) = report["schedules"]
    written = pipeline.compile_topology(topo, pipeline.CompileOptions(
        algorithm="ring", collective=Collective.ALLGATHER, max_threadblocks=budget,
        rank_sizes=(1 << 30,), jobs=1))
    assert row["threadblocks"] <= budget and row["variant"].startswith("ring/c")
    assert row["nchunks"] == written.program.nchunks
    assert row["simulated"][0]["algbw"] == pytest.approx(written.predicted[0][1].algbw, rel=0.02)
