"""Writing outputs never damages anything (issue 10): devices, FIFOs, links,
directories, inputs, modes."""

from __future__ import annotations

import errno
import os
import stat
import threading

import pytest

from colc.cli import main
from colc.errors import ColcError
from colc.output import write_output

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RING = os.path.join(REPO, "examples", "ring-4.yaml")


def test_new_file_gets_the_umask_mode(tmp_path) -> None:
    old = os.umask(0o027)
    try:
        write_output(str(tmp_path / "a.xml"), "x")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "a.xml").st_mode) == 0o640
    assert os.listdir(tmp_path) == ["a.xml"]


def test_existing_file_keeps_its_mode(tmp_path) -> None:
    target = tmp_path / "a.xml"
    target.write_text("old")
    os.chmod(target, 0o644)
    write_output(str(target), "new")
    assert target.read_text() == "new"
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o644


def test_symlink_is_followed_not_replaced(tmp_path) -> None:
    real = tmp_path / "real.xml"
    real.write_text("old")
    link = tmp_path / "link.xml"
    link.symlink_to(real)
    write_output(str(link), "new")
    assert link.is_symlink() and real.read_text() == "new"


def test_fifo_is_written_through(tmp_path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(open(fifo).read()))
    reader.start()
    write_output(str(fifo), "hello")
    reader.join(10)
    assert got == ["hello"] and stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_dev_null_stays_a_device() -> None:
    write_output(os.devnull, "hello")
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)


def test_directory_and_inputs_are_refused(tmp_path) -> None:
    with pytest.raises(ColcError, match="is a directory"):
        write_output(str(tmp_path), "x")
    src = tmp_path / "topo.yaml"
    src.write_text("family: ring\nranks: 4\nbandwidth: 10\n")
    with pytest.raises(ColcError, match="refusing to overwrite the input"):
        write_output(str(src), "x", inputs=[str(src)])
    link = tmp_path / "alias.yaml"
    link.symlink_to(src)
    with pytest.raises(ColcError, match="refusing to overwrite the input"):
        write_output(str(link), "x", inputs=[str(src)])
    assert src.read_text().startswith("family")
    with pytest.raises(ColcError, match="does not exist"):
        write_output(str(tmp_path / "no" / "x.xml"), "x")


def test_cli_refuses_to_overwrite_its_input(tmp_path, capsys) -> None:
    src = tmp_path / "same.yaml"
    src.write_text(open(RING).read())
    assert main([str(src), "--algorithm", "ring", "-o", str(src)]) == 1
    assert "refusing to overwrite the input" in capsys.readouterr().err
    assert src.read_text() == open(RING).read()


def test_cli_refuses_to_overwrite_the_dump_a_wrapper_names(tmp_path, capsys) -> None:
    """A wrapper YAML (``nccl_topo: dgx.xml``) was the only input checked:
    ``-o dgx.xml`` replaced the machine's NCCL dump with the schedule, and
    a portfolio in its folder could do the same to a file of its name.
    Every file the topology was read from is an input now (a TACCL
    profile's sketch too)."""
    dump = tmp_path / "dgx.xml"
    dump.write_bytes(open(os.path.join(REPO, "tests", "data", "real", "dgx-a100.nccl.xml"),
                          "rb").read())
    before = dump.read_bytes()
    wrapper = tmp_path / "cluster.yaml"
    wrapper.write_text("nccl_topo: dgx.xml\nboxes: 2\n")
    argv = [str(wrapper), "--collective", "allgather", "--algorithm", "ring"]
    assert main([*argv, "-o", str(dump)]) == 1
    assert capsys.readouterr().err.strip() == (f"{dump}: error: refusing to overwrite the "
                                               f"input file {dump}")
    assert dump.read_bytes() == before
    from colc.cli import load_any_topology

    taccl = os.path.join(REPO, "tests", "data", "real", "taccl-ndv2.json")
    assert load_any_topology(taccl).inputs == (taccl, taccl.replace(".json", ".sketch.json"))
    assert load_any_topology(str(wrapper)).inputs == (str(wrapper), str(dump))


