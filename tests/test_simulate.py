"""The runtime timing simulator: hand-computed times on tiny programs, closed forms,
the selection rule, and clean errors."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

import pytest

from colc.errors import ColcError
from colc.frontends.families import ring
from colc.ir.core import Buffer, Collective, Protocol
from colc.ir.program import Loc, Program, RankProgram, Step, StepKind, Threadblock
from colc.ir.runtime_model import GENERIC, PRESETS, ProtocolCosts
from colc.ir.simulate import SimulationError, busbw_factor, selection, simulate
from colc.ir.topology import Link, Node, Topology

I, O = Buffer.INPUT, Buffer.OUTPUT
MIB = 1 << 20

#: A machine with round numbers: 10 GB/s per threadblock, 1 us per hop, nothing else.
PLAIN = replace(
    GENERIC,
    protocols={p: ProtocolCosts(tb_p2p=10.0, conn_net=10.0, hop_p2p=1.0, hop_net=1.0,
                                call=0.0, base=0.0) for p in Protocol},
    local_bw=1e9, credit_p2p=0.0, credit_net=0.0, latency_scale=1.0)


def pair(bw: int = 100) -> Topology:
    nodes = (Node("a", "gpu"), Node("b", "gpu"))
    return Topology("pair", nodes, (Link("a", "b", Fraction(bw)), Link("b", "a", Fraction(bw))))


def star(n: int, bw: int) -> Topology:
    """n GPUs on one switch, bw GB/s per port each way."""
    nodes = tuple(Node(f"g{i}", "gpu") for i in range(n)) + (Node("sw", "switch"),)
    links = []
    for i in range(n):
        links += [Link(f"g{i}", "sw", Fraction(bw)), Link("sw", f"g{i}", Fraction(bw))]
    return Topology("star", nodes, tuple(links))


def step(kind: StepKind, count: int = 1, dep=None, has_dep: bool = False,
         src: tuple = (I, 0), dst: tuple = (O, 0)) -> Step:
    return Step(kind, Loc(*src), Loc(*dst), count, dep, has_dep)


def program(ranks: list[list[Threadblock]], nchunks: int, ngpus: int,
            protocol: Protocol = Protocol.SIMPLE) -> Program:
    rps = tuple(RankProgram(r, nchunks, nchunks, 0, tuple(tbs)) for r, tbs in enumerate(ranks))
    nch = 1 + max(tb.channel for tbs in ranks for tb in tbs)
    return Program("t", Collective.ALLREDUCE, protocol, nch, nchunks, ngpus, True, True, 0, 0,
                   rps)


def one_send(protocol: Protocol = Protocol.SIMPLE, count: int = 1) -> Program:
    """Rank 0 sends chunk 0 to rank 1 (the rest of the 2-rank program does nothing)."""
    return program([[Threadblock(0, 1, None, 0, (step(StepKind.SEND, count),))],
                    [Threadblock(0, None, 0, 0, (step(StepKind.RECV, count),))]], 2, 2, protocol)


def test_one_send_costs_bytes_over_rate_plus_a_hop() -> None:
    # 2 MiB in 2 chunks: chunk 0 (1 MiB) is one call of two slices at 10 GB/s;
    # the last slice is visible 1 us after it is written.
    res = simulate(one_send(), pair(), PLAIN, 2 * MIB)
    assert res.time_us == pytest.approx(MIB / 10e3 + 1.0, rel=1e-6)
    assert res.algbw == pytest.approx(2 * MIB / res.time_us / 1e3)
    assert res.busbw == pytest.approx(res.algbw * busbw_factor(Collective.ALLREDUCE, 2))


def test_link_slower_than_threadblock_limits() -> None:
    res = simulate(one_send(), pair(bw=4), PLAIN, 2 * MIB)
    assert res.time_us == pytest.approx(MIB / 4e3 + 1.0, rel=1e-6)


def test_two_senders_share_the_receivers_port_fairly() -> None:
    # g1 and g2 each send 1 MiB to g0; g0's port gives 10 GB/s in all: 5 each.
    senders = [Threadblock(0, 0, None, 0, (step(StepKind.SEND),))]
    recvs = [Threadblock(0, None, 1, 0, (step(StepKind.RECV),)),
             Threadblock(1, None, 2, 0, (step(StepKind.RECV),))]
    prog = program([recvs, senders, senders], 3, 3)
    res = simulate(prog, star(3, 10), PLAIN, 3 * MIB)
    assert res.time_us == pytest.approx(MIB / 5e3 + 1.0, rel=1e-6)
    assert res.busiest_link[2] == pytest.approx(1.0, rel=1e-2)


def test_ll_puts_its_flags_on_the_wire() -> None:
    # LL moves 8 data bytes per 16-byte line: on a 4 GB/s link (threadblock
    # 10 GB/s of data = 20 GB/s of wire) 64 KiB of data takes 128 KiB / 4 GB/s.
    res = simulate(one_send(Protocol.LL), pair(bw=4), PLAIN, 128 << 10)
    assert res.time_us == pytest.approx(2 * (64 << 10) / 4e3 + 1.0, rel=1e-6)


def test_fifo_credits_bound_a_connection_by_latency() -> None:
    # Simple buffers 4 slices (2 calls).  8 chunks of 2 MiB are 8 calls of two
    # 1 MiB slices (105 us each at 10 GB/s).  With a 1000 us hop, slot k is free
    # again only when slice k has arrived: the sender sends 4 slices, waits for
    # the first to land, and so on: 3 waits of (hop + slice), 4 slices, a hop.
    slow = replace(PLAIN, protocols={p: replace(c, hop_p2p=1000.0)
                                     for p, c in PLAIN.protocols.items()})
    prog = program([[Threadblock(0, 1, None, 0, (step(StepKind.SEND, 8),))],
                    [Threadblock(0, None, 0, 0, (step(StepKind.RECV, 8),))]], 8, 2)
    res = simulate(prog, pair(), slow, 8 * 2 * MIB)
    s = MIB / 10e3
    assert res.time_us == pytest.approx(3 * (1000 + s) + 4 * s + 1000, rel=1e-6)


def test_dependency_waits_for_the_flag() -> None:
    # rank 0: tb0 copies (local), tb1 sends after tb0's step 0
    tbs0 = [Threadblock(0, None, None, 0, (step(StepKind.COPY, has_dep=True),)),
            Threadblock(1, 1, None, 0, (step(StepKind.SEND, dep=(0, 0)),))]
    prog = program([tbs0, [Threadblock(0, None, 0, 0, (step(StepKind.RECV),))]], 2, 2)
    slow_copy = replace(PLAIN, local_bw=1.0)  # 1 GB/s local copy
    res = simulate(prog, pair(), slow_copy, 2 * MIB)
    copy = MIB / 1e3
    drain = (MIB / 2) / 1e3  # the receiver drains each slice at the local rate
    # slice 1 arrives (MIB/2)/10 GB/s + 1 us after the copy; its drain hides slice 2
    assert res.time_us == pytest.approx(copy + (MIB / 2) / 10e3 + 1.0 + 2 * drain, rel=1e-6)


def test_ring_matches_the_closed_form_within_2_percent() -> None:
    """A bidirectional ring on a ring topology, one channel per direction, 1 GiB."""
    from colc.compiler.lowering.lower_to_program import LoweringOptions, lower_to_program
    from colc.compiler.rings.ring import ring_schedule

    topo = ring(8, 10, bidirectional=True)
    sched = ring_schedule(topo, Collective.ALLGATHER)
    prog = lower_to_program(sched, LoweringOptions())
    assert prog.nchannels == 2
    fast = replace(GENERIC, protocols={p: replace(c, tb_p2p=100.0)
                                       for p, c in GENERIC.protocols.items()})
    res = simulate(prog, topo, fast, 1 << 30)
    closed = 2 * 10 * 8 / 7  # each direction carries (N-1)/N of M / 2 at 10 GB/s
    assert res.algbw == pytest.approx(closed, rel=0.02)


def test_selection_rule() -> None:
    prog = replace(one_send(), nchunks=16, min_bytes=1024, max_bytes=1 << 20)
    assert selection(prog, 4096, 4) == ""
    assert "multiple of nchunksperloop" in selection(prog, 4096 + 4, 4)
    assert "below minBytes" in selection(prog, 512, 4)
    assert "above maxBytes" in selection(prog, 2 << 20, 4)
    assert simulate(prog, pair(), PLAIN, 4096 + 4 * 4).selected is False


def test_bad_inputs_are_clean_errors() -> None:
    with pytest.raises(SimulationError, match="for 2 ranks but topology star has 3"):
        simulate(one_send(), star(3, 10), PLAIN, MIB)
    with pytest.raises(SimulationError, match="positive"):
        simulate(one_send(), pair(), PLAIN, 0)
    hang = program([[Threadblock(0, 1, None, 0, (step(StepKind.SEND),))],
                    [Threadblock(0, None, 0, 0, (step(StepKind.RECV, dep=(1, 0)),)),
                     Threadblock(1, None, None, 0, (step(StepKind.COPY, dep=(0, 0),
                                                         has_dep=True),))]], 2, 2)
    with pytest.raises(SimulationError, match="hangs"):
        simulate(hang, pair(), PLAIN, MIB)
    assert issubclass(SimulationError, ColcError)


def test_presets_are_complete() -> None:
    for model in PRESETS.values():
        assert Protocol.SIMPLE in model.protocols and Protocol.LL in model.protocols
        assert 0 < model.p2p_efficiency <= 1 and 0 < model.net_efficiency <= 1
        assert model.max_threadblocks >= 64


@pytest.mark.parametrize("protocol", [Protocol.LL, Protocol.LL128])
def test_extrapolated_time_matches_the_full_simulation(protocol) -> None:
    """Large calls run many loop iterations; simulating 4 and 8 and extending the
    difference must agree with simulating all of them."""
    from colc.compiler.pipeline import CompileOptions, Compiler, Variant
    from colc.frontends.families import torus
    from colc.ir.simulate import EXTRAPOLATE_ABOVE, _Simulation
    from colc.ir.load_checks import load_program

    topo = torus([3, 3], 10)
    c = Compiler(topo, CompileOptions(algorithm="trees", collective=Collective.ALLGATHER))
    program = c.program(Variant("trees", 16, protocol))
    size = 1 << 30
    iters = _Simulation(load_program(program), topo, c.model, size, 4).iters
    assert len(iters) > EXTRAPOLATE_ABOVE  # the extrapolation really applies
    full = simulate(program, topo, c.model, size, extrapolate=False)
    fast = simulate(program, topo, c.model, size)
    assert fast.time_us == pytest.approx(full.time_us, rel=5e-3)
    assert fast.busiest_link[:2] == full.busiest_link[:2]


def test_hardware_families_pick_their_cost_model_whatever_the_name() -> None:
    """A file named cluster.yaml with 'family: mi250' is an MI250 machine."""
    from colc.frontends import parse_topology_text
    from colc.ir.runtime_model import model_for

    for family, preset in (("dgx-a100", "a100"), ("dgx-h100", "h100"), ("mi250", "mi250")):
        topo = parse_topology_text(f"family: {family}\nboxes: 1\nname: cluster\n", "cluster.yaml")
        assert topo.name == "cluster" and model_for(topo).name == preset
    assert model_for(ring(4, 10)).name == "generic"


def test_flow_remainder_below_clock_resolution_finishes() -> None:
    """Found by the long fuzz run: late in a long simulation (a 1/1000 GB/s link),
    a flow whose remaining time is below the float clock's resolution was
    re-armed at the same instant forever.  It must finish instead."""
    from colc.ir.simulate import _Engine, _Flow, _Link

    eng = _Engine()
    eng.now = 1.5e8  # us: the clock's resolution here is about 3e-8 us
    link = _Link(1.0, ("a", "b"))
    finished = []
    flow = _Flow(1.0, (link,), 1e12, lambda: finished.append(True))
    link.add(flow)
    flow.t, flow.rate, flow.rem = eng.now, 1e12, 0.5  # 5e-13 us left: below resolution
    eng._finish_flow((flow, flow.ver))
    assert finished == [True] and not eng.heap and not link.flows


def test_a_superseded_flow_end_does_not_extend_the_call() -> None:
    """Two flows share a 10-unit/us link: 1 unit and 3 units, 5 each until
    the first ends at 0.2 us; the second then runs at 10 and ends at 0.4.
    Its first completion event (0.6 at the old rate) is superseded and must
    not move the clock: the simulated call ended there until 2026-11-29."""
    from colc.ir.simulate import _Engine, _Flow, _Link

    eng = _Engine()
    link = _Link(10.0, ("a", "b"))
    ends = []
    for name, size in (("a", 1.0), ("b", 3.0)):
        eng.start_flow(_Flow(size, (link,), 1e12, lambda n=name: ends.append((n, eng.now))))
    eng.run()
    assert [n for n, _ in ends] == ["a", "b"]
    assert [t for _, t in ends] == pytest.approx([0.2, 0.4])
    assert eng.now == pytest.approx(0.4)


def test_a_slice_nobody_receives_still_lands_before_the_call_ends() -> None:
    """Arrivals are read lazily; one that no receive consumes (a file with an
    extra send) still counts in the call's time, as its landing did when it
    was an event."""
    from pathlib import Path

    from colc.backends.msccl_reader import read_msccl
    from colc.cli import load_any_topology
    from colc.compiler.pipeline import CompileOptions, compile_topology
    from colc.ir.runtime_model import model_for

    repo = Path(__file__).resolve().parent.parent
    topo = load_any_topology(str(repo / "examples" / "ring-4.yaml"))
    # direct with a paired threadblock per peer (unpaired needs 6 threadblocks)
    text = compile_topology(topo, CompileOptions(collective=Collective.ALLTOALL, jobs=1,
                                                 algorithm="direct", chunks=1,
                                                 max_threadblocks=5)).text
    last = '<step s="1" type="r" srcbuf="i" srcoff="0" dstbuf="o" dstoff="1" cnt="1" ' \
           'depid="-1" deps="-1" hasdep="0"/>'
    extra = '<step s="2" type="s" srcbuf="i" srcoff="1" dstbuf="o" dstoff="0" cnt="1" ' \
            'depid="-1" deps="-1" hasdep="0"/>'
    assert text.count(last) >= 1
    longer = text.replace(last, last + "\n      " + extra, 1)
    model = model_for(topo)
    base, more = read_msccl(text, "base"), read_msccl(longer, "extra")
    assert more.runnable and not more.loaded.diagnostics
    for size in (1 << 10, 1 << 16):
        t0 = simulate(base.program, topo, model, size).time_us
        t1 = simulate(more.program, topo, model, size).time_us
        assert t1 > t0


@pytest.mark.parametrize("machine,documented", [("a100x2", 0.056), ("mi250x2", 0.115)])
def test_presets_keep_their_calibration_error(machine, documented) -> None:
    """docs/cost-model.md's table (``python bench/calibrate.py --check``):
    NCCL's (RCCL's) ring as a file, simulated with the machine's preset
    against the published measurements at 1M, 16M, 128M and 1G, keeps the
    mean absolute error the table states (A100 5.6%, MI250 11.5%)."""
    from colc.compiler.published_results import MACHINES, ring_predictions, ring_rows
    from colc.ir.runtime_model import model_named

    topo, rows = ring_rows(machine)
    errors = [abs(p / m - 1) for _, _, measured, predicted in
              ring_predictions(topo, rows, model_named(MACHINES[machine][2]))
              for m, p in zip(measured, predicted, strict=True)]
    assert len(errors) == 12
    assert sum(errors) / len(errors) == pytest.approx(documented, abs=0.0006)


def test_a_dependency_on_a_missing_threadblock_is_an_error_not_a_crash(tmp_path,
                                                                        capsys) -> None:
    """A step waiting on a threadblock its rank does not have (the runtime
    hangs) was an internal error (IndexError) in colc simulate; it is one
    line, as colc verify's."""
    import re
    from pathlib import Path

    from colc.cli import main

    repo = Path(__file__).resolve().parent.parent
    topo = str(repo / "examples" / "ring-4.yaml")
    good = tmp_path / "good.xml"
    assert main([topo, "--collective", "allreduce", "--algorithm", "ring", "-o", str(good)]) == 0
    text = good.read_text()
    assert 'depid="-1"' in text
    bad = tmp_path / "bad.xml"
    bad.write_text(re.sub(r'depid="-1" deps="-1"', 'depid="50" deps="0"', text, count=1))
    capsys.readouterr()
    assert main(["simulate", str(bad), "--topo", topo, "--sizes", "1M"]) == 1
    err = capsys.readouterr().err
    assert "waits on threadblock 50, which the rank does not have" in err
    assert "internal error" not in err and len(err.strip().splitlines()) == 1


