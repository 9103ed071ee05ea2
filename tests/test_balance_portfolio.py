"""Lane balancing, selectable chunking and size-window portfolios.

Properties every schedule generator must keep through ``balance-lanes``: the
data a schedule moves does not change (the chunk checker proves the
postcondition in both aliasing modes and the physics), and the lowered
program stays within the runtime's limits.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import random
from pathlib import Path
from fractions import Fraction

import pytest

from colc.cli import main
from colc.compiler.algorithms import load_optional_algorithms
from colc.compiler.lowering.balance_lanes import STEP_BUDGET, balance_lanes, plan_lanes
from colc.compiler.lowering.lower_to_program import LoweringOptions, lower_to_program
from colc.compiler.pipeline import (
    ALGORITHMS,
    CompileOptions,
    compile_topology,
    selectable_sizes,
)
from colc.compiler.portfolio import build_portfolio, check_windows, format_portfolio
from colc.frontends.families import dgx_a100, hypercube, ring, torus
from colc.ir.check_chunks import check_schedule
from colc.ir.core import Buffer, Collective, Protocol
from colc.ir.runtime_model import A100, GENERIC, MI250
from colc.ir.topology import Link, Node, Topology

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(REPO, "examples")
COLLS = (Collective.ALLGATHER, Collective.REDUCESCATTER, Collective.ALLREDUCE)


def two_boxes(gpus: int = 3) -> Topology:
    """Two boxes of ``gpus`` GPUs on a box switch, joined by a network switch."""
    nodes, links = [], []
    for b in range(2):
        nodes += [Node(f"b{b}g{i}", "gpu") for i in range(gpus)] + [Node(f"b{b}nvs", "switch")]
        for i in range(gpus):
            links += [Link(f"b{b}g{i}", f"b{b}nvs", Fraction(100)),
                      Link(f"b{b}nvs", f"b{b}g{i}", Fraction(100))]
    nodes.append(Node("ib", "switch", net=True))
    for b in range(2):
        for i in range(gpus):
            links += [Link(f"b{b}g{i}", "ib", Fraction(10)), Link("ib", f"b{b}g{i}", Fraction(10))]
    return Topology("two-boxes", tuple(nodes), tuple(links))


CASES = [("ring", lambda: ring(6, 10, bidirectional=True)), ("bfb", lambda: torus([3, 3], 10)),
         ("bfb", lambda: hypercube(3, 10)), ("trees", two_boxes), ("hier", two_boxes)]


@pytest.mark.parametrize("coll", COLLS, ids=lambda c: c.value)
@pytest.mark.parametrize("name,make", CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
def test_balancing_keeps_the_data_and_the_limits(name, make, coll) -> None:
    load_optional_algorithms()
    topo = make()
    sched = ALGORITHMS[name](topo, coll, 4 if name in ("trees", "hier") else None)
    for model in (A100, GENERIC):
        plan = plan_lanes(sched, topo, model, Protocol.SIMPLE, target_algbw=200.0)
        out = balance_lanes(sched, plan)
        assert check_schedule(out, topo) == []  # same postcondition, races, physics
        moved = sorted((o.src.rank, o.dst.rank, o.count) for o in sched.ops if o.is_transfer)
        chunks_in = sum(c for _, _, c in moved)
        assert chunks_in == sum(o.count for o in out.ops if o.is_transfer)
        per_lane: dict[tuple[int, int, int], int] = {}
        for o in out.ops:
            if o.is_transfer:
                key = (o.src.rank, o.dst.rank, o.channel)
                per_lane[key] = per_lane.get(key, 0) + 1
                assert o.channel < plan.lanes[(o.src.rank, o.dst.rank)]
        assert max(per_lane.values()) <= STEP_BUDGET
        _assert_rounds_follow_their_ops(sched, out)
        prog = lower_to_program(out, LoweringOptions(fuse=False, pair_connections=False,
                                                      max_threadblocks=model.max_threadblocks))
        assert prog.nchannels <= 32
        assert all(len(tb.steps) <= 64 for rp in prog.ranks for tb in rp.threadblocks)
        assert all(len(rp.threadblocks) <= model.max_threadblocks for rp in prog.ranks)


def _assert_rounds_follow_their_ops(sched, out) -> None:
    """Balancing reorders (and may cut) ops: each keeps its generator's round
    (rings and BFB give their steps), a piece the round of the op it was cut
    from.  The rounds were left in place while the ops moved."""
    if not sched.rounds:
        assert out.rounds == ()
        return
    assert len(out.rounds) == len(out.ops)

    def key(o, shift=0):
        return (o.kind, o.src.rank, o.src.buffer, o.src.index + shift, o.dst.rank,
                o.dst.buffer, o.dst.index + shift)

    round_of = {key(o, d): r for o, r in zip(sched.ops, sched.rounds) for d in range(o.count)}
    assert all(round_of[key(o)] == r for o, r in zip(out.ops, out.rounds))


def test_lanes_follow_the_threadblock_rates() -> None:
    """A pair carrying 120 GB/s needs >= 6 lanes of 20 GB/s; a 10 GB/s pair one."""
    load_optional_algorithms()
    topo = dgx_a100(2)
    sched = ALGORITHMS["hier"](topo, Collective.ALLGATHER, 16)
    plan = plan_lanes(sched, topo, A100, Protocol.SIMPLE)
    rate = {p: plan.lane_rate[p] * n for p, n in plan.lanes.items()}
    for pair, n in plan.lanes.items():
        assert plan.lane_rate[pair] <= 20.0 + 1e-9
        if n > 1:  # more lanes only where one would be the bottleneck
            assert rate[pair] > 20.0 or n * 40 >= 1


def test_random_topologies_balance_correctly() -> None:
    rng = random.Random(5)
    load_optional_algorithms()
    for _ in range(6):
        n = rng.randint(3, 6)
        nodes = tuple(Node(f"r{i}", "gpu") for i in range(n))
        links = []
        for i in range(n):
            j = (i + 1) % n
            bw = Fraction(rng.choice([5, 10, 25]))
            links += [Link(f"r{i}", f"r{j}", bw), Link(f"r{j}", f"r{i}", bw)]
        topo = Topology("rand", nodes, tuple(links))
        for coll in COLLS:
            sched = ALGORITHMS["ring"](topo, coll, None)
            out = balance_lanes(sched, plan_lanes(sched, topo, MI250, Protocol.SIMPLE,
                                                  target_algbw=100.0))
            assert check_schedule(out, topo) == []


def test_single_file_is_selectable_at_power_of_two_sizes() -> None:
    topo = dgx_a100(2)
    res = compile_topology(topo, CompileOptions(algorithm="hier", collective=Collective.ALLGATHER,
                                                rank_sizes=(16 << 20,)))
    sizes = selectable_sizes(res.program, 4, lo=1 << 20, hi=1 << 30)
    assert sizes == [1 << k for k in range(20, 31)]
    assert selectable_sizes(res.program, 2, lo=1 << 20, hi=1 << 30) == sizes
    assert res.predicted and res.predicted[0][1].selected


@pytest.mark.parametrize("upper_wins", [True, False])
def test_the_midpoint_between_windows_goes_to_the_faster_file(monkeypatch, upper_wins) -> None:
    """Between evaluated sizes s and 4s the power of two 2s (128 MiB between 64
    and 256 MiB) is simulated under both winners and served by the faster: the
    window boundary lands at s or at 2s, and the midpoint's figure is the
    serving window's."""
    from colc.compiler import pipeline

    real = pipeline.Compiler.simulate
    s, mid = 16 << 20, 32 << 20

    def rigged(self, variant, size, program=None):
        res = real(self, variant, size, program)
        slow = ((variant.protocol is Protocol.SIMPLE and size < (mid if upper_wins else 64 << 20))
                or (variant.protocol is Protocol.LL128 and size > (s if upper_wins else mid)))
        return dataclasses.replace(res, algbw=res.algbw / 10) if slow else res

    monkeypatch.setattr(pipeline.Compiler, "simulate", rigged)
    p = build_portfolio(dgx_a100(2), CompileOptions(
        algorithm="rails", collective=Collective.ALLGATHER, chunks=8, jobs=1),
        sizes=(s, 64 << 20))
    protocols = [w.variant.protocol for w in p.windows]  # (rails' paired and unpaired files)
    k = protocols.index(Protocol.SIMPLE)
    assert k and set(protocols[:k]) == {Protocol.LL128} and set(protocols[k:]) == {
        Protocol.SIMPLE}
    assert check_windows(p.windows) == []
    lower, upper = p.windows[k - 1], p.windows[k]
    assert lower.hi == (s if upper_wins else mid)
    owner = upper if upper_wins else lower
    assert mid in [r.nbytes for r in owner.results]
    assert all(r.selected for w in p.windows for r in w.results)


