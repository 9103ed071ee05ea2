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
import json
import os
import sys
import tempfile
from collections.abc import Sequence

from colc import __version__
from colc.errors import ColcError, InternalError

SUBCOMMANDS = ("compile", "verify", "analyze", "convert", "find")


def main(argv: Sequence[str] | None = None) -> int:
    """Run colc; returns the exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        return _dispatch(args)
    except ColcError as err:
        print(_one_line(str(err)), file=sys.stderr)
        return 1
    except InternalError as err:
        print(f"colc: internal error (please report): {_one_line(str(err))}", file=sys.stderr)
        return 3
    except KeyboardInterrupt:
        print("colc: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 1
    except Exception as err:  # noqa: BLE001 - last line of defence, no traceback for users
        print(f"colc: internal error (please report): {type(err).__name__}: "
              f"{_one_line(str(err))}", file=sys.stderr)
        if os.environ.get("COLC_DEBUG"):
            raise
        return 3


def _one_line(msg: str) -> str:
    text = " ".join(msg.split())
    return text if text.startswith(("colc", "/")) or ": error:" in text else f"colc: error: {text}"


def _dispatch(args: list[str]) -> int:
    if args and args[0] in SUBCOMMANDS:
        cmd, rest = args[0], args[1:]
    else:
        cmd, rest = "compile", args
    handler = {"compile": _cmd_compile, "verify": _cmd_verify, "analyze": _cmd_analyze,
               "convert": _cmd_convert, "find": _cmd_find}[cmd]
    return handler(rest)


def write_atomically(path: str, text: str) -> None:
    """Write ``text`` to ``path`` via a temporary file in the same folder."""
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise ColcError(f"{path}: error: output folder {folder} does not exist")
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".colc-", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _compile_parser() -> argparse.ArgumentParser:
    from colc.compiler.pipeline import available_algorithms

    p = argparse.ArgumentParser(
        prog="colc", description="Compile a topology into a verified collective schedule.",
        epilog="subcommands: colc verify FILE | colc analyze TOPO [--json] | "
               "colc convert IN -o OUT.yaml | colc find --ranks N --degree D")
    p.add_argument("topology", help="topology file (colc YAML, or another supported format)")
    p.add_argument("-o", "--output", help="output file (default: standard output)")
    p.add_argument("--version", action="version", version=f"colc {__version__}")
    p.add_argument("--collective", default="allreduce",
                   choices=["allreduce", "allgather", "reducescatter"])
    p.add_argument("--algorithm", default="auto", choices=available_algorithms())
    p.add_argument("--protocol", default="Simple", choices=["Simple", "LL", "LL128"])
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--inplace", action="store_true", help="only in-place calls")
    mode.add_argument("--outofplace", action="store_true", help="only out-of-place calls")
    p.add_argument("--instances", type=int, default=1, help="parallel copies of the schedule")
    p.add_argument("--min-bytes", type=int, default=0, help="smallest message size to use it for")
    p.add_argument("--max-bytes", type=int, default=0, help="largest message size (0 = no limit)")
    p.add_argument("--backend", choices=["msccl", "oneccl"], default=None,
                   help="output format (default: from the extension, else msccl)")
    p.add_argument("--verify-each", action="store_true", help="check the IR after every pass")
    p.add_argument("--boxes", type=int, default=None,
                   help="boxes for single-box inputs such as an NCCL topology dump")
    return p


def _backend_for(args: argparse.Namespace) -> str:
    if args.backend:
        return args.backend
    if args.output and args.output.endswith(".oneccl.xml"):
        return "oneccl"
    return "msccl"


def _cmd_compile(argv: list[str]) -> int:
    from colc.compiler.pipeline import CompileOptions, compile_topology
    from colc.ir.core import Collective, Protocol

    args = _compile_parser().parse_args(argv)
    if args.min_bytes < 0 or args.max_bytes < 0:
        raise ColcError("--min-bytes and --max-bytes must be >= 0")
    if args.max_bytes and args.max_bytes < args.min_bytes:
        raise ColcError("--max-bytes is smaller than --min-bytes")
    topo = load_any_topology(args.topology, boxes=args.boxes)
    opts = CompileOptions(
        algorithm=args.algorithm, collective=Collective(args.collective),
        protocol=Protocol(args.protocol),
        inplace=True if args.inplace else (False if args.outofplace else None),
        outofplace=True if args.outofplace else (False if args.inplace else None),
        instances=args.instances, min_bytes=args.min_bytes, max_bytes=args.max_bytes,
        backend=_backend_for(args), verify_each=args.verify_each)
    result = compile_topology(topo, opts)
    for note in result.notes:
        print(f"colc: note: {note}", file=sys.stderr)
    if args.output:
        write_atomically(args.output, result.text)
        print(f"colc: wrote {args.output} ({result.algorithm}, {opts.collective.value}, "
              f"{topo.num_ranks} ranks, algbw {float(result.algbw):.3f} GB/s, verified)",
              file=sys.stderr)
    else:
        sys.stdout.write(result.text)
    return 0


def load_any_topology(path: str, boxes: int | None = None):
    """Load a topology from any supported input format, chosen by content."""
    from colc.frontends import load_topology

    if not os.path.exists(path):
        raise ColcError(f"{path}: error: no such file")
    loader = _foreign_loader(path, boxes)
    return loader() if loader is not None else load_topology(path)


def _foreign_loader(path: str, boxes: int | None):
    """A loader for non-YAML inputs (NCCL XML, msccl-tools / TACCL JSON), if any."""
    try:
        from colc.frontends.detect import foreign_loader
    except ImportError:
        return None
    return foreign_loader(path, boxes=boxes)


def _cmd_verify(argv: list[str]) -> int:
    from colc.backends.verify import verify_file

    p = argparse.ArgumentParser(prog="colc verify",
                                description="Check a runtime XML file on the runtime's terms.")
    p.add_argument("file")
    p.add_argument("--backend", choices=["msccl", "oneccl"], default=None)
    p.add_argument("-q", "--quiet", action="store_true", help="print only problems")
    args = p.parse_args(argv)
    report = verify_file(args.file, backend=args.backend)
    for line in report.errors:
        print(f"{args.file}: error: {line}")
    for line in report.warnings:
        if not args.quiet:
            print(f"{args.file}: warning: {line}")
    if report.ok:
        if not args.quiet:
            print(f"{args.file}: OK ({report.summary})")
        return 0
    return 1


def _cmd_analyze(argv: list[str]) -> int:
    from colc.compiler.analyze import analyze_topology, format_table

    p = argparse.ArgumentParser(prog="colc analyze",
                                description="Bounds and schedule figures for a topology.")
    p.add_argument("topology")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--boxes", type=int, default=None)
    args = p.parse_args(argv)
    topo = load_any_topology(args.topology, boxes=args.boxes)
    report = analyze_topology(topo)
    if args.json:
        print(json.dumps(report, indent=2, sort_keys=False))
    else:
        print(format_table(report))
    return 0


def _cmd_convert(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="colc convert",
                                description="Write any supported topology input as colc YAML.")
    p.add_argument("input")
    p.add_argument("-o", "--output", required=True)
    p.add_argument("--boxes", type=int, default=None)
    args = p.parse_args(argv)
    try:
        from colc.frontends.yaml_writer import topology_to_yaml
    except ImportError as err:
        raise ColcError("colc convert is not available in this build") from err
    topo = load_any_topology(args.input, boxes=args.boxes)
    write_atomically(args.output, topology_to_yaml(topo))
    return 0


def _cmd_find(argv: list[str]) -> int:
    from fractions import Fraction

    from colc.compiler.find_topology import find_topology

    p = argparse.ArgumentParser(
        prog="colc find", description="Search direct-connect topologies (bases and expansions) "
        "for N ranks of degree d; print the Pareto frontier and write the chosen one as YAML.")
    p.add_argument("--ranks", type=int, required=True)
    p.add_argument("--degree", type=int, required=True)
    p.add_argument("--size", type=int, default=1 << 20, help="allreduce size in bytes")
    p.add_argument("--alpha", default="10", help="per-hop latency in us")
    p.add_argument("--bandwidth", default="12.5", help="egress bandwidth per rank, GB/s")
    p.add_argument("-o", "--output", help="write the chosen topology here (colc YAML)")
    args = p.parse_args(argv)
    try:
        alpha, bandwidth = Fraction(args.alpha), Fraction(args.bandwidth)
    except (ValueError, ZeroDivisionError) as err:
        raise ColcError(f"colc find: error: --alpha/--bandwidth must be numbers ({err})") from err
    result = find_topology(args.ranks, args.degree, size=args.size, alpha=alpha,
                           bandwidth=bandwidth)
    print(result.table())
    if args.output:
        write_atomically(args.output, result.yaml())
        print(f"colc: wrote {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
