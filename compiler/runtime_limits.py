"""The runtime's limits that decide what a file may take, before any is built.

``threadblock_budget`` turns ``--max-threadblocks`` into threadblocks per
GPU (default ``DEFAULT_THREADBLOCKS``, NCCL's channel ceiling; 0 the GPU's
own limit) and refuses what no GPU runs; ``rank_limit_problem`` refuses an
MSCCL file of more ranks than the executor's XML reader keeps
(``MSCCL_MAX_RANKS``).  Both are O(1); the limits per rank (steps, nodes,
FIFO depth) are checked on the program by ``colc.ir.load_checks``.
"""

from __future__ import annotations

from colc.ir.runtime_model import RuntimeModel

from colc.errors import ColcError

#: Threadblocks per GPU a file may take unless the user says otherwise:
#: NCCL's channel ceiling (32; NCCL's ring takes 16 on a DGX A100).  Every
#: threadblock holds an SM for the whole call, and training overlaps its
#: collectives with compute kernels that need the SMs (FSDP, ZeRO).
DEFAULT_THREADBLOCKS = 32


def threadblock_budget(requested: int, model: RuntimeModel,
                       option: str = "--max-threadblocks") -> int:
    """Threadblocks per GPU a file may take: ``requested``, or the GPU's own
    limit (``model.max_threadblocks``: SMs or CUs) for 0.

    Parameters
    ----------
    requested : int
        ``--max-threadblocks``: 0 for the GPU's limit, else 1..that limit.
    model : RuntimeModel
    option : str
        The option the budget came from, for the message.

    Returns
    -------
    int

    Raises
    ------
    ColcError
        A negative budget, or one above what the GPU holds at once.

    Examples
    --------
    >>> from colc.ir.runtime_model import A100
    >>> threadblock_budget(0, A100), threadblock_budget(32, A100)
    (108, 32)
    """
    if requested < 0:
        raise ColcError(f"{option} must be 0 (the GPU's limit) or a positive "
                        f"number of threadblocks per GPU, got {requested}")
    if requested > model.max_threadblocks:
        raise ColcError(f"{option} {requested} is more than the "
                        f"{model.max_threadblocks} threadblocks a GPU of machine {model.name} "
                        f"runs at once (the runtime needs all of a rank's threadblocks "
                        f"resident); use at most {model.max_threadblocks}, or 0 for that limit")
    return requested or model.max_threadblocks


#: Most ranks an MSCCL file can hold: the executor's XML reader keeps at most
#: 1024 children per element (``MAX_SUBS``, unchecked: it writes past its
#: array beyond that), and every rank is a ``<gpu>`` child of ``<algo>``.
#: Within it the node limit (4096 per rank: ``algo``, every ``gpu``, the
#: rank's own threadblocks and steps) leaves 3071 for threadblocks and steps,
#: more than a step per foreign shard needs even in allreduce (2046 at 1024
#: ranks), so the per-shard generators are not refused by it.
MSCCL_MAX_RANKS = 1024


def rank_limit_problem(ngpus: int, backend: str = "msccl") -> str | None:
    """Why no ``backend`` file can be written for ``ngpus`` ranks, or None.

    Examples
    --------
    >>> rank_limit_problem(1024) is None, rank_limit_problem(2500, "oneccl") is None
    (True, True)
    >>> rank_limit_problem(1025)[:46]
    '1025 ranks: an MSCCL file holds at most 1024 r'
    """
    if backend != "msccl" or ngpus <= MSCCL_MAX_RANKS:
        return None
    return (f"{ngpus} ranks: an MSCCL file holds at most {MSCCL_MAX_RANKS} ranks (the "
            f"executor's XML reader keeps at most {MSCCL_MAX_RANKS} children per element, "
            f"MAX_SUBS, one <gpu> per rank); write the oneCCL format instead "
            f"(-o FILE.oneccl.xml)")