def test_a_runner_up_that_is_faster_at_the_midpoint_gets_a_window(monkeypatch) -> None:
    """At the midpoint 2s between evaluated sizes s and 4s, the runners-up of
    both sides compete with the two winners (DGX A100 x4 allgather at 128 MiB:
    rails c8 Simple, second at 256 MiB, 163.6 GB/s against NCCL's rings as
    LL128, 153.4): a faster runner-up serves (s, 2s] in a window of its own."""
    from colc.compiler import pipeline

    real = pipeline.Compiler.simulate
    s, mid, top = 16 << 20, 32 << 20, 64 << 20
    best = {s: "rails/c8/LL128", mid: "rails/c4/Simple", top: "rails/c8/Simple"}
    second = {top: "rails/c4/Simple"}

    def rigged(self, variant, size, program=None):
        res = real(self, variant, size, program)
        slow = (1 if variant.label == best.get(size) else
                3 if variant.label == second.get(size) else 30)
        return dataclasses.replace(res, algbw=res.algbw / slow)

    monkeypatch.setattr(pipeline.Compiler, "simulate", rigged)
    p = build_portfolio(dgx_a100(2), CompileOptions(
        algorithm="rails", collective=Collective.ALLGATHER, jobs=1), sizes=(s, top))
    assert [w.variant.label for w in p.windows] == [best[s], best[mid], best[top]]
    assert [(w.lo, w.hi) for w in p.windows] == [(0, s), (s + 1, mid), (mid + 1, 0)]
    assert check_windows(p.windows) == []
    assert [r.nbytes for r in p.windows[1].results] == [mid]


def test_portfolio_covers_every_size_once(tmp_path) -> None:
    topo = two_boxes(4)
    sizes = (1 << 10, 1 << 14, 1 << 18, 1 << 22)
    p = build_portfolio(topo, CompileOptions(collective=Collective.ALLREDUCE), sizes=sizes)
    from colc.ir.simulate import iteration_limit

    assert check_windows(p.windows) == []
    last = p.windows[-1]  # unlimited, or ended at its file's loop-iteration limit
    assert p.windows[0].lo == 0 and last.hi in (0, iteration_limit(last.program))
    for w in p.windows:  # every window's file is selected at the sizes it won
        assert all(r.selected for r in w.results)
        assert w.program.min_bytes == w.lo and w.program.max_bytes == w.hi
        assert w.text.startswith("<!-- generated by colc")
    names = [w.filename(i, "allreduce") for i, w in enumerate(p.windows)]
    assert names == sorted(names)


def test_portfolio_says_when_the_runtime_cannot_select_it() -> None:
    p = build_portfolio(two_boxes(3), CompileOptions(collective=Collective.ALLREDUCE),
                        sizes=(1 << 12, 1 << 16))
    assert check_windows(p.windows) == []
    assert any("no file is selected by the runtime" in n for n in p.notes)
    # the summary's figures there are marked (they were shown as the file's)
    table = format_portfolio(p)
    assert "@4K*" in table and "@64K*" in table and "* not selected by the runtime" in table


