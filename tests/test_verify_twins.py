"""Verifying several files in turn: the reader's plain-step path and runs
shared between files with the same steps (a portfolio's LL and LL128 windows)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from verify_helpers import example, mutate  # noqa: E402

from colc.backends import msccl_reader, msccl_verify  # noqa: E402
from colc.backends.msccl_verify import MscclVerifier, verify_msccl_text  # noqa: E402
from colc.backends.verify import Verifier  # noqa: E402
from colc.backends.verify_dir import verify_dir  # noqa: E402
from colc.compiler.pipeline import _twin_groups  # noqa: E402

LL = example("03")  # allreduce on 3 GPUs, LL, in-place
LL128 = mutate(mutate(LL, 'proto="LL"', 'proto="LL128"'), 'name="allreduce_pairs"',
               'name="pairs-ll128"')
SIMPLE = mutate(LL, 'proto="LL"', 'proto="Simple"')
# rank 0's first reduce adds the wrong scratch chunk: the postcondition fails
BROKEN = mutate(LL, 'type="re" srcbuf="s" srcoff="0" dstbuf="i" dstoff="0"',
                'type="re" srcbuf="s" srcoff="1" dstbuf="i" dstoff="0"')


def step_nodes(text: str):
    for algo in msccl_reader.parse_tree(text):
        for gpu in algo.children:
            for tb in gpu.children:
                yield from ((int(gpu.attrs[0][1]), int(tb.attrs[0][1]), pos, node)
                            for pos, node in enumerate(tb.children))


def test_plain_steps_read_as_the_checked_path_reads_them() -> None:
    reader = msccl_reader._Reader(LL)
    nodes = list(step_nodes(LL))
    assert len(nodes) == 51
    for rank, tb, pos, node in nodes:
        fast = msccl_reader._plain_step(node)
        assert fast is not None  # every step of the example is plain
        assert fast == reader.step_fields(node, (rank, tb, pos))
    assert reader.diags == []


@pytest.mark.parametrize("old, new, warning", [
    ('srcoff="0" dstbuf="i" dstoff="0"', 'srcoff="00" dstbuf="i" dstoff="0"', None),
    ('cnt="1" depid="1"', 'cnt="01" depid="1"', "read as octal"),
    ('cnt="1" depid="1"', 'cnt="0x1" depid="1"', None),
    ('cnt="1" depid="1"', 'cnt="+1" depid="1"', None),
    ('cnt="1" depid="1"', 'cnt=" 1" depid="1"', None),
    ('depid="1" deps="1" hasdep="0"', 'depid="1" hasdep="0" deps="1"', None),
    ('hasdep="0"/>', 'hasdep="0" hasdep="1"/>', "given twice"),
])
def test_other_spellings_take_the_checked_path(old: str, new: str, warning: str | None) -> None:
    text = mutate(LL, old, new)
    odd = [node for _r, _t, _p, node in step_nodes(text)
           if msccl_reader._plain_step(node) is None]
    assert len(odd) == 1
    report = verify_msccl_text(text, "x.xml")
    assert report.ok, report.errors
    if warning is not None:
        assert any(warning in w for w in report.warnings), report.warnings


def count_runs(monkeypatch) -> list[str]:
    runs: list[str] = []
    real = msccl_verify.run_findings

    def counted(program, loaded, jobs=None):
        runs.append(program.name)
        return real(program, loaded, jobs)

    monkeypatch.setattr(msccl_verify, "run_findings", counted)
    return runs


def test_a_file_with_the_previous_files_steps_is_not_run_again(monkeypatch) -> None:
    runs = count_runs(monkeypatch)
    verifier = MscclVerifier()
    first, second = verifier.verify(LL, "ll.xml"), verifier.verify(LL128, "ll128.xml")
    assert runs == ["allreduce_pairs"]
    assert first.ok and second.ok and first.twin == "" and second.twin == "ll.xml"
    alone = verify_msccl_text(LL128, "ll128.xml")
    assert (second.errors, second.warnings) == (alone.errors, alone.warnings)
    assert second.program == alone.program  # read from its own text


@pytest.mark.parametrize("other", [SIMPLE, BROKEN], ids=["fifo-depth", "one-step"])
def test_a_different_program_is_run(monkeypatch, other: str) -> None:
    runs = count_runs(monkeypatch)
    verifier = MscclVerifier()
    verifier.verify(LL, "a.xml")
    report = verifier.verify(other, "b.xml")
    assert len(runs) == 2 and report.twin == ""
    assert report.errors == verify_msccl_text(other, "b.xml").errors


def test_a_file_after_one_whose_runs_failed_is_run(monkeypatch) -> None:
    runs = count_runs(monkeypatch)
    verifier = MscclVerifier()
    broken_ll128 = mutate(BROKEN, 'proto="LL"', 'proto="LL128"')
    first, second = verifier.verify(BROKEN, "a.xml"), verifier.verify(broken_ll128, "b.xml")
    assert len(runs) == 2
    assert not first.ok and not second.ok and second.twin == ""
    assert any("postcondition of allreduce fails" in e for e in second.errors), second.errors


def test_the_directory_report_names_the_shared_runs(tmp_path, monkeypatch) -> None:
    runs = count_runs(monkeypatch)
    (tmp_path / "00-ll.xml").write_text(mutate(LL, 'maxBytes="0"', 'maxBytes="4096"'))
    (tmp_path / "01-ll128.xml").write_text(mutate(LL128, 'minBytes="0"', 'minBytes="4097"'))
    report = verify_dir(str(tmp_path))
    assert report.ok, (report.errors, [r.errors for _, r in report.files])
    assert len(runs) == 1
    (_, first), (_, second) = report.files
    assert "whose runs it shares" not in first.summary
    assert f"the same steps as {tmp_path / '00-ll.xml'}, whose runs it shares" in second.summary


def test_verifier_text_and_file_agree(tmp_path) -> None:
    path = tmp_path / "x.xml"
    path.write_text(LL)
    assert Verifier().file(str(path)) == Verifier().text(LL, str(path))


def test_portfolio_groups_texts_by_their_steps() -> None:
    texts = [LL, SIMPLE, LL128, BROKEN, "not xml"]
    assert sorted(_twin_groups(texts)) == [[0, 2], [1], [3], [4]]


def test_a_twin_gets_the_header_checks_of_its_own_tag(tmp_path, monkeypatch) -> None:
    """Audit: a file with the previous clean file's steps skipped the checks
    of its <algo> tag, so ``colc verify DIR`` said OK of a window that
    ``colc verify FILE`` calls empty (maxBytes < minBytes)."""
    runs = count_runs(monkeypatch)
    (tmp_path / "a.xml").write_text(mutate(LL, 'maxBytes="0"', 'maxBytes="1048576"'))
    (tmp_path / "b.xml").write_text(mutate(mutate(LL128, 'minBytes="0"', 'minBytes="4194304"'),
                                           'maxBytes="0"', 'maxBytes="2097152"'))
    report = verify_dir(str(tmp_path))
    assert len(runs) == 1 and not report.ok
    (_, first), (_, second) = report.files
    assert first.ok and second.errors == ("maxBytes 2097152 < minBytes 4194304: the runtime "
                                          "never selects this algorithm",), second.errors
    verifier = MscclVerifier()  # the twin's header warning is its own, and later files share
    verifier.verify(LL, "a.xml")
    second = verifier.verify(mutate(LL128, 'maxBytes="0"', 'maxBytes="-1"'), "b.xml")
    third = verifier.verify(LL, "c.xml")
    assert second.ok and second.twin == "a.xml" and third.twin == "a.xml" and len(runs) == 2
    assert [w for w in second.warnings if "maxBytes -1 is negative" in w], second.warnings
