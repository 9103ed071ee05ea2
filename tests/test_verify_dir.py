"""``colc verify DIR``: an MSCCL_ALGO_DIR as the runtime loads it."""

from __future__ import annotations

import os
import re

from colc.cli import main


def _portfolio(tmp_path) -> str:
    topo = tmp_path / "ring.yaml"
    topo.write_text("family: ring\nranks: 4\nbandwidth: 10\nbidirectional: true\n")
    out = tmp_path / "algos"
    assert main([str(topo), "--collective", "allgather", "-o", str(out) + "/"]) == 0
    return str(out)


def test_portfolio_folder_verifies(tmp_path, capsys) -> None:
    folder = _portfolio(tmp_path)
    capsys.readouterr()
    assert main(["verify", folder]) == 0
    out = capsys.readouterr().out
    assert "do not overlap" in out and out.count(": OK (") == len(os.listdir(folder)) + 1


def test_overlap_shadow_and_foreign_files_are_reported(tmp_path, capsys) -> None:
    folder = _portfolio(tmp_path)
    names = sorted(os.listdir(folder))
    last = open(os.path.join(folder, names[-1])).read()
    # a copy of the unlimited window that sorts last: wholly shadowed, overlapping
    with open(os.path.join(folder, "zz-copy.xml"), "w") as fh:
        fh.write(last)
    capsys.readouterr()
    assert main(["verify", folder]) == 1
    out = capsys.readouterr().out
    assert "zz-copy.xml: window" in out and "overlaps" in out and "never used" in out
    os.unlink(os.path.join(folder, "zz-copy.xml"))
    with open(os.path.join(folder, "README"), "w") as fh:
        fh.write("notes")
    assert main(["verify", folder]) == 1
    out = capsys.readouterr().out  # once, as the folder's error (it was listed twice)
    assert out.count("not an algorithm file") == 1
    assert "README: not an algorithm file: an MSCCL or oneCCL file starts with" in out


def test_sizes_no_file_covers_are_named(tmp_path, capsys) -> None:
    """A folder holding only some of a portfolio's windows verified as OK
    without a word about the sizes that fall back to NCCL; the gap is now a
    warning (not an error: a file for large calls only is a choice)."""
    folder = _portfolio(tmp_path)
    names = sorted(os.listdir(folder))
    capsys.readouterr()
    assert main(["verify", folder]) == 0
    assert "no file for" not in capsys.readouterr().out
    first = open(os.path.join(folder, names[0])).read()
    hi = int(re.search(r'maxBytes="(\d+)"', first).group(1))
    os.unlink(os.path.join(folder, names[-1]))
    os.unlink(os.path.join(folder, names[0]))
    assert main(["verify", folder]) == 0
    out = capsys.readouterr().out
    assert (f"warning: no file for allgather, 4 ranks, in-place and out-of-place at 0..{hi}, "
            in out), out
    assert "..unlimited bytes: NCCL's own algorithm runs there" in out


def test_links_load_like_the_runtime_and_other_entries_are_skipped(tmp_path, capsys) -> None:
    """The runtime opens every regular file and every symbolic link of the
    folder (by the entry's type), so a dangling link or a link to a folder
    fails its load; subfolders and FIFOs it skips."""
    folder = _portfolio(tmp_path)
    first = sorted(os.listdir(folder))[0]
    os.mkdir(os.path.join(folder, "old"))
    os.mkfifo(os.path.join(folder, "pipe"))
    os.symlink(first, os.path.join(folder, "alias.xml"))  # a link to a file: read through
    capsys.readouterr()
    assert main(["verify", folder]) == 1  # the alias duplicates a window
    out = capsys.readouterr().out
    assert "alias.xml: OK (" in out and "pipe" not in out and "old" not in out
    os.unlink(os.path.join(folder, "alias.xml"))
    os.symlink(str(tmp_path / "gone.xml"), os.path.join(folder, "zz-gone.xml"))
    os.symlink(str(tmp_path), os.path.join(folder, "zz-dir.xml"))
    assert main(["verify", folder]) == 1
    out = capsys.readouterr().out
    assert re.search(r"error: zz-gone.xml: a symbolic link to nothing \(.*gone.xml\); the runtime "
                     r"opens every link", out), out
    assert "error: zz-dir.xml: a symbolic link to a folder" in out
    os.unlink(os.path.join(folder, "zz-gone.xml"))
    os.unlink(os.path.join(folder, "zz-dir.xml"))
    with open(os.path.join(folder, "zz-bin"), "wb") as fh:
        fh.write(b"\xff\xfe\x00")
    assert main(["verify", folder]) == 1  # the path was printed twice
    assert f"{folder}: error: zz-bin: not UTF-8 text (byte 0) (the runtime" in \
        capsys.readouterr().out


