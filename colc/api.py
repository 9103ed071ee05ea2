"""The Python API: what ``colc`` does on the command line, as functions.

    >>> import colc
    >>> topo = colc.load_topology("family: ring\\nranks: 4\\nbandwidth: 10\\n")
    >>> f = colc.compile(topo, collective="allgather", algorithm="ring")
    >>> f.verify().ok
    True

``load_topology`` takes a path or the text of a topology (colc YAML, NCCL
topology XML, msccl-tools or TACCL JSON); ``compile`` returns a
``Compiled`` file (MSCCL by default) with its schedule, program, predicted
times and verification; ``portfolio`` builds one file per size window.
Errors are ``colc.errors.ColcError`` with the same one-line messages as the
command line.  See docs/api.md.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
import warnings
from dataclasses import dataclass

import functools
import re
import threading

from colc.collector import fewer_collections
from colc.errors import ColcError
from colc.sizes import MAX_SIZE

#: The compiler keeps per-process caches (the last schedule's analysis, the
#: simulator's tables, the worker pool's task): calls from several threads
#: run one at a time, so each gets the file a lone call gets.
_LOCK = threading.RLock()

#: The command line's flags that are the API's keywords, and what their
#: values look like in a message ("int": a number or size such as 1M; "name":
#: a word such as fp16 or allgather; None: the flag takes no value).
_FLAGS = {
    "max-threadblocks": "int", "chunks": "int", "instances": "int", "jobs": "int",
    "min-bytes": "int", "max-bytes": "int", "budgets": "int", "sizes": "int",
    "boxes": "int", "machine": "name", "backend": "name", "dtype": "name",
    "collective": "name", "algorithm": "name", "protocol": "name",
    "inplace": None, "outofplace": None, "search": None,
}

#: One of those flags, where a message names it (after a space, a bracket or
#: a quote; never inside a word or a path such as ``run--jobs``), with its
#: value when one follows.
_FLAG = re.compile(r"(?<![^\s(\[`'\"])--(" + "|".join(sorted(_FLAGS, key=len, reverse=True))
                   + r")(?![\w-])(?:[ =](\w(?:[\w.,:-]*\w)?))?")


def _keyword(match: re.Match) -> str:
    flag, value = match.group(1), match.group(2)
    name = flag.replace("-", "_")
    kind = _FLAGS[flag]
    if value is None or kind is None or (kind == "int" and not value[0].isdigit()):
        return name + match.group(0)[len(flag) + 2:]  # no value: keep what followed
    return f"{name}={value!r}" if kind == "name" else f"{name}={value}"


#: The command line's way to ask for the oneCCL format, and the API's.
_ONECCL_OUTPUT = ("-o FILE.oneccl.xml", "backend='oneccl'")


def _api_text(text: str) -> str:
    """``text`` with the command line's flags named as the API's keywords."""
    return _FLAG.sub(_keyword, text.replace(*_ONECCL_OUTPUT))


def _in_api_terms(err: ColcError) -> ColcError:
    """``err`` with the command line's flags named as the API's keywords
    (``use --max-threadblocks 9 or more`` -> ``use max_threadblocks=9 or
    more``; ``-o FILE.oneccl.xml`` -> ``backend='oneccl'``)."""
    err.args = tuple(_api_text(a) if isinstance(a, str) else a for a in err.args)
    if isinstance(getattr(err, "msg", None), str):
        err.msg = _api_text(err.msg)
    return err


def _api_call(fn):
    """Run ``fn`` under ``_LOCK``, its errors in the API's terms."""
    @functools.wraps(fn)
    def call(*args, **kw):
        with _LOCK:
            try:
                return fn(*args, **kw)
            except ColcError as err:
                raise _in_api_terms(err) from None
    return call


def _stacklevel() -> int:
    """The ``stacklevel`` of a warning issued in this module that points at
    the first caller outside it (and outside ``functools``' wrapper)."""
    import sys

    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename == __file__:
        frame, level = frame.f_back, level + 1
    return level


