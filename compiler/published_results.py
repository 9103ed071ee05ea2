"""Published measurements the cost model is calibrated and judged against.

Seed 004 (ForestColl), Tables 2 and 3, as transcribed in
``shared/reference/seed-inventory.md`` section 3.6: measured algbw (GB/s,
nccl-tests) at 1 MB, 16 MB, 128 MB and 1 GB.  Machines: two DGX A100 boxes
(16 GPUs; ``dgx-a100`` family, 2 boxes) and two MI250 boxes of 16 GCDs
(``mi250`` family, 2 boxes, "16+16").  The 8+8 MI250 rows use GCDs 0-7 of
each box, which no built-in family describes; they are kept for reference.

``MEASURED[(machine, collective, system)] = (1M, 16M, 128M, 1G)``.
"""

from __future__ import annotations

#: Message sizes of the table columns, bytes.
SIZES = (1 << 20, 16 << 20, 128 << 20, 1 << 30)

MEASURED: dict[tuple[str, str, str], tuple[float, float, float, float]] = {
    # 004 Table 3: DGX A100, 2 boxes
    ("a100x2", "allgather", "forestcoll"): (13.1, 92.6, 201, 247),
    ("a100x2", "allgather", "taccl"): (6.67, 56.4, 150, 213),
    ("a100x2", "allgather", "nccl-ring"): (3.17, 37.6, 152, 187),
    ("a100x2", "reducescatter", "forestcoll"): (9.24, 72.5, 185, 247),
    ("a100x2", "reducescatter", "nccl-ring"): (3.17, 37.5, 151, 190),
    ("a100x2", "allreduce", "forestcoll"): (5.75, 41.4, 107, 122),
    ("a100x2", "allreduce", "nccl-tree"): (4.47, 34.8, 71.9, 96.8),
    ("a100x2", "allreduce", "nccl-ring"): (1.75, 20.8, 78.3, 95.3),
    # 004 Table 2: MI250, 16+16
    ("mi250x2", "allgather", "forestcoll"): (9.3, 69.8, 152, 174),
    ("mi250x2", "allgather", "taccl"): (9.73, 54.4, 96.5, 108),
    ("mi250x2", "allgather", "rccl-ring"): (2.98, 35.2, 111, 165),
    ("mi250x2", "reducescatter", "forestcoll"): (9.75, 68.8, 146, 177),
    ("mi250x2", "reducescatter", "rccl-ring"): (2.98, 35.9, 114, 163),
    ("mi250x2", "allreduce", "forestcoll"): (5.26, 42.3, 78.3, 87.4),
    ("mi250x2", "allreduce", "blink+switch"): (5.12, 31.6, 60.5, 75.4),
    ("mi250x2", "allreduce", "rccl-tree"): (4.69, 33.0, 67.3, 86.5),
    ("mi250x2", "allreduce", "rccl-ring"): (1.55, 18.3, 56.7, 82.9),
    # 004 Table 2: MI250, 8+8 (GCDs 0-7 of each box)
    ("mi250x2-8+8", "allgather", "forestcoll"): (12.8, 70.8, 111, 121),
    ("mi250x2-8+8", "allgather", "rccl-ring"): (2.43, 32.1, 44.6, 44.9),
    ("mi250x2-8+8", "reducescatter", "forestcoll"): (12.9, 64.8, 99.5, 109),
    ("mi250x2-8+8", "reducescatter", "rccl-ring"): (2.34, 31.7, 44.9, 45.0),
    ("mi250x2-8+8", "allreduce", "forestcoll"): (7.46, 39.5, 57.7, 61.4),
    ("mi250x2-8+8", "allreduce", "rccl-ring"): (1.23, 16.6, 22.5, 23.0),
}

#: The machines colc models, by table name: (family, boxes, model preset).
MACHINES = {"a100x2": ("dgx-a100", 2, "a100"), "mi250x2": ("mi250", 2, "mi250")}

#: Ring channels of the vendor library on those machines (NCCL: 16 NIC-aligned
#: rings on two DGX A100 boxes; RCCL: one ring per GCD entry, 16).
RING_CHANNELS = {"a100x2": 16, "mi250x2": 16}


def best_published(machine: str, collective: str) -> tuple[str, tuple[float, ...]]:
    """The best measured system per size: ``(names, figures)``.

    Examples
    --------
    >>> best_published("a100x2", "allgather")[1]
    (13.1, 92.6, 201, 247)
    """
    rows = {sys: v for (m, c, sys), v in MEASURED.items() if m == machine and c == collective}
    best = tuple(max(v[i] for v in rows.values()) for i in range(len(SIZES)))
    names = "/".join(sorted(rows))
    return names, best


#: Collectives of the vendor ring rows, in table order.
RING_COLLECTIVES = ("allgather", "reducescatter", "allreduce")


def ring_rows(machine: str):
    """The vendor ring's published rows on ``machine`` as files to simulate
    (``bench/calibrate.py``'s fit and the test of its table).

    Returns
    -------
    tuple
        ``(topology, rows)``, a row ``(collective, program, loaded,
        measured, system)`` per collective: NCCL's (RCCL's) ring as a
        Simple program with the measured runs' channels, loaded once.
    """
    from colc.compiler.rings.nccl_baseline import nccl_ring_program
    from colc.frontends.families import build_family
    from colc.ir.core import Collective, Protocol
    from colc.ir.load_checks import load_program

    family, nboxes, _ = MACHINES[machine]
    topo = build_family({"family": family, "boxes": nboxes}, f"<family {family}>")
    rows = []
    for coll in RING_COLLECTIVES:
        system = next(s for (m, c, s) in MEASURED if m == machine and c == coll
                      and s.endswith("-ring"))
        prog = nccl_ring_program(topo, Collective(coll), channels=RING_CHANNELS[machine],
                                 protocol=Protocol.SIMPLE)
        rows.append((coll, prog, load_program(prog), MEASURED[(machine, coll, system)], system))
    return topo, rows


def ring_predictions(topo, rows, model) -> list[tuple[str, str, tuple, list[float]]]:
    """``(collective, system, measured, predicted)`` per row of ``ring_rows``:
    the simulated algbw under ``model`` at the table's sizes."""
    from colc.ir.simulate import simulate

    return [(coll, system, measured,
             [simulate(prog, topo, model, size, loaded=loaded).algbw for size in SIZES])
            for coll, prog, loaded, measured, system in rows]


__all__ = ["MACHINES", "MEASURED", "RING_CHANNELS", "RING_COLLECTIVES", "SIZES",
           "best_published", "ring_predictions", "ring_rows"]