def test_file_warnings_and_an_empty_folder_are_shown(tmp_path, capsys) -> None:
    folder = _portfolio(tmp_path)
    first = sorted(os.listdir(folder))[0]
    path = os.path.join(folder, first)
    with open(path) as fh:
        text = fh.read()
    with open(path, "w") as fh:  # cnt="01": the runtime reads octal, the same value
        fh.write(text.replace('cnt="1"', 'cnt="01"', 1))
    capsys.readouterr()
    assert main(["verify", folder]) == 0
    out = capsys.readouterr().out
    assert f"{path}: warning: " in out and "read as octal" in out
    assert main(["verify", "-q", folder]) == 0
    assert capsys.readouterr().out == ""
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["verify", str(empty)]) == 0
    assert "warning: no algorithm file" in capsys.readouterr().out


def test_summary_counts_channels_in_words(tmp_path, capsys) -> None:
    folder = _portfolio(tmp_path)
    capsys.readouterr()
    assert main(["verify", folder]) == 0
    counts = re.findall(r" (\d+) (channels?),", capsys.readouterr().out)
    assert counts and ("1", "channel") in counts  # the ring's LL window has one channel
    assert all((n == "1") == (word == "channel") for n, word in counts), counts


def test_folder_output_does_not_depend_on_jobs(tmp_path, capsys, monkeypatch) -> None:
    from colc.backends import verify_dir as vd

    folder = _portfolio(tmp_path)
    names = sorted(os.listdir(folder))
    with open(os.path.join(folder, names[0])) as fh:  # a twin of the first file
        twin = fh.read().replace('proto="LL"', 'proto="LL128"', 1)
    with open(os.path.join(folder, names[0][:-4] + "-ll128.xml"), "w") as fh:
        fh.write(twin)  # its window overlaps the first's: an error, reported in order
    with open(os.path.join(folder, "zz-notes.txt"), "w") as fh:
        fh.write("notes")
    monkeypatch.setattr(vd, "PARALLEL_BYTES", 0)
    outputs = []
    for jobs in ("1", "2"):
        capsys.readouterr()
        assert main(["verify", "--jobs", jobs, folder]) == 1
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1]
    assert "whose runs it shares" in outputs[0] and "overlaps" in outputs[0]
    assert "zz-notes.txt: not an algorithm file" in outputs[0]
    assert all(r.program is None for _, r in vd.verify_dir(folder, 2).files)


def test_neighbouring_files_of_near_sizes_are_grouped() -> None:
    from colc.backends.verify_dir import TWIN_BYTES, _neighbours

    sizes = [100, 100 + TWIN_BYTES, 50_000, 50_010, 10]
    assert _neighbours(sizes) == [[0, 1], [2, 3], [4]]