def test_cli_writes_to_dev_null_and_stdout(capsys) -> None:
    assert main([RING, "--algorithm", "ring", "-o", os.devnull]) == 0
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)
    assert main([RING, "--algorithm", "ring", "-o", "-"]) == 0
    assert "<algo " in capsys.readouterr().out


def test_several_outputs_are_written_all_or_none(tmp_path, monkeypatch) -> None:
    """``write_outputs`` (a portfolio's folder): when the third file cannot be
    written, the two before it are not renamed over the old files either."""
    from colc import output

    old = {f"f{i}.xml": f"old {i}\n" for i in range(4)}
    for name, text in old.items():
        (tmp_path / name).write_text(text)
    real_stage = output._stage
    calls = []

    def stage(path, real, text, st):
        calls.append(path)
        if len(calls) == 3:
            raise ColcError(f"{path}: error: cannot write: File too large")
        return real_stage(path, real, text, st)

    monkeypatch.setattr(output, "_stage", stage)
    items = [(str(tmp_path / name), "new\n") for name in old]
    with pytest.raises(ColcError, match="f2.xml: error: cannot write"):
        output.write_outputs(items)
    assert {p.name: p.read_text() for p in tmp_path.iterdir()} == old  # no temporaries
    monkeypatch.setattr(output, "_stage", real_stage)
    output.write_outputs(items)
    assert {p.name: p.read_text() for p in tmp_path.iterdir()} == dict.fromkeys(old, "new\n")



def test_a_failed_rename_gives_the_renamed_files_their_old_texts_back(tmp_path,
                                                                       monkeypatch) -> None:
    """When the third rename fails (the folder changed under the run), the
    two files renamed before it get their old texts back, a file that was
    new is removed again, and nothing of colc's is left in the folder."""
    from colc import output

    old = {f"f{i}.xml": f"old {i}\n" for i in range(3)}
    for name, text in old.items():
        (tmp_path / name).write_text(text)
    real_replace = os.replace
    calls = []

    def replace(src, dst):
        if str(src).endswith(".tmp"):
            calls.append(dst)
            if len(calls) == 3:
                raise OSError(errno.ENOENT, "No such file or directory")
        return real_replace(src, dst)

    monkeypatch.setattr(output.os, "replace", replace)
    items = [(str(tmp_path / name), "new\n") for name in ("new.xml", "f0.xml", "f1.xml",
                                                           "f2.xml")]
    with pytest.raises(ColcError, match="f1.xml: error: cannot write: No such file"):
        output.write_outputs(items)
    assert len(calls) == 3
    assert {p.name: p.read_text() for p in tmp_path.iterdir()} == old

    def interrupted(src, dst):  # Ctrl-C just after the second rename is done
        real_replace(src, dst)
        if str(src).endswith(".tmp"):
            calls.append(dst)
            if len(calls) == 5:
                raise KeyboardInterrupt

    monkeypatch.setattr(output.os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        output.write_outputs(items)
    assert {p.name: p.read_text() for p in tmp_path.iterdir()} == old  # f0.xml's text too


def _file_limit(nbytes: int):
    import resource

    return lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (nbytes, nbytes))


def test_a_portfolio_past_the_file_size_limit_leaves_the_folder_as_it_was(tmp_path) -> None:
    """``ulimit -f``: the larger files of a portfolio cannot be written; the
    run exits 1 with one line, the earlier portfolio is untouched and new
    folders are not left behind (every level ``-o`` created: only the last
    one was removed)."""
    import subprocess
    import sys

    folder = tmp_path / "algos"
    assert main([RING, "--algorithm", "ring", "-o", f"{folder}/"]) == 0
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    for target in (folder, tmp_path / "new" / "deeper"):  # both levels removed again
        done = subprocess.run([sys.executable, "-m", "colc.cli", RING, "-o", f"{target}/"],
                              capture_output=True, text=True, preexec_fn=_file_limit(60_000),
                              cwd=REPO, timeout=300)
        assert done.returncode == 1, done.stderr
        assert done.stderr.strip().splitlines()[-1].endswith("cannot write: File too large")
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    assert not (tmp_path / "new").exists()