@_api_call
def load_topology(source: str | os.PathLike, *, boxes: int | None = None):
    """A ``Topology`` from a file path, or from the text of a topology.

    Parameters
    ----------
    source : str or path-like
        An existing file, or the file's content (YAML, XML or JSON).
    boxes : int, optional
        Boxes for single-box inputs (NCCL topology dumps).

    Returns
    -------
    colc.ir.topology.Topology
        Its ``notes`` (a TACCL profile measured at another size than 1 MB)
        are also issued as ``UserWarning``.
    """
    from colc.cli import load_any_topology

    if boxes is not None and (not isinstance(boxes, int) or isinstance(boxes, bool)):
        raise ColcError(f"colc.load_topology: boxes must be a whole number, got {boxes!r}")
    if not isinstance(source, (str, os.PathLike)):
        raise ColcError(f"colc.load_topology: source must be a file path or the text of a "
                        f"topology (str), got {type(source).__name__}")
    text = os.fspath(source)
    if not isinstance(text, str):
        raise ColcError(f"colc.load_topology: source must be a file path or the text of a "
                        f"topology (str), got {type(text).__name__}")
    if not text.strip():
        raise ColcError("colc.load_topology: source is empty; give a file name or the text of "
                        "a topology")
    if _names_a_file(source, text):
        topo = load_any_topology(text, boxes=boxes, warn=_quiet)
    else:
        topo = _load_text(text, boxes)
    for note in topo.notes:  # at the caller's line (colc.compile's caller's too)
        warnings.warn(note, UserWarning, stacklevel=_stacklevel())
    return topo


def _quiet(note: str) -> None:
    """Notes are issued as warnings once the topology is loaded."""


def _load_text(text: str, boxes: int | None):
    """A topology from its text, through a temporary file named ``<text>``
    in messages and notes."""
    from colc.cli import load_any_topology

    suffix = ".xml" if text.lstrip().startswith("<") else (
        ".json" if _is_json(text) else ".yaml")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, f"topology{suffix}")
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
        try:
            topo = load_any_topology(path, boxes=boxes, warn=_quiet)
        except ColcError as err:
            raise _as_text(err, path) from None
    return dataclasses.replace(topo, source="<text>",
                               notes=tuple(n.replace(path, "<text>") for n in topo.notes))


#: Endings that make a one-line ``source`` a file name, not topology text.
_FILE_ENDINGS = (".yaml", ".yml", ".json", ".xml")


def _names_a_file(source, text: str) -> bool:
    """Whether ``load_topology``'s source is a path (missing paths included)."""
    if not isinstance(source, str):
        return True  # a path-like object is always a path
    if "\n" in text or text.lstrip().startswith(("<", "{")):  # XML, JSON or flow YAML
        return False
    # one line without a colon is no topology text (a YAML topology is a mapping)
    return (os.path.exists(text) or text.endswith(_FILE_ENDINGS) or ":" not in text)


def _is_json(text: str) -> bool:
    """Whether ``text`` is JSON (a flow-style YAML mapping starts with ``{`` too)."""
    import json

    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _as_text(err: ColcError, path: str) -> ColcError:
    """``err``, its message naming the temporary file ``path`` as ``<text>``."""
    err.args = tuple(a.replace(path, "<text>") if isinstance(a, str) else a for a in err.args)
    if getattr(err, "path", None) == path:
        err.path = "<text>"
    if isinstance(getattr(err, "msg", None), str):
        err.msg = err.msg.replace(path, "<text>")
    return err


#: Collectives ``compile`` and ``portfolio`` build (the CLI's ``--collective``).
COLLECTIVES = ("allreduce", "allgather", "reducescatter", "alltoall")


def _options(collective: str, algorithm: str, protocol: str, what: str = "colc.compile",
             **kw):
    from colc.compiler.pipeline import CompileOptions
    from colc.ir.core import Collective, Protocol

    collective = collective.value if isinstance(collective, Collective) else collective
    protocol = protocol.value if isinstance(protocol, Protocol) else protocol
    if not isinstance(algorithm, str):
        raise ColcError(f"{what}: algorithm must be one name such as 'ring' or 'auto', got "
                        f"{algorithm!r}")
    if "dtype" in kw:  # the command line's --dtype; CompileOptions holds its bytes
        from colc.sizes import dtype_bytes

        if "dtype_bytes" in kw:
            raise ColcError(f"{what}: give dtype or dtype_bytes, not both")
        dtype = kw.pop("dtype")
        if not isinstance(dtype, str):
            raise ColcError(f"{what}: dtype must be a name such as 'fp16', got {dtype!r}")
        kw["dtype_bytes"] = dtype_bytes(dtype)
    if collective not in COLLECTIVES:
        raise ColcError(f"{what}: unknown collective {collective!r}; choose from "
                        f"{', '.join(COLLECTIVES)}")
    if protocol not in {p.value for p in Protocol}:
        raise ColcError(f"{what}: unknown protocol {protocol!r}; choose from "
                        f"{', '.join(p.value for p in Protocol)}")
    coll, proto = Collective(collective), Protocol(protocol)
    _check_keywords(kw)
    return CompileOptions(algorithm=algorithm, collective=coll, protocol=proto, **kw)