def test_folder_reading_survives_odd_algo_tags(tmp_path, capsys) -> None:
    """Found by review: a non-ASCII digit in an <algo> attribute of a file in
    the folder crashed the portfolio writer (str.isdigit accepts it, int()
    not); an <algo> after a 64 KiB comment was called unreadable; an empty
    window (minBytes > maxBytes) made the gap warning nonsense."""
    from colc.backends.verify_dir import _gaps, header_selection

    folder = tmp_path / "d"
    folder.mkdir()
    (folder / "user.xml").write_text('<algo name="x" ngpus="4" coll="allgather" inplace="1" '
                                     'outofplace="1" minBytes="0" maxBytes="\u00b9"></algo>\n')
    assert header_selection(str(folder / "user.xml")) is None
    topo = tmp_path / "ring.yaml"
    topo.write_text("family: ring\nranks: 4\nbandwidth: 10\nbidirectional: true\n")
    assert main([str(topo), "--collective", "allgather", "-o", f"{folder}/"]) == 0
    assert "user.xml: no MSCCL <algo> tag colc can read" in capsys.readouterr().err
    first = sorted(p for p in folder.iterdir() if p.name.startswith("colc-"))[0]
    late = tmp_path / "late.xml"
    late.write_text("<!-- " + "x" * 70000 + " -->\n" + first.read_text())
    assert header_selection(str(late)) == header_selection(str(first)) is not None
    assert _gaps([(100, 50), (0, float("inf"))]) == []
    assert _gaps([(100, 50)]) == [(0, float("inf"))]


def test_a_oneccl_file_in_a_folder_is_named_as_one(tmp_path, capsys) -> None:
    """A oneCCL file in an MSCCL_ALGO_DIR breaks the runtime's load; the
    error said the runtime has no <?xml?> declaration and 'not an MSCCL
    algorithm file', not what the file is."""
    data = os.path.join(os.path.dirname(__file__), "data", "oneccl")
    text = open(os.path.join(data, "ring3-allgather-split.oneccl.xml"), encoding="utf-8").read()
    folder = tmp_path / "algos"
    folder.mkdir()
    (folder / "ring3.xml").write_text(text)
    assert main(["verify", str(folder)]) == 1
    out = capsys.readouterr().out.strip().splitlines()
    assert out == [f"{folder}: error: ring3.xml: a oneCCL file; the MSCCL runtime parses every "
                   "file of the folder and fails on it (verify oneCCL files one by one: colc "
                   "verify FILE)"]
    assert main(["verify", "--backend", "msccl", str(folder / "ring3.xml")]) == 1
    first = capsys.readouterr().out.splitlines()[0]
    assert first.endswith("error: a oneCCL file (its first element) read as MSCCL, which "
                          "cannot parse it; verify it as oneCCL (drop --backend msccl)")
    assert main(["verify", str(folder / "ring3.xml")]) == 0


def test_a_kernel_file_that_waits_for_data_is_reported_not_waited_on(tmp_path) -> None:
    """Exploring as a user: ``colc verify /proc`` and ``colc TOPO -o /proc/``
    hung reading ``/proc/kmsg``, a file the kernel calls regular whose read
    waits for data.  Folder scans and heads are read without blocking: a
    FIFO with a writer and no data stands in for it."""
    import pytest

    from colc.frontends._input import open_nonblocking

    fifo = tmp_path / "waits"
    os.mkfifo(fifo)
    writer = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)  # a writer that never writes
    try:
        with open_nonblocking(str(fifo)) as fh, pytest.raises(BlockingIOError):
            fh.read(4096)
    finally:
        os.close(writer)
    with open_nonblocking(__file__) as fh:
        assert fh.read(3) == b'"""'


def _pair_allgather(nchunks: int = 2, coll: str = "allgather", window: str = "0 0") -> str:
    """A 2-rank allgather (LL, out-of-place) of ``nchunks`` chunks per
    loop: each rank copies its shard to the output and swaps it with the
    other's; ``window`` is "minBytes maxBytes"."""
    cf = nchunks // 2
    lo, hi = window.split()
    lines = [f'<algo name="pair" proto="LL" nchannels="1" nchunksperloop="{nchunks}" '
             f'ngpus="2" coll="{coll}" inplace="0" outofplace="1" minBytes="{lo}" '
             f'maxBytes="{hi}">']
    for r in range(2):
        lines += [f'  <gpu id="{r}" i_chunks="{cf}" o_chunks="{nchunks}" s_chunks="0">',
                  f'    <tb id="0" send="{1 - r}" recv="{1 - r}" chan="0">']
        for s, (kind, src, dst) in enumerate((("cpy", f"i{0}", f"o{r * cf}"),
                                              ("s", f"o{r * cf}", f"o{r * cf}"),
                                              ("r", f"o{(1 - r) * cf}", f"o{(1 - r) * cf}"))):
            lines.append(f'      <step s="{s}" type="{kind}" srcbuf="{src[0]}" '
                         f'srcoff="{src[1:]}" dstbuf="{dst[0]}" dstoff="{dst[1:]}" cnt="{cf}" '
                         f'depid="-1" deps="-1" hasdep="0"/>')
        lines += ["    </tb>", "  </gpu>"]
    return "\n".join(lines + ["</algo>", ""])