def test_simulate_says_when_the_file_fails_verification(tmp_path, capsys) -> None:
    """colc simulate printed figures for a file whose runs end wrong (an
    allgather with a receive turned into a send) as if it were a schedule;
    it still prints them, but says the file fails verification, names the
    first error and exits 1; --json says so too, with the dtype."""
    import json
    from pathlib import Path

    from colc.cli import main

    repo = Path(__file__).resolve().parent.parent
    topo = str(repo / "examples" / "ring-4.yaml")
    good = tmp_path / "good.xml"
    assert main([topo, "--collective", "allgather", "--algorithm", "ring", "--chunks", "1",
                 "-o", str(good)]) == 0
    capsys.readouterr()
    assert main(["simulate", str(good), "--topo", topo, "--sizes", "1M", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["verified"] and not report["verification_errors"]
    assert report["dtype"] == "fp32"
    text = good.read_text()
    bad = tmp_path / "bad.xml"
    bad.write_text(text.replace('type="r"', 'type="s"', 1))
    assert main(["simulate", str(bad), "--topo", topo, "--sizes", "1M"]) == 1
    out, err = capsys.readouterr()
    assert "algbw" in out and "1M" in out
    assert err.startswith(f"{bad}: error: fails verification") and "postcondition" in err, err
    assert len(err.strip().splitlines()) == 1
    assert main(["simulate", str(bad), "--topo", topo, "--sizes", "1M", "--json",
                 "--dtype", "bf16"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert not report["verified"] and report["dtype"] == "bf16"
    assert "postcondition" in report["verification_errors"][0]
    # --no-verify skips it (a minute at 1024 ranks): not verified, not failed
    assert main(["simulate", str(bad), "--topo", topo, "--sizes", "1M", "--json",
                 "--no-verify"]) == 0
    assert json.loads(capsys.readouterr().out)["verified"] is None


def test_simulate_names_a_folder_and_unreadable_files_plainly(tmp_path, capsys) -> None:
    """colc simulate DIR said 'cannot read (IsADirectoryError)'."""
    from pathlib import Path

    from colc.cli import main

    topo = str(Path(__file__).resolve().parent.parent / "examples" / "ring-4.yaml")
    assert main(["simulate", str(tmp_path), "--topo", topo]) == 1
    assert capsys.readouterr().err.strip() == (
        f"{tmp_path}: error: is a folder; colc simulate takes one MSCCL file (colc verify "
        f"checks a folder)")
    assert main(["simulate", str(tmp_path / "none.xml"), "--topo", topo]) == 1
    assert capsys.readouterr().err.strip() == (
        f"{tmp_path / 'none.xml'}: error: cannot read: No such file or directory")
    (tmp_path / "bin.xml").write_bytes(b"\xff\xfe<algo")
    assert main(["simulate", str(tmp_path / "bin.xml"), "--topo", topo]) == 1
    assert "not UTF-8 text" in capsys.readouterr().err


def test_selection_warning_blames_the_window_when_the_window_is_the_cause() -> None:
    """A window starting at 32G was told 'nchunksperloop 8 divides no element
    count ... e.g. 32G' (a size it selects: the check stopped at 16G), and a
    window of 0..512 bytes the same (the check started at 1K)."""
    import dataclasses

    from oneccl_cases import ring_allreduce

    from colc.ir.simulate import selection_warnings

    prog = ring_allreduce(4)  # 4 chunks: every power of two from 16 bytes
    assert selection_warnings(dataclasses.replace(prog, min_bytes=32 << 30)) == []
    assert selection_warnings(dataclasses.replace(prog, max_bytes=512)) == []
    assert selection_warnings(dataclasses.replace(prog, min_bytes=600, max_bytes=1000)) == [
        "no power-of-two size nccl-tests runs lies in the file's window (600..1000 bytes): "
        "the runtime never uses it"]
    # what nccl-tests moves decides (review): on 3 ranks a 1K allgather is 1008
    # bytes, below a window from 1K; the file's 6 chunks were blamed
    ag3 = dataclasses.replace(prog, collective=Collective.ALLGATHER, ngpus=3, nchunks=6,
                              min_bytes=1024, max_bytes=2000)
    assert selection_warnings(ag3)[0].startswith("no power-of-two size nccl-tests runs")
    odd = ring_allreduce(3)
    assert selection_warnings(odd)[0].startswith("nchunksperloop 3 divides no element count")
