"""oneCCL XML backend: lowering, printing, schema, reader and verifier."""

from __future__ import annotations

import dataclasses
import glob
import os

import pytest

from colc.backends.msccl_xml import emit_msccl_xml
from colc.backends.oneccl_reader import load_oneccl_xml, read_oneccl_xml
from colc.backends.oneccl_verify import verify_oneccl_text
from colc.backends.oneccl_xml import (
    emit_oneccl_xml,
    lower_program,
    print_oneccl_xml,
    validate_oneccl_xml,
)
from colc.errors import InternalError, SpecError
from colc.ir.core import Buffer, Collective, Protocol
from colc.ir.interpret_oneccl import (
    ThreadDiagnostic,
    check_thread_schedule,
    interpret_thread_schedule,
    verify_thread_schedule,
)
from colc.ir.oneccl import Instr, InstrKind, RankThreads, Region, Thread, ThreadSchedule
from colc.ir.program import Loc, Program, RankProgram, Step, StepKind, Threadblock
from oneccl_cases import ring_allgather, ring_allgather_split, ring_allreduce, ring_reducescatter

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN = os.path.join(HERE, "data", "oneccl")
MSCCL_EXAMPLES = "/work/shared/reference/msccl-examples"


def _verify(program: Program) -> list[str]:
    text = emit_oneccl_xml(program)
    return [str(d) for d in verify_thread_schedule(read_oneccl_xml(text, program.name))]


# --------------------------------------------------------------------------- correct schedules


@pytest.mark.parametrize("n", [2, 3, 4, 5])
@pytest.mark.parametrize("build", [ring_allreduce, ring_allgather, ring_reducescatter,
                                   ring_allgather_split])
def test_ring_schedules_verify(build, n: int) -> None:
    assert _verify(build(n)) == []


def test_all_three_collectives_under_both_aliasings() -> None:
    # allgather and reducescatter rings declare in-place and out-of-place.
    for prog in (ring_allgather(4), ring_reducescatter(4)):
        sched = lower_program(prog)
        for inplace in (True, False):
            done, diags = interpret_thread_schedule(sched, inplace=inplace, eager_depth=2)
            assert done and diags == []


def test_emit_is_deterministic_and_round_trips() -> None:
    prog = ring_allreduce(4)
    text = emit_oneccl_xml(prog)
    assert text == emit_oneccl_xml(prog)
    assert text.endswith("</oneccl_schedule>\n")
    assert "\t" not in text
    back = read_oneccl_xml(text, "x.oneccl.xml")
    assert back == lower_program(prog)
    assert print_oneccl_xml(back) == text


def test_lowering_of_fused_steps() -> None:
    sched = lower_program(ring_reducescatter(3))
    instrs = sched.ranks[0].threads[0].instrs
    kinds = [i.kind for i in instrs]
    # s; rrs = recv tmp, reduce, send tmp; rrc (src != dst) = recv tmp, reduce, copy
    assert kinds == [InstrKind.SEND, InstrKind.RECV, InstrKind.REDUCE, InstrKind.SEND,
                     InstrKind.RECV, InstrKind.REDUCE, InstrKind.COPY]
    assert instrs[3].src is Region.TMP and instrs[6].dst is Region.OUTPUT
    assert sched.ranks[0].threads[0].tmp_chunks == 1
    # tags are k * C + channel, per direction
    assert [i.tag for i in instrs if i.kind is InstrKind.SEND] == [0, 1]
    assert [i.tag for i in instrs if i.kind is InstrKind.RECV] == [0, 1]


def test_dependency_becomes_sync_on_last_lowered_instruction() -> None:
    sched = lower_program(ring_allgather_split(4))
    t0 = sched.ranks[0].threads[0].instrs
    syncs = [i for i in t0 if i.kind is InstrKind.SYNC]
    assert [(s.wait_thread, s.wait_instr) for s in syncs] == [(1, 0), (1, 1)]


def test_eager_depth_follows_protocol() -> None:
    assert lower_program(ring_allgather(3)).eager_depth == 2
    assert lower_program(ring_allgather(3, Protocol.LL)).eager_depth == 8


def test_lowering_rejects_shared_connection() -> None:
    prog = ring_allgather(3)
    rp = prog.ranks[0]
    tb = rp.threadblocks[0]
    bad = dataclasses.replace(rp, threadblocks=(tb, dataclasses.replace(tb, id=1)))
    with pytest.raises(InternalError, match="two threadblocks"):
        lower_program(dataclasses.replace(prog, ranks=(bad, *prog.ranks[1:])))