def test_a_file_of_a_collective_colc_does_not_check_is_a_warning(tmp_path, capsys) -> None:
    """Audit: a gather file in the folder was an error saying both "accepted
    by the runtime" and "the runtime fails on it"; the runtime loads it and
    never selects it for colc's collectives.  It is named as not checked."""
    (tmp_path / "a.xml").write_text(_pair_allgather())
    (tmp_path / "b.xml").write_text(_pair_allgather(coll="gather"))
    assert main(["verify", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert (f"{tmp_path}: warning: b.xml: not checked: colc verify checks coll allreduce, "
            "allgather, reducescatter, broadcast, reduce, alltoall, not 'gather'; the runtime "
            "loads the folder with it and never selects it for those\n") in out, out
    assert f"{tmp_path}: OK (1 files;" in out
    (tmp_path / "b.xml").write_text(_pair_allgather(coll="gather").replace(' ngpus="2"', ""))
    assert main(["verify", str(tmp_path)]) == 1  # and broken besides: the load fails
    assert "b.xml: attribute ngpus of node algo not found" in capsys.readouterr().out


def test_windows_are_compared_as_the_runtime_reads_them(tmp_path, capsys) -> None:
    """Audit: maxBytes -1 is no upper limit in effect (the runtime compares
    unsigned); the folder took its window for an empty one and saw no
    overlap with an unlimited file sorted first."""
    (tmp_path / "a.xml").write_text(_pair_allgather())
    (tmp_path / "b.xml").write_text(_pair_allgather(window="4096 -1"))
    assert main(["verify", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert ("error: b.xml: window 4096..18446744073709551615 overlaps a.xml (0..unlimited) for "
            "allgather, 2 ranks, out-of-place: the runtime uses a.xml there\n") in out, out
    assert "b.xml: never used" in out


def test_nchunksperloop_decides_which_calls_a_file_takes(tmp_path, capsys) -> None:
    """Audit: a file of nchunksperloop 6 sorted first takes only the calls
    of a multiple of 6 elements (runtime notes 4.1), so one of 2 after it is
    used at the others (every power of two): not "never used"; one of 12
    after it is."""
    from colc.backends.verify_dir import Selection, same_calls

    (tmp_path / "a6.xml").write_text(_pair_allgather(6))
    (tmp_path / "b2.xml").write_text(_pair_allgather(2))
    assert main(["verify", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert ("b2.xml: window 0..unlimited overlaps a6.xml (0..unlimited) for allgather, 2 ranks, "
            "out-of-place: the runtime uses a6.xml there at element counts of a multiple of 6 "
            "(its nchunksperloop 6, this file's 2)\n") in out, out
    assert "never used" not in out and out.count(": OK (") == 2
    os.rename(tmp_path / "b2.xml", tmp_path / "b12.xml")
    (tmp_path / "b12.xml").write_text(_pair_allgather(12))
    assert main(["verify", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "b12.xml: never used for allgather, 2 ranks, out-of-place" in out, out
    six = Selection("allgather", 2, ("out-of-place",), (0, 11), 6)
    assert same_calls(six, Selection("allgather", 2, ("out-of-place",), (0, 7), 2))
    assert not same_calls(six, Selection("allgather", 2, ("out-of-place",), (7, 11), 4))
