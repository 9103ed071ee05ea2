"""The ``colc`` command.

Main job::

    colc TOPO.yaml -o allreduce.xml [--collective allreduce] [--algorithm auto] ...

Subcommands: ``colc verify FILE``, ``colc analyze TOPO [--json]``,
``colc convert IN -o OUT.yaml``, ``colc find ...`` (when available).

User errors print one line and exit 1; internal errors say so and exit 3;
output files are written atomically (temporary file + rename), so a failed
run leaves nothing behind.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import os
import sys
import tempfile
from collections.abc import Sequence

from colc import __version__
from colc.collector import fewer_collections
from colc.errors import ColcError, InternalError

SUBCOMMANDS = ("compile", "verify", "analyze", "convert", "find", "simulate", "report")
#: ``--machine``'s help, one text for every subcommand.
MACHINE_HELP = ("runtime cost model (default: the topology's hardware: a hardware family's, "
                "an NCCL dump's GPU, else a100/h100/mi250 named in the topology's name, "
                "else generic)")


def main(argv: Sequence[str] | None = None) -> int:
    """Run colc; returns the exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    from colc.progress import Progress, active

    try:
        with active(Progress()), fewer_collections():
            return _dispatch(args)
    except ColcError as err:
        print(_one_line(str(err)), file=sys.stderr)
        return 1
    except InternalError as err:
        print(f"colc: internal error (please report): {_plain(err)}", file=sys.stderr)
        return 3
    except KeyboardInterrupt:
        print("colc: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader of the output stopped (colc verify ... | head): quiet,
        # and the status of a tool SIGPIPE stops (128 + 13), not an input error's
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except OSError as err:
        if err.errno not in _WRITE_ERRNOS:
            return _internal(err)
        with contextlib.suppress(OSError):  # the output cannot be written: a full disk
            print(f"colc: error: cannot write the output: {err.strerror}", file=sys.stderr)
        return 1
    except Exception as err:  # noqa: BLE001 - last line of defence, no traceback for users
        return _internal(err)


#: Errors of writing the standard output (``colc verify FILE > /dev/full``) or
#: a file past ``ulimit -f``: the user's to fix, not colc's.
_WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EFBIG, errno.EDQUOT})


def _internal(err: BaseException) -> int:
    """Report an unexpected exception in one line (exit status 3)."""
    print(f"colc: internal error (please report): {type(err).__name__}: {_plain(err)}",
          file=sys.stderr)
    if os.environ.get("COLC_DEBUG"):
        raise err
    return 3


def clear_progress() -> None:
    """Erase the progress line before printing results."""
    from colc.progress import clear

    clear()


def _plain(err: BaseException) -> str:
    """An internal error's message on one line, without the user-error
    prefix ``_one_line`` gives (a MemoryError has none: say so)."""
    return " ".join(str(err).split()) or "(no message)"


def _one_line(msg: str) -> str:
    text = " ".join(msg.split())
    return text if text.startswith(("colc", "/")) or ": error:" in text else f"colc: error: {text}"


def _dispatch(args: list[str]) -> int:
    jobs = os.environ.get("COLC_JOBS", "").strip()
    if jobs and not (jobs.isascii() and jobs.isdecimal()):  # else silently every CPU
        raise ColcError(f"colc: error: COLC_JOBS must be a whole number of processes (0: "
                        f"every CPU), got {jobs!r}")
    if args and args[0] == "help":
        return _cmd_help(args[1:])
    if args and args[0] in SUBCOMMANDS:
        cmd, rest = args[0], args[1:]
    else:
        cmd, rest = "compile", args
    handler = {"compile": _cmd_compile, "verify": _cmd_verify, "analyze": _cmd_analyze,
               "convert": _cmd_convert, "find": _cmd_find, "simulate": _cmd_simulate,
               "report": _cmd_report}[cmd]
    return handler(rest)