#: ``CompileOptions`` fields of whole numbers, and the least each may be.
_COUNTS = {"min_bytes": 0, "max_bytes": 0, "chunks": 1, "instances": 1, "jobs": 0,
           "max_threadblocks": 0}


#: ``CompileOptions`` fields the pipeline sets for itself: the portfolio's
#: protocol ranges, and ``prove`` (off only for analysis, which writes no file).
_INTERNAL = {"protocol_ranges", "prove"}


def _check_keywords(kw: dict) -> None:
    """The keyword options are ``CompileOptions`` fields of the right kind, as the
    CLI checks its options (else a TypeError from deep inside, or a file the
    runtime never selects)."""
    from colc.compiler.pipeline import CompileOptions

    known = {f.name for f in dataclasses.fields(CompileOptions)}
    known -= {"algorithm", "collective", "protocol"} | _INTERNAL
    for name in sorted(kw):
        if name not in known:
            raise ColcError(f"colc: unknown option {name!r}; choose from "
                            f"{', '.join(sorted(known | {'dtype'}))}")
    for name in ("min_bytes", "max_bytes"):  # sizes as the CLI reads them ("1M")
        if isinstance(kw.get(name), str):
            from colc.sizes import parse_size

            kw[name] = parse_size(kw[name], f"colc: option {name}")
    for name, least in _COUNTS.items():
        value = kw.get(name)
        if value is None and name == "chunks":
            continue
        if name in kw and (not isinstance(value, int) or isinstance(value, bool)
                           or value < least):
            raise ColcError(f"colc: option {name} must be a whole number of at least "
                            f"{least}, got {value!r}")
    for name in ("comment", "scheduler", "backend"):
        if name in kw and not isinstance(kw[name], str):
            raise ColcError(f"colc: option {name} must be a string, got {kw[name]!r}")
    for name, allowed in (("executor", ("local", "dask")), ("dtype_bytes", (1, 2, 4, 8)),
                          ("balance", (True, False)), ("verify_each", (True, False))):
        if name in kw and (kw[name] not in allowed or type(kw[name]) is not type(allowed[0])):
            raise ColcError(f"colc: option {name} must be one of "
                            f"{', '.join(map(repr, allowed))}, got {kw[name]!r}")
    if "rank_sizes" in kw:
        kw["rank_sizes"] = _size_list(kw["rank_sizes"], "colc: option rank_sizes")
    for mode in ("inplace", "outofplace"):
        if kw.get(mode) not in (None, True, False):
            raise ColcError(f"colc: option {mode} must be True, False or None, got "
                            f"{kw[mode]!r}")
    if kw.get("inplace") is False and kw.get("outofplace") is False:
        raise ColcError("colc: inplace=False and outofplace=False leave no kind of call "
                        "to compile for")
    for name in ("min_bytes", "max_bytes"):
        if kw.get(name, 0) > MAX_SIZE:
            raise ColcError(f"colc: option {name} {kw[name]} is above {MAX_SIZE >> 40}T (no "
                            f"collective moves that much in one call)")
    if kw.get("max_bytes") and kw.get("min_bytes", 0) > kw["max_bytes"]:
        raise ColcError(f"colc: max_bytes {kw['max_bytes']} is smaller than min_bytes "
                        f"{kw['min_bytes']}")


