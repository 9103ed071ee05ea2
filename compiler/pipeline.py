"""The one written-down pipeline: topology -> schedule -> program -> text.

Steps, in order:

1. generate a chunk schedule with the chosen algorithm (``ALGORITHMS``);
2. ``check_schedule`` proves it (postcondition, races, physics) under each
   aliasing mode; modes that fail are dropped unless the user asked for them;
3. ``replicate-instances`` (when ``instances > 1``), checked again with
   ``verify_each``;
4. ``lower-to-program``: threadblocks, channels, fusion, ordering, nops;
5. the backend prints the program;
6. the backend's verifier re-reads the printed text and interprets it on the
   runtime's terms (FIFO depth of the protocol and unbounded); any finding is
   an error and nothing is written.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from fractions import Fraction

from colc.compiler.estimate_bandwidth import schedule_algbw
from colc.compiler.lower_to_program import (
    STRATEGIES,
    LoweringOptions,
    LoweringStalled,
    lower_to_program,
)
from colc.compiler.replicate_instances import replicate_instances
from colc.compiler.ring import ring_schedule
from colc.errors import (
    ColcError,
    InfeasibleError,
    InternalError,
    UnsupportedError,
    VerificationError,
)
from colc.ir.check_chunks import check_schedule
from colc.ir.chunks import Schedule
from colc.ir.core import Collective, Protocol
from colc.ir.program import Program
from colc.ir.topology import Topology

Generator = Callable[[Topology, Collective], Schedule]

#: Schedule generators by ``--algorithm`` name.
ALGORITHMS: dict[str, Generator] = {"ring": ring_schedule}
#: ``max_k`` caps tried for tree packings, best bandwidth first (None: optimal k).
TREE_K_SCAN: tuple[int | None, ...] = (None, 16, 8, 4, 2, 1)


def register_algorithm(name: str, generator: Generator) -> None:
    """Make ``generator`` available as ``--algorithm name``."""
    ALGORITHMS[name] = generator


@dataclass(frozen=True, slots=True)
class CompileOptions:
    """Options of the main job; field names match the CLI flags."""

    algorithm: str = "auto"
    collective: Collective = Collective.ALLREDUCE
    protocol: Protocol = Protocol.SIMPLE
    inplace: bool | None = None  # None: whatever the schedule is correct for
    outofplace: bool | None = None
    instances: int = 1
    min_bytes: int = 0
    max_bytes: int = 0
    backend: str = "msccl"
    verify_each: bool = False


@dataclass(frozen=True, slots=True)
class CompileResult:
    """Everything the main job produced."""

    schedule: Schedule
    program: Program
    text: str
    algorithm: str
    algbw: Fraction
    notes: tuple[str, ...] = ()


def available_algorithms() -> list[str]:
    """Names accepted by ``--algorithm`` (``auto`` included)."""
    _load_optional_algorithms()
    return ["auto", *sorted(ALGORITHMS)]


def _load_optional_algorithms() -> None:
    """Register generators whose modules may not be present in this build."""
    for name, module, attr in (("trees", "colc.compiler.generate_trees", "tree_schedule"),
                               ("bfb", "colc.compiler.bfb_algorithm", "bfb_schedule_for")):
        if name in ALGORITHMS:
            continue
        try:
            mod = __import__(module, fromlist=[attr])
        except ImportError:
            continue
        gen = getattr(mod, attr, None)
        if gen is not None:
            ALGORITHMS[name] = gen


def variants(name: str, topo: Topology, collective: Collective) -> Iterator[Schedule]:
    """Schedules of one algorithm, best first, cheaper for the runtime after.

    Trees: the optimal (or best fixed-k) packing first, then smaller k, which
    needs fewer chunks and so fewer steps and channels (seed 001 B.5.4).
    """
    gen = ALGORITHMS[name]
    if name != "trees":
        yield gen(topo, collective)
        return
    seen: set[int] = set()
    for max_k in TREE_K_SCAN:
        sched = gen(topo, collective, max_k=max_k, verify=False)  # proved by _modes
        if sched.nchunks not in seen:
            seen.add(sched.nchunks)
            yield sched


def candidates(topo: Topology, opts: CompileOptions) -> Iterator[tuple[str, Schedule]]:
    """(algorithm, schedule) pairs in the order the compiler tries them.

    ``auto`` ranks the algorithms that apply by the bandwidth-only algbw of
    their first variant.
    """
    _load_optional_algorithms()
    if opts.algorithm != "auto":
        if opts.algorithm not in ALGORITHMS:
            raise UnsupportedError(f"unknown algorithm '{opts.algorithm}'; "
                                   f"choose from {', '.join(available_algorithms())}")
        for sched in variants(opts.algorithm, topo, opts.collective):
            yield opts.algorithm, sched
        return
    ranked = []
    errors = []
    for name in sorted(ALGORITHMS):
        gen = variants(name, topo, opts.collective)
        try:
            first = next(gen)
        except ColcError as err:
            errors.append(f"{name}: {err}")
            continue
        ranked.append((-schedule_algbw(first, topo), name, first, gen))
    if not ranked:
        raise UnsupportedError("no algorithm applies: " + "; ".join(errors))
    ranked.sort(key=lambda r: (r[0], r[1]))
    for _, name, first, gen in ranked:
        yield name, first
        for sched in gen:
            yield name, sched


def _modes(sched: Schedule, topo: Topology, opts: CompileOptions) -> Schedule:
    """Keep the aliasing modes the schedule is proved correct for."""
    physical = check_schedule(dataclasses.replace(sched, inplace=False, outofplace=False), topo)
    physical = [p for p in physical if "claims neither" not in p]
    if physical:
        raise InternalError(f"{sched.algorithm} produced an invalid schedule: {physical[0]}")
    ok = {}
    for mode in ("inplace", "outofplace"):
        trial = dataclasses.replace(sched, inplace=mode == "inplace",
                                    outofplace=mode == "outofplace")
        problems = check_schedule(trial)
        wanted = getattr(opts, mode)
        if wanted and problems:
            raise VerificationError(problems, header=f"the schedule is not correct {mode}: ")
        ok[mode] = not problems and wanted is not False
    if not (ok["inplace"] or ok["outofplace"]):
        raise InternalError(f"{sched.algorithm} schedule is correct in no aliasing mode")
    return dataclasses.replace(sched, inplace=ok["inplace"], outofplace=ok["outofplace"])


def compile_topology(topo: Topology, opts: CompileOptions) -> CompileResult:
    """Compile ``topo`` to a verified runtime file (see module docstring).

    Parameters
    ----------
    topo : Topology
    opts : CompileOptions

    Returns
    -------
    CompileResult

    Raises
    ------
    ColcError
        For requests that cannot be met; nothing has been written.
    """
    refusals: list[str] = []
    for algorithm, sched in candidates(topo, opts):
        sched = _modes(sched, topo, opts)
        if opts.instances != 1:
            sched = replicate_instances(sched, opts.instances)
            if opts.verify_each:
                _check_or_raise(sched, topo, "replicate-instances")
        lowering = LoweringOptions(
            protocol=opts.protocol, inplace=sched.inplace, outofplace=sched.outofplace,
            min_bytes=opts.min_bytes, max_bytes=opts.max_bytes,
            name=f"{topo.name}-{opts.collective.value}-{algorithm}")
        try:
            program, text = _lower_and_verify(sched, lowering, opts.backend)
        except InfeasibleError as err:
            refusals.append(f"{algorithm} ({sched.nchunks} chunks): {err}")
            continue
        notes = tuple(f"not used: {r}" for r in refusals)
        return CompileResult(sched, program, text, algorithm, schedule_algbw(sched, topo), notes)
    raise InfeasibleError("no schedule fits the runtime's limits: " + "; ".join(refusals[-3:]))


def _lower_and_verify(sched: Schedule, lowering: LoweringOptions,
                      backend: str) -> tuple[Program, str]:
    """Lower with the first strategy whose printed file verifies on the runtime's terms."""
    findings: list[str] = []
    for strategy in STRATEGIES:
        try:
            program = lower_to_program(sched, dataclasses.replace(lowering, **strategy))
        except LoweringStalled as err:
            findings = [str(err)]
            continue
        text = _emit(program, backend)
        report = _verify_text(text, backend)
        if report.ok:
            return program, text
        findings = list(report.errors[:3])
    raise InternalError("generated file failed verification: " + "; ".join(findings))


def _check_or_raise(sched: Schedule, topo: Topology, after: str) -> None:
    problems = check_schedule(sched, topo)
    if problems:
        raise InternalError(f"schedule invalid after {after}: {problems[0]}")


def _emit(program: Program, backend: str) -> str:
    if backend == "msccl":
        from colc.backends.msccl_xml import emit_msccl_xml
        return emit_msccl_xml(program)
    if backend == "oneccl":
        from colc.backends.oneccl_xml import emit_oneccl_xml
        return emit_oneccl_xml(program)
    raise UnsupportedError(f"unknown backend '{backend}'; choose msccl or oneccl")


def _verify_text(text: str, backend: str):
    from colc.backends.verify import verify_text

    return verify_text(text, f"<generated {backend} file>", backend=backend)
