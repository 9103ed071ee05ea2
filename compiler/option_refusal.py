"""Refusals that name the user's own option (issue 20, part 3).

When every candidate is refused, the cause is often an option the user set:
a protocol the machine does not offer, more ``--instances`` than the steps
and threadblocks allow, a ``--chunks`` that no algorithm fits.  The generic
message ("no schedule fits the runtime's limits: rings2d/c32/LL128: ... 192
steps > 64; ...") lists candidates; the user needs to hear which of *their*
choices ruled everything out and what would work instead.

``protocol_problem``: before anything is built, a ``--protocol`` the machine's
runtime does not offer (MI250: RCCL keeps LL128 off); ``mode_problem``:
``--inplace`` for an all-to-all (colc's are out of place).

``option_problem``: after a refusal, each option the user moved from its
default (``--instances``, ``--chunks``, ``--protocol``) is relaxed on its own
and the job is built again; the first relaxation that writes a file gives a
message whose first words are that option, what it rules out, and the value
that works (``--instances``: the largest count that builds, found downward).

Input: the ``Topology``, the ``CompileOptions`` and a ``build`` function
(``_compile_once`` or the portfolio's); output: one message or None.
Complexity: at most ``instances + 2`` extra builds, only on the refusal path.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from colc.errors import ColcError
from colc.ir.core import Collective, Protocol
from colc.ir.runtime_model import RuntimeModel, model_for, model_named
from colc.ir.topology import Topology

#: ``--instances`` values tried downward before giving up on naming one.
MAX_INSTANCE_TRIES = 8


def _model(topo: Topology, opts) -> RuntimeModel:
    return model_named(opts.machine) if opts.machine else model_for(topo)


def protocol_problem(topo: Topology, opts) -> str | None:
    """Why ``opts.protocol`` cannot be used on this machine, or None.

    >>> from colc.frontends.families import mi250
    >>> from colc.compiler.pipeline import CompileOptions
    >>> protocol_problem(mi250(1), CompileOptions(protocol=Protocol.LL128)).split(";")[0]
    '--protocol LL128: machine mi250 has no LL128 (its runtime keeps it off)'
    """
    model = _model(topo, opts)
    if opts.protocol in model.protocols:
        return None
    offered = " or ".join(f"--protocol {p.value}" for p in model.protocols)
    return (f"--protocol {opts.protocol.value}: machine {model.name} has no "
            f"{opts.protocol.value} (its runtime keeps it off); use {offered}")


def mode_problem(opts) -> str | None:
    """Why ``--inplace`` cannot be met before anything is built, or None.

    Every all-to-all schedule colc builds (``direct``, ``rails``, ``mcf``,
    ``mcf-hops``, ``hop-relay``) is correct out of place only: in place, a
    rank's own blocks are overwritten by arriving ones before they leave.

    >>> from colc.compiler.pipeline import CompileOptions
    >>> from colc.ir.core import Collective
    >>> mode_problem(CompileOptions(collective=Collective.ALLTOALL, inplace=True))[:40]
    '--inplace: colc writes all-to-all out of'
    """
    if opts.collective is Collective.ALLTOALL and opts.inplace:
        return ("--inplace: colc writes all-to-all out of place only (in place, a rank's "
                "blocks would be overwritten by arriving ones before they leave); drop --inplace")
    return None


def option_problem(topo: Topology, opts, err: ColcError,
                   build: Callable[[Topology, object], object]) -> str | None:
    """The refusal naming the user's option that ruled out every candidate, or None.

    Parameters
    ----------
    topo : Topology
    opts : CompileOptions
        The options that were refused.
    err : ColcError
        The refusal (its text follows the message as the detail).
    build : callable
        ``build(topo, opts)``: the job, raising ``InfeasibleError`` when
        nothing fits.

    Returns
    -------
    str or None
        ``--instances 3 rules out every candidate ...; --instances 2 writes
        a file (variant)``, or None when no single option is to blame.
    """
    detail = " ".join(str(err).split())
    for trial, what in _relaxations(topo, opts):
        try:
            result = build(topo, trial)
        except ColcError:
            continue
        label = getattr(result, "algorithm", "") or "a portfolio"
        return f"{what} ({label}); the refusal was: {detail}"
    return None


def _relaxations(topo: Topology, opts):
    """``(options, message head)`` for each single option relaxed, in the
    order they are tried."""
    if opts.instances > 1:
        for k in range(opts.instances - 1, max(0, opts.instances - 1 - MAX_INSTANCE_TRIES), -1):
            yield (dataclasses.replace(opts, instances=k),
                   f"--instances {opts.instances} rules out every candidate (each instance "
                   f"multiplies the steps and threadblocks per GPU); --instances {k} writes "
                   f"a file")
    if opts.chunks is not None:
        yield (dataclasses.replace(opts, chunks=None),
               f"--chunks {opts.chunks} rules out every candidate; without --chunks colc "
               f"tries each algorithm's own chunkings and writes a file")
    if opts.protocol is not Protocol.SIMPLE:
        for proto in _model(topo, opts).protocols:
            if proto is not opts.protocol:
                yield (dataclasses.replace(opts, protocol=proto),
                       f"--protocol {opts.protocol.value} rules out every candidate; "
                       f"--protocol {proto.value} writes a file")


__all__ = ["option_problem", "protocol_problem"]
