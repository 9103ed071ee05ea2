"""The bad-input corpus (``tests/bad_inputs/``, issue 10).

Every case must end in exit 1 with one line on stderr that names the file and
says what is wrong, without a traceback and without writing the output file,
in bounded time.  The expected text of each file is in ``EXPECTED.tsv``.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from colc.cli import main

HERE = Path(__file__).parent / "bad_inputs"


def _cases() -> list[tuple[str, str, str]]:
    rows = []
    for line in (HERE / "EXPECTED.tsv").read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            name, cmd, text = line.split("\t")
            rows.append((name, cmd, text))
    return rows


def _run(capsys, argv: list[str]) -> tuple[int, str, float]:
    t0 = time.perf_counter()
    rc = main(argv)
    elapsed = time.perf_counter() - t0
    return rc, capsys.readouterr().err, elapsed


def _check_error(rc: int, err: str, path: str, text: str) -> None:
    assert rc == 1, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"{path}:"), err
    assert "Traceback" not in err and "internal error" not in err
    assert text in lines[0], err


def test_every_corpus_file_has_an_expectation():
    listed = {name for name, _, _ in _cases()}
    present = {p.name for p in HERE.iterdir() if p.name != "EXPECTED.tsv"}
    assert present == listed


@pytest.mark.parametrize("name,cmd,text", _cases(), ids=lambda x: str(x)[:40])
def test_bad_input_is_one_clean_line(capsys, tmp_path, name, cmd, text):
    path = str(HERE / name)
    out = tmp_path / "out.xml"
    argv = [path, "-o", str(out)] if cmd == "compile" else ["analyze", path]
    rc, err, elapsed = _run(capsys, argv)
    _check_error(rc, err, path, text)
    assert not out.exists() and list(tmp_path.iterdir()) == []
    assert elapsed < 20, f"{name}: {elapsed:.1f} s"


def test_fifty_megabyte_file_is_refused_before_reading(capsys, tmp_path):
    big = tmp_path / "big.yaml"
    with open(big, "w", encoding="utf-8") as fh:
        fh.write("name: big\nnodes:\n")
        line = "  - {id: n%08d, kind: gpu}\n"
        for i in range(50 * 1024 * 1024 // len(line % 0) + 1):
            fh.write(line % i)
    rc, err, elapsed = _run(capsys, [str(big), "-o", str(tmp_path / "o.xml")])
    _check_error(rc, err, str(big), "colc reads input files of at most 16 MiB")
    assert elapsed < 5


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
def test_link_to_a_device_is_refused(capsys, tmp_path):
    link = tmp_path / "zero.yaml"
    link.symlink_to("/dev/zero")
    rc, err, _ = _run(capsys, [str(link), "-o", str(tmp_path / "o.xml")])
    _check_error(rc, err, str(link), "is a character device")


def test_directory_as_input_is_refused(capsys, tmp_path):
    d = tmp_path / "adir"
    d.mkdir()
    rc, err, _ = _run(capsys, ["analyze", str(d)])
    assert rc == 1 and len(err.strip().splitlines()) == 1 and str(d) in err, err


def test_boxes_on_a_yaml_topology_is_an_error(capsys):
    path = str(HERE.parent.parent / "examples" / "ring-4.yaml")
    rc, err, _ = _run(capsys, [path, "--boxes", "2"])
    _check_error(rc, err, path, "--boxes applies to single-box inputs")


@pytest.mark.parametrize("argv,text", [
    (["--min-bytes", "1Q"], "'1Q' is not a size"),
    (["--dtype", "fp128"], "fp128"),
    (["--instances", "33"], "--instances must be in 1..32"),  # refused before any build
    (["--min-bytes", "1000000T"], "'1000000T' is above 1T"),  # ran past 30 s and 1.9 GB
])
def test_bad_option_values(capsys, argv, text):
    path = str(HERE.parent.parent / "examples" / "ring-4.yaml")
    rc, err, _ = _run(capsys, [path, *argv])
    assert rc in (1, 2) and text in err and "Traceback" not in err, err


def test_a_bad_colc_jobs_is_an_error_not_ignored(capsys, monkeypatch):
    path = str(HERE.parent.parent / "examples" / "ring-4.yaml")
    monkeypatch.setenv("COLC_JOBS", "abc")
    rc, err, _ = _run(capsys, [path, "-o", os.devnull])
    assert rc == 1 and err.strip() == ("colc: error: COLC_JOBS must be a whole number of "
                                       "processes (0: every CPU), got 'abc'")


def test_api_errors_are_colcs_own(tmp_path, capsys):
    """``import colc`` reaches ``colc.errors`` (docs/api.md catches
    ``colc.errors.ColcError``); a negative ``jobs`` is refused (it hung in
    the batch loop); unknown keywords and values of the wrong kind are
    refused in one line (they were TypeErrors from deep inside, or a file
    never selected); colc simulate names a oneCCL file for what it is."""
    import colc

    topo = colc.load_topology(str(HERE.parent.parent / "examples" / "ring-4.yaml"))
    with pytest.raises(colc.errors.ColcError, match="jobs must be"):
        colc.compile(topo, algorithm="ring", jobs=-1)
    for kw, text in (({"foo": 1}, "unknown option 'foo'"),
                     ({"chunks": "2"}, "chunks must be a whole number of at least 1"),
                     ({"min_bytes": 1 << 20, "max_bytes": 1 << 10}, "max_bytes 1024 is smaller"),
                     ({"min_bytes": -1}, "min_bytes must be a whole number of at least 0"),
                     ({"min_bytes": "1Q"}, "option min_bytes: '1Q' is not a size"),
                     ({"min_bytes": "1M", "max_bytes": "1K"}, "max_bytes 1024 is smaller than "
                      "min_bytes 1048576"),
                     ({"inplace": "yes"}, "inplace must be True, False or None"),
                     ({"inplace": False, "outofplace": False}, "leave no kind of call")):
        with pytest.raises(colc.errors.ColcError, match=text):
            colc.compile(topo, algorithm="ring", **kw)
    # an all-to-all is correct only out of place: excluding that is the user's
    # choice, not an internal error
    with pytest.raises(colc.errors.ColcError,
                       match=r"not correct inplace \(and outofplace calls were excluded\)"):
        colc.compile(topo, collective="alltoall", algorithm="direct", outofplace=False)
    ring = colc.compile(topo, collective="allgather", algorithm="ring")
    report = ring.analyze(sizes=("1M",), collectives=("allgather",), algorithms=("ring",))
    assert report["sizes"] == [1 << 20]  # strings as elsewhere in the API (were TypeErrors)
    for kw, text in (({"foo": 1}, "unknown analyze option 'foo'"),
                     ({"collectives": ("bogus",)}, "unknown collective 'bogus'"),
                     ({"sizes": [-5]}, "sizes must be positive whole numbers of bytes"),
                     ({"sizes": [1.5]}, "sizes must be positive whole numbers of bytes"),
                     ({"max_threadblocks": "8"}, "max_threadblocks must be a whole number"),
                     ({"budgets": 4}, "budgets must be whole numbers"),
                     ({"simulate": "no"}, "simulate must be True, False or None"),
                     ({"sizes": None}, "sizes must be a size or a list of sizes"),
                     ({"budgets": None}, "budgets must be whole numbers")):
        with pytest.raises(colc.errors.ColcError, match=text):
            ring.analyze(**kw)
    one = ring.analyze(collectives="allgather", algorithms="ring", sizes=(1 << 20,))
    assert [s["algorithm"] for s in one["schedules"]] == ["ring"]  # not letter by letter
    for kw, text in (({"executor": "ray"}, "executor must be one of 'local', 'dask'"),
                     ({"balance": "no"}, "balance must be one of True, False"),
                     ({"dtype_bytes": 3}, "dtype_bytes must be one of 1, 2, 4, 8"),
                     ({"comment": 5}, "comment must be a string"),
                     ({"rank_sizes": None}, "sizes must be a size or a list of sizes")):
        with pytest.raises(colc.errors.ColcError, match=text):
            colc.compile(topo, algorithm="ring", **kw)
    with pytest.raises(colc.errors.ColcError, match="min_bytes is not an option here"):
        colc.portfolio(topo, min_bytes=1 << 20)
    with pytest.raises(colc.errors.ColcError, match="boxes must be a whole number"):
        colc.load_topology(str(HERE.parent.parent / "examples" / "ring-4.yaml"), boxes="2")
    # simulate and analyze take the compile's machine (they took the topology's)
    a100 = colc.compile(topo, collective="allgather", algorithm="ring", machine="a100")
    (at_128m,) = a100.simulate(sizes="128M")
    assert at_128m.algbw == dict(a100.result.predicted)[128 << 20].algbw
    assert a100.analyze(algorithms=("ring",), sizes=(1 << 20,))["machine"] == "a100"
    with pytest.raises(colc.errors.ColcError, match="protocol is not an option here"):
        colc.portfolio(topo, protocol="LL")
    oneccl = HERE.parent / "data" / "oneccl" / "ring3-allgather-split.oneccl.xml"
    ring3 = tmp_path / "ring3.yaml"
    ring3.write_text("family: ring\nranks: 3\nbandwidth: 25\n")
    assert main(["simulate", str(oneccl), "--topo", str(ring3)]) == 1
    assert "a oneCCL file; colc simulate runs MSCCL files" in capsys.readouterr().err


def test_api_compiles_from_threads_as_one_at_a_time():
    """A helper using the API compiled four collectives from a thread pool:
    the allreduce came out as another, slower file (12 threadblocks, 23.7
    against 49.9 GB/s) in 4 runs of 5, and with jobs=2 some calls raised
    IndexError from the worker pool: the compiler's per-process caches are
    not for threads.  The API runs calls one at a time."""
    from concurrent.futures import ThreadPoolExecutor

    import colc

    topo = colc.load_topology(str(HERE.parent.parent / "examples" / "ring-4.yaml"))
    colls = ["allreduce", "allgather", "reducescatter", "alltoall"]

    def job(coll: str) -> str:
        return colc.compile(topo, collective=coll, jobs=1).to_msccl_xml()

    alone = [job(c) for c in colls]
    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(job, colls)) == alone


def test_api_speaks_in_keywords_and_warns_at_the_callers_line(tmp_path):
    """Found by a helper using the API: errors named the command line's
    flags (use --max-threadblocks 9); a file the runtime never selects, or
    skips at some sizes, was warned of on the command line only; the
    topology's warnings pointed into colc; enums, ranges, dtype names and
    instances in the repr were refused or missing."""
    import warnings

    import colc
    from colc.ir.core import Collective, Protocol

    ring3 = tmp_path / "ring3.yaml"
    ring3.write_text("family: ring\nranks: 3\nbandwidth: 10\n")
    with pytest.raises(colc.errors.ColcError, match=r"use max_threadblocks=\d+ or more$"):
        colc.compile(str(ring3), collective="allgather", max_threadblocks=1)
    with pytest.raises(colc.errors.ColcError, match=r"^chunks=40: ring's chunks are copies.*"
                                                    r"use chunks=32 or fewer$"):
        colc.compile(str(ring3), algorithm="ring", chunks=40)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        made = colc.compile(str(ring3), collective="allgather", algorithm="trees", chunks=8)
    (gap,) = seen
    assert gap.category is UserWarning and gap.filename == __file__
    assert str(gap.message).startswith("the runtime selects this file at 10 of the 21")
    assert "colc.portfolio gives a portfolio" in str(gap.message)
    assert [r.nbytes for r in made.simulate(sizes={"1M", 4096, "4K"})] == [4096, 1 << 20]
    with pytest.warns(UserWarning, match="the runtime never selects it there"):
        colc.compile(str(ring3), algorithm="ring", instances=2)
    both = colc.compile(str(ring3), collective=Collective.ALLGATHER, protocol=Protocol.LL,
                        algorithm="ring", instances=2, dtype="fp16")
    assert both.algorithm == "ring/LL" and both.options.dtype_bytes == 2
    assert "ring/LL x2 instances" in repr(both)
    assert len(made.simulate(sizes=range(1024, 4096, 1024))) == 3
    with pytest.raises(colc.errors.ColcError, match="algorithm must be one name"):
        colc.compile(str(ring3), algorithm=["ring"])
    with pytest.raises(colc.errors.ColcError,
                       match=r"^protocol='LL128': .* use protocol='Simple' or protocol='LL'$"):
        colc.compile(str(ring3), protocol="LL128", machine="mi250")
    odd = tmp_path / "run--jobs 2" / "--max-threadblocks 4.yaml"  # flags only where a message names one
    with pytest.raises(colc.errors.ColcError, match=f"^{re.escape(str(odd))}: error: no such file"):
        colc.load_topology(odd)
    switched = os.path.join(os.path.dirname(os.path.dirname(__file__)), "examples",
                            "switch-tree.yaml")
    with pytest.raises(colc.errors.ColcError,
                       match=r"use algorithm='trees' or algorithm='ring'$"):
        colc.compile(switched, algorithm="bfb")


def test_api_load_topology_names_paths_and_text(tmp_path):
    """A missing path is "no such file" (it was parsed as YAML text); a
    path-like object is always a path; errors in topology text name
    ``<text>``, not the temporary file colc parses it from; an unknown
    ``verify`` backend is refused by name (it was a misleading XML error)."""
    import colc

    for source in (str(tmp_path / "missing.yaml"), tmp_path / "nothere", "topos/absent"):
        with pytest.raises(colc.errors.ColcError, match="error: no such file"):
            colc.load_topology(source)
    for empty in ("", "  \n"):  # was ": error: no such file"
        with pytest.raises(colc.errors.ColcError, match="source is empty"):
            colc.load_topology(empty)
    assert {"compile", "load_topology", "portfolio", "Compiled"} <= set(dir(colc))
    with pytest.raises(colc.errors.SpecError) as err:
        colc.load_topology("family: ring\nranks: 4\n")
    assert str(err.value).startswith("<text>:") and err.value.path == "<text>"
    assert "tmp" not in str(err.value)
    one_line_xml = ('<system version="1"><cpu numaid="0"><nic><net name="mlx5_0" dev="0"/>'
                    '</nic></cpu></system>')  # a "/" and no ":": text all the same
    with pytest.raises(colc.errors.SpecError, match="^<text>: error: no <gpu> elements"):
        colc.load_topology(one_line_xml)
    topo = colc.load_topology("family: ring\nranks: 4\nbandwidth: 10\n")
    made = colc.compile(topo, collective="allgather", algorithm="ring")
    with pytest.raises(colc.errors.ColcError, match="unknown backend 'bogus'"):
        made.verify(backend="bogus")


def test_api_refuses_what_the_cli_refuses(tmp_path):
    """Found by exploring the API as a user: sizes past 1T hung (the CLI
    refuses them at once); sizes=0 or [] silently meant the default sizes; a
    oneCCL portfolio came back as MSCCL files; a collective misspelt in
    colc.portfolio was blamed on colc.compile; load_topology(5) or (None)
    was a TypeError; flow-style YAML text was read as malformed JSON; a bare
    mistyped file name was parsed as YAML text."""
    import colc

    topo = colc.load_topology(str(HERE.parent.parent / "examples" / "ring-4.yaml"))
    huge = 1 << 50
    for call in (lambda: colc.compile(topo, algorithm="ring", min_bytes=huge),
                 lambda: colc.compile(topo, algorithm="ring", rank_sizes=(huge,)),
                 lambda: colc.compile(topo, algorithm="ring").simulate(sizes=huge)):
        with pytest.raises(colc.errors.ColcError, match="is above 1T"):
            call()
    for sizes, text in ((0, "positive whole numbers"), ([], "no size given")):
        with pytest.raises(colc.errors.ColcError, match=text):
            colc.portfolio(topo, sizes=sizes)
    with pytest.raises(colc.errors.ColcError, match="a portfolio is MSCCL files"):
        colc.portfolio(topo, backend="oneccl")
    with pytest.raises(colc.errors.ColcError, match="^colc.portfolio: unknown collective 'foo'"):
        colc.portfolio(topo, collective="foo")
    for source in (5, None, b"family: ring"):
        with pytest.raises(colc.errors.ColcError, match="source must be a file path or the text"):
            colc.load_topology(source)
    flow = colc.load_topology("{family: ring, ranks: 4, bandwidth: 10}")
    assert flow.num_ranks == 4
    with pytest.raises(colc.errors.ColcError, match="^nosuch: error: no such file"):
        colc.load_topology("nosuch")
    # the pipeline's own fields are not options (prove=False ended in an
    # internal error; protocol_ranges=5 was accepted)
    for name, value in (("prove", False), ("protocol_ranges", 5)):
        with pytest.raises(colc.errors.ColcError, match=f"unknown option '{name}'"):
            colc.compile(topo, algorithm="ring", **{name: value})
    for search in ("yes", 1):
        with pytest.raises(colc.errors.ColcError, match="search must be True or False"):
            colc.compile(topo, algorithm="ring").analyze(search=search)


def test_compiled_analyze_names_bad_lists():
    """Compiled.analyze(algorithms=None) or (collectives=3) raised a bare
    TypeError from deep inside analyze; a name twice made two rows."""
    import colc

    ring4 = str(HERE.parent.parent / "examples" / "ring-4.yaml")
    made = colc.compile(ring4, collective="allgather", algorithm="ring")
    for kw in ({"algorithms": None}, {"algorithms": 3}, {"collectives": None},
               {"collectives": [3]}):
        with pytest.raises(colc.errors.ColcError, match="must be a name or a list of names"):
            made.analyze(**kw)
    report = made.analyze(algorithms=["ring", "ring"], simulate=False)
    assert [s["algorithm"] for s in report["schedules"]] == ["ring"]
    # an unknown name was the command line's "algorithm:", not the keyword
    with pytest.raises(colc.errors.ColcError,
                       match="^Compiled.analyze: algorithms: unknown algorithm 'nope'"):
        made.analyze(algorithms=("nope",))


def test_an_unparsable_command_line_exits_2_and_a_bad_value_1(capsys):
    """As the README says: a value that is not a number is argparse's usage
    error (status 2), one out of range is colc's own (status 1, one line)."""
    path = str(HERE.parent.parent / "examples" / "ring-4.yaml")
    with pytest.raises(SystemExit) as info:
        main([path, "--max-threadblocks", "abc", "-o", os.devnull])
    err = capsys.readouterr().err
    assert info.value.code == 2 and "invalid int value: 'abc'" in err
    assert err.startswith("usage: colc")
    rc, err, _ = _run(capsys, [path, "--max-threadblocks", "-1", "-o", os.devnull])
    assert rc == 1 and len(err.strip().splitlines()) == 1 and "Traceback" not in err