# --------------------------------------------------------------------------- golden files


GOLDEN_PROGRAMS = {
    "ring3-allreduce": lambda: ring_allreduce(3),
    "ring3-allgather": lambda: ring_allgather(3),
    "ring3-reducescatter": lambda: ring_reducescatter(3),
    "ring3-allgather-split": lambda: ring_allgather_split(3),
}


@pytest.mark.parametrize("name", sorted(GOLDEN_PROGRAMS))
@pytest.mark.parametrize("backend", ["msccl", "oneccl"])
def test_golden_both_backends(name: str, backend: str, update_golden: bool) -> None:
    prog = GOLDEN_PROGRAMS[name]()
    text = emit_oneccl_xml(prog) if backend == "oneccl" else emit_msccl_xml(prog)
    path = os.path.join(GOLDEN, f"{name}.{backend}.xml")
    if update_golden:
        os.makedirs(GOLDEN, exist_ok=True)
        with open(path, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
        return
    with open(path, encoding="utf-8") as fh:
        assert fh.read() == text, f"{path} differs: review and rerun with --update-golden"


def test_golden_oneccl_files_verify() -> None:
    files = sorted(glob.glob(os.path.join(GOLDEN, "*.oneccl.xml")))
    assert files
    for path in files:
        assert verify_thread_schedule(load_oneccl_xml(path)) == [], path


def test_colc_verify_says_what_a_clean_oneccl_file_holds(capsys) -> None:
    from colc.cli import main

    path = sorted(glob.glob(os.path.join(GOLDEN, "*.oneccl.xml")))[0]
    sched = load_oneccl_xml(path)
    assert main(["verify", path]) == 0
    out = capsys.readouterr().out.strip()
    assert out.startswith(f"{path}: OK (oneCCL {sched.collective.value}, {sched.nranks} "
                          f"ranks, "), out
    assert f"{sched.nchunks} chunks per loop; executed at eager depth {sched.eager_depth})" in out


@pytest.mark.parametrize("edit", ["comment", "bom", "pi"])
def test_format_is_told_past_the_declaration_comments_and_a_bom(edit, tmp_path, capsys) -> None:
    """A comment or processing instruction after the XML declaration, or a
    byte-order mark, does not make a oneCCL file an MSCCL one."""
    from colc.cli import main

    src = sorted(glob.glob(os.path.join(GOLDEN, "*.oneccl.xml")))[0]
    decl, rest = open(src, encoding="utf-8").read().split("\n", 1)
    assert decl.startswith("<?xml")
    text = {"comment": f"{decl}\n<!-- edited by hand -->\n{rest}",
            "bom": f"\ufeff{decl}\n{rest}",
            "pi": f"{decl}\n<?editor mark?>\n{rest}"}[edit]
    path = tmp_path / "edited.xml"  # not named .oneccl.xml: told from the content
    path.write_text(text, encoding="utf-8")
    assert main(["verify", str(path)]) == 0
    assert ": OK (oneCCL " in capsys.readouterr().out


def test_a_oneccl_name_tells_the_format_when_the_content_cannot(tmp_path, capsys) -> None:
    from colc.cli import main

    path = tmp_path / "x.oneccl.xml"
    path.write_text("<schedule/>\n")
    assert main(["verify", str(path)]) == 1
    assert "oneCCL XML schema" in capsys.readouterr().out
    assert main(["verify", "--backend", "oneccl", str(tmp_path)]) == 1
    assert "--backend oneccl: a folder is verified as an MSCCL_ALGO_DIR" in capsys.readouterr().err


def test_absurd_oneccl_chunk_counts_are_refused_before_the_run() -> None:
    """nchunks 30 M on three ranks took 12.7 GB and more than 200 s."""
    import re as _re

    src = os.path.join(os.path.dirname(__file__), "data", "oneccl",
                       "ring3-allgather-split.oneccl.xml")
    text = open(src, encoding="utf-8").read()
    text = _re.sub(r'nchunks="\d+"', 'nchunks="30000000"', text)
    text = _re.sub(r'input_chunks="\d+"', 'input_chunks="10000000"', text)
    text = _re.sub(r'output_chunks="\d+"', 'output_chunks="30000000"', text)
    report = verify_oneccl_text(text, "big.oneccl.xml")
    assert not report.ok and "buffers of 120000000 chunk slots" in report.errors[0]


# --------------------------------------------------------------------------- verifier findings


def _sched(coll: Collective, n: int, nchunks: int, threads: dict[int, list[list[Instr]]],
           *, inplace: bool = False, depth: int = 2, scratch: int = 0) -> ThreadSchedule:
    from colc.ir.core import buffer_extents
    ext = buffer_extents(coll, nchunks, n)
    ranks = tuple(
        RankThreads(r, ext[Buffer.INPUT], ext[Buffer.OUTPUT], scratch,
                    tuple(Thread(t, 0, 1, tuple(code)) for t, code in enumerate(threads[r])))
        for r in range(n))
    return ThreadSchedule("t", coll, n, nchunks, inplace, not inplace, 0, 0, depth, ranks)


def send(peer: int, tag: int, buf: Region, off: int, cnt: int = 1) -> Instr:
    return Instr(InstrKind.SEND, peer=peer, tag=tag, src=buf, src_off=off, count=cnt)


def recv(peer: int, tag: int, buf: Region, off: int, cnt: int = 1) -> Instr:
    return Instr(InstrKind.RECV, peer=peer, tag=tag, dst=buf, dst_off=off, count=cnt)


def copy(a: Region, ao: int, b: Region, bo: int) -> Instr:
    return Instr(InstrKind.COPY, src=a, src_off=ao, dst=b, dst_off=bo, count=1)


def reduce(a: Region, ao: int, b: Region, bo: int) -> Instr:
    return Instr(InstrKind.REDUCE, src=a, src_off=ao, dst=b, dst_off=bo, count=1)


def sync(t: int, i: int) -> Instr:
    return Instr(InstrKind.SYNC, wait_thread=t, wait_instr=i)


IN, OUT, TMP = Region.INPUT, Region.OUTPUT, Region.TMP


def _pair_allgather(first_recv: bool) -> ThreadSchedule:
    """2-rank allgather; with ``first_recv`` both ranks receive before sending."""
    code = {}
    for r in range(2):
        p = 1 - r
        body = [send(p, 0, OUT, r), recv(p, 0, OUT, p)]
        if first_recv:
            body.reverse()
        code[r] = [[copy(IN, 0, OUT, r), *body]]
    return _sched(Collective.ALLGATHER, 2, 2, code)



@pytest.mark.parametrize("old,new,words", [
    ('nranks="3"', 'nranks="0"',
     "<oneccl_schedule> attribute nranks='0': expected a whole number 1 or more"),
    ('<rank id="1"', '<rank id="1" bogus="2"', "<rank> has no attribute 'bogus'"),
    (' tag="0"', '', "<send> lacks attribute 'tag'"),
    ('dst_buf="output"', 'dst_buf="outp"',
     "attribute dst_buf='outp': expected one of input, output, scratch, tmp"),
])
def test_a_schema_error_names_the_attribute(tmp_path, capsys, old, new, words) -> None:
    """RelaxNG said only "Element rank failed to validate attributes" (and
    on the root's line plus one): the message names the attribute, what the
    schema wants there, and the element's own line."""
    path = os.path.join(HERE, "data", "oneccl", "ring3-allgather-split.oneccl.xml")
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    assert old in text
    from colc.cli import main

    bad = text.replace(old, new, 1)
    line = text[:text.index(old)].count("\n") + 1  # each element on a line of its own
    target = tmp_path / "bad.oneccl.xml"
    target.write_text(bad)
    assert main(["verify", str(target)]) == 1
    err = capsys.readouterr().out.strip()
    assert words in err and err.endswith(f"[line {line}]"), err




def test_token_attributes_with_spaces_read_as_the_schema_compares_them(tmp_path, capsys) -> None:
    """RelaxNG compares an untyped value as a token: buf=" input" passes the
    schema, and the reader took it for an unknown region (an internal
    error); a space-padded version is not blamed for another element's
    mistake."""
    from colc.cli import main

    path = os.path.join(HERE, "data", "oneccl", "ring3-allgather-split.oneccl.xml")
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    spaced = tmp_path / "spaced.oneccl.xml"
    spaced.write_text(text.replace('dst_buf="output"', 'dst_buf=" output "'))
    assert main(["verify", str(spaced)]) == 0
    bogus = tmp_path / "bogus.oneccl.xml"
    bogus.write_text(text.replace('version="1"', 'version=" 1 "', 1).replace(
        '<rank id="1"', '<rank id="1" bogus="2"', 1))
    capsys.readouterr()
    assert main(["verify", str(bogus)]) == 1
    err = capsys.readouterr().out
    assert "<rank> has no attribute 'bogus'" in err and "version" not in err, err


def test_an_empty_window_is_flagged_as_in_msccl_files() -> None:
    """An empty window (max below min) was a warning while a file in neither
    mode was an error, though the runtime selects neither and colc refuses
    to write either: both are errors, in both formats."""
    from colc.backends.verify import verify_text

    path = os.path.join(HERE, "data", "oneccl", "ring3-allgather-split.oneccl.xml")
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    empty = text.replace('min_bytes="0" max_bytes="0"', 'min_bytes="100" max_bytes="10"')
    assert empty != text
    report = verify_oneccl_text(empty, "w.oneccl.xml")
    assert not report.ok and any("max_bytes 10 < min_bytes 100: the runtime never selects" in e
                                 for e in report.errors)
    assert not verify_oneccl_text(text, "ok.oneccl.xml").warnings
    golden = os.path.join(os.path.dirname(HERE), "golden", "msccl", "ring4-allreduce.xml")
    with open(golden, encoding="utf-8") as fh:
        xml = fh.read()
    assert verify_text(xml, "ok.xml").ok
    bad = verify_text(xml.replace('minBytes="0" maxBytes="0"',
                                  'minBytes="100" maxBytes="10"', 1), "w.xml")
    assert not bad.ok and any("maxBytes 10 < minBytes 100: the runtime never selects" in e
                              for e in bad.errors)


def test_windows_past_ten_digits_are_written_and_read() -> None:
    """A window of 16G (or 10**10 bytes) stopped a oneCCL compile with an
    internal error: the schema held byte counts to 10 digits.  They take 18
    (a signed 64-bit count); other integers still 10."""
    path = os.path.join(HERE, "data", "oneccl", "ring3-allgather-split.oneccl.xml")
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    big = text.replace('max_bytes="0"', f'max_bytes="{16 << 30}"')
    assert verify_oneccl_text(big, "big.oneccl.xml").ok
    assert read_oneccl_xml(big, "big.oneccl.xml").max_bytes == 16 << 30
    too_big = text.replace('max_bytes="0"', f'max_bytes="{10 ** 18}"')
    report = verify_oneccl_text(too_big, "huge.oneccl.xml")
    assert not report.ok and "at most 18 digits" in report.errors[0]


def test_verify_and_compile_tell_the_same_selection_warning_in_oneccl_terms() -> None:
    """colc warned at compile that no power-of-two call cuts into a oneCCL
    file's chunks, in MSCCL's words, and colc verify said OK without it."""
    from colc.backends.verify import verify_text
    from colc.ir.simulate import selection_warnings

    prog = ring_allreduce(3)  # 3 chunks: no power-of-two element count
    text = emit_oneccl_xml(prog)
    report = verify_text(text, "r3.oneccl.xml")
    assert report.ok
    assert list(report.warnings) == selection_warnings(prog, "oneccl")
    assert report.warnings[0].startswith("nchunks 3 divides no element count")
    assert "nchunksperloop" not in report.warnings[0]
    assert selection_warnings(prog)[0].startswith("nchunksperloop 3 divides")
    assert not verify_text(emit_oneccl_xml(ring_allreduce(4)), "r4.oneccl.xml").warnings
    # no example size outside a small window (it named 4M for a window of 64 bytes)
    tiny = dataclasses.replace(ring_allreduce(3), min_bytes=8, max_bytes=64)
    assert selection_warnings(tiny)[0].endswith(
        "(it would at sizes of a multiple of 3 elements, and nccl-tests runs none in the window)")


def test_a_oneccl_compile_speaks_of_chunks_and_threads(tmp_path, capsys) -> None:
    from colc.cli import main

    yaml = tmp_path / "r3.yaml"
    yaml.write_text("family: ring\nranks: 3\nbandwidth: 10\n")
    out = tmp_path / "r3.oneccl.xml"
    assert main([str(yaml), "--collective", "allreduce", "-o", str(out)]) == 0
    err = capsys.readouterr().err
    warning = next(line for line in err.splitlines() if "warning" in line)
    assert warning.startswith("colc: warning: nchunks ") and "equal chunks" in warning
    wrote = next(line for line in err.splitlines() if "wrote" in line)
    assert "threads per rank" in wrote and "threadblock" not in wrote
    assert "nchunksperloop" not in err
    assert main(["verify", str(out)]) == 0
    assert warning.split("warning: ")[1] in capsys.readouterr().out
    # the provenance line MSCCL files carry (it was missing from oneCCL's)
    second = out.read_text().splitlines()[1]
    assert second.startswith("<!-- generated by colc ") and "trees" in second
    # a user's comment keeps to what XML allows (a control character made
    # the schema check an internal error, review)
    import colc

    with pytest.warns(UserWarning, match="never selects"):  # 3 ranks: as the CLI warns
        text = colc.compile(str(yaml), collective="allreduce", algorithm="ring",
                            comment="job\x01 -- x").to_oneccl_xml()
    assert text.splitlines()[1] == "<!-- job - - x -->"
    # and so does the MSCCL file's (a NUL byte went into it, exploring as a user)
    with pytest.warns(UserWarning, match="never selects"):
        text = colc.compile(str(yaml), collective="allreduce", algorithm="ring",
                            comment="job\x00 -- x").to_msccl_xml()
    assert text.splitlines()[0] == "<!-- job - - x -->"


def test_hand_schedule_correct() -> None:
    assert verify_thread_schedule(_pair_allgather(False)) == []


def test_deadlock_regardless_of_buffering() -> None:
    diags = [str(d) for d in verify_thread_schedule(_pair_allgather(True))]
    assert "rank 0 thread 0 instr 1: deadlock (eager depth 2): blocked in recv from rank 1 " \
           "tag 0 waits for a message never sent" in diags
    assert any("unbounded buffering" in d for d in diags)


def test_deadlock_only_with_bounded_buffering() -> None:
    # Both ranks send three messages before receiving any.
    code = {}
    for r in range(2):
        p = 1 - r
        code[r] = [[*(send(p, t, IN, t) for t in range(3)),
                    *(recv(p, t, TMP, 0) for t in range(3))]]
    sched = _sched(Collective.ALLREDUCE, 2, 3, code)
    done, diags = interpret_thread_schedule(sched, inplace=False, eager_depth=2)
    assert not done
    assert any("deadlock (eager depth 2): blocked in send to rank 1 tag 2 has 2 unreceived" in str(d)
               for d in diags)
    done, _ = interpret_thread_schedule(sched, inplace=False, eager_depth=None)
    assert done
    done, _ = interpret_thread_schedule(sched, inplace=False, eager_depth=3)
    assert done


def test_rendezvous_when_receive_is_posted() -> None:
    # Depth 0: every send waits for its receive; out-of-order tags still match.
    code = {0: [[send(1, 0, IN, 0), send(1, 1, IN, 1)]],
            1: [[recv(0, 1, TMP, 0), recv(0, 0, TMP, 0)]]}
    sched = _sched(Collective.ALLREDUCE, 2, 2, code)
    done, _ = interpret_thread_schedule(sched, inplace=False, eager_depth=0)
    assert not done  # rank 0 sends tag 0 first, but rank 1 waits for tag 1
    done, _ = interpret_thread_schedule(sched, inplace=False, eager_depth=1)
    assert done


def test_race_detected_without_dependency() -> None:
    diags = _verify(ring_allgather_split(4, drop_dep=True))
    assert "rank 1 thread 1 instr 0: data race on output[0]: write here and read by thread 0 " \
           "instr 2, not ordered (out-of-place)" in diags


def test_race_between_local_threads() -> None:
    code = {0: [[copy(IN, 0, OUT, 0)], [copy(IN, 0, OUT, 0)]],
            1: [[copy(IN, 0, OUT, 1)]]}
    sched = _sched(Collective.ALLGATHER, 2, 2, code)
    diags = [str(d) for d in verify_thread_schedule(sched)]
    assert any(d.startswith("rank 0 thread 1 instr 0: data race on output[0]") for d in diags)
    # A sync orders them.
    code[0][1] = [sync(0, 0), copy(IN, 0, OUT, 0)]
    diags = [str(d) for d in verify_thread_schedule(_sched(Collective.ALLGATHER, 2, 2, code))]
    assert not any("race" in d for d in diags)


def test_order_through_another_rank_is_not_a_race() -> None:
    """Rank-local clocks run first (memory linear in the threads); the pair below
    is ordered only through rank 1, so that run flags it and the global clocks
    clear it: no race reported."""
    code = {0: [[copy(IN, 0, OUT, 0), send(1, 0, IN, 0)],
                [recv(1, 1, TMP, 0), copy(IN, 0, OUT, 0)]],
            1: [[recv(0, 0, TMP, 0), send(0, 1, IN, 0), copy(IN, 0, OUT, 1)]]}
    sched = _sched(Collective.ALLGATHER, 2, 2, code)
    done, diags = interpret_thread_schedule(sched, inplace=False, eager_depth=None)
    assert done and not any("race" in str(d) for d in diags)
    code[0][1] = [copy(IN, 0, OUT, 0)]  # without the message: a real race
    done, diags = interpret_thread_schedule(_sched(Collective.ALLGATHER, 2, 2, code),
                                            inplace=False, eager_depth=None)
    assert any("data race on output[0]" in str(d) for d in diags)


def test_double_reduction_is_an_error() -> None:
    code = {}
    for r in range(2):
        p = 1 - r
        code[r] = [[send(p, 0, IN, 0), recv(p, 0, TMP, 0), reduce(TMP, 0, IN, 0),
                    reduce(TMP, 0, IN, 0)]]
    sched = _sched(Collective.ALLREDUCE, 2, 2, code, inplace=True)
    diags = [str(d) for d in verify_thread_schedule(sched)]
    assert "rank 0 thread 0 instr 3: reduces a contribution twice: i0[0]+i1[0] (+) i1[0] " \
           "(in-place)" in diags


def test_postcondition_failure_names_chunk() -> None:
    code = {0: [[copy(IN, 0, OUT, 0), send(1, 0, OUT, 0), recv(1, 0, OUT, 0)]],
            1: [[copy(IN, 0, OUT, 1), send(0, 0, OUT, 1), recv(0, 0, OUT, 0)]]}
    diags = [str(d) for d in verify_thread_schedule(_sched(Collective.ALLGATHER, 2, 2, code))]
    assert "rank 0: postcondition of allgather fails: output[0] holds i1[0], expected i0[0] " \
           "(out-of-place)" in diags
    assert "rank 0: postcondition of allgather fails: output[1] holds uninitialised, " \
           "expected i1[0] (out-of-place)" in diags


def test_reduce_of_uninitialized_chunk() -> None:
    code = {0: [[reduce(IN, 0, OUT, 0)]], 1: [[copy(IN, 0, OUT, 0)]]}
    diags = [str(d) for d in verify_thread_schedule(
        _sched(Collective.ALLREDUCE, 2, 2, code))]
    assert "rank 0 thread 0 instr 0: reads uninitialised output[0] (out-of-place)" in diags


def test_static_findings() -> None:
    code = {0: [[send(1, 0, IN, 0), send(1, 0, IN, 0), send(1, 5, IN, 1, cnt=2)]],
            1: [[recv(0, 0, OUT, 0), recv(0, 7, OUT, 0), sync(0, 2)]]}
    diags = [str(d) for d in check_thread_schedule(_sched(Collective.ALLREDUCE, 2, 2, code))]
    assert "rank 0 thread 0 instr 1: send to rank 1 reuses tag 0 of thread 0 instr 0" in diags
    assert "rank 0 thread 0 instr 2: send touches input[1..2] but input has 2 chunks" in diags
    assert "rank 0 thread 0 instr 2: send to rank 1 tag 5 is never received" in diags
    assert "rank 1 thread 0 instr 1: recv from rank 0 tag 7 is never sent" in diags
    assert "rank 1 thread 0 instr 2: sync waits for its own thread's instr 2, which cannot " \
           "have completed" in diags


def test_size_mismatch_and_wrong_extent() -> None:
    code = {0: [[send(1, 0, IN, 0, cnt=2)]], 1: [[recv(0, 0, OUT, 0)]]}
    sched = _sched(Collective.ALLREDUCE, 2, 2, code)
    diags = [str(d) for d in check_thread_schedule(sched)]
    assert "rank 0 thread 0 instr 0: send of 2 chunks to rank 1 tag 0 is received as 1 " \
           "chunks by thread 0 instr 0" in diags
    bad = dataclasses.replace(sched, ranks=(dataclasses.replace(sched.ranks[0], output_chunks=1),
                                            sched.ranks[1]))
    diags = [str(d) for d in check_thread_schedule(bad)]
    assert "rank 0: output_chunks=1, but allreduce of 2 chunks on 2 ranks has 2" in diags


def test_thread_diagnostic_is_a_diagnostic() -> None:
    from colc.ir.diagnostics import Diagnostic
    d = ThreadDiagnostic("x", rank=1, tb=2, step=3)
    assert isinstance(d, Diagnostic) and str(d) == "rank 1 thread 2 instr 3: x"


# --------------------------------------------------------------------------- reader errors


GOOD = emit_oneccl_xml(ring_allgather_split(3))


def _bad(text: str) -> SpecError:
    with pytest.raises(SpecError) as info:
        read_oneccl_xml(text, "bad.oneccl.xml")
    return info.value


@pytest.mark.parametrize(("mutate", "expect"), [
    (lambda t: t.replace("</oneccl_schedule>", ""), "malformed XML"),
    (lambda t: t.replace('version="1"', 'version="2"'), "schema"),
    (lambda t: t.replace('coll="allgather"', 'coll="gather"'), "schema"),
    (lambda t: t.replace('cnt="1"', 'cnt="0"', 1), "schema"),
    (lambda t: t.replace('cnt="1"', 'cnt="01"', 1), "schema"),
    (lambda t: t.replace('<send i="1"', '<send i="1" extra="x"', 1), "schema"),
    (lambda t: t.replace('<send i="1"', '<bcast i="1"', 1).replace("</send>", ""), "schema"),
    (lambda t: t.replace('<send i="1"', '<send i="7"', 1), "instruction i=7 is at position 1"),
    (lambda t: t.replace('peer="1"', 'peer="0"', 1), "send peer 0 is the rank itself"),
    (lambda t: t.replace('peer="1"', 'peer="9"', 1), "not below nranks=3"),
    (lambda t: t.replace('<rank id="1"', '<rank id="2"', 1), "rank id 2: expected 1"),
    (lambda t: t.replace('thread="1" instr="0"', 'thread="4" instr="0"', 1),
     "sync on thread 4, but the rank has 2 threads"),
    (lambda t: t.replace('thread="1" instr="0"', 'thread="1" instr="9"', 1),
     "sync on thread 1 instr 9, but that thread has 2 instructions"),
    (lambda t: t.replace('nranks="3"', 'nranks="4"'), "4 <rank> elements"[2:]),
    # read rank by rank: the last rank, text between ranks, a root without ranks
    (lambda t: t.replace('<rank id="2"', '<rank id="2" extra="x"', 1), "schema"),
    (lambda t: t.replace("</rank>", "</rank>words", 1), "schema"),
    (lambda t: t.replace('eager_depth="2">', 'eager_depth="2">words', 1), "text inside"),
    (lambda t: t[:t.index("  <rank")] + "</oneccl_schedule>\n", "schema"),
    (lambda t: t.replace("<oneccl_schedule ", "<other ", 1).replace(
        "</oneccl_schedule>", "</other>"), "schema"),
])
def test_reader_rejects(mutate, expect: str) -> None:
    err = _bad(mutate(GOOD))
    assert expect in str(err)
    assert str(err).startswith("bad.oneccl.xml")
    assert "\n" not in str(err)


def test_reader_streaming_sees_the_whole_document(monkeypatch) -> None:
    """Read rank by rank, the document is still checked as a whole: text beside
    a comment in the root, a DTD in a document not in UTF-8 (no byte scan
    finds it), and a rank past the per-rank element cap."""
    from colc.backends import oneccl_reader

    assert "text inside" in str(_bad(GOOD.replace("</rank>", "</rank><!--c-->junk", 1)))
    doc = GOOD.replace('<?xml version="1.0" encoding="UTF-8"?>',
                       '<?xml version="1.0" encoding="UTF-16"?>\n<!DOCTYPE x [<!ENTITY e "v">]>')
    with pytest.raises(SpecError, match="DOCTYPE"):
        read_oneccl_xml(doc.encode("utf-16"), "bad.oneccl.xml")
    monkeypatch.setattr(oneccl_reader, "MAX_RANK_ELEMENTS", 3)
    assert "more than 3 elements" in str(_bad(GOOD))


def test_reader_line_numbers() -> None:
    err = _bad(GOOD.replace('peer="1"', 'peer="0"', 1))
    assert err.line == 6
    last = GOOD.rindex('cnt="1"')
    err = _bad(GOOD[:last] + 'cnt="0"' + GOOD[last + 7:])  # a schema error in the last rank
    assert err.line == GOOD.count("\n", 0, last) + 1


def test_reader_refuses_entities_and_dtd() -> None:
    bomb = ('<?xml version="1.0"?>\n<!DOCTYPE lolz [<!ENTITY lol "lol">'
            '<!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">]>\n'
            '<oneccl_schedule name="&lol2;"/>')
    err = _bad(bomb)
    assert "DOCTYPE" in str(err) or "schema" in str(err)
    external = ('<?xml version="1.0"?>\n<!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]>'
                '\n<oneccl_schedule name="&e;"/>')
    assert "root:" not in str(_bad(external))


def test_reader_size_limit(tmp_path) -> None:
    from colc.backends import oneccl_xml
    with pytest.raises(SpecError, match="at most"):
        oneccl_xml.parse_xml_safely(b" " * 10 + b"<a/>", "big.xml", max_bytes=8)
    missing = tmp_path / "none.oneccl.xml"
    with pytest.raises(SpecError, match="cannot read"):
        load_oneccl_xml(str(missing))


def test_validate_returns_root() -> None:
    assert validate_oneccl_xml(GOOD, "x").tag == "oneccl_schedule"


# --------------------------------------------------------------------------- MSCCL examples


def _msccl_reader():
    return pytest.importorskip("colc.backends.msccl_reader")


@pytest.mark.parametrize("path", sorted(glob.glob(os.path.join(MSCCL_EXAMPLES,
                                                               "0[1-5]_*.executor.xml"))))
def test_msccl_examples_convert_and_verify(path: str) -> None:
    reader = _msccl_reader()
    with open(path, encoding="utf-8") as fh:
        result = reader.read_msccl(fh.read(), path)
    assert result.program is not None, [str(d) for d in result.diagnostics]
    program = result.program
    text = emit_oneccl_xml(program)
    assert verify_thread_schedule(read_oneccl_xml(text, path)) == []


def test_unused_threadblock_ids_must_be_contiguous() -> None:
    prog = ring_allgather(2)
    rp = prog.ranks[0]
    tb = dataclasses.replace(rp.threadblocks[0], id=3)
    with pytest.raises(InternalError, match="0..n-1"):
        lower_program(dataclasses.replace(prog, ranks=(dataclasses.replace(rp, threadblocks=(tb,)),
                                                       prog.ranks[1])))


def test_nop_and_zero_count_lowering() -> None:
    o = Loc(Buffer.OUTPUT, 0)
    none = Loc(Buffer.INPUT, None)
    steps0 = (Step(StepKind.NOP, none, none, 0),
              Step(StepKind.COPY, Loc(Buffer.INPUT, 0), o, 1, has_dep=True))
    steps1 = (Step(StepKind.NOP, none, none, 0, dep=(0, 0)),  # vacuous: target lowers to nothing
              Step(StepKind.NOP, none, none, 0, dep=(0, 1)),
              Step(StepKind.SEND, o, o, 1))
    r0 = RankProgram(0, 1, 2, 0, (Threadblock(0, None, None, 0, steps0),
                                  Threadblock(1, 1, None, 0, steps1)))
    r1 = RankProgram(1, 1, 2, 0, (Threadblock(0, None, 0, 0, (
        Step(StepKind.COPY, Loc(Buffer.INPUT, 0), Loc(Buffer.OUTPUT, 1), 1),
        Step(StepKind.RECV, o, o, 1))),))
    prog = Program("nops", Collective.ALLGATHER, Protocol.SIMPLE, 1, 2, 2, False, True, 0, 0,
                   (r0, r1))
    sched = lower_program(prog)
    t1 = sched.ranks[0].threads[1].instrs
    assert [(i.kind, i.wait_thread, i.wait_instr) for i in t1[:1]] == [(InstrKind.SYNC, 0, 0)]
    assert len(t1) == 2
    # rank 1 never sends its own chunk to rank 0: postcondition fails, nothing else.
    diags = [str(d) for d in verify_thread_schedule(sched)]
    assert diags == ["rank 0: postcondition of allgather fails: output[1] holds uninitialised, "
                     "expected i1[0] (out-of-place)"]


def test_doc_example_and_its_race_message() -> None:
    doc = open(os.path.join(HERE, "..", "docs", "oneccl-xml.md"), encoding="utf-8").read()
    with open(os.path.join(GOLDEN, "ring3-allgather-split.oneccl.xml"), encoding="utf-8") as fh:
        assert fh.read() in doc
    diags = _verify(ring_allgather_split(3, drop_dep=True))
    assert ("rank 0 thread 1 instr 0: data race on output[2]: write here and read by thread 0 "
            "instr 2, not ordered (out-of-place)") in diags


def test_a_finding_of_a_file_names_its_line() -> None:
    """An execution finding of a file (a race, a deadlock) carries the line of
    the instruction it names, as an MSCCL file's step does; one of a Program
    lowered in memory has none."""
    text = emit_oneccl_xml(ring_allgather_split(4, drop_dep=True))
    lines = text.splitlines()
    report = verify_oneccl_text(text, "race.oneccl.xml")
    race = next(e for e in report.errors if e.startswith("rank 1 thread 1 instr 0: data race"))
    line = int(race.rsplit("[line ", 1)[1].rstrip("]"))
    rank = next(k for k, s in enumerate(lines) if '<rank id="1"' in s)
    thread = next(k for k, s in enumerate(lines) if k > rank and '<thread id="1"' in s)
    assert line == thread + 2 and 'i="0"' in lines[line - 1]
    assert all("[line " in e for e in report.errors)
    assert not any("[line " in d for d in _verify(ring_allgather_split(4, drop_dep=True)))