@dataclass(frozen=True)
class Compiled:
    """One compiled, verified file and what it was made from.

    Attributes
    ----------
    topology : Topology
    result : colc.compiler.pipeline.CompileResult
    """

    topology: object
    result: object
    options: object = None  # the CompileOptions: machine and budget for simulate/analyze

    def __repr__(self) -> str:
        """One line: what was compiled and how, not the file's text."""
        prog = self.result.program
        tbs = f", {prog.max_threadblocks} threadblocks per GPU" if prog is not None else ""
        coll = f"{self.options.collective.value}, " if self.options is not None else ""
        copies = getattr(self.options, "instances", 1)
        copies = f" x{copies} instances" if copies > 1 else ""
        return (f"Compiled({self.topology.name!r}, {self.topology.num_ranks} ranks, {coll}"
                f"{self.algorithm}{copies}{tbs})")

    @property
    def algorithm(self) -> str:
        """The variant written: ``algorithm[/chunks]/protocol``."""
        return self.result.algorithm

    @property
    def program(self):
        """The runtime program (``colc.ir.program.Program``)."""
        return self.result.program

    @property
    def schedule(self):
        """The chunk-level schedule (``colc.ir.chunks.Schedule``)."""
        return self.result.schedule

    def to_msccl_xml(self) -> str:
        """The MSCCL executor file (what ``colc TOPO -o x.xml`` writes)."""
        from colc.backends.msccl_xml import emit_msccl_xml

        return emit_msccl_xml(self._program("MSCCL file"))

    def to_oneccl_xml(self) -> str:
        """The same program in colc's oneCCL thread format (docs/oneccl-xml.md);
        for an algorithm written as threads directly (``hop-relay``), its file."""
        from colc.backends.oneccl_xml import emit_oneccl_xml

        if getattr(self.result, "threads", None) is not None:
            return self.result.text
        return emit_oneccl_xml(self.program)

    def _program(self, what: str):
        if self.program is None:
            raise ColcError(f"{self.algorithm} writes oneCCL threads directly: it has no "
                            f"threadblock program, so no {what}; use to_oneccl_xml()")
        return self.program

    @_api_call
    def verify(self, backend: str | None = None):
        """``colc verify`` on the printed file: a report with ``ok``, ``errors``, ``summary``
        (``backend`` None: oneCCL for an algorithm written as threads, else MSCCL)."""
        from colc.backends.verify import verify_text

        threads = getattr(self.result, "threads", None)
        backend = backend or ("oneccl" if threads is not None else "msccl")
        if backend not in ("msccl", "oneccl"):
            raise ColcError(f"Compiled.verify: unknown backend {backend!r}; "
                            f"choose msccl or oneccl")
        text = self.to_msccl_xml() if backend == "msccl" else self.to_oneccl_xml()
        return verify_text(text, f"<{self.algorithm}>", backend=backend)

    @_api_call
    def simulate(self, sizes=(1 << 20, 1 << 30), dtype: str = "fp32", machine: str | None = None):
        """Predicted call at each size (``colc.ir.simulate.SimResult`` list);
        ``machine`` defaults to the compile's (``machine=`` of ``compile``),
        else the topology's."""
        from colc.ir.runtime_model import model_for, model_named
        from colc.ir.simulate import simulate
        from colc.sizes import dtype_bytes

        machine = machine or getattr(self.options, "machine", None)
        model = model_named(machine) if machine else model_for(self.topology)
        size_list = _size_list(sizes, "Compiled.simulate")
        if not isinstance(dtype, str):
            raise ColcError(f"Compiled.simulate: dtype must be a name such as 'fp32', got "
                            f"{dtype!r}")
        program = self._program("simulation (the simulator runs threadblock programs)")
        return [simulate(program, self.topology, model, s, dtype_bytes(dtype))
                for s in size_list]

    @_api_call
    def analyze(self, **kw) -> dict:
        """``colc analyze`` restricted to this file's collective.

        Keywords as ``colc.compiler.analyze.analyze_topology``'s
        (``algorithms``, ``collectives``, ``sizes``, ``simulate``,
        ``machine``, ``max_threadblocks``, ``budgets``, ``search``,
        ``jobs``); sizes may be strings (``"1M"``) and collectives names,
        as elsewhere in the API; ``machine`` and ``max_threadblocks``
        default to the compile's.
        """
        import inspect

        from colc.compiler.analyze import analyze_topology
        from colc.ir.core import Collective

        known = set(inspect.signature(analyze_topology).parameters) - {"topo"}
        unknown = sorted(set(kw) - known)
        if unknown:
            raise ColcError(f"colc: unknown analyze option {unknown[0]!r}; choose from "
                            f"{', '.join(sorted(known))}")
        if "sizes" in kw:
            kw["sizes"] = _size_list(kw["sizes"], "Compiled.analyze")
        for name in ("max_threadblocks", "jobs"):
            value = kw.get(name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool)
                                      or value < 0):
                raise ColcError(f"Compiled.analyze: {name} must be a whole number of at "
                                f"least 0, got {value!r}")
        for name in ("collectives", "algorithms"):  # one name, or several
            if name not in kw:
                continue
            if isinstance(kw[name], (str, Collective)):
                kw[name] = (kw[name],)
            if not isinstance(kw[name], (list, tuple)) or not all(
                    isinstance(x, (str, Collective)) for x in kw[name]):
                raise ColcError(f"Compiled.analyze: {name} must be a name or a list of names, "
                                f"got {kw[name]!r}")
            kw[name] = tuple(dict.fromkeys(kw[name]))  # a name given twice is one row
        self._check_algorithms(kw.get("algorithms", ()))
        budgets = kw.get("budgets", ())
        if not isinstance(budgets, (list, tuple)) or not all(
                isinstance(b, int) and not isinstance(b, bool) and b >= 0 for b in budgets):
            raise ColcError(f"Compiled.analyze: budgets must be whole numbers of at least 0, "
                            f"got {budgets!r}")
        if kw.get("simulate") not in (None, True, False):
            raise ColcError(f"Compiled.analyze: simulate must be True, False or None, got "
                            f"{kw['simulate']!r}")
        if type(kw.get("search", False)) is not bool:
            raise ColcError(f"Compiled.analyze: search must be True or False, got "
                            f"{kw['search']!r}")
        for name in ("machine", "max_threadblocks"):  # the compile's, unless given
            if name not in kw and getattr(self.options, name, None) is not None:
                kw[name] = getattr(self.options, name)
        if "collectives" in kw:
            for c in kw["collectives"]:
                if not isinstance(c, Collective) and c not in COLLECTIVES:
                    raise ColcError(f"colc: unknown collective {c!r}; choose from "
                                    f"{', '.join(COLLECTIVES)}")
            kw["collectives"] = tuple(Collective(c) for c in kw["collectives"])
        made = self.program if self.program is not None else self.result.threads
        kw.setdefault("collectives", (made.collective,))
        return analyze_topology(self.topology, **kw)

    @staticmethod
    def _check_algorithms(names: tuple) -> None:
        """Refuse an unknown name in ``analyze``'s ``algorithms`` in the API's
        terms (the analysis said ``algorithm:``, the command line's option)."""
        from colc.compiler.pipeline import ALGORITHMS, THREAD_ALGORITHMS

        for name in names:
            if name not in ALGORITHMS and name not in THREAD_ALGORITHMS:
                raise ColcError(f"Compiled.analyze: algorithms: unknown algorithm {name!r}; "
                                f"choose from {', '.join(sorted(ALGORITHMS))}")


