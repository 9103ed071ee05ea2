"""``colc verify`` engine: examples, mutations, interpreter semantics, speed."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from verify_helpers import (  # noqa: E402
    EXAMPLES,
    example,
    mutate,
    pairwise_allreduce_outofplace,
    ring_allreduce,
    segmented_ring_allgather,
    step,
)

from colc.backends.msccl_reader import read_msccl  # noqa: E402
from colc.backends.msccl_verify import verify_msccl_text  # noqa: E402
from colc.ir.diagnostics import Diagnostic, Severity  # noqa: E402
from colc.ir.interpret import interpret  # noqa: E402

GOOD = sorted(EXAMPLES.glob("*.executor.xml")) + sorted(EXAMPLES.glob("*.msccl-scheduler.xml"))
TOOLS = sorted(EXAMPLES.glob("*.msccltools.xml"))


def errors_of(text: str) -> tuple[str, ...]:
    report = verify_msccl_text(text, "mutant.xml")
    assert not report.ok
    return report.errors


def has(errors: tuple[str, ...], *needles: str) -> bool:
    return any(all(n in e for n in needles) for e in errors)


# ------------------------------------------------------------------ examples
@pytest.mark.parametrize("path", GOOD, ids=lambda p: p.name)
def test_good_examples_verify(path: Path) -> None:
    report = verify_msccl_text(path.read_text(), str(path))
    assert report.ok, report.errors
    assert report.errors == ()


@pytest.mark.parametrize("path", TOOLS, ids=lambda p: p.name)
def test_msccltools_output_rejected(path: Path) -> None:
    errs = errors_of(path.read_text())
    for attr in ("outofplace", "minBytes", "maxBytes"):
        assert has(errs, f"attribute {attr} of node algo not found"), errs


def test_examples_present() -> None:
    assert len(GOOD) == 6 and len(TOOLS) == 5


# ----------------------------------------------------------------- mutations
def test_tab_before_element() -> None:
    text = mutate(example("01"), "\n    <tb", "\n\t<tb")
    assert has(errors_of(text), "expecting '<'", "line 3")


def test_xml_prolog() -> None:
    text = '<?xml version="1.0" encoding="UTF-8"?>\n' + example("01")
    assert has(errors_of(text), "<?xml")


def test_reduce_scatter_spelling_rejected() -> None:
    text = mutate(example("01"), 'coll="allreduce"', 'coll="reduce_scatter"')
    assert has(errors_of(text), "reduce_scatter", "reducescatter")


def test_tb_id_gap() -> None:
    # 02 rank 0 has tbs 0..5; renumber tb 3 to 7 -> gap.
    text = mutate(example("02"), '<tb id="3"', '<tb id="7"')
    assert has(errors_of(text), "rank 0", "tb 3 is missing")


def test_tb_id_gaps_are_named_from_their_first_id() -> None:
    # 02 rank 0 has tbs 0..4; renumber tb 2 to 9 -> tbs 2 and 5-8 missing
    text = mutate(example("02"), '<tb id="2"', '<tb id="9"')
    errors = errors_of(text)
    assert has(errors, "rank 0", "tb 2 is missing") and has(errors, "rank 0", "tbs 5-8 are missing")


@pytest.mark.parametrize("ngpus,words", [
    ("0", "ngpus=0: the runtime uses a file only for communicators of ngpus ranks"),
    ("-4", "ngpus=-4: the runtime uses a file only for communicators of ngpus ranks"),
    ("1025", "ngpus=1025: a file holds at most 1024 ranks"),
    ("2147483647", "ngpus=2147483647: a file holds at most 1024 ranks"),  # ran out of memory
])
def test_ngpus_out_of_the_runtimes_range_is_one_error(ngpus, words) -> None:
    """``ngpus`` 0 or negative passed as OK (the runtime never uses the file);
    a huge one built a rank table past 3 GB; 1025 listed 1021 missing ranks."""
    text = mutate(example("02"), 'ngpus="4"', f'ngpus="{ngpus}"')
    start = time.perf_counter()
    errors = errors_of(text)
    assert time.perf_counter() - start < 5
    assert len(errors) == 1 and words in errors[0], errors


def test_many_missing_gpus_are_one_line() -> None:
    text = mutate(example("02"), 'ngpus="4"', 'ngpus="64"')
    errors = errors_of(text)
    assert has(errors, "no <gpu> for 60 of the ngpus=64 ranks (ids 4-63)")
    assert not has(errors, 'no <gpu id="')


def test_cnt_72() -> None:
    text = mutate(example("01"), 'cnt="1"', 'cnt="72"')
    assert has(errors_of(text), "rank 0 tb 0 step 0", "cnt 72 out of range")


def test_more_than_1024_gpu_elements() -> None:
    """The executor's XML reader keeps at most 1024 children per element (MAX_SUBS,
    unchecked): a file with 1025 <gpu> elements is rejected, naming the limit."""
    def local_copies(n: int) -> str:  # every rank copies its input into its output
        gpus = "".join(f'<gpu id="{r}" i_chunks="1" o_chunks="1" s_chunks="0"><tb id="0" '
                       f'send="-1" recv="-1" chan="0">{step(0, "cpy", ("i", 0), ("o", 0))}'
                       f'</tb></gpu>\n' for r in range(n))
        return (f'<algo name="x" proto="Simple" nchannels="1" nchunksperloop="{n}" '
                f'ngpus="{n}" coll="allreduce" inplace="0" outofplace="1" minBytes="0" '
                f'maxBytes="0">\n{gpus}</algo>\n')

    t0 = time.perf_counter()
    assert has(errors_of(local_copies(1025)), "1025 <gpu> elements", "MAX_SUBS",
               "at most 1024 ranks")
    assert time.perf_counter() - t0 < 10
    read = read_msccl(local_copies(1024), "x.xml")
    assert not any("MAX_SUBS" in str(d) for d in read.diagnostics)


def test_s_64() -> None:
    text = mutate(example("01"), '<step s="0"', '<step s="64"')
    assert has(errors_of(text), "rank 0 tb 0 step 0", "s=64")


def test_a_bad_step_keeps_the_positions_of_the_steps_after_it() -> None:
    """An unknown step type is one error; the steps after it keep their
    positions (they were numbered one too low, each warned of)."""
    text = mutate(example("01"), '<step s="0" type="s"', '<step s="0" type="zz"')
    report = verify_msccl_text(text, "mutant.xml")
    assert has(report.errors, "rank 0 tb 0 step 0", "type='zz'")
    assert not any("is not the step's position" in w for w in report.warnings)


def test_removed_dependency_is_a_race() -> None:
    # 02: the send of the own chunk waits for the local copy into o[0].
    good = ('type="s" srcbuf="o" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="0" deps="0"')
    text = mutate(example("02"), good, good.replace('depid="0" deps="0"',
                                                    'depid="-1" deps="-1"'))
    errs = errors_of(text)
    assert has(errs, "rank 0 tb 2 step 0", "data race on o[0]", "tb 0 step 0"), errs


def test_removed_dependency_in_generated_ring() -> None:
    text = ring_allreduce(4)
    text = text.replace('depid="0" deps="3"', 'depid="-1" deps="-1"', 1)
    errs = errors_of(text)
    assert has(errs, "rank 0 tb 1 step 0", "data race") or has(errs, "postcondition"), errs


@pytest.mark.parametrize(("depth", "deadlocks"), [(1, True), (2, True), (3, False), (8, False),
                                                  (None, False)])
def test_example_03_fifo_depth(depth: int | None, deadlocks: bool) -> None:
    # LL, each tb sends cnt=3 before receiving: with one call per chunk the
    # third call needs a depth of 3 (section 4.8).
    program = read_msccl(example("03"), "03").program
    diags = interpret(program, fifo_depth=depth, inplace=True)
    assert any("deadlock" in d.message for d in diags) == deadlocks
    if not deadlocks:
        assert diags == []


def test_example_03_as_simple_deadlocks() -> None:
    text = mutate(example("03"), 'proto="LL"', 'proto="Simple"')
    errs = errors_of(text)
    assert has(errs, "deadlock (in-place, FIFO depth 2)", "space in the full FIFO")
    assert not has(errs, "FIFO depth unbounded")


def test_swapped_srcoff_in_rrc() -> None:
    text = ring_allreduce(4)
    # rank 0's rrc reduces into i[1]; make its local operand i[2] instead.
    old = '<step s="3" type="rrc" srcbuf="i" srcoff="1" dstbuf="i" dstoff="1"'
    text = mutate(text, old, old.replace('srcoff="1"', 'srcoff="2"'))
    errs = errors_of(text)
    assert has(errs, "rank 0 tb 0 step 3") and (has(errs, "twice") or has(errs, "postcondition"))


def test_missing_receiver_tb_deadlocks() -> None:
    text = example("01")
    start = text.index('<gpu id="1"')
    tb_start = text.index("<tb", start)
    tb_end = text.index("</tb>", tb_start) + len("</tb>\n")
    idle = '<tb id="0" send="-1" recv="-1" chan="0">\n    </tb>\n'  # no empty <gpu>: an error
    text = text[:tb_start] + idle + text[tb_end:].lstrip(" ")
    errs = errors_of(text)
    assert has(errs, "no tb on rank 1 receives from rank 0 on chan 0")
    assert has(errs, "deadlock (in-place, FIFO depth 2)")


@pytest.mark.parametrize(("tb", "message"), [
    ('<tb id="1" send="-1" recv="2" chan="0">', "no tb on rank 2 sends to rank 0 on chan 0"),
    ('<tb id="1" send="2" recv="-1" chan="0">', "no tb on rank 2 receives from rank 0 on chan 0"),
])
def test_declared_peer_without_a_partner_hangs_the_setup(tb: str, message: str) -> None:
    """The runtime connects every peer a tb declares, steps or not, and
    NCCL's connection setup waits for the other end: a tb on rank 0 that
    declares rank 2 (no ring step joins them) hangs the communicator."""
    text = example("01")
    end = text.index("  </gpu>")
    text = text[:end] + f"    {tb}\n    </tb>\n" + text[end:]
    errs = errors_of(text)
    assert has(errs, "rank 0 tb 1", message, "but never", "rank 2's", "hang"), errs


def test_more_threadblocks_than_a_gpu_holds_is_warned() -> None:
    """The runtime launches a rank's threadblocks as one grid whose blocks
    wait on each other; 120 fit an H100's 132 SMs, not an A100's 108."""
    text = example("01")
    end = text.index("  </gpu>")
    extra = "".join(f'    <tb id="{i}" send="-1" recv="-1" chan="0">\n    </tb>\n'
                    for i in range(1, 120))
    from colc.backends.verify import verify_text

    report = verify_text(text[:end] + extra + text[end:], "wide.xml")
    assert report.ok
    assert any(w.startswith("120 threadblocks per GPU: more than A100 (108), MI250 GCD (104) "
                            "hold at once") and "it fits: H100 (132)" in w
               for w in report.warnings), report.warnings
    assert not [w for w in verify_text(text, "narrow.xml").warnings if "hold at once" in w]


def test_absurd_chunk_counts_are_refused_before_the_run() -> None:
    """nchunksperloop 600 M on six ranks took verify past 24 GB (killed):
    the buffers are counted before the interpreter allocates them."""
    import re as _re

    text = example("02")
    text = _re.sub(r'nchunksperloop="\d+"', 'nchunksperloop="40000000"', text)
    text = _re.sub(r'i_chunks="\d+"', 'i_chunks="10000000"', text)
    text = _re.sub(r'o_chunks="\d+"', 'o_chunks="40000000"', text)
    t0 = time.perf_counter()
    errs = errors_of(text)
    assert time.perf_counter() - t0 < 10
    assert has(errs, "buffers of 200000000 chunk slots over all ranks", "more than colc's "
               "interpreter follows (33554432"), errs


def test_a_peer_out_of_range_is_one_error_not_two() -> None:
    text = example("01").replace('<tb id="0" send="1" recv="3" chan="0">',
                                 '<tb id="0" send="9" recv="3" chan="0">', 1)
    errs = errors_of(text)
    assert not has(errs, "no tb on rank 9"), errs


def test_extra_send_is_unconsumed() -> None:
    text = example("01")
    extra = ('      <step s="7" type="s" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="1" '
             'depid="-1" deps="-1" hasdep="0"/>\n')
    end = text.index("    </tb>")
    text = text[:end] + extra + text[end:]
    assert has(errors_of(text), "rank 0 tb 0 step 7", "1 message call(s)", "never received")


def test_inplace_flag_on_outofplace_only_schedule() -> None:
    assert verify_msccl_text(pairwise_allreduce_outofplace(0, 1), "p").ok
    errs = errors_of(pairwise_allreduce_outofplace(1, 0))
    assert has(errs, "rank 0 tb 0 step 3", "twice", "in-place")
    assert not has(errs, "out-of-place")


def test_allgather_inplace_only_run_out_of_place() -> None:
    # 04 is in-place only; declared out-of-place it reads uninitialised output.
    text = mutate(example("04"), 'inplace="1" outofplace="0"', 'inplace="0" outofplace="1"')
    assert has(errors_of(text), "reads uninitialised o[0]", "out-of-place")


def test_cnt_mismatch() -> None:
    text = example("03").replace('type="r" srcbuf="i" srcoff="0" dstbuf="s" dstoff="0" cnt="3"',
                                 'type="r" srcbuf="i" srcoff="0" dstbuf="s" dstoff="0" cnt="2"', 1)
    assert has(errors_of(text), "rank 0 tb 1 step 1", "cnt=2", "cnt=3")


def test_out_of_real_extent() -> None:
    # 02 allgather: the real input extent is cf = 1 chunk; i_chunks="2" lets
    # the parser accept srcoff=1 but the buffer does not have it.
    text = example("02").replace('i_chunks="1"', 'i_chunks="2"', 1)
    text = text.replace('type="cpy" srcbuf="i" srcoff="0"', 'type="cpy" srcbuf="i" srcoff="1"', 1)
    assert has(errors_of(text), "rank 0 tb 0 step 0", "outside the real extent 1 of i")


# ------------------------------------------------------------------- reader
def test_strtol_semantics() -> None:
    from colc.backends.msccl_reader import parse_strtol
    assert parse_strtol("010") == (8, True, True)
    assert parse_strtol("0x10") == (16, True, False)
    assert parse_strtol("-1") == (-1, True, False)
    assert parse_strtol("08")[1] is False
    assert parse_strtol("abc") == (0, False, False)


def test_garbage_integer_is_an_error() -> None:
    text = mutate(example("01"), 'cnt="1"', 'cnt="one"')
    assert has(errors_of(text), "cnt='one' is not an integer")


def test_octal_is_a_warning_and_read_as_octal() -> None:
    text = mutate(example("01"), 'nchunksperloop="4"', 'nchunksperloop="04"')
    report = verify_msccl_text(text, "x")
    assert report.ok and any("octal" in w for w in report.warnings)


def test_extra_spaces_use_attribute_slots() -> None:
    # 10 attributes + 7 extra spaces = 17 slots: the last attribute is dropped.
    old = '<step s="0" type="s" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="1" ' \
          'depid="-1" deps="-1" hasdep="0"/>'
    new = old.replace('" ', '"  ', 7)
    errs = errors_of(mutate(example("01"), old, new))
    assert has(errs, "attribute hasdep of node step not found")


def test_newline_inside_tag() -> None:
    text = mutate(example("01"), 'srcbuf="i" srcoff="0"', 'srcbuf="i"\n srcoff="0"')
    assert has(errors_of(text), "expected '>'")


def test_comments_and_unknown_elements() -> None:
    text = mutate(example("01"), "\n    <tb", "\n    <!-- a comment -->\n    <copy a=\"1\"/>\n"
                                              "    <tb")
    report = verify_msccl_text(text, "x")
    assert report.ok, report.errors
    assert any("<copy> inside <gpu> is ignored" in w for w in report.warnings)


def test_unknown_attribute_is_a_warning() -> None:
    report = verify_msccl_text(mutate(example("01"), "<algo ", '<algo redop="sum" '), "x")
    assert report.ok and any("unknown attribute redop" in w for w in report.warnings)


def test_step_with_child_is_an_error() -> None:
    old = 'hasdep="0"/>'
    text = mutate(example("01"), old, 'hasdep="0"><x/></step>')
    assert has(errors_of(text), "child elements crashes")


def test_chan_32_and_chan_beyond_nchannels() -> None:
    assert has(errors_of(mutate(example("01"), 'chan="0"', 'chan="32"')), "chan 32", "off-by-one")
    assert has(errors_of(mutate(example("01"), 'chan="0"', 'chan="1"')), "nchannels 1", "hang")


def test_nop_without_dependent_successor() -> None:
    text = example("03")
    text = mutate(text, 'type="re" srcbuf="s" srcoff="0" dstbuf="i" dstoff="0" cnt="1" depid="1"'
                        ' deps="1"', 'type="re" srcbuf="s" srcoff="0" dstbuf="i" dstoff="0" '
                        'cnt="1" depid="-1" deps="-1"')
    assert has(errors_of(text), "rank 0 tb 0 step 1", "chain of dependencies")


def test_non_positional_s_is_a_warning() -> None:
    text = mutate(example("01"), '<step s="1"', '<step s="5"')
    report = verify_msccl_text(text, "x")
    assert report.ok and any("s=5 is not the step's position 1" in w for w in report.warnings)


def test_depless_nop_shifts_numbering() -> None:
    # A dep-less nop before tb 1's hasdep recv shifts its flag from 1 to 0;
    # tb 0 waits for >= 1 and then only sees it after the next flag (step 3),
    # which still exists: so this is only a warning plus a changed schedule.
    text = mutate(example("03"), '<step s="0" type="s" srcbuf="i" srcoff="3"',
                  '<step s="0" type="nop" srcbuf="i" srcoff="-1" dstbuf="o" dstoff="-1" cnt="0" '
                  'depid="-1" deps="-1" hasdep="0"/>\n      <step s="0" type="s" srcbuf="i" '
                  'srcoff="3"')
    report = verify_msccl_text(text, "x")
    assert any("shifts the kernel's step numbering" in w for w in report.warnings)


def test_peer_is_own_rank_and_beyond_ngpus() -> None:
    assert has(errors_of(mutate(example("01"), 'send="1" recv="3"', 'send="0" recv="3"')),
               "own rank")
    assert has(errors_of(mutate(example("01"), 'send="1" recv="3"', 'send="9" recv="3"')),
               "send peer 9 is not a rank")


def test_fused_re_chain_of_16() -> None:
    lines = ['<algo name="x" proto="Simple" nchannels="1" nchunksperloop="1" ngpus="1" '
             'coll="allreduce" inplace="1" outofplace="0" minBytes="0" maxBytes="0">',
             '  <gpu id="0" i_chunks="1" o_chunks="0" s_chunks="16">',
             '    <tb id="0" send="-1" recv="-1" chan="0">']
    lines += [f'      <step s="{k}" type="cpy" srcbuf="i" srcoff="0" dstbuf="s" dstoff="{k}" '
              'cnt="1" depid="-1" deps="-1" hasdep="0"/>' for k in range(16)]
    lines += [f'      <step s="{16 + k}" type="re" srcbuf="s" srcoff="{k}" dstbuf="o" dstoff="0" '
              'cnt="1" depid="-1" deps="-1" hasdep="0"/>' for k in range(16)]
    lines += ["    </tb>", "  </gpu>", "</algo>"]
    assert has(errors_of("\n".join(lines) + "\n"), "fused re chain of 16")


def test_single_quotes_are_named_where_they_are() -> None:
    """A file quoted with ' throughout was told 'unexpected end of file' at
    its last line: the reader looked for the closing '"' first."""
    text = example("01")
    errs = errors_of(text.replace('"', "'"))
    first_algo = text.replace('"', "'").count("\n", 0, text.index("<algo")) + 1
    assert errs == (f"a value opened with \"'\" ends only at the next '\"' in the runtime "
                    f"(none follows) [line {first_algo}]",)


def test_node_count_limit() -> None:
    text = example("01")
    step = ('      <step s="0" type="cpy" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="0" '
            'depid="-1" deps="-1" hasdep="0"/>\n')
    end = text.index("    </tb>")
    # 1 algo + 4 gpu + 1 tb + 7 steps = 13 stored nodes for rank 0.
    errs = errors_of(text[:end] + step * 4083 + text[end:])
    assert has(errs, "4096 stored XML nodes for rank 0")
    errs = errors_of(text[:end] + step * 4082 + text[end:])
    assert not has(errs, "stored XML nodes")


def test_node_count_includes_a_later_top_level_algo() -> None:
    # The runtime runs the first <algo> but stores the nodes of every one:
    # a copy of the file after it adds 13 more for rank 0, 6 for rank 1.
    text = example("01")
    step = ('      <step s="0" type="cpy" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="0" '
            'depid="-1" deps="-1" hasdep="0"/>\n')
    end = text.index("    </tb>")
    report = verify_msccl_text(text[:end] + step * 4070 + text[end:] + text, "mutant.xml")
    assert has(report.errors, "4096 stored XML nodes for rank 0")
    assert any("second top-level <algo> is never run" in w for w in report.warnings)
    assert not has(errors_of(text[:end] + step * 4069 + text[end:] + text), "stored XML nodes")
    assert not has(errors_of(text[:end] + step * 4082 + text[end:]), "stored XML nodes")


# -------------------------------------------------------------- diagnostics
def test_diagnostic_str() -> None:
    assert str(Diagnostic("boom", 1, 0, 3)) == "rank 1 tb 0 step 3: boom"
    assert str(Diagnostic("boom")) == "boom"
    assert Diagnostic("x", severity=Severity.WARNING).is_error is False


def test_deterministic_output() -> None:
    text = mutate(example("03"), 'proto="LL"', 'proto="Simple"')
    assert verify_msccl_text(text, "x") == verify_msccl_text(text, "x")


# -------------------------------------------------------------------- speed
def test_ring_64_ranks_is_fast() -> None:
    text = ring_allreduce(64)
    t0 = time.perf_counter()
    report = verify_msccl_text(text, "ring64.xml")
    elapsed = time.perf_counter() - t0
    assert report.ok, report.errors[:3]
    assert text.count("<step") == 8192
    assert elapsed < 4.0  # typically ~1 s; generous for loaded CI machines


def test_segmented_ring_allgather() -> None:
    assert verify_msccl_text(segmented_ring_allgather(9, 3), "ag").ok
    broken = segmented_ring_allgather(9, 3).replace('depid="1" deps="3"', 'depid="1" deps="4"')
    assert has(errors_of(broken), "deadlock", "publish step >= 4")


def _remote_order_program(reply_first: bool):
    """Allgather on 2 ranks where rank 0's two threadblocks touch o[0] and are
    ordered only through rank 1 (its reply is sent after it received), or,
    with ``reply_first``, not ordered at all."""
    from colc.ir.core import Buffer, Collective, Protocol
    from colc.ir.program import Loc, Program, RankProgram, Step, StepKind, Threadblock

    i, o = Buffer.INPUT, Buffer.OUTPUT
    rank0 = (Threadblock(0, 1, None, 0, (Step(StepKind.COPY, Loc(i, 0), Loc(o, 0), 1),
                                         Step(StepKind.SEND, Loc(o, 0), Loc(o, 0), 1))),
             Threadblock(1, None, 1, 0, (Step(StepKind.RECV, Loc(o, 1), Loc(o, 1), 1),
                                         Step(StepKind.COPY, Loc(o, 0), Loc(o, 0), 1))))
    recv = Step(StepKind.RECV, Loc(o, 0), Loc(o, 0), 1)
    reply = (Step(StepKind.COPY, Loc(i, 0), Loc(o, 1), 1),
             Step(StepKind.SEND, Loc(o, 1), Loc(o, 1), 1))
    steps = (*reply, recv) if reply_first else (recv, *reply)
    rank1 = (Threadblock(0, 0, 0, 0, steps),)
    return Program("remote-order", Collective.ALLGATHER, Protocol.SIMPLE, 1, 2, 2, False, True,
                   0, 0, (RankProgram(0, 1, 2, 0, rank0), RankProgram(1, 1, 2, 0, rank1)))


def test_order_through_another_rank_is_not_a_race() -> None:
    # the rank-local clocks see a race; the full clocks, which follow the
    # messages through rank 1, prove the accesses ordered
    assert interpret(_remote_order_program(False), fifo_depth=2, inplace=False) == []


def test_race_confirmed_by_the_full_clocks() -> None:
    diags = interpret(_remote_order_program(True), fifo_depth=2, inplace=False)
    assert any("data race on o[0]" in d.message and d.rank == 0 for d in diags), diags


def test_token_game_finds_the_interpreters_deadlocks() -> None:
    # the lowering's hang check: messages and flags only, same verdict
    from colc.ir.interpret import deadlocks

    program = read_msccl(example("03"), "03").program
    for depth in (1, 2, 3, 8):
        full = [d for d in interpret(program, fifo_depth=depth, inplace=True)
                if "deadlock" in d.message]
        game = [d for d in deadlocks(program, depth) if "deadlock" in d.message]
        assert [str(d) for d in game] == [str(d) for d in full]
    assert deadlocks(read_msccl(example("01"), "01").program, 2) == []


def test_a_nop_depid_past_int8_is_an_error() -> None:
    """The runtime keeps a nop's depid in an int8 like a step's: 130 names
    no threadblock (the wait never ends), 257 names threadblock 1."""
    text = example("01")
    head = '<tb id="0" send="1" recv="3" chan="0">\n'
    for depid, says in ((130, "waits on no threadblock"), (257, "waits on threadblock 1")):
        nop = step(0, "nop", ("i", -1), ("i", -1), cnt=0, dep=(depid, 0)) + "\n"
        errs = errors_of(mutate(text, head, head + nop))
        assert has(errs, f"depid {depid} > 127", says), errs


def test_a_33rd_send_peer_on_a_channel_is_an_error_even_when_idle() -> None:
    """Past 32 threadblocks with a send (or recv) peer on one channel the
    executor's parser records the peer past its 32-entry array, whether or
    not the threadblock sends; with a send step the load fails."""
    n = 34
    lines = [f'<algo name="x" proto="Simple" nchannels="2" nchunksperloop="{n}" ngpus="{n}" '
             'coll="allgather" inplace="0" outofplace="1" minBytes="0" maxBytes="0">']
    for r in range(n):
        lines.append(f'  <gpu id="{r}" i_chunks="1" o_chunks="{n}" s_chunks="0">')
        nxt, prv = (r + 1) % n, (r - 1) % n
        lines.append(f'    <tb id="0" send="{nxt}" recv="{prv}" chan="0">')
        lines.append(step(0, "cpy", ("i", 0), ("o", r)))
        lines += [step(1, "s", ("o", r), ("o", r))]
        lines += [step(1 + j, "rcs", ("o", (r - j) % n), ("o", (r - j) % n))
                  for j in range(1, n - 1)]
        lines += [step(n - 1, "r", ("o", (r + 1) % n), ("o", (r + 1) % n)), "    </tb>"]
        idle = ([f'    <tb id="{p}" send="{p}" recv="-1" chan="1">\n    </tb>' for p in range(1, n)]
                if r == 0 else [f'    <tb id="1" send="-1" recv="0" chan="1">\n    </tb>'])
        lines += idle + ["  </gpu>"]
    text = "\n".join(lines + ["</algo>"]) + "\n"
    errs = errors_of(text)
    assert has(errs, "rank 0 tb 33", "more than 32 tbs with a send peer on channel 1",
               "past the channel's 32-entry array"), errs
    assert not has(errs, "tb 32:"), errs  # the 32nd fits
    busy = mutate(text, f'<tb id="33" send="33" recv="-1" chan="1">\n    </tb>',
                  f'<tb id="33" send="33" recv="-1" chan="1">\n'
                  + step(0, "s", ("o", 0), ("o", 0)) + "\n    </tb>")
    assert has(errors_of(busy), "rank 0 tb 33", "too many sends per channel (load fails)")
    # a 34th that sends is named too (the load fails there)
    n_more = mutate(text, '<tb id="33" send="33" recv="-1" chan="1">\n    </tb>',
                    '<tb id="33" send="33" recv="-1" chan="1">\n    </tb>\n'
                    '    <tb id="34" send="2" recv="-1" chan="1">\n'
                    + step(0, "s", ("o", 0), ("o", 0)) + "\n    </tb>")
    errs = errors_of(n_more)
    assert has(errs, "rank 0 tb 33", "past the channel's") and has(
        errs, "rank 0 tb 34", "too many sends per channel (load fails)"), errs


def test_a_window_past_the_loop_iteration_limit_is_warned() -> None:
    """A call runs at most 65536 loop iterations (MSCCL_MAX_ITER) before its
    dependency flags overflow: an LL file with dependencies and no maxBytes
    (example 03: nchunksperloop 9, RCCL's 16 KiB of a chunk an iteration, the
    smaller LL buffer) hangs past 9 GiB; with maxBytes there, or no
    dependency (example 04), there is no warning."""
    from colc.backends.verify import verify_text

    limit = 9 * 65536 * 16384
    text = example("03")
    warned = [w for w in verify_text(text, "a.xml").warnings if "MSCCL_MAX_ITER" in w]
    assert len(warned) == 1 and "above 9G" in warned[0] and str(limit) in warned[0], warned
    capped = mutate(text, 'maxBytes="0"', f'maxBytes="{limit}"')
    assert not [w for w in verify_text(capped, "b.xml").warnings if "MSCCL_MAX_ITER" in w]
    assert not [w for w in verify_text(example("04"), "c.xml").warnings
                if "MSCCL_MAX_ITER" in w]


def test_broadcast_and_reduce_files_are_warned_of_their_root() -> None:
    """The runtime ignores the root when it selects a file, so a broadcast
    or reduce file (proved for root 0) runs for every root; with Simple
    its host and kernel also disagree on chunk steps."""
    from colc.backends.verify import verify_text

    for coll, kind in (("broadcast", "r"), ("reduce", "rrc")):
        text = "\n".join([
            f'<algo name="t" proto="Simple" nchannels="1" nchunksperloop="1" ngpus="2" '
            f'coll="{coll}" inplace="0" outofplace="1" minBytes="0" maxBytes="0">',
            '  <gpu id="0" i_chunks="1" o_chunks="1" s_chunks="0">',
            '    <tb id="0" send="-1" recv="1" chan="0">' if coll == "reduce" else
            '    <tb id="0" send="1" recv="-1" chan="0">',
            step(0, "cpy", ("i", 0), ("o", 0)) if coll == "broadcast" else
            step(0, kind, ("i", 0), ("o", 0)),
            step(1, "s", ("i", 0), ("o", 0)) if coll == "broadcast" else "",
            '    </tb>', '  </gpu>',
            '  <gpu id="1" i_chunks="1" o_chunks="1" s_chunks="0">',
            '    <tb id="0" send="-1" recv="0" chan="0">' if coll == "broadcast" else
            '    <tb id="0" send="0" recv="-1" chan="0">',
            step(0, "r", ("i", 0), ("o", 0)) if coll == "broadcast" else
            step(0, "s", ("i", 0), ("o", 0)),
            '    </tb>', '  </gpu>', '</algo>', ""])
        report = verify_text(text, f"{coll}.xml")
        assert report.ok, report.errors
        assert any(w.startswith(f"{coll}: the runtime selects a file whatever the call's root")
                   for w in report.warnings), report.warnings
        assert any(f"{coll} with Simple" in w for w in report.warnings)
        ll = verify_text(text.replace('proto="Simple"', 'proto="LL"'), f"{coll}-ll.xml")
        assert not [w for w in ll.warnings if "with Simple" in w]


def test_compiled_ll_files_end_their_window_at_the_loop_iteration_limit() -> None:
    """A compiled LL file without a --max-bytes (ring allgather on 4 ranks,
    nchunksperloop 8) ends its window at 8 GiB, the last size its calls
    run within 65536 loop iterations (RCCL's LL buffer), and says so; its
    verify has no warning of it, a size past it is predicted as not
    selected, and a Simple file (1 TiB and more) keeps an unlimited
    window."""
    import dataclasses

    from colc.backends.verify import verify_text
    from colc.compiler.pipeline import CompileOptions, compile_topology
    from colc.frontends.families import ring
    from colc.ir.core import Collective, Protocol
    from colc.ir.simulate import iteration_limit

    topo = ring(4, 25)
    opts = CompileOptions(collective=Collective.ALLGATHER, algorithm="ring", jobs=1,
                          protocol=Protocol.LL, chunks=1)  # one ring (c copies: c x 8 GiB)
    result = compile_topology(topo, opts)
    assert result.program.max_bytes == iteration_limit(result.program) == 8 * (1 << 30)
    assert 'maxBytes="8589934592"' in result.text
    assert any(n.startswith("maxBytes 8589934592: a larger call runs more than 65536 loop")
               for n in result.notes), result.notes
    assert not [w for w in verify_text(result.text, "ll.xml").warnings if "MSCCL_MAX_ITER" in w]
    wide = compile_topology(topo, dataclasses.replace(opts, max_bytes=1 << 36))
    assert [r.selected for _, r in wide.predicted][-1] is False  # 64 GiB: past the limit
    simple = compile_topology(topo, dataclasses.replace(opts, protocol=Protocol.SIMPLE))
    assert simple.program.max_bytes == 0


def test_int16_overflow_in_a_field_the_step_does_not_use_is_a_warning() -> None:
    """The runtime keeps srcoff, dstoff and deps as int16 but reads an
    offset only where the step type uses it and deps only with a depid:
    40000 in an unused one loads and runs (it was an error); in a used one
    it stays an error."""
    from colc.backends.verify import verify_text

    text = example("01")
    recv = '<step s="6" type="r" srcbuf="i" srcoff="2"'
    unused = mutate(text, recv, '<step s="6" type="r" srcbuf="i" srcoff="40000"')
    unused = mutate(unused, 'depid="-1" deps="-1"', 'depid="-1" deps="40000"')
    report = verify_text(unused, "unused.xml")
    assert report.ok, report.errors
    assert any("srcoff 40000 does not fit in int16 (unused" in w for w in report.warnings)
    assert any("deps=40000 does not fit in int16 (unused: depid -1)" in w
               for w in report.warnings)
    send = '<step s="0" type="s" srcbuf="i" srcoff="0"'
    assert has(errors_of(mutate(text, send, '<step s="0" type="s" srcbuf="i" srcoff="40000"')),
               "srcoff 40000 does not fit in int16")


def test_verify_holds_a_file_to_the_budget_given(tmp_path, capsys) -> None:
    """Found by a helper exploring as a user: colc verify could not check a
    file against the threadblock budget it was compiled for (colc simulate
    could); with --max-threadblocks a file taking more fails, alone or in a
    folder, and a budget below 1 is refused."""
    import re

    from colc.cli import main

    topo = str(Path(__file__).resolve().parent.parent / "examples" / "ring-4.yaml")
    folder = tmp_path / "pf"
    folder.mkdir()
    out = folder / "ag.xml"
    assert main([topo, "--collective", "allgather", "--algorithm", "ring", "--chunks", "4",
                 "-o", str(out)]) == 0
    capsys.readouterr()
    tbs = int(re.search(r"(\d+) threadblocks per GPU", _summary_of(main, out, capsys)).group(1))
    assert main(["verify", str(out), "--max-threadblocks", str(tbs)]) == 0
    capsys.readouterr()
    assert main(["verify", str(out), "--max-threadblocks", str(tbs - 1)]) == 1
    assert capsys.readouterr().out.strip() == (
        f"{out}: error: {tbs} threadblocks per GPU, more than the budget of {tbs - 1} "
        f"(--max-threadblocks)")
    assert main(["verify", str(folder), "--max-threadblocks", str(tbs - 1), "-q"]) == 1
    assert f"{out}: error: {tbs} threadblocks per GPU" in capsys.readouterr().out
    assert main(["verify", str(out), "--max-threadblocks", "0"]) == 1
    assert "must be 1 or more" in capsys.readouterr().err


def _summary_of(main, path, capsys) -> str:
    assert main(["verify", str(path)]) == 0
    return capsys.readouterr().out


# ------------------------------------------- runtime audit (msccl-xml-runtime)
def _staged_allgather(via: int, to: int, scratch: int = 3, cnt: int = 2,
                      min_bytes: int = 0, inplace: bool = False) -> str:
    """2-rank allgather (LL, nchunksperloop 4) whose ranks stage their shard
    through scratch: ``cpy i[0] -> s[via]``, ``cpy s[via] -> s[to]``, ``cpy
    s[to] -> o[own]``, each of ``cnt`` chunks, then exchange.  Correct for
    any ``via``, ``to`` when each chunk is copied on its own (the
    interpreter's calls)."""
    mode = 'inplace="1" outofplace="0"' if inplace else 'inplace="0" outofplace="1"'
    lines = [f'<algo name="t" proto="LL" nchannels="1" nchunksperloop="4" ngpus="2" '
             f'coll="allgather" {mode} minBytes="{min_bytes}" maxBytes="0">']
    for r in range(2):
        own, other = 2 * r, 2 * (1 - r)
        lines += [f'  <gpu id="{r}" i_chunks="2" o_chunks="4" s_chunks="{scratch}">',
                  f'    <tb id="0" send="{1 - r}" recv="{1 - r}" chan="0">',
                  step(0, "cpy", ("i", 0), ("s", via), cnt),
                  step(1, "cpy", ("s", via), ("s", to), cnt),
                  step(2, "cpy", ("s", to), ("o", own), cnt),
                  step(3, "s", ("o", own), ("o", own), 2),
                  step(4, "r", ("o", other), ("o", other), 2),
                  '    </tb>', '  </gpu>']
    return "\n".join(lines + ["</algo>", ""])


def test_a_local_copy_onto_an_overlapping_range_is_a_race() -> None:
    """Audit: ``cpy s[1] -> s[0]`` of cnt 2 verified, as the interpreter
    copies chunk by chunk; for small calls (maxAllowedCount >= 2) the
    runtime copies both chunks as one range whose threads race."""
    errs = errors_of(_staged_allgather(1, 0))
    for rank in (0, 1):
        assert has(errs, f"rank {rank} tb 0 step 1", "src s[1..2] and dst s[0..1] overlap",
                   "1 chunk apart", "up to 65536 bytes", "a race"), errs
    assert len(errs) == 2, errs
    assert has(errors_of(_staged_allgather(0, 1)), "rank 0 tb 0 step 1",
               "src s[0..1] and dst s[1..2] overlap")  # forward: the same race
    for text in (_staged_allgather(2, 0, scratch=4),  # two chunks apart: disjoint
                 _staged_allgather(1, 1),  # onto itself: each thread its own elements
                 _staged_allgather(1, 0, min_bytes=1 << 20)):  # calls copy chunk by chunk
        report = verify_msccl_text(text, "t.xml")
        assert report.ok, report.errors


def test_an_overlap_through_the_in_place_aliasing_is_a_race() -> None:
    """In-place, rank 1's i[0..1] is o[2..3]: a cnt-2 copy from i[0] to o[1]
    overlaps it one chunk apart, though the buffers are named apart."""
    text = _staged_allgather(0, 1, scratch=3, inplace=True)
    text = mutate(text, step(2, "cpy", ("s", 1), ("o", 2), 2),
                  step(2, "cpy", ("s", 1), ("o", 2), 2).replace('srcbuf="s" srcoff="1"',
                                                               'srcbuf="i" srcoff="0"')
                  .replace('dstoff="2"', 'dstoff="1"'))
    errs = errors_of(text)
    assert has(errs, "rank 1 tb 0 step 2", "src i[0..1] and dst o[1..2] overlap through the "
               "in-place aliasing"), errs
    assert not has(errs, "rank 0 tb 0 step 2", "overlap")  # rank 0's i[0..1] is o[0..1]


def test_fused_reduce_and_rrc_operands_overlapping_the_destination_race() -> None:
    from colc.ir.core import Buffer, Collective, Protocol
    from colc.ir.program import Loc, Program, RankProgram, Step, StepKind, Threadblock

    def overlaps(*steps: Step) -> list[str]:
        """Rank 1's steps after rank 0 sends it i[0..1] (a 2-rank allreduce)."""
        send = Step(StepKind.SEND, Loc(i, 0), Loc(i, 0), 2)
        ranks = (RankProgram(0, 4, 4, 4, (Threadblock(0, 1, None, 0, (send,)),)),
                 RankProgram(1, 4, 4, 4, (Threadblock(0, None, 0, 0, steps),)))
        p = Program("x", Collective.ALLREDUCE, Protocol.SIMPLE, 1, 4, 2, False, True, 0, 0,
                    ranks)
        found = interpret(p, fifo_depth=2, inplace=False)
        return [str(d) for d in found if "overlap" in str(d)]

    i, s, o = Buffer.INPUT, Buffer.SCRATCH, Buffer.OUTPUT
    recv = Step(StepKind.RECV, Loc(i, 0), Loc(s, 0), 2)
    assert overlaps(recv, Step(StepKind.REDUCE, Loc(s, 0), Loc(o, 0), 2),
                    Step(StepKind.REDUCE, Loc(s, 2), Loc(o, 0), 2)) == []
    fused = overlaps(recv, Step(StepKind.REDUCE, Loc(o, 2), Loc(o, 0), 2),  # one transmission
                     Step(StepKind.REDUCE, Loc(o, 1), Loc(o, 0), 2))
    assert fused == ["rank 1 tb 0 step 1: reduce cnt 2: src o[1..2] and dst o[0..1] overlap, "
                     "1 chunk apart; for calls up to 4194304 bytes (maxAllowedCount > 1) the "
                     "runtime moves the 2 chunks as one contiguous range, whose threads read "
                     "what others write: a race"], fused
    rrc = overlaps(Step(StepKind.RECV_REDUCE_COPY, Loc(o, 1), Loc(o, 0), 2))
    assert len(rrc) == 1 and "rank 1 tb 0 step 0: recv_reduce_copy cnt 2: src o[1..2]" in rrc[0]
    assert overlaps(Step(StepKind.RECV_REDUCE_COPY, Loc(o, 0), Loc(o, 0), 2)) == []


def test_a_rank_without_threadblocks_is_an_error() -> None:
    """Audit: an empty ``<gpu>`` verified; the runtime launches that rank's
    kernel with a grid of 0 blocks, which fails.  A missing ``<gpu>`` is
    named once, as missing."""
    text = "\n".join([
        '<algo name="t" proto="Simple" nchannels="1" nchunksperloop="1" ngpus="1" '
        'coll="allreduce" inplace="1" outofplace="0" minBytes="0" maxBytes="0">',
        '  <gpu id="0" i_chunks="1" o_chunks="1" s_chunks="0">', '  </gpu>', '</algo>', ""])
    assert errors_of(text) == ("rank 0: no threadblock: the runtime launches this rank's kernel "
                               "with a grid of 0 blocks, which fails (every call of the "
                               "collective errors)",)
    missing = errors_of(text.replace('ngpus="1"', 'ngpus="2"'))
    assert has(missing, "rank 1", "runs nothing") and not has(missing, "rank 1: no threadblock")


@pytest.mark.parametrize("attrs, error, warned", [
    ('minBytes="-1" maxBytes="0"', "minBytes -1 is negative: the runtime compares it with a "
     "call's size unsigned, as 18446744073709551615, so it never selects this algorithm", ""),
    ('minBytes="0" maxBytes="-1"', "", "maxBytes -1 is negative: the runtime compares it with a "
     "call's size unsigned, as 18446744073709551615, so no upper limit is in effect"),
    ('minBytes="4096" maxBytes="-4096"', "", "maxBytes -4096 is negative"),
])
def test_negative_byte_limits_are_read_unsigned(attrs: str, error: str, warned: str) -> None:
    """Audit: the runtime compares the call's size_t bytes with int64
    minBytes/maxBytes, unsigned: maxBytes -1 is no limit in effect (colc
    said "< minBytes 0"), minBytes -1 is never met (colc said selected)."""
    from colc.backends.verify import verify_text
    from colc.ir.simulate import selectable_sizes

    text = mutate(example("04"), 'minBytes="0" maxBytes="0"', attrs)
    report = verify_text(text, "m.xml")
    assert report.errors == ((error,) if error else ()), report.errors
    assert not warned or any(w.startswith(warned) for w in report.warnings), report.warnings
    program = read_msccl(text, "m.xml").program
    assert bool(selectable_sizes(program)) == (not error)
    if not error:
        assert "unlimited (maxBytes -" in report.summary, report.summary


# ------------------------- the audit's items left (reader, channels, offsets, fusion)
def _one_rank(steps: list[str], *, before: str = "", chan: int = 0, o_chunks: int = 1,
              s_chunks: int = 0) -> str:
    """1-rank out-of-place allreduce: one peerless tb on ``chan`` running
    ``steps`` (default: ``cpy i[0] -> o[0]``); ``before`` goes inside
    ``<algo>`` before the ``<gpu>``."""
    return "\n".join([
        '<algo name="t" proto="Simple" nchannels="1" nchunksperloop="1" ngpus="1" '
        'coll="allreduce" inplace="0" outofplace="1" minBytes="0" maxBytes="0">', before,
        f'  <gpu id="0" i_chunks="1" o_chunks="{o_chunks}" s_chunks="{s_chunks}">',
        f'    <tb id="0" send="-1" recv="-1" chan="{chan}">',
        *(steps or [step(0, "cpy", ("i", 0), ("o", 0))]),
        '    </tb>', '  </gpu>', '</algo>', ""])


@pytest.mark.parametrize("skipped, note", [
    ("""<note text='it"/>""", "a value opened with \"'\" ends at the next '\"'"),
    ('<note><a></b></note>', "</b> closes <a>: the runtime skips <a>"),
    ('<gpu id="5" i_chunks="1" o_chunks="1" s_chunks="0"><tb id="0" send="-1" recv="-1" '
     'chan="0"></tbx></gpu>', "</tbx> closes <tb>"),  # no rank loads gpu 5's threadblocks
], ids=["apostrophe", "close", "not-a-rank"])
def test_what_the_runtime_takes_inside_an_element_it_skips(skipped: str, note: str) -> None:
    """Audit (left, now fixed): the runtime's reader opens a value with '"'
    or "'" and ends it at the next '"' only (parser.cc:29, 44-48); it skips
    an element it has no handler for in one node slot, which each element
    read inside overwrites, so a closing tag there is compared with itself
    (parser.cc:173-174, 186, 206).  colc refused both; now it warns."""
    from colc.backends.verify import verify_text

    report = verify_text(_one_rank([], before="  " + skipped), "skip.xml")
    assert report.ok, report.errors
    assert any(w.startswith(note) for w in report.warnings), report.warnings


@pytest.mark.parametrize("text, error", [
    (_one_rank([], before="  <note a='x'/>"), "expected '>', got '0' in <note> (a value "
     "opened with \"'\" ends only at the next '\"' in the runtime) [line 2]"),  # runs to <gpu id="
    (_one_rank([]).replace("    </tb>", "    </tbx>"),
     "mismatched closing tag: <tb> closed by </tbx> [line 6]"),  # rank 0 stores its tb
    (_one_rank([], before='  <gpu id="0" i_chunks="1" o_chunks="1" s_chunks="0"><foo></gpu>'),
     "mismatched closing tag: <gpu> closed by </algo> [line 8]"),  # </gpu> closed <foo>
    (_one_rank([], before="  <note a='x\" b=\"y\"\t/>"), "expected '>', got '\\t' in <note> "
     "(newline or tab inside a tag?) [line 2]"),  # a's value ended where it should
], ids=["apostrophe", "own-tb", "own-gpu", "apostrophe-closed"])
def test_what_the_runtime_refuses_there_stays_refused(text: str, error: str) -> None:
    assert errors_of(text) == (error,)


def test_a_peerless_threadblock_runs_on_any_channel() -> None:
    """Audit (left, now fixed): a tb without peers on ``chan >= nchannels``
    was called a hang.  Its primitives load no connection (no peer, no role:
    prims_simple.h, the constructor's ``if (flags & ...) load...Conn``) and
    the kernel only copies ``channels[chan]`` into shared memory
    (msccl_kernel.cu, ``case 1``): its local steps run.  With a peer it
    still needs the connection the runtime never sets up there."""
    from colc.backends.verify import verify_text

    report = verify_text(_one_rank([], chan=1), "local.xml")
    assert report.ok, report.errors
    peered = mutate(mutate(_one_rank([], chan=1), 'ngpus="1"', 'ngpus="2"'),
                    'send="-1"', 'send="1"')
    assert has(errors_of(peered), "rank 0 tb 0: chan 1 >= nchannels 1", "hang")


def _pair_allreduce(dstoff: int) -> str:
    """2-rank out-of-place allreduce: each rank sends i[0..1] and reduces
    what it receives with them into o[0..1] (``rrc``); rank 1 writes
    ``dstoff`` for that o[0]."""
    lines = ['<algo name="t" proto="Simple" nchannels="1" nchunksperloop="2" ngpus="2" '
             'coll="allreduce" inplace="0" outofplace="1" minBytes="0" maxBytes="0">']
    for r in range(2):
        lines += [f'  <gpu id="{r}" i_chunks="2" o_chunks="2" s_chunks="0">',
                  f'    <tb id="0" send="{1 - r}" recv="{1 - r}" chan="0">',
                  step(0, "s", ("i", 0), ("o", 0), 2),
                  step(1, "rrc", ("i", 0), ("o", dstoff if r else 0), 2),
                  '    </tb>', '  </gpu>']
    return "\n".join(lines + ["</algo>", ""])


def test_an_offset_past_int16_is_read_truncated() -> None:
    """Audit (left, now fixed): the runtime stores srcoff and dstoff as int16
    (msccl_struct.h ``int16_t srcOffset, dstOffset``; parser.cc:571-575),
    bounds-checks the stored value where the type is checked
    (parser.cc:610-611) and uses it (msccl_kernel.cu).  An rrc (never
    checked, parser.cc:518-521) whose dstoff 65536 is stored as 0 runs
    right, but was called unused, then read out of the buffer."""
    from colc.backends.verify import verify_text

    assert verify_text(_pair_allreduce(0), "near.xml").ok
    report = verify_text(_pair_allreduce(65536), "far.xml")
    assert report.ok, report.errors
    assert any("rank 1 tb 0 step 1: dstoff 65536 does not fit in int16: the runtime stores and "
               "uses 0" in w for w in report.warnings), report.warnings
    report = verify_text(mutate(_one_rank([]), 'dstoff="0"', 'dstoff="65536"'), "cpy.xml")
    assert report.ok, report.errors  # checked, as the 0 it stores: in bounds
    assert errors_of(mutate(_one_rank([]), 'dstoff="0"', 'dstoff="40000"')) == (
        "rank 0 tb 0 step 0: dstoff 40000 does not fit in int16: the runtime stores -25536, "
        "< -1 (runtime: 'Incorrect offset') [line 5]",)


def test_an_rrc_offset_truncated_out_of_the_buffer_is_an_error() -> None:
    """40000 is stored as -25536: the runtime writes before the buffer."""
    errs = errors_of(_pair_allreduce(40000))
    assert has(errs, "rank 1 tb 0 step 1: dst o[-25536..-25535] outside the real extent"), errs


def test_a_re_with_depid_below_minus_one_is_not_fused() -> None:
    """Audit (left, now fixed): the parser fuses a ``re`` into the one before
    only when its depid is -1 (parser.cc:559, ``dependBid == -1``); depid
    -2 waits for nothing (parser.cc:545) but starts a chain of its own.  A
    chain of 16 broken at its 8th member by depid -2 is two chains (7 and
    9 members), which the runtime runs; colc fused all 16 (an error).  The
    reductions move cnt 0 chunks: only the chain's length is at stake."""
    from colc.backends.verify import verify_text

    steps = [step(0, "cpy", ("i", 0), ("o", 0))]
    steps += [step(1 + k, "re", ("s", k), ("o", 0), 0, dep=(-2, -1) if k == 7 else None)
              for k in range(16)]
    text = _one_rank(steps, s_chunks=16)
    report = verify_text(text, "chain.xml")
    assert report.ok, report.errors
    assert any("depid=-2 < -1 waits for nothing" in w for w in report.warnings)
    (tb,) = read_msccl(text, "chain.xml").loaded.tbs[0]
    assert [len(t.operands) for t in tb.transmissions] == [0, 7, 9]


def test_a_depid_below_minus_one_names_fusion_only_on_a_re() -> None:
    """The warning for depid -2 said the runtime fuses a ``re`` only at
    depid -1 on every step type; fusion concerns a ``re`` alone."""
    from colc.backends.verify import verify_text

    report = verify_text(_one_rank([step(0, "cpy", ("i", 0), ("o", 0), dep=(-2, -1))]), "c.xml")
    assert report.ok, report.errors
    assert report.warnings == ("rank 0 tb 0 step 0: depid=-2 < -1 waits for nothing [line 5]",)
    steps = [step(0, "cpy", ("i", 0), ("o", 0)), step(1, "re", ("s", 0), ("o", 0), 0, (-2, -1))]
    report = verify_text(_one_rank(steps, s_chunks=1), "re.xml")
    assert report.warnings == ("rank 0 tb 0 step 1: depid=-2 < -1 waits for nothing, but the "
                               "runtime fuses a re into the re before it only at depid -1 "
                               "[line 6]",), report.warnings


def _re_chain(dstoffs: list[int]) -> list[int]:
    """Operands per transmission of a cpy then one cnt-0 ``re`` into
    ``o[dstoff]`` per entry of ``dstoffs`` (the file must verify)."""
    from colc.backends.verify import verify_text

    steps = [step(0, "cpy", ("i", 0), ("o", 0))]
    steps += [step(1 + k, "re", ("s", k), ("o", off), 0) for k, off in enumerate(dstoffs)]
    text = _one_rank(steps, s_chunks=len(dstoffs))
    report = verify_text(text, "chain.xml")
    assert report.ok, report.errors
    (tb,) = read_msccl(text, "chain.xml").loaded.tbs[0]
    return [len(t.operands) for t in tb.transmissions]


def test_a_re_whose_dstoff_is_past_int16_continues_no_chain() -> None:
    """The parser compares the previous ``re``'s stored int16 dstOffset
    with this step's dstoff as read, an int (parser.cc:
    ``oldReductionDstOffset == dstOffset``): a dstoff that does not fit
    in int16 never continues a chain, though it is stored like the one
    before.  16 ``re`` into dstoff 65536 (stored 0) are 16 transmissions;
    colc compared the stored values and fused them (an error).  One at 0
    after one at 65536 continues it: 0 equals the 0 stored."""
    assert _re_chain([65536] * 16) == [0] + [1] * 16
    assert _re_chain([65536, 0]) == [0, 2]
    assert _re_chain([0, 65536, 0]) == [0, 1, 2]
    assert _re_chain([0, 0]) == [0, 2]