def test_portfolio_folders_colc_cannot_create_are_one_line(tmp_path, capsys,
                                                           monkeypatch) -> None:
    """A dangling symbolic link and a path under a regular file are refused
    before the build; a folder the system will not create (read-only file
    system) is one line too.  All three were internal errors (exit 3)."""
    (tmp_path / "dlink").symlink_to(tmp_path / "nowhere")
    (tmp_path / "afile").write_text("x\n")
    for target, words in (("dlink", "is a symbolic link to a missing folder"),
                          ("afile/sub", "cannot create the folder in")):
        assert main([RING, "--algorithm", "ring", "-o", f"{tmp_path / target}/"]) == 1
        err = capsys.readouterr().err
        assert words in err and len(err.strip().splitlines()) == 1, err

    def read_only(path, *args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(os, "makedirs", read_only)
    assert main([RING, "--algorithm", "ring", "-o", f"{tmp_path / 'new'}/"]) == 1
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.endswith("new: error: cannot create the folder: Read-only file system"), err


def test_an_old_file_that_cannot_be_removed_leaves_the_folder_as_it_was(tmp_path, capsys,
                                                                        monkeypatch) -> None:
    """A rerun removes the older colc files of the collective; when one cannot
    be removed (immutable, say) the run is one line, exit 1, and no new file
    is left beside the old ones (they were all written, then an internal
    error)."""
    from colc import output

    folder = tmp_path / "algos"
    assert main([RING, "--algorithm", "ring", "-o", f"{folder}/"]) == 0
    first = sorted(folder.iterdir())[0]
    (folder / "colc-allreduce-99-old.xml").write_bytes(first.read_bytes())
    (folder / first.name).write_text(first.read_text().replace("<algo ", "<algo  ", 1))
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    real_rename = os.rename

    def rename(src, dst):
        if str(src).endswith("99-old.xml"):
            raise PermissionError(errno.EPERM, "Operation not permitted")
        return real_rename(src, dst)

    monkeypatch.setattr(output.os, "rename", rename)
    capsys.readouterr()
    assert main([RING, "--algorithm", "ring", "-o", f"{folder}/"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.endswith("colc-allreduce-99-old.xml: error: cannot remove the older file: "
                        "Operation not permitted"), err
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    monkeypatch.setattr(output.os, "rename", real_rename)
    assert main([RING, "--algorithm", "ring", "-o", f"{folder}/"]) == 0
    assert "removed 1 older colc files" in capsys.readouterr().err
    assert sorted(p.name for p in folder.iterdir()) == sorted(set(before) - {
        "colc-allreduce-99-old.xml"})


def test_report_needs_a_file_name(tmp_path, capsys) -> None:
    """``colc report -o nodir/`` wrote an HTML file named ``nodir``."""
    for target in (f"{tmp_path / 'nodir'}/", ""):
        assert main(["report", RING, "--no-portfolio", "--sizes", "1M", "-o", target]) == 1
        assert "-o takes the HTML file's name" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
def test_a_full_standard_output_is_the_users_error_not_an_internal_one() -> None:
    import subprocess
    import sys

    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "colc.cli", "analyze", RING,
                               "--no-simulate"], stdout=full, stderr=subprocess.PIPE,
                              text=True, cwd=REPO, timeout=300)
    assert done.returncode == 1
    assert done.stderr.strip() == "colc: error: cannot write the output: No space left on device"



def test_a_portfolio_is_not_written_through_a_link_of_its_file_name(tmp_path, capsys) -> None:
    """A symbolic link where a portfolio file's name falls was followed: a
    link planted in a shared MSCCL_ALGO_DIR redirected colc's write (often
    as root) to any file.  It is refused; nothing is written."""
    folder = tmp_path / "algos"
    assert main([RING, "--algorithm", "ring", "-o", f"{folder}/"]) == 0
    names = sorted(p.name for p in folder.iterdir())
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    (folder / names[0]).unlink()
    (folder / names[0]).symlink_to(victim)
    before = {p.name: p.read_bytes() for p in folder.iterdir() if not p.is_symlink()}
    capsys.readouterr()
    assert main([RING, "--algorithm", "ring", "-o", f"{folder}/"]) == 1
    err = capsys.readouterr().err.strip()
    assert err == (f"{folder / names[0]}: error: is a symbolic link; a portfolio file is not "
                   f"written through a link (remove it)")
    assert victim.read_text() == "keep me"
    assert {p.name: p.read_bytes() for p in folder.iterdir() if not p.is_symlink()} == before


def test_dev_stdout_on_a_pipe_is_written_through() -> None:
    """`colc convert X -o /dev/stdout | cat` failed: /dev/stdout resolves to
    /proc/PID/fd/pipe:[N], no path, so colc tried to stage a file in
    /proc/PID/fd.  The link is opened as the kernel opens it."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "colc.cli", "convert", RING, "-o", "/dev/stdout"],
                          capture_output=True, text=True, check=False, cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith('name: "ring-4"') and done.stderr == ""


@pytest.mark.parametrize("target", ["-", "/dev/stdout"])
def test_a_closed_reader_of_stdout_is_status_141_quietly(target) -> None:
    """`colc convert X -o /dev/stdout | true` said 'cannot write: Broken pipe'
    and exited 1 (review), where `-o -` exited 141 quietly."""
    import subprocess
    import sys

    read, write = os.pipe()
    os.close(read)  # the reader is gone before colc writes a byte
    try:
        done = subprocess.run([sys.executable, "-m", "colc.cli", "convert", RING, "-o", target],
                              stdout=write, stderr=subprocess.PIPE, text=True, cwd=REPO,
                              timeout=120, check=False)
    finally:
        os.close(write)
    assert (done.returncode, done.stderr) == (141, "")


@pytest.mark.parametrize("target", ["-", "/dev/stdout"])
def test_a_reader_that_stops_midway_is_status_141(tmp_path, target) -> None:
    """`colc convert big.yaml -o - | head -c 100` exited 0 (exploring as a
    user): a pipe took 64 KiB of one large buffered write, which returned
    without an error, so a truncated file looked like success."""
    import subprocess
    import sys

    big = tmp_path / "big.yaml"
    big.write_text("family: dgx-h100\nboxes: 100\n", encoding="utf-8")
    proc = subprocess.Popen([sys.executable, "-m", "colc.cli", "convert", str(big), "-o", target],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO)
    head = proc.stdout.read(100)
    proc.stdout.close()  # the reader stops with most of the text unread
    _, err = proc.communicate(timeout=120)
    assert len(head) == 100 and (proc.returncode, err) == (141, b"")


def test_a_portfolio_does_not_replace_a_users_file_of_its_name(tmp_path, capsys) -> None:
    """A user's own file under a name colc picks for a portfolio file was
    replaced without a word.  colc replaces only its own earlier files
    (their first line says colc wrote them); here nothing is written."""
    folder = tmp_path / "algos"
    assert main([RING, "--algorithm", "ring", "-o", f"{folder}/"]) == 0
    names = sorted(p.name for p in folder.iterdir())
    assert main([RING, "--algorithm", "ring", "-o", f"{folder}/"]) == 0  # colc's own: replaced
    mine = folder / names[0]
    mine.write_text("<algo name='hand-tuned'/>\n")
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    capsys.readouterr()
    assert main([RING, "--algorithm", "ring", "-o", f"{folder}/"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"{mine}: error: exists and colc did not write it")
    assert "\n" not in err
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