def _size_list(sizes, what: str) -> tuple[int, ...]:
    """Message sizes given as one size or several, each bytes or a string
    (``"1M"``); refused unless whole and positive."""
    from colc.sizes import parse_size

    if isinstance(sizes, (str, int)):
        sizes = (sizes,)
    unordered = isinstance(sizes, (set, frozenset))
    if isinstance(sizes, (range, set, frozenset)) or (
            hasattr(sizes, "__iter__") and not isinstance(sizes, (bytes, dict, list, tuple))):
        sizes = list(sizes)
    if not isinstance(sizes, (list, tuple)):
        raise ColcError(f"{what}: sizes must be a size or a list of sizes, got {sizes!r}")
    out = []
    for s in sizes:
        n = parse_size(s, what) if isinstance(s, str) else s
        if not isinstance(n, int) or isinstance(n, bool) or n <= 0:
            raise ColcError(f"{what}: sizes must be positive whole numbers of bytes, got {s!r}")
        if n > MAX_SIZE:
            raise ColcError(f"{what}: {n} bytes is above {MAX_SIZE >> 40}T (no collective "
                            f"moves that much in one call)")
        out.append(n)
    if not out:
        raise ColcError(f"{what}: no size given")
    return tuple(sorted(set(out)) if unordered else out)