def test_check_windows_finds_gaps_and_overlaps() -> None:
    """Gaps, overlaps and a bounded last window, but one bounded at its
    file's loop-iteration limit (65536 iterations of 16 KiB of LL's 3 chunks)."""
    from colc.ir.program import Loc, Program, RankProgram, Step, StepKind, Threadblock

    wait = Step(StepKind.COPY, Loc(Buffer.INPUT, 0), Loc(Buffer.OUTPUT, 0), 1, dep=(1, 0))
    rank = RankProgram(0, 1, 1, 0, (Threadblock(0, None, None, 0, (wait,)),))
    waits = Program("x", Collective.ALLREDUCE, Protocol.LL, 1, 3, 1, True, True, 0, 0, (rank,))
    plain = Program("x", Collective.ALLREDUCE, Protocol.LL, 1, 3, 1, True, True, 0, 0, ())

    class W:
        def __init__(self, lo, hi, program=plain):
            self.lo, self.hi, self.program = lo, hi, program

    assert check_windows([W(0, 100), W(101, 0)]) == []
    assert check_windows([W(0, 100), W(150, 0)]) == ["window 1 starts at 150, expected 101"]
    assert check_windows([W(0, 100), W(50, 0)]) == ["window 1 starts at 50, expected 101"]
    assert check_windows([W(0, 100)]) == ["the last window is bounded"]
    assert check_windows([W(0, 100), W(101, 3 << 30, waits)]) == []
    assert check_windows([W(0, 100), W(101, 1 << 30, waits)]) == ["the last window is bounded"]


def test_directory_output_writes_verified_windows(tmp_path, capsys) -> None:
    path = tmp_path / "topo.yaml"
    path.write_text("family: ring\nranks: 4\nbandwidth: 10\nbidirectional: true\n")
    out = tmp_path / "algos"
    assert main([str(path), "--collective", "allgather", "-o", str(out) + "/"]) == 0
    files = sorted(os.listdir(out))
    assert files and all(f.startswith("colc-allgather-") and f.endswith(".xml") for f in files)
    for f in files:
        assert main(["verify", "-q", str(out / f)]) == 0
    err = capsys.readouterr().err
    assert "window (bytes)" in err and "verified" in err
    # a second run replaces the first one's files, and nothing else
    (out / "mine.xml").write_text("<algo/>")
    assert main([str(path), "--collective", "allgather", "-o", str(out)]) == 0
    assert "mine.xml" in os.listdir(out)


def test_portfolios_for_other_rank_counts_and_modes_share_a_folder(tmp_path, capsys) -> None:
    """One MSCCL_ALGO_DIR serves jobs of several sizes, but the file names
    carried no rank count: a 6-rank portfolio replaced the 4-rank one, and an
    out-of-place one overwrote the in-place one without a word.  Names now
    carry the ranks (and the mode when only one), older colc files are
    removed only where the runtime would match them to the same calls, and
    what else in the folder gets in the way is named."""
    out = tmp_path / "algos"

    def write(ranks: int, *flags: str) -> list[str]:
        topo = tmp_path / f"ring{ranks}.yaml"
        topo.write_text(f"family: ring\nranks: {ranks}\nbandwidth: 10\nbidirectional: true\n")
        assert main([str(topo), "--collective", "allgather", "-o", f"{out}/", *flags]) == 0
        return sorted(os.listdir(out))

    four = write(4)
    assert four and all(f.startswith("colc-allgather-4ranks-0") for f in four)
    six = [f for f in write(6) if f not in four]
    assert six and all(f.startswith("colc-allgather-6ranks-0") for f in six)
    assert set(four) <= set(os.listdir(out))
    capsys.readouterr()
    both = sorted(os.listdir(out))
    inplace = [f for f in write(4, "--inplace") if f not in both]
    assert all(f.startswith("colc-allgather-4ranks-inplace-") for f in inplace)
    assert not set(four) & set(os.listdir(out))  # they matched the same in-place calls
    assert f"removed {len(four)} older colc files for the same calls" in capsys.readouterr().err
    write(4, "--outofplace")
    assert set(inplace) <= set(os.listdir(out))  # in-place calls keep their files
    assert main(["verify", "-q", str(out)]) == 0
    capsys.readouterr()
    # a file of the user's own for the same calls, and one the runtime cannot parse
    (out / "allgather.xml").write_bytes((out / six[0]).read_bytes())
    (out / "notes.txt").write_text("which file is which\n")
    write(6)
    err = capsys.readouterr().err
    assert f"warning: {out}/allgather.xml: window " in err and "6 ranks" in err
    assert f"warning: {out}/notes.txt: no MSCCL <algo> tag" in err
    assert (out / "allgather.xml").exists() and (out / "notes.txt").exists()


def test_the_api_writes_a_portfolio_folder_as_the_cli_does(tmp_path, capsys) -> None:
    """docs/api.md said colc.portfolio is ``colc TOPO -o DIR/`` but the API
    could not write the folder; colc.write_portfolio writes the same files,
    byte for byte, by the same rules."""
    import colc

    topo = os.path.join(EXAMPLES, "ring-4.yaml")
    assert main([topo, "--collective", "allgather", "-o", f"{tmp_path / 'cli'}/"]) == 0
    written = colc.write_portfolio(colc.portfolio(topo, collective="allgather"),
                                   tmp_path / "api")
    cli = sorted(os.listdir(tmp_path / "cli"))
    assert list(written.names) == cli
    for name in cli:
        assert (tmp_path / "api" / name).read_bytes() == (tmp_path / "cli" / name).read_bytes()
    (tmp_path / "api" / "notes.txt").write_text("x")
    again = colc.write_portfolio(colc.portfolio(topo, collective="allgather"), tmp_path / "api")
    assert again.removed == () and again.conflicts[0].startswith("notes.txt: no MSCCL <algo>")
    with pytest.raises(colc.errors.ColcError, match="expected what colc.portfolio returns"):
        colc.write_portfolio("x", tmp_path)
    for folder in ("", b"/tmp"):  # "" wrote into / (review)
        with pytest.raises(colc.errors.ColcError, match="folder must be a non-empty path"):
            colc.write_portfolio(colc.portfolio(topo, collective="allgather"), folder)