class _Defaults(argparse.ArgumentDefaultsHelpFormatter):
    """Help that shows each option's default, except options without one."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        # a store_false flag's "default" (True) is only the flag left unset
        if action.default in (None, False, argparse.SUPPRESS) or not action.help \
                or isinstance(action, argparse._StoreFalseAction):
            return action.help
        return super()._get_help_string(action)


def _cmd_help(argv: list[str]) -> int:
    """``colc help [SUBCOMMAND]``: the main job's help, or a subcommand's."""
    if argv[:1] in (["-h"], ["--help"]):
        print("usage: colc help [SUBCOMMAND]\n\nThe main job's help, or a subcommand's: "
              + ", ".join(SUBCOMMANDS))
        return 0
    if not argv:
        _compile_parser().print_help()
        print("\nsubcommands (colc help SUBCOMMAND for each): " + ", ".join(SUBCOMMANDS))
        return 0
    if argv[0] not in SUBCOMMANDS:
        raise ColcError(f"colc help: error: no subcommand {argv[0]!r}; choose from "
                        f"{', '.join(SUBCOMMANDS)}")
    if len(argv) > 1:
        raise ColcError(f"colc help: error: one subcommand at a time, got {' '.join(argv)!r}")
    return _dispatch([argv[0], "--help"])


def check_target(path: str, inputs: Sequence[str] = ()) -> None:
    """Refuse an output ``write_atomically`` would refuse, before the work
    (``colc.output.check_target``)."""
    from colc.output import check_target as check

    check(path, inputs)


def write_atomically(path: str, text: str, inputs: Sequence[str] = ()) -> None:
    """Write ``text`` to ``path`` safely: atomically for files, in place for
    devices and FIFOs, never over a directory or an input (``colc.output``)."""
    from colc.output import write_output

    write_output(path, text, inputs=inputs)


def _version_text() -> str:
    from colc.versions import describe

    return f"colc {__version__} ({describe()})"


def _compile_parser() -> argparse.ArgumentParser:
    from colc.compiler.pipeline import available_algorithms
    from colc.ir.runtime_model import PRESETS

    p = argparse.ArgumentParser(
        formatter_class=_Defaults,
        prog="colc", description="Compile a topology into a verified collective schedule.",
        epilog="subcommands: colc verify FILE|DIR | colc simulate FILE --topo TOPO | "
               "colc analyze TOPO [--json] | colc convert IN -o OUT.yaml | "
               "colc find --ranks N --degree D | colc report TOPO -o OUT.html "
               "(colc help SUBCOMMAND for each)")
    p.add_argument("topology", help="topology file (colc YAML, or another supported format)")
    p.add_argument("-o", "--output",
                   help="output file, or a directory (existing, or ending in /) for one file "
                        "per message-size window; default: standard output")
    p.add_argument("--version", action="version", version=_version_text())
    p.add_argument("--collective", default="allreduce",
                   choices=["allreduce", "allgather", "reducescatter", "alltoall"],
                   help="the collective to compile")
    p.add_argument("--algorithm", default="auto", choices=available_algorithms(),
                   help="schedule generator: ring, bfb (direct-connect linear programs), "
                        "trees (spanning-tree packing), hier (box trees and one network "
                        "hop), rings2d (rings in boxes, then along rails), dimrings (tori: "
                        "rings along each dimension, rows as one step), rails (boxes behind "
                        "a switch: blocks cross once on a rail, within the threadblock "
                        "budget), nccl-rings (NCCL's rings as a file); auto "
                        "simulates every applicable one and keeps the fastest")
    p.add_argument("--protocol", default=None, choices=["Simple", "LL", "LL128"],
                   help="protocol of a single file (a directory gets every protocol) "
                        "(default: Simple)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--inplace", action="store_true", help="only in-place calls")
    mode.add_argument("--outofplace", action="store_true", help="only out-of-place calls")
    p.add_argument("--instances", type=int, default=1, help="parallel copies of the schedule")
    p.add_argument("--chunks", type=int, default=None,
                   help="chunks per shard (trees, hier, bfb, rings2d, rails, dimrings; ring: "
                        "copies of its rings, nccl-rings: its rings); default: tried by "
                        "simulation")
    p.add_argument("--min-bytes", default="0", help="smallest message size to use it for (1M)")
    p.add_argument("--max-bytes", default="0", help="largest message size (0 = no limit)")
    p.add_argument("--machine", choices=sorted(PRESETS), default=None, help=MACHINE_HELP)
    _budget_option(p)
    p.add_argument("--dtype", default="fp32", help="element type for selection: fp32|fp16|bf16")
    p.add_argument("--backend", choices=["msccl", "oneccl"], default=None,
                   help="output format (default: from the extension, else msccl)")
    p.add_argument("--verify-each", action="store_true", help="check the IR after every pass")
    p.add_argument("--no-balance", action="store_true",
                   help="skip the lane balancing pass (the plain lowering; ring's copies, "
                        "rings2d, rails and nccl-rings are lowered plain anyway)")
    p.add_argument("--boxes", type=int, default=None,
                   help="boxes for single-box inputs such as an NCCL topology dump")
    p.add_argument("--jobs", type=int, default=0,
                   help="processes for lowering and simulating candidates (default 0: "
                        "every CPU available, or COLC_JOBS); the output does not depend "
                        "on it")
    p.add_argument("--executor", choices=["local", "dask"], default="local",
                   help="where candidates are lowered and simulated: local processes, or a "
                        "dask.distributed cluster (pip install 'colc[dask]'); the output "
                        "does not depend on it")
    p.add_argument("--scheduler", default="",
                   help="dask scheduler address for --executor dask (default: "
                        "COLC_DASK_SCHEDULER, else a local cluster)")
    return p


def _budget_option(p: argparse.ArgumentParser) -> None:
    from colc.compiler.pipeline import DEFAULT_THREADBLOCKS

    p.add_argument("--max-threadblocks", type=int, default=DEFAULT_THREADBLOCKS, metavar="N",
                   help="threadblocks (SMs) per GPU a file may take; each holds an SM for the "
                        "whole call, which compute kernels overlapping the collective need. "
                        "0 = the GPU's own limit (108 on A100, 104 per MI250 GCD, 132 on H100)")


def _backend_for(args: argparse.Namespace) -> str:
    if args.backend:
        return args.backend
    if args.output and args.output.endswith(".oneccl.xml"):
        return "oneccl"
    return "msccl"


def _options(args: argparse.Namespace):
    from colc.compiler.pipeline import CompileOptions
    from colc.ir.core import Collective, Protocol
    from colc.ir.load_checks import MAX_CHANNELS
    from colc.sizes import dtype_bytes, parse_size

    lo = parse_size(args.min_bytes, "--min-bytes")
    hi = parse_size(args.max_bytes, "--max-bytes")
    if hi and hi < lo:
        raise ColcError("--max-bytes is smaller than --min-bytes")
    if not 1 <= args.instances <= MAX_CHANNELS:
        raise ColcError(f"--instances must be in 1..{MAX_CHANNELS} (each instance takes "
                        f"channels of its own, and the runtime has {MAX_CHANNELS}), got "
                        f"{args.instances}")
    if args.scheduler and args.executor != "dask":
        raise ColcError("--scheduler goes with --executor dask")
    if args.chunks is not None and not 1 <= args.chunks <= 4096:
        raise ColcError(f"--chunks must be in 1..4096, got {args.chunks}")
    return CompileOptions(
        algorithm=args.algorithm, collective=Collective(args.collective),
        protocol=Protocol(args.protocol or "Simple"),
        inplace=True if args.inplace else (False if args.outofplace else None),
        outofplace=True if args.outofplace else (False if args.inplace else None),
        instances=args.instances, min_bytes=lo, max_bytes=hi,
        backend=_backend_for(args), verify_each=args.verify_each, machine=args.machine,
        chunks=args.chunks, balance=not args.no_balance, dtype_bytes=dtype_bytes(args.dtype),
        jobs=_jobs(args.jobs), executor=args.executor, scheduler=args.scheduler,
        max_threadblocks=_budget(args.max_threadblocks))


def _budget_list(text: str) -> tuple[int, ...]:
    """``--budgets 8,16,0`` as integers (each a valid budget)."""
    out = []
    for item in filter(None, (x.strip() for x in text.split(","))):
        try:
            out.append(_budget(int(item), "--budgets"))
        except ValueError:
            raise ColcError(f"colc: error: --budgets takes whole numbers separated by "
                            f"commas, got {item!r}") from None
    if text.strip() and not out:  # "," alone: no budget rows at all
        raise ColcError(f"colc: error: --budgets takes whole numbers separated by commas, "
                        f"got {text!r}")
    return tuple(out)


def _budget(n: int, option: str = "--max-threadblocks") -> int:
    if n < 0:
        raise ColcError(f"colc: error: {option} must be 0 (the GPU's limit) or a "
                        f"positive number of threadblocks per GPU, got {n}")
    return n


def _jobs(n: int) -> int:
    if n < 0:
        raise ColcError(f"colc: error: --jobs must be 0 (all CPUs) or more, got {n}")
    return n


def _is_directory_target(path: str) -> bool:
    return path.endswith(("/", os.sep)) or os.path.isdir(path)


def _cmd_compile(argv: list[str]) -> int:
    from colc.compiler.pipeline import compile_topology
    from colc.sizes import format_gbs, format_size

    args = _compile_parser().parse_args(argv)
    _check_named(args.output, "the file's name, or a folder's ending in /")
    opts = _options(args)
    topo = load_any_topology(args.topology, boxes=args.boxes)
    if args.output and _is_directory_target(args.output):
        given = [f"--{name} {value}" for name, value, default in (
            ("protocol", args.protocol, None), ("min-bytes", args.min_bytes, "0"),
            ("max-bytes", args.max_bytes, "0")) if value != default]
        if given:
            print(f"colc: note: {', '.join(given)} ignored: a folder gets every protocol the "
                  f"machine offers, each over its own size window", file=sys.stderr)
        return _write_portfolio(topo, opts, args.output)
    if args.output and args.output != "-":
        check_target(args.output, topo.inputs)  # before the compile: minutes at scale
    result = compile_topology(topo, opts)
    clear_progress()
    for note in (*result.notes, *_protocol_note(args, opts)):
        print(f"colc: note: {note}", file=sys.stderr)
    predicted = ", ".join(f"{format_gbs(r.algbw)} GB/s at {format_size(s)}"
                          + ("" if r.selected else " (not selected there)")
                          for s, r in result.predicted)
    if result.program is not None or result.threads is not None:
        from colc.ir.simulate import selection_gaps, selection_warnings

        written = result.threads or result.program
        for line in selection_warnings(written, opts.backend):
            print(f"colc: warning: {line}", file=sys.stderr)
        for line in selection_gaps(written, opts.backend):  # when there is no warning
            print(f"colc: note: {line}", file=sys.stderr)
    if args.output:
        write_atomically(args.output, result.text, inputs=topo.inputs)
        copies = f" x{opts.instances} instances" if opts.instances > 1 else ""
        print(f"colc: wrote {_target_name(args.output)} ({result.algorithm}{copies}, "
              f"{opts.collective.value}, {topo.num_ranks} ranks, "
              f"{_written_shape(result, predicted, opts.backend)}; the schedule's "
              f"bandwidth-only figure "
              f"{format_gbs(float(result.algbw))} GB/s; verified)",
              file=sys.stderr)
    else:
        from colc.output import write_stdout

        write_stdout(result.text)
    return 0


def _protocol_note(args, opts) -> tuple[str, ...]:
    """Where the user's window lies below every size a portfolio serves with
    Simple and ``--protocol`` was left at Simple: say so (DGX A100 x2
    allgather up to 64 KiB, Simple 0.93 GB/s at 64K, LL 2.1)."""
    from colc.compiler.portfolio import PROTOCOL_SIZES
    from colc.ir.core import Protocol

    least = PROTOCOL_SIZES[Protocol.SIMPLE][0]
    if args.protocol is not None or not opts.max_bytes or opts.max_bytes >= least:
        return ()
    return (f"--max-bytes {opts.max_bytes}: below {least} bytes a portfolio serves calls with "
            f"LL or LL128 files, not Simple (the default); --protocol LL writes such a file",)


def _written_shape(result, predicted: str, backend: str) -> str:
    """The summary's middle: a program's chunks, threadblocks (a oneCCL
    file's threads: one per threadblock) and predictions, or the threads of
    a file written as oneCCL threads directly."""
    if result.program is not None:
        tbs = result.program.max_threadblocks
        if backend == "oneccl":
            return (f"nchunks {result.program.nchunks}, at most {tbs} thread{'s' * (tbs != 1)} "
                    f"per rank; predicted {predicted}")
        return (f"nchunksperloop {result.program.nchunks}, "
                f"{tbs} threadblock{'s' * (tbs != 1)} per GPU; predicted {predicted}")
    ranks = result.threads.ranks
    threads = max(len(r.threads) for r in ranks)
    instrs = max(sum(len(t.instrs) for t in r.threads) for r in ranks)
    return (f"nchunks {result.threads.nchunks}, at most {threads} threads and {instrs} "
            f"instructions per rank; not simulated: the bound is the routes' busiest link")


def _write_portfolio(topo, opts, folder: str) -> int:
    from colc.algo_dir import check_folder, write_portfolio
    from colc.compiler.portfolio import build_portfolio, format_portfolio
    from colc.ir.simulate import MAX_ITERATIONS

    folder = folder.rstrip("/") or "/"
    if opts.backend != "msccl" or folder.lower().endswith(".oneccl.xml"):
        raise ColcError(f"-o {folder}/: a folder gets a portfolio of MSCCL files; for oneCCL "
                        f"name a file (several files, one per size window, with --min-bytes "
                        f"and --max-bytes)")
    check_folder(folder)
    portfolio = build_portfolio(topo, opts)
    clear_progress()
    written = write_portfolio(portfolio, folder, inputs=topo.inputs)
    print(format_portfolio(portfolio), file=sys.stderr)
    for note in portfolio.notes:
        print(f"colc: note: {note}", file=sys.stderr)
    removed = (f"; removed {len(written.removed)} older colc files for the same calls"
               if written.removed else "")
    end = portfolio.windows[-1].hi
    reach = (f"{end} (past it a call runs more than {MAX_ITERATIONS} loop iterations)" if end
             else "unlimited")
    print(f"colc: wrote {len(written.names)} files to {folder} ({opts.collective.value}, "
          f"{topo.num_ranks} ranks, windows 0..{reach}, verified){removed}", file=sys.stderr)
    for problem in written.conflicts:
        print(f"colc: warning: {folder}/{problem}", file=sys.stderr)
    return 0


def load_any_topology(path: str, boxes: int | None = None, warn=None):
    """Load a topology from any supported input format, chosen by content;
    its ``inputs`` are every file read for it (``path`` and, for a wrapper,
    the NCCL dump it names).  Its ``notes`` go to ``warn`` (default: a
    ``colc: warning:`` line each on stderr)."""
    import dataclasses

    from colc.frontends._input import recording_reads

    with recording_reads() as paths:
        topo = _load_any(path, boxes)
    for note in topo.notes:
        (warn or _warning)(note)
    return dataclasses.replace(topo, inputs=tuple(dict.fromkeys([path, *paths])))


def _warning(note: str) -> None:
    print(f"colc: warning: {note}", file=sys.stderr)


def _family_hint(path: str) -> str:
    """For a missing file named like a built-in family (``torus-4x4``), how
    to ask for the family: a topology is always a file.

    >>> _family_hint("torus-4x4")[:44]
    ' (built-in families are YAML files: write e.'
    >>> _family_hint("mynet.yaml")
    ''
    """
    from colc.frontends.families import FAMILIES

    stem = os.path.basename(path).split(".")[0].lower()
    family = next((f for f in sorted(FAMILIES, key=len, reverse=True)
                   if stem.startswith(f)), None)
    if family is None:
        return ""
    return (f" (built-in families are YAML files: write e.g. 'family: {family}' and its "
            f"parameters into {os.path.splitext(path)[0]}.yaml; README, Families)")


def _load_any(path: str, boxes: int | None):
    from colc.frontends import load_topology
    from colc.frontends.limits import MAX_RANKS

    if path == "-":
        raise ColcError("-: error: colc reads a topology from a file, not from standard input")
    if not os.path.exists(path):
        raise ColcError(f"{path}: error: no such file{_family_hint(path)}")
    if boxes is not None and not 1 <= boxes <= MAX_RANKS:  # an NCCL dump took 0 as 1
        raise ColcError(f"colc: error: --boxes must be 1 to {MAX_RANKS} (colc handles at most "
                        f"{MAX_RANKS} ranks), got {boxes}")
    loader = _foreign_loader(path, boxes)
    if loader is not None:
        return loader()
    if boxes is not None:
        raise ColcError(f"{path}: error: --boxes applies to single-box inputs (an NCCL "
                        f"topology dump, a TACCL profile); for colc YAML write 'boxes:' in "
                        f"a family file (e.g. 'family: dgx-a100' with 'boxes: {boxes}')")
    return load_topology(path)


def _foreign_loader(path: str, boxes: int | None):
    """A loader for non-YAML inputs (NCCL XML, msccl-tools / TACCL JSON), if any."""
    try:
        from colc.frontends.detect import foreign_loader
    except ImportError:
        return None
    return foreign_loader(path, boxes=boxes)


def _cmd_verify(argv: list[str]) -> int:
    from colc.backends.verify import verify_file

    p = argparse.ArgumentParser(
        formatter_class=_Defaults,
        prog="colc verify",
        description="Check a runtime XML file on the runtime's terms, or every file of an "
                    "MSCCL_ALGO_DIR and the size windows between them.")
    p.add_argument("file", help="an algorithm file, or a folder")
    p.add_argument("--backend", choices=["msccl", "oneccl"], default=None,
                   help="the file's format (default: from its first element, else its "
                        "name: *.oneccl.xml is oneCCL); a folder is always MSCCL")
    p.add_argument("-q", "--quiet", action="store_true",
                   help="print only errors (no warnings, no OK lines)")
    p.add_argument("--jobs", type=int, default=0,
                   help="processes a folder's files are verified on (default 0: every CPU "
                        "available, or COLC_JOBS); the output does not depend on it")
    p.add_argument("--max-threadblocks", type=int, default=None, metavar="N",
                   help="fail an MSCCL file that takes more threadblocks per GPU than N "
                        "(the budget it was compiled for; 1 or more: a file names no GPU "
                        "whose limit 0 would mean)")
    args = p.parse_args(argv)
    jobs = _jobs(args.jobs) or None
    budget = args.max_threadblocks
    if budget is not None and budget < 1:
        raise ColcError(f"colc verify: error: --max-threadblocks must be 1 or more "
                        f"threadblocks per GPU, got {budget}")
    if os.path.isdir(args.file):
        if args.backend == "oneccl":
            raise ColcError(f"{args.file}: error: --backend oneccl: a folder is verified as "
                            "an MSCCL_ALGO_DIR; name each oneCCL file")
        return _verify_folder(args.file, args.quiet, jobs, budget)
    report = verify_file(args.file, backend=args.backend, budget=budget)
    for line in report.errors:
        print(f"{args.file}: error: {line}")
    for line in report.warnings:
        if not args.quiet:
            print(f"{args.file}: warning: {line}")
    if report.ok:
        if not args.quiet:
            print(f"{args.file}: OK ({report.summary})")
            if report.program is not None:
                print(f"{args.file}: {_selection_line(report.program)}")
        return 0
    return 1


def _verify_folder(folder: str, quiet: bool, jobs: int | None, budget: int | None) -> int:
    """``colc verify DIR``: every file, and the windows between them."""
    from colc.backends.verify_dir import verify_dir

    report = verify_dir(folder, jobs, budget)
    for name, r in report.files:
        for line in r.errors:
            print(f"{os.path.join(folder, name)}: error: {line}")
        for line in r.warnings:
            if not quiet:
                print(f"{os.path.join(folder, name)}: warning: {line}")
        if r.ok and not quiet:
            print(f"{os.path.join(folder, name)}: OK ({r.summary})")
    for line in report.errors:
        print(f"{folder}: error: {line}")
    for line in report.warnings:
        if not quiet:
            print(f"{folder}: warning: {line}")
    if report.ok and not quiet:
        print(f"{folder}: OK ({len(report.files)} files; windows of the same collective, "
              f"ranks and mode do not overlap)")
    return 0 if report.ok else 1


def _selection_line(program) -> str:
    from colc.compiler.pipeline import selectable_sizes
    from colc.ir.simulate import nccl_tests_range
    from colc.sizes import format_size

    lo, hi = nccl_tests_range(program)
    parts = []
    for name, size in (("fp32", 4), ("fp16/bf16", 2)):
        sizes = selectable_sizes(program, size, lo, hi)
        if not sizes:
            parts.append(f"{name}: no power-of-two size from {format_size(lo)} to "
                         f"{format_size(hi)}")
        else:
            parts.append(f"{name}: {format_size(sizes[0])}..{format_size(sizes[-1])} "
                         f"({len(sizes)} power-of-two size{'s' * (len(sizes) != 1)})")
    return "selected by the runtime at " + "; ".join(parts)


def _cmd_analyze(argv: list[str]) -> int:
    from colc.compiler.analyze import SIZES, analyze_topology, format_table
    from colc.ir.core import Collective
    from colc.ir.runtime_model import PRESETS
    from colc.sizes import format_size, parse_sizes

    p = argparse.ArgumentParser(
        formatter_class=_Defaults,
        prog="colc analyze",
        description="Bounds and schedule figures of a topology: bandwidth-only algbw and "
                    "simulated time per message size for each algorithm.")
    p.add_argument("topology")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--algorithm", action="append", default=[],
                   help="only this algorithm (repeatable)")
    p.add_argument("--collective", action="append", default=[],
                   choices=["allgather", "reducescatter", "allreduce", "alltoall"],
                   help="only this collective (repeatable)")
    p.add_argument("--sizes", default=",".join(format_size(x) for x in SIZES),
                   help="simulated sizes")
    sim = p.add_mutually_exclusive_group()
    sim.add_argument("--simulate", dest="simulate", action="store_true", default=None,
                     help="simulate even above 64 ranks (by default up to 64 ranks are "
                          "simulated, larger jobs get bandwidth-only figures)")
    sim.add_argument("--no-simulate", dest="simulate", action="store_false",
                     help="bandwidth-only figures at every rank count (fast)")
    p.add_argument("--search", action="store_true",
                   help="simulate every chunking and protocol the portfolio tries for each "
                        "algorithm and show the fastest per size (minutes; default: one "
                        "representative file per algorithm, seconds)")
    p.add_argument("--machine", choices=sorted(PRESETS), default=None, help=MACHINE_HELP)
    _budget_option(p)
    p.add_argument("--jobs", type=int, default=0,
                   help="processes the algorithms are analysed on (default 0: every CPU "
                        "available, or COLC_JOBS); the output does not depend on it")
    p.add_argument("--budgets", default="", metavar="LIST",
                   help="also, per collective and size, the file the portfolio within each of "
                        "these threadblock budgets selects, e.g. 8,16,24,32,48,64,0 (0 = the "
                        "GPU's limit; a portfolio per budget: minutes on large machines)")
    p.add_argument("--boxes", type=int, default=None)
    args = p.parse_args(argv)
    budgets = _budget_list(args.budgets)
    if args.search and args.simulate is False:
        print("colc: note: --search ignored: it simulates, and --no-simulate asks for none",
              file=sys.stderr)
    topo = load_any_topology(args.topology, boxes=args.boxes)
    report = analyze_topology(
        topo, algorithms=tuple(dict.fromkeys(args.algorithm)),  # one row per name given
        collectives=tuple(Collective(c) for c in dict.fromkeys(args.collective)),
        sizes=parse_sizes(args.sizes), simulate=args.simulate, machine=args.machine,
        max_threadblocks=_budget(args.max_threadblocks), budgets=budgets,
        search=args.search, jobs=_jobs(args.jobs) or None)
    clear_progress()
    if args.json:
        print(json.dumps(report, indent=2, sort_keys=False))
    else:
        print(format_table(report))
    return 0


def _cmd_convert(argv: list[str]) -> int:
    p = argparse.ArgumentParser(formatter_class=_Defaults, prog="colc convert",
                                description="Write any supported topology input as colc YAML.")
    p.add_argument("input")
    p.add_argument("-o", "--output", required=True)
    p.add_argument("--boxes", type=int, default=None)
    args = p.parse_args(argv)
    try:
        from colc.frontends.yaml_writer import topology_to_yaml
    except ImportError as err:
        raise ColcError("colc convert is not available in this build") from err
    _check_output(args.output, "colc convert writes colc YAML", ".yaml")
    topo = load_any_topology(args.input, boxes=args.boxes)
    text = topology_to_yaml(topo)
    _readable_back(text, args.input)
    write_atomically(args.output, text, inputs=topo.inputs)
    return 0


def _readable_back(text: str, source: str) -> None:
    """Refuse a conversion colc could not read back: past the input limits
    (a 700-rank complete graph is 14.6 MB and 1.2 million YAML values)."""
    from colc.errors import SpecError
    from colc.frontends._yaml_guard import check_events
    from colc.frontends.limits import MAX_FILE_BYTES

    size = len(text.encode("utf-8"))
    why = (f"{size / 2**20:.1f} MiB, more than the {MAX_FILE_BYTES >> 20} MiB colc reads"
           if size > MAX_FILE_BYTES else "")
    if not why:
        try:
            check_events(text, "")
        except SpecError as err:
            why = str(err).split("error: ")[-1].split(";")[0]
    if why:
        raise ColcError(f"{source}: error: its colc YAML would not read back ({why}); "
                        f"keep {source}, which colc reads as it is")


#: Names that promise a format colc's YAML and HTML outputs are not (a
#: runtime loads every file of its XML folder; a JSON reader chokes; a
#: ``report.md`` held HTML where Markdown was asked for).
_OTHER_FORMATS = {".yaml": (".json", ".xml", ".html", ".htm"),
                  ".html": (".json", ".xml", ".yaml", ".yml", ".md", ".markdown")}


def _target_name(output: str) -> str:
    """``output`` as the 'wrote' line names it (``-`` is standard output)."""
    return "standard output" if output == "-" else output


def _check_named(output: str | None, what: str) -> None:
    """Refuse an empty ``-o`` (``-o ""``, a shell variable left unset): the
    compile printed the file to stdout, find wrote nothing, convert said
    ': error: is a directory'."""
    if output is not None and not output.strip():
        raise ColcError(f"colc: error: -o takes {what}, got {output!r}")


def _check_output(output: str | None, writes: str, suffix: str) -> None:
    """Refuse an empty ``-o``, a folder (``new/``: ``find`` wrote a file
    named ``new``), or a name whose extension names another format than
    ``suffix``'s (``colc convert``/``find`` write YAML, ``report`` HTML)."""
    _check_named(output, f"the {suffix[1:].upper()} file's name")
    if output and output != "-" and _is_directory_target(output):
        what = "is a directory" if os.path.isdir(output) else "names a folder (ends in /)"
        raise ColcError(f"{output}: error: {what}; {writes}, one file (give a file name)")
    if output and output.lower().endswith(_OTHER_FORMATS[suffix]):
        raise ColcError(f"{output}: error: {writes}; name the output {suffix}")


def _cmd_find(argv: list[str]) -> int:
    from fractions import Fraction

    from colc.compiler.bfb.find_topology import find_topology

    from colc.sizes import parse_size

    p = argparse.ArgumentParser(
        formatter_class=_Defaults,
        prog="colc find", description="Search direct-connect topologies (bases and expansions) "
        "for N ranks of degree d; print the Pareto frontier and write the chosen one as YAML.")
    p.add_argument("--ranks", type=int, required=True, help="number of ranks N")
    p.add_argument("--degree", type=int, required=True,
                   help="links per rank d (each duplex link counts once)")
    p.add_argument("--size", type=lambda t: parse_size(t, "colc find: error: --size"),
                   default=1 << 20,
                   help="allreduce size the frontier is ranked at, bytes (suffixes K, M, G)")
    p.add_argument("--alpha", default="10", help="per-hop latency in us")
    p.add_argument("--bandwidth", default="12.5", help="egress bandwidth per rank, GB/s")
    p.add_argument("--alltoall-share", default="0",
                   help="weight of the all-to-all time against the allreduce time in the "
                        "ranking, 0..1 (the seed's workload mix)")
    p.add_argument("--alltoall-size", type=lambda t: parse_size(t, "colc find: error: "
                                                               "--alltoall-size"),
                   default=1 << 20, help="bytes per rank of the all-to-all column")
    p.add_argument("--json", action="store_true",
                   help="print the candidates as one JSON array (an object each) instead "
                        "of the table (on standard error with -o -, where the YAML goes "
                        "to standard output)")
    p.add_argument("--mcf-lp", action="store_true",
                   help="solve the all-to-all LP (A.1) for every candidate however large "
                        "(10 minutes or more per candidate at 1024 ranks; default: the distance bound "
                        "where the LP is large, marked +)")
    p.add_argument("--jobs", type=int, default=0,
                   help="processes the --mcf-lp LPs run on (0: every CPU available)")
    p.add_argument("-o", "--output", help="write the chosen topology here (colc YAML)")
    args = p.parse_args(argv)
    _check_output(args.output, "colc find writes the chosen topology as colc YAML", ".yaml")
    if args.output and args.output != "-":
        check_target(args.output)  # before the search: minutes with --mcf-lp
    alpha, bandwidth, share = (_option_number(getattr(args, name), option) for name, option in (
        ("alpha", "--alpha"), ("bandwidth", "--bandwidth"),
        ("alltoall_share", "--alltoall-share")))
    result = find_topology(args.ranks, args.degree, size=args.size, alpha=alpha,
                           bandwidth=bandwidth, alltoall_share=share,
                           alltoall_size=args.alltoall_size, mcf_lp=args.mcf_lp,
                           jobs=_jobs(args.jobs) or None)
    report = sys.stderr if args.output == "-" else sys.stdout  # stdout holds the YAML then
    if args.json:
        import json

        print(json.dumps(result.records(), indent=1), file=report)
    else:
        print(result.table(), file=report)
    if args.output:
        write_atomically(args.output, result.yaml())
        if not (args.json and report is sys.stderr):  # stderr holds only the JSON then
            print(f"colc: wrote {_target_name(args.output)}", file=sys.stderr)
    return 0


def _option_number(text: str, option: str) -> Fraction:
    """A number given on the command line, read as a topology field is (no
    exponent past 1000 either way: ``1e999999999`` took minutes)."""
    from colc.frontends._values import FieldError, parse_number

    try:
        return parse_number(text, path="colc", field=option)  # find_topology checks ranges
    except FieldError as err:
        raise ColcError(f"colc find: error: {option}: {err.problem}") from None


def _cmd_simulate(argv: list[str]) -> int:
    from colc.backends.msccl_reader import read_msccl
    from colc.ir.runtime_model import PRESETS, model_for, model_named
    from colc.ir.simulate import simulate
    from colc.sizes import dtype_bytes, format_size, parse_sizes

    p = argparse.ArgumentParser(
        formatter_class=_Defaults,
        prog="colc simulate",
        description="Predict the time of an MSCCL file on a machine, per message size "
                    "(nccl-tests conventions).")
    p.add_argument("file")
    p.add_argument("--topo", required=True, help="topology the file runs on")
    p.add_argument("--sizes", default="1K:1G", help="sizes and lo:hi power-of-two ranges")
    p.add_argument("--dtype", default="fp32", help="fp32|fp16|bf16")
    p.add_argument("--machine", choices=sorted(PRESETS), default=None, help=MACHINE_HELP)
    p.add_argument("--boxes", type=int, default=None)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--max-threadblocks", type=int, default=None, metavar="N",
                   help="warn when the file takes more threadblocks per GPU than this "
                        "budget (0 = the GPU's limit)")
    p.add_argument("--no-verify", dest="verify", action="store_false",
                   help="skip running the verifier on the file (a minute at 1024 ranks); "
                        "by default a file that fails it exits 1 after its figures")
    args = p.parse_args(argv)
    sizes = parse_sizes(args.sizes)
    dt = dtype_bytes(args.dtype)
    if os.path.isdir(args.file):
        raise ColcError(f"{args.file}: error: is a folder; colc simulate takes one MSCCL file "
                        f"(colc verify checks a folder)")
    try:
        with open(args.file, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as err:
        raise ColcError(f"{args.file}: error: cannot read: {err.strerror}") from None
    except UnicodeDecodeError:
        raise ColcError(f"{args.file}: error: not UTF-8 text, so not an MSCCL file") from None
    from colc.backends.verify import detect_backend, not_a_schedule

    problem = not_a_schedule(text, args.file, "colc simulate")
    if problem:
        raise ColcError(f"{args.file}: error: {problem}")
    if detect_backend(text, args.file) == "oneccl":
        raise ColcError(f"{args.file}: error: a oneCCL file; colc simulate runs MSCCL files "
                        f"(colc verify checks oneCCL files; the figures a compile predicts "
                        f"for one made from an MSCCL program are its MSCCL twin's: the same "
                        f"command with -o FILE.xml; hop-relay files are not simulated)")
    read = read_msccl(text, args.file)
    if not read.runnable or read.program is None:
        first = next((d for d in read.diagnostics if d.is_error), "not an MSCCL file")
        raise ColcError(f"{args.file}: error: the runtime would reject it: {first}")
    topo = load_any_topology(args.topo, boxes=args.boxes)
    model = model_named(args.machine) if args.machine else model_for(topo)
    proto = read.program.protocol
    if proto not in model.protocols:
        given = (f"--machine {args.machine}" if args.machine
                 else f"machine {model.name} (the topology's)")
        raise ColcError(f"{args.file}: error: an {proto.value} file; {given} has no "
                        f"{proto.value}")
    try:
        rows = [simulate(read.program, topo, model, s, dt, loaded=read.loaded) for s in sizes]
    except ColcError as err:  # a hang the verifier would name: say which file
        raise ColcError(f"{args.file}: error: {err}") from None
    tbs = read.program.max_threadblocks
    over = _over_budget(tbs, args.max_threadblocks, model)
    failed = _verification_errors(read) if args.verify else []
    if args.json:
        print(json.dumps({"file": args.file, "topology": topo.name, "machine": model.name,
                          "dtype": args.dtype, "threadblocks_per_gpu": tbs,
                          "verified": (not failed) if args.verify else None,
                          "verification_errors": failed,
                          "rows": [dataclass_dict(r) for r in rows]}, indent=2))
    else:
        _print_simulation(args, topo, model, tbs, rows)
    if over:
        print(f"colc: warning: {args.file}: {over}", file=sys.stderr)
    unselected = _unselected(read.program) if rows and not any(r.selected for r in rows) else ""
    if unselected:
        print(f"colc: warning: {args.file}: {unselected}", file=sys.stderr)
    if failed:
        more = f" (and {len(failed) - 1} more; colc verify lists them)" if len(failed) > 1 else ""
        print(f"{args.file}: error: fails verification, so these figures are of a file the "
              f"runtime would not run correctly: {failed[0]}{more}", file=sys.stderr)
        return 1
    return 0


def _unselected(program) -> str:
    """Why the runtime selects the file at no size at all, or '' (``colc simulate``
    warns when none of its sizes is selected and there is such a reason)."""
    from colc.ir.core import runtime_bytes
    from colc.ir.simulate import selection_warnings
    from colc.sizes import format_size

    hi = runtime_bytes(program.max_bytes)  # as the runtime compares them: unsigned
    if hi and hi < runtime_bytes(program.min_bytes):
        return (f"its size window is empty (maxBytes {format_size(program.max_bytes)} is "
                f"below minBytes {format_size(program.min_bytes)}): the runtime selects it "
                f"at no size; colc verify calls this an error")
    reasons = selection_warnings(program, "msccl")
    return reasons[0] if reasons else ""  # the table's selected column says why per size


def _verification_errors(read) -> list[str]:
    """The errors ``colc verify`` finds in a loadable MSCCL file (its runs in
    every mode it declares: postcondition, deadlock at the FIFO depth, races)."""
    from colc.backends.msccl_verify import verify_program

    found = verify_program(read.program, read.locate, loaded=read.loaded)
    return [str(d) for d in found if d.is_error]


def _over_budget(tbs: int, budget: int | None, model) -> str:
    """Why a file of ``tbs`` threadblocks per GPU breaks ``--max-threadblocks``, or ''."""
    from colc.compiler.pipeline import threadblock_budget

    if budget is None:
        return ""
    limit = threadblock_budget(_budget(budget), model)
    if tbs <= limit:
        return ""
    return (f"takes {tbs} threadblocks per GPU, more than the budget of {limit} "
            f"(--max-threadblocks)")


def _print_simulation(args, topo, model, tbs: int, rows) -> None:
    from colc.sizes import format_gbs, format_size

    print(f"{args.file} on {topo.name} (machine {model.name}, {args.dtype}; {tbs} "
          f"threadblocks per GPU)")
    print(f"{'size':>8}{'time us':>12}{'algbw':>9}{'busbw':>9}  {'selected':<9}"
          f"{'busiest threadblock':<22}busiest link")
    for r in rows:
        tb = f"r{r.busiest_tb[0]} tb{r.busiest_tb[1]} {r.busiest_tb[2]:.0%}"
        link = f"{r.busiest_link[0]}->{r.busiest_link[1]} {r.busiest_link[2]:.0%}"
        sel = "yes" if r.selected else "no"
        print(f"{format_size(r.nbytes):>8}{r.time_us:>12.1f}{format_gbs(r.algbw, 2):>9}"
              f"{format_gbs(r.busbw, 2):>9}  "
              f"{sel:<9}{tb:<22}{link}")
    unselected = [r for r in rows if not r.selected]
    if unselected:
        sizes = "1 size" if len(unselected) == 1 else f"{len(unselected)} sizes"
        print(f"not selected at {sizes}: {unselected[0].why_not}")


def _cmd_report(argv: list[str]) -> int:
    from colc.backends.report_html import render_report
    from colc.compiler.report_data import gather_report
    from colc.ir.core import Collective
    from colc.ir.runtime_model import PRESETS
    from colc.sizes import parse_sizes

    p = argparse.ArgumentParser(
        formatter_class=_Defaults,
        prog="colc report",
        description="Write a self-contained HTML page: topology summary, bounds, simulated "
                    "algbw per algorithm and size (inline SVG plots), size-window portfolio.")
    p.add_argument("topology")
    p.add_argument("-o", "--output", required=True, help="the HTML file to write")
    p.add_argument("--collective", choices=["allgather", "reducescatter", "allreduce",
                                            "alltoall"],
                   default="allreduce", help="collective of the portfolio")
    p.add_argument("--sizes", default="1K:1G",
                   help="sizes and lo:hi power-of-two ranges (every size is simulated per "
                        "algorithm and collective, large ones cost the most)")
    p.add_argument("--machine", choices=sorted(PRESETS), default=None, help=MACHINE_HELP)
    p.add_argument("--no-portfolio", dest="portfolio", action="store_false",
                   help="skip the portfolio (it adds minutes on a 16-GPU box)")
    _budget_option(p)
    p.add_argument("--boxes", type=int, default=None)
    args = p.parse_args(argv)
    sizes = parse_sizes(args.sizes)
    if not args.output or _is_directory_target(args.output):
        raise ColcError(f"colc report: error: -o takes the HTML file's name, got "
                        f"{args.output!r}")
    _check_output(args.output, "colc report writes HTML", ".html")
    topo = load_any_topology(args.topology, boxes=args.boxes)
    check_target(args.output, topo.inputs)  # before the slow part, not after it
    data = gather_report(topo, collective=Collective(args.collective), sizes=sizes,
                         machine=args.machine, portfolio=args.portfolio,
                         max_threadblocks=_budget(args.max_threadblocks))
    clear_progress()
    port = data["portfolio"]
    if port is not None and port["error"]:
        print(f"colc: warning: no portfolio for {port['collective']}: {port['error']}",
              file=sys.stderr)
    write_atomically(args.output, render_report(data), inputs=topo.inputs)
    print(f"colc: wrote {_target_name(args.output)}", file=sys.stderr)
    return 0


def dataclass_dict(obj) -> dict:
    """A dataclass as a JSON-ready dict."""
    import dataclasses

    return dataclasses.asdict(obj)


if __name__ == "__main__":
    sys.exit(main())