@_api_call
def compile(topology, *, collective: str = "allreduce", algorithm: str = "auto",  # noqa: A001
            protocol: str = "Simple", **options) -> Compiled:
    """Compile ``topology`` to one verified runtime file (``colc TOPO -o FILE``).

    Parameters
    ----------
    topology : Topology or str
        A ``Topology``, a path or topology text (see ``load_topology``).
    collective, algorithm, protocol : str
        As the command-line options.
    **options
        Other ``CompileOptions`` fields (docs/api.md lists them):
        ``max_threadblocks``, ``machine``, ``chunks``, ``instances``,
        ``min_bytes``, ``max_bytes``, ``inplace``, ``outofplace``, ``backend``,
        ``dtype`` (or ``dtype_bytes``), ``rank_sizes``, ``jobs``, ``balance``.

    Returns
    -------
    Compiled
        A file the runtime selects at no power-of-two size, or skips at some
        from 1K to 1G, is also warned of (``UserWarning``), as the command
        line warns.
    """
    from colc.compiler.pipeline import compile_topology
    from colc.ir.simulate import selection_gaps, selection_warnings

    topo = topology if hasattr(topology, "ranks") else load_topology(topology)
    opts = _options(collective, algorithm, protocol, **options)
    with fewer_collections():
        result = compile_topology(topo, opts)
    written = getattr(result, "threads", None) or result.program
    gaps = selection_gaps(written, opts.backend, portfolio="colc.portfolio gives")
    for line in selection_warnings(written, opts.backend) + gaps:
        warnings.warn(_api_text(line), UserWarning, stacklevel=_stacklevel())
    return Compiled(topo, result, opts)


@_api_call
def portfolio(topology, *, collective: str = "allreduce", algorithm: str = "auto",
              sizes: tuple[int, ...] | None = None, **options):
    """One file per size window (``colc TOPO -o DIR/``): a ``Portfolio``.

    ``sizes`` are the evaluated message sizes (default 1 KiB to 1 GiB by
    factors of 4, of 16 past 512 ranks); other keywords as for ``compile``.
    """
    from colc.compiler.portfolio import build_portfolio

    topo = topology if hasattr(topology, "ranks") else load_topology(topology)
    for name in ("protocol", "min_bytes", "max_bytes"):
        if name in options:
            raise ColcError(f"colc.portfolio: {name} is not an option here (a portfolio picks "
                            f"the protocol and size window of each file itself)")
    if options.get("backend", "msccl") != "msccl":
        raise ColcError("colc.portfolio: a portfolio is MSCCL files (backend 'msccl'); "
                        "compile one oneCCL file with colc.compile")
    opts = _options(collective, algorithm, "Simple", "colc.portfolio", **options)
    wanted = _size_list(sizes, "colc.portfolio: sizes") if sizes is not None else None
    with fewer_collections():
        return build_portfolio(topo, opts, sizes=wanted)


@_api_call
def write_portfolio(portfolio, folder: str | os.PathLike):
    """Write a ``Portfolio``'s files into ``folder`` as ``colc TOPO -o DIR/``
    does (``colc.algo_dir``): all or none, named by collective, rank count
    and mode, earlier colc files for the same calls removed.

    Returns
    -------
    colc.algo_dir.Written
        The names written, the older files removed, and one line per other
        file of the folder in their way (the CLI's warnings).
    """
    from colc.algo_dir import write_portfolio as write
    from colc.compiler.portfolio import Portfolio

    if not isinstance(portfolio, Portfolio):
        raise ColcError(f"colc.write_portfolio: expected what colc.portfolio returns, got "
                        f"{type(portfolio).__name__}")
    path = os.fspath(folder) if isinstance(folder, (str, os.PathLike)) else None
    if not isinstance(path, str) or not path:
        raise ColcError(f"colc.write_portfolio: folder must be a non-empty path, got "
                        f"{folder!r}")
    return write(portfolio, path.rstrip("/") or "/")


__all__ = ["Compiled", "compile", "load_topology", "portfolio", "write_portfolio"]