def test_api_results_print_as_a_summary_not_the_files() -> None:
    """repr of a compiled file or a portfolio held the whole XML text (0.7
    and 1.2 MB for ring-4), flooding a notebook cell."""
    import colc

    topo = os.path.join(EXAMPLES, "ring-4.yaml")
    c = colc.compile(topo, collective="allgather")
    assert repr(c) == (f"Compiled({c.topology.name!r}, 4 ranks, allgather, {c.algorithm}, "
                       f"{c.program.max_threadblocks} threadblocks per GPU)")
    p = colc.portfolio(topo, collective="allgather")
    lines = repr(p).splitlines()
    assert len(lines) == len(p.windows) + 2 and len(repr(p)) < 100 * len(lines)
    for w, line in zip(p.windows, lines[1:]):
        assert w.span() in line and w.variant.label in line
        assert f"{w.program.max_threadblocks} threadblocks per GPU" in line


def test_verify_warns_about_unselectable_files(tmp_path, capsys) -> None:
    out = tmp_path / "x.xml"
    topo = os.path.join(EXAMPLES, "torus-3x5.yaml")
    assert main([topo, "--collective", "allreduce", "--algorithm", "ring", "-o", str(out)]) == 0
    capsys.readouterr()
    assert main(["verify", str(out)]) == 0
    text = capsys.readouterr().out
    assert "never selects it" in text and "selected by the runtime at fp32: no" in text


def test_simulate_cli_and_its_errors(tmp_path, capsys) -> None:
    out = tmp_path / "x.xml"
    topo = os.path.join(EXAMPLES, "ring-4.yaml")
    assert main([topo, "--algorithm", "ring", "--chunks", "1", "-o", str(out)]) == 0  # one ring
    capsys.readouterr()
    assert main(["simulate", str(out), "--topo", topo, "--sizes", "1K,1M"]) == 0
    text = capsys.readouterr().out
    assert "1K" in text and "1M" in text and "algbw" in text
    assert main(["simulate", str(out), "--topo", topo, "--sizes", "1Q"]) == 1
    assert "not a size" in capsys.readouterr().err
    other = os.path.join(EXAMPLES, "torus-3x5.yaml")
    assert main(["simulate", str(out), "--topo", other]) == 1
    assert "ranks" in capsys.readouterr().err
    assert main(["simulate", str(out), "--topo", topo, "--dtype", "int3"]) == 1
    assert main([topo, "--min-bytes", "1Z", "-o", str(out)]) == 1
    capsys.readouterr()
    # errors name the file, and the option that chose the machine
    ll128 = tmp_path / "ll128.xml"
    assert main([topo, "--algorithm", "ring", "--protocol", "LL128", "-o", str(ll128)]) == 0
    capsys.readouterr()
    assert main(["simulate", str(ll128), "--topo", topo, "--machine", "mi250"]) == 1
    assert capsys.readouterr().err.strip() == (f"{ll128}: error: an LL128 file; --machine "
                                               "mi250 has no LL128")
    hang = tmp_path / "hang.xml"  # rank 0's threadblock waits on its own step
    text = out.read_text()
    first = text.index('depid="-1"', text.index('<gpu id="0"'))
    hang.write_text(text[:first] + 'depid="0"' + text[first + len('depid="-1"'):])
    assert main(["simulate", str(hang), "--topo", topo]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"{hang}: error: the program hangs in simulation: 4 threadblocks "
                          "never finish"), err


def test_parallel_and_serial_runs_give_identical_bytes():
    """Issue 11: lowering and simulation run on several processes; the file (and
    the portfolio's files) must not depend on the number of jobs."""
    import dataclasses

    from colc.compiler.parallel import prefetch, simulate_pairs
    from colc.compiler.pipeline import CompileOptions, Compiler, Variant, compile_topology
    from colc.compiler.portfolio import build_portfolio
    from colc.frontends.families import torus
    from colc.ir.core import Collective, Protocol

    topo = torus([3, 3], 10)
    opts = CompileOptions(collective=Collective.ALLGATHER, protocol=Protocol.LL, jobs=1)
    serial = compile_topology(topo, opts)
    parallel = compile_topology(topo, dataclasses.replace(opts, jobs=2))
    assert serial.text == parallel.text and serial.variant == parallel.variant
    sizes = (1 << 12, 1 << 20, 1 << 26, 1 << 30)  # two large sizes: simulate_pairs
    one = build_portfolio(topo, opts, sizes=sizes)
    two = build_portfolio(topo, dataclasses.replace(opts, jobs=2), sizes=sizes)
    assert [(w.variant, w.text) for w in one.windows] == [(w.variant, w.text) for w in two.windows]
    assert one.table == two.table
    # the workers really bring results back into the compiler's caches
    c = Compiler(topo, dataclasses.replace(opts, jobs=2))
    vs = [Variant("trees", 16, Protocol.LL), Variant("ring", None, Protocol.LL)]
    for v in vs:
        c.estimate(v)
    assert prefetch(c, [(v, (1 << 20,)) for v in vs], 2) == 2
    assert all((v, 1 << 20) in c._sims for v in vs)
    # lowered variants simulated at large sizes on forked processes, as here
    pairs = [(vs[0], 1 << 26), (vs[1], 1 << 30)]
    assert simulate_pairs(c, pairs, 2) == 2
    fresh = Compiler(topo, opts)
    assert [c._sims[p] for p in pairs] == [fresh.simulate(*p) for p in pairs]


def test_one_variant_simulates_its_sizes_at_once_and_verifies_modes_at_once():
    """Issue 11: one variant (a forced algorithm) is lowered here and simulated
    at its sizes on forked processes; a large file's aliasing modes are
    interpreted at once.  Same figures, bytes and findings as one process."""
    import dataclasses

    from colc.backends.msccl_verify import verify_program
    from colc.compiler.parallel import prefetch, simulate_pairs
    from colc.compiler.pipeline import CompileOptions, Compiler, Variant, compile_topology
    from colc.frontends.families import torus
    from colc.ir.core import Collective, Protocol

    topo = torus([4, 4], 10)
    opts = CompileOptions(algorithm="dimrings", chunks=2, collective=Collective.ALLGATHER,
                          jobs=1)
    serial = compile_topology(topo, opts)
    parallel = compile_topology(topo, dataclasses.replace(opts, jobs=2))
    assert serial.text == parallel.text and serial.predicted == parallel.predicted
    c = Compiler(topo, dataclasses.replace(opts, jobs=2))
    v = Variant("dimrings", 2, Protocol.SIMPLE)
    c.estimate(v)
    assert prefetch(c, [(v, (1 << 20, 1 << 24, 1 << 28))], 2) == 1
    assert all((v, s) in c._sims for s in (1 << 20, 1 << 24, 1 << 28))
    # a file wrong in both modes: the same findings, in the same order
    ranks = list(serial.program.ranks)
    tb0 = ranks[0].threadblocks[0]
    ranks[0] = dataclasses.replace(ranks[0], threadblocks=(
        dataclasses.replace(tb0, steps=tb0.steps[1:]), *ranks[0].threadblocks[1:]))
    broken = dataclasses.replace(serial.program, ranks=tuple(ranks))
    one, two = verify_program(broken, jobs=1), verify_program(broken, jobs=2)
    assert one and one == two


def test_dask_executor_gives_identical_bytes():
    """Issue 11: with --executor dask the candidates are lowered and simulated on
    a dask.distributed cluster (here a local one); files are byte-identical."""
    pytest.importorskip("dask.distributed")
    import dataclasses

    from colc.compiler.parallel import dask_client, jobs_for, prefetch
    from colc.compiler.pipeline import CompileOptions, Compiler, Variant, compile_topology
    from colc.compiler.portfolio import build_portfolio
    from colc.frontends.families import torus
    from colc.ir.core import Collective, Protocol

    topo = torus([3, 3], 10)
    opts = CompileOptions(collective=Collective.ALLGATHER, protocol=Protocol.LL, jobs=1)
    dask = dataclasses.replace(opts, executor="dask")
    assert jobs_for(dask) == sum(dask_client().nthreads().values()) >= 1
    assert compile_topology(topo, opts).text == compile_topology(topo, dask).text
    sizes = (1 << 12, 1 << 20)
    one = build_portfolio(topo, opts, sizes=sizes)
    two = build_portfolio(topo, dask, sizes=sizes)
    assert [(w.variant, w.text) for w in one.windows] == [(w.variant, w.text) for w in two.windows]
    c = Compiler(topo, dask)
    vs = [Variant("trees", 16, Protocol.LL), Variant("ring", None, Protocol.LL)]
    for v in vs:
        c.estimate(v)
    assert prefetch(c, [(v, (1 << 20,)) for v in vs], 1) == 2  # the cluster ran both
    assert all((v, 1 << 20) in c._sims for v in vs)


def test_dask_executor_errors_are_clean(tmp_path, capsys):
    from colc.cli import main

    topo = os.path.join(EXAMPLES, "ring-4.yaml")
    out = tmp_path / "x.xml"
    assert main([topo, "-o", str(out), "--scheduler", "tcp://127.0.0.1:1"]) == 1
    assert "--scheduler goes with --executor dask" in capsys.readouterr().err
    if importlib.util.find_spec("distributed") is None:
        assert main([topo, "-o", str(out), "--executor", "dask"]) == 1
        assert "pip install 'colc[dask]'" in capsys.readouterr().err
        return
    assert main([topo, "-o", str(out), "--executor", "dask",
                 "--scheduler", "tcp://127.0.0.1:1"]) == 1
    assert "cannot reach the dask scheduler at tcp://127.0.0.1:1" in capsys.readouterr().err
    for bad in ("garbage", "tcp://localhost:notaport"):  # malformed: the user's error
        assert main([topo, "-o", str(out), "--executor", "dask", "--scheduler", bad]) == 1
        assert f"colc: error: bad dask scheduler address '{bad}'" in capsys.readouterr().err
    assert not out.exists()


def test_lowering_gives_up_at_once_on_a_threadblock_limit(monkeypatch) -> None:
    """More phases only add threadblocks: a threadblock count over the limit ends the
    search after the first phase count (spread, packed and merged channels at most)."""
    from colc.compiler.bfb.algorithm import bfb_schedule_for
    from colc.compiler.lowering import lower_to_program as ltp
    from colc.errors import InfeasibleError

    sched = bfb_schedule_for(torus([4, 4], 10), Collective.ALLGATHER, None)
    calls = []
    real = ltp._lower_once
    monkeypatch.setattr(ltp, "_lower_once", lambda *a, **k: calls.append(1) or real(*a, **k))
    with pytest.raises(InfeasibleError, match="threadblocks > 2"):
        lower_to_program(sched, LoweringOptions(max_threadblocks=2))
    assert 1 <= len(calls) <= 3
    calls.clear()
    lower_to_program(sched, LoweringOptions())  # within the limits: one attempt
    assert len(calls) == 1


def test_lowering_refuses_a_crowded_connection_before_lowering(monkeypatch) -> None:
    """65 independent transfers of one pair on one channel hint need a threadblock of
    65 steps under every phase split: refused without a lowering attempt."""
    from colc.compiler.lowering import lower_to_program as ltp
    from colc.compiler.lowering.infer_dependencies import infer_dependencies
    from colc.errors import InfeasibleError
    from colc.ir.chunks import Op, OpKind, Schedule, Slot
    from colc.ir.core import Buffer

    def sched_of(n: int) -> Schedule:
        ops = []
        for src in (0, 1):
            for k in range(n):
                idx = src * n + k
                ops.append(Op(len(ops), OpKind.COPY, Slot(src, Buffer.INPUT, k),
                              Slot(1 - src, Buffer.OUTPUT, idx), 1, None, (), 0))
        for src in (0, 1):
            ops.append(Op(len(ops), OpKind.COPY, Slot(src, Buffer.INPUT, 0),
                          Slot(src, Buffer.OUTPUT, src * n), n, None, (), 0))
        return infer_dependencies(Schedule(Collective.ALLGATHER, 2, 2 * n, 0, tuple(ops),
                                           "test", False, True))

    calls = []
    real = ltp._lower_once
    monkeypatch.setattr(ltp, "_lower_once", lambda *a, **k: calls.append(1) or real(*a, **k))
    assert check_schedule(sched_of(65)) == []
    with pytest.raises(InfeasibleError, match="65 transfers to rank 1"):
        lower_to_program(sched_of(65), LoweringOptions())
    assert calls == []
    program = lower_to_program(sched_of(64), LoweringOptions(pair_connections=False))
    assert max(len(tb.steps) for rp in program.ranks for tb in rp.threadblocks) <= 64


def test_a_refused_variant_is_lowered_once(monkeypatch) -> None:
    """A portfolio asks for a variant at every size; one that no lowering fits is
    tried once and its refusal repeated."""
    from colc.compiler.pipeline import Compiler, Variant
    from colc.errors import InfeasibleError

    compiler = Compiler(torus([4, 4], 10), CompileOptions(collective=Collective.ALLGATHER,
                                                          max_threadblocks=1))
    calls = []
    real = compiler._lower
    monkeypatch.setattr(compiler, "_lower", lambda *a: calls.append(1) or real(*a))
    variant = Variant("bfb")
    for size in (1 << 20, 1 << 30):
        with pytest.raises(InfeasibleError, match="threadblocks"):
            compiler.simulate(variant, size)
    assert calls == [1]


def test_workers_bring_back_refusals(monkeypatch) -> None:
    """A variant no lowering fits is refused in the worker that tried it; the
    parent keeps the refusal instead of lowering the variant again."""
    from colc.compiler.parallel import prefetch
    from colc.compiler.pipeline import Compiler, Variant
    from colc.errors import InfeasibleError

    compiler = Compiler(torus([4, 4], 10), CompileOptions(collective=Collective.ALLGATHER,
                                                          max_threadblocks=1))
    variants = [Variant("bfb"), Variant("bfb", 4)]
    for v in variants:
        compiler.estimate(v)
    prefetch(compiler, [(v, (1 << 20,)) for v in variants], 2)
    assert set(compiler._refused) == set(variants)
    monkeypatch.setattr(compiler, "_lower", lambda *a: pytest.fail("lowered again"))
    with pytest.raises(InfeasibleError, match="threadblocks"):
        compiler.program(variants[0])


def test_large_direct_fabrics_try_one_chunking_lowered_decoupled_first():
    """Issue 11: above ONE_CHUNKING_RANKS bfb and dimrings try one chunk per
    shard (each further chunking is a whole job more, and the simulator and the
    verifier run a call per chunk); their fused lowerings, which hang there at
    one call per chunk, are tried after the decoupled one.  Below, their
    Simple and LL128 files are lowered decoupled first too (fused relays ran
    at up to half speed) and their LL files fused first."""
    from colc.compiler.choose_variants import ONE_CHUNKING_RANKS
    from colc.compiler.pipeline import (
        DECOUPLED,
        FUSED,
        CompileOptions,
        Compiler,
        Variant,
        variants,
    )
    from colc.frontends.families import torus
    from colc.ir.core import Collective, Protocol

    small, large = torus([16, 16], 25), torus([17, 17], 25)
    assert small.num_ranks <= ONE_CHUNKING_RANKS < large.num_ranks
    for alg in ("bfb", "dimrings"):
        opts = CompileOptions(algorithm=alg, collective=Collective.ALLGATHER)
        assert len(variants(Compiler(small, opts))) > 1
        assert [v.chunks for v in variants(Compiler(large, opts))] == [1]
        for proto in (Protocol.SIMPLE, Protocol.LL128, Protocol.LL):
            v = Variant(alg, 1, proto)
            assert Compiler(small, opts)._strategies(v) == (
                FUSED if proto is Protocol.LL else DECOUPLED)
            assert Compiler(large, opts)._strategies(v) == DECOUPLED


def test_coarse_portfolio_gives_the_midpoint_to_a_grid_form_ranked_above_it(monkeypatch) -> None:
    """Past ``COARSE_RANKS`` a window ends at twice its last evaluated size,
    but where the next window's variant was not ranked there (rings2d's grid
    form, ranked from 1 GiB past ``GRID_EVERY_SIZE_RANKS``) both are
    simulated at the midpoint and the faster serves it (DGX A100 x128 at 128
    MiB: the grid allgather 101.3 GB/s against rails LL128's 87.6).  Here
    the thresholds are lowered so that DGX A100 x2 takes that path."""
    from colc.compiler import choose_variants, portfolio
    from colc.compiler.pipeline import Compiler, Variant

    monkeypatch.setattr(portfolio, "COARSE_RANKS", 8)
    monkeypatch.setattr(choose_variants, "GRID_EVERY_SIZE_RANKS", 8)
    comp = Compiler(dgx_a100(2), CompileOptions(collective=Collective.ALLGATHER, jobs=1))
    mid, lo, hi = 128 << 20, 64 << 20, 1 << 30
    grid = Variant("rings2d", 16, Protocol.SIMPLE)
    for lower in (Variant("rails", 8, Protocol.LL128), Variant("rails", 1, Protocol.LL128)):
        runs = portfolio._split_midpoints(comp, [(lower, [lo]), (grid, [hi])], {}, set())
        if comp.simulate(grid, mid).algbw > comp.simulate(lower, mid).algbw:
            assert runs == [(lower, [lo], lo), (grid, [mid, hi], 0)]
        else:
            assert runs == [(lower, [lo, mid], mid), (grid, [hi], 0)]
    # both outcomes occur with these two (rails c1 LL128 is slow at 128 MiB)
    assert len({comp.simulate(v, mid).algbw > comp.simulate(grid, mid).algbw
                for v in (Variant("rails", 8, Protocol.LL128), Variant("rails", 1, Protocol.LL128))}) == 2
    # a next window ranked at the smaller size already: no simulation, the cut at 2 s
    first, rails = Variant("ring", 1, Protocol.SIMPLE), Variant("rails", 4, Protocol.SIMPLE)
    assert portfolio._split_midpoints(comp, [(first, [lo]), (rails, [hi])], {}, set()) == [
        (first, [lo], mid), (rails, [hi], 0)]
    assert (rails, mid) not in comp._sims and (first, mid) not in comp._sims


def test_prefetch_starts_the_task_whose_hang_check_simulates_the_largest_size() -> None:
    """A prefetch task's cost is its largest simulation, the lowering's hang
    check included where it simulates (``Compiler.hang_size``: the least
    ranked size with one call per chunk, in a compiler that does not prove):
    rails LL128 simulates 1 GiB there although its own sizes stop at 4 MiB,
    so it goes before rails LL, whose range has no such size; a proving
    compiler's hang check is the token game alone (DGX A100 x128 allreduce:
    358 s of one core for a 1 GiB simulation the ranking did not use), and
    it simulates nothing in lowering; equal costs keep their order."""
    from colc.compiler.parallel import _longest_first
    from colc.compiler.pipeline import Compiler, Variant

    sizes = (1024, 256 << 10, 1 << 30)
    ll, ll128 = Variant("rails", 1, Protocol.LL), Variant("rails", 1, Protocol.LL128)
    tasks = [(ll, (1024,)), (ll128, (1024,))]
    for prove in (False, True):
        comp = Compiler(dgx_a100(2), CompileOptions(
            algorithm="rails", collective=Collective.ALLGATHER, jobs=1, rank_sizes=sizes,
            protocol_ranges=((Protocol.LL, 0, 256 << 10), (Protocol.LL128, 0, 1 << 30)),
            prove=prove))
        nchunks = comp.variant_schedule(ll).nchunks
        assert nchunks == 16
        # LL's calls (32 KiB) are larger than a chunk up to 256 KiB: no hang-check size
        assert comp.hang_size(ll, nchunks) is None
        assert comp.hang_size(ll128, nchunks) == 1 << 30
        assert _longest_first(comp, tasks) == (tasks if prove else tasks[::-1])
        comp.program(ll128)
        assert ((ll128, 1 << 30) in comp._sims) is not prove
    assert _longest_first(comp, [(ll, (1024,)), (ll, (4096,))]) == [(ll, (4096,)), (ll, (1024,))]
    # a variant whose schedule is not built yet counts by its own sizes only
    other = Variant("rails", 2, Protocol.LL128)
    assert _longest_first(comp, [(ll, (4096,)), (other, (1024,))])[0][0] == ll


def test_verify_all_answers_in_the_texts_order_whatever_their_lengths() -> None:
    """``Compiler.verify_all`` verifies the longest texts first on forked
    workers (which get indices, not texts) and answers in the order given."""
    from colc.compiler.pipeline import Compiler

    root = Path(__file__).resolve().parent.parent / "golden" / "msccl"
    short = (root / "ring4-allreduce.xml").read_text()
    long = (root / "torus-allgather-bfb.xml").read_text()
    bad = short.replace('ngpus="4"', 'ngpus="5"', 1)
    assert bad != short and len(long) > len(short)
    comp = Compiler(ring(4, 25), CompileOptions(jobs=2))
    assert comp.verify_all([bad, long, short, bad]) == [False, True, True, False]
    assert comp.verify_all([short, long]) == [True, True]


def test_prefetch_simulates_unselectable_sizes_where_nothing_is_selectable(monkeypatch) -> None:
    """Where no candidate is selectable at a size (an allreduce on three
    ranks: every file's chunks per loop are a multiple of 3, and no
    power-of-two element count divides),
    ``_rank`` simulates them all anyway, so the prefetch runs those on its
    workers too: the ranking in this process simulates nothing itself."""
    from colc.compiler import pipeline

    calls = []
    real = pipeline.simulate

    def counted(program, *args, **kwargs):
        calls.append(os.getpid())
        return real(program, *args, **kwargs)

    monkeypatch.setattr(pipeline, "simulate", counted)
    port = build_portfolio(ring(3, 25), CompileOptions(collective=Collective.ALLREDUCE, jobs=2),
                           sizes=(1 << 10, 16 << 10, 256 << 10, 4 << 20))
    assert port.windows
    assert not any(w.program.nchunks & (w.program.nchunks - 1) == 0 for w in port.windows)
    assert os.getpid() not in calls


def test_portfolio_selects_a_file_at_every_size_nccl_tests_runs_on_six_ranks() -> None:
    """nccl-tests moves per-rank counts of whole 16 bytes (``nccl_tests_bytes``):
    asked for 1 MiB of allgather on 6 ranks it moves 1048512 bytes, 43688
    elements per rank, a multiple of 8 but not of 16.  The portfolio ranks the
    files the runtime selects at those sizes, so every window's file is
    selected at its sizes (before, selection was judged on 1 MiB itself, no
    multiple of 6 elements: 'no file is selected' was noted at every size and
    windows took files the runtime never picks there)."""
    from colc.compiler.pipeline import selectable_sizes
    from colc.ir.simulate import nccl_tests_bytes

    sizes = (1 << 10, 64 << 10, 1 << 20, 16 << 20)
    port = build_portfolio(ring(6, 25), CompileOptions(collective=Collective.ALLGATHER, jobs=1),
                           sizes=sizes)
    assert not any("no file is selected" in n for n in port.notes)
    for size in sizes:
        moved = nccl_tests_bytes(Collective.ALLGATHER, 6, size, 4)
        assert moved < size
        (w,) = [w for w in port.windows if w.lo <= size and (w.hi == 0 or size <= w.hi)]
        assert size in selectable_sizes(w.program, 4, lo=size, hi=size)


def test_prefetch_expects_the_midpoint_below_a_form_ranked_from_a_large_size(monkeypatch) -> None:
    """Past ``COARSE_RANKS`` ranks ``_coarse_rivals`` simulates, at the
    midpoint below a form ranked from a large size only, the winner of the
    evaluated size below; the prefetch runs the variant simulated first
    there beside its other large-size simulations (thresholds lowered so
    DGX A100 x2 takes that path; nothing is simulated here)."""
    from colc.compiler import choose_variants, portfolio
    from colc.compiler.pipeline import Compiler, Variant

    comp = Compiler(dgx_a100(2), CompileOptions(collective=Collective.ALLGATHER, jobs=1))
    rails, grid = Variant("rails", 8, Protocol.LL128), Variant("rings2d", 16, Protocol.SIMPLE)
    sizes, lo, mid, hi = (64 << 20, 1 << 30), 64 << 20, 128 << 20, 1 << 30
    assert portfolio._midpoint_pairs(comp, [rails, grid], sizes, {lo: rails}) == []  # 16 ranks
    monkeypatch.setattr(portfolio, "COARSE_RANKS", 8)
    assert portfolio._midpoint_pairs(comp, [rails, grid], sizes, {lo: rails}) == []  # no least
    monkeypatch.setattr(choose_variants, "GRID_EVERY_SIZE_RANKS", 8)
    assert portfolio._least(comp, grid) == hi
    assert portfolio._midpoint_pairs(comp, [rails, grid, grid], sizes,
                                     {lo: rails, hi: grid}) == [(rails, mid)]
    assert portfolio._midpoint_pairs(comp, [rails, grid], sizes, {hi: grid}) == []
    assert portfolio._midpoint_pairs(comp, [rails, grid], (lo, 256 << 20, hi), {lo: rails}) == []


def test_portfolio_sizes_in_any_order_give_the_same_windows() -> None:
    """The API passes sizes as given: listed large first, the small-message
    file was given the large sizes' window.  They are sorted first."""
    topo = two_boxes(2)
    opts = CompileOptions(collective=Collective.ALLGATHER, jobs=1)
    up = build_portfolio(topo, opts, sizes=(1 << 10, 1 << 20))
    down = build_portfolio(topo, opts, sizes=(1 << 20, 1 << 10, 1 << 20))
    assert [(w.lo, w.hi, w.variant) for w in up.windows] == \
        [(w.lo, w.hi, w.variant) for w in down.windows]


def test_local_threadblocks_are_reserved_on_their_own_rank_only() -> None:
    """Rank 0's two local threadblocks leave the budget of rank 1, which has
    no local step, to its connections; when the reserve leaves rank 0's
    connections too few lanes, they take the whole budget, on rank 0 only."""
    from colc.compiler.lowering.balance_lanes import _fit_with_local

    pairs = [(0, 1), (1, 0), (1, 2), (2, 1)]
    lanes = {p: 3 for p in pairs}
    rate = {p: 10.0 for p in pairs}
    nops = {p: 1 for p in pairs}
    _fit_with_local(lanes, rate, nops, STEP_BUDGET, 8, {0: 2}, 3, paired=False)
    used = {r: sum(v for p, v in lanes.items() if r in p) for r in range(3)}
    assert used[0] <= 6 and used[1] == 8  # not 6: rank 0's reserve is not rank 1's
    # rank 0's reserve of 5 leaves its connections 3 of 8, fewer than their
    # least (each pair's 80 transfers need 2 lanes of 40 steps): they take
    # the whole budget instead, and are cut to it only
    tight = {p: 80 for p in pairs}
    lanes = {p: 3 for p in pairs}
    _fit_with_local(lanes, rate, tight, STEP_BUDGET, 8, {0: 5}, 3, paired=False)
    used = {r: sum(v for p, v in lanes.items() if r in p) for r in range(3)}
    assert 3 < used[0] <= 8 and used[1] == 8
    # ... on rank 0 only: rank 2, on a connection of its own to rank 3, keeps
    # its reserve of 2 (before, every rank gave its connections the whole
    # budget once one rank's could not fit)
    two = pairs + [(2, 3), (3, 2)]
    lanes = {p: 4 for p in two}
    _fit_with_local(lanes, rate | {(2, 3): 10.0, (3, 2): 10.0}, tight | {(2, 3): 1, (3, 2): 1},
                    STEP_BUDGET, 8, {0: 5, 2: 2}, 4, paired=False)
    used = {r: sum(v for p, v in lanes.items() if r in p) for r in range(4)}
    assert 3 < used[0] <= 8 and used[1] <= 8 and used[2] <= 6 and used[3] <= 8
