"""Cost model of the MSCCL executor on a machine: the constants the simulator uses.

A ``RuntimeModel`` says how fast one threadblock moves data with each NCCL
protocol, what a hop costs in latency, how much of a link's nominal bandwidth
the runtime gets, and how big the protocol's pieces are.  Geometry (buffer
sizes, FIFO depth, slices per call, LL/LL128 wire overhead) is read from the
runtime's sources; per-threadblock bandwidths and latencies start from NCCL's
and RCCL's tuning tables and are then *calibrated* against published
measurements (``bench/calibrate.py``, ``docs/cost-model.md``), which is where
every number below is justified.

Presets: ``A100``, ``H100``, ``MI250`` and ``GENERIC`` (for CPU clusters and
direct-connect fabrics described only by their links).  ``model_for(topo)``
picks one from the topology's name, ``model_named(name)`` by name.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from colc.errors import ColcError
from colc.ir.core import Protocol
from colc.ir.topology import Topology

#: NCCL_STEPS: FIFO slots of every connection (``device.h``).
NCCL_STEPS = 8


@dataclass(frozen=True, slots=True)
class ProtocolGeometry:
    """How a protocol cuts data (runtime sources; see docs/runtime-constants.md).

    Attributes
    ----------
    call_bytes : int
        Data bytes one primitive call moves at most (``chunkEffectiveSize``:
        Simple 4 MiB / 8 steps * 4 chunk steps; LL half of a 64 KiB step;
        LL128 15/16 of a 614400-byte step).
    slices_per_call : int
        FIFO slices a call is cut into (Simple 2; LL and LL128 1).
    fifo_slices : int
        Slices a connection buffers before the sender blocks (Simple 8 steps /
        2 steps per slice = 4, i.e. 2 calls; LL and LL128 8).
    wire_factor : float
        Bytes on the wire per data byte (LL: 8 data + 8 flag bytes per
        16-byte line = 2; LL128: 128/120; Simple 1).
    """

    call_bytes: int
    slices_per_call: int
    fifo_slices: int
    wire_factor: float


GEOMETRY: dict[Protocol, ProtocolGeometry] = {
    Protocol.SIMPLE: ProtocolGeometry((1 << 22) // NCCL_STEPS * 4, 2, 4, 1.0),
    Protocol.LL: ProtocolGeometry((1 << 16) // 2, 1, 8, 2.0),
    Protocol.LL128: ProtocolGeometry(614400 // 16 * 15, 1, 8, 128 / 120),
}


@dataclass(frozen=True, slots=True)
class ProtocolCosts:
    """Per-protocol speeds and latencies of one machine.

    Attributes
    ----------
    tb_p2p : float
        GB/s of data one threadblock pushes to a peer GPU over NVLink/xGMI
        (P2P transport), before link sharing.
    conn_net : float
        GB/s of data one NET connection carries at most (one proxy stream
        through the NIC); the threadblock only stages the data locally.
    hop_p2p : float
        us from a slice being written to its being visible at the receiver
        (and for credits to travel back), P2P transport.
    hop_net : float
        The same through the network proxy (NIC, switch, remote proxy).
    call : float
        us of fixed work per primitive call (barriers, flag polling).
    base : float
        us of fixed cost per collective call (kernel launch, first and last
        synchronisation), paid once.
    """

    tb_p2p: float
    conn_net: float
    hop_p2p: float
    hop_net: float
    call: float
    base: float


@dataclass(frozen=True, slots=True)
class RuntimeModel:
    """A machine as the simulator sees it.

    Attributes
    ----------
    name : str
        Preset name (``a100``, ``h100``, ``mi250``, ``generic``).
    protocols : dict
        ``Protocol -> ProtocolCosts`` for the protocols the runtime offers
        on this machine (RCCL keeps LL128 off by default on MI250).
    geometry : dict
        ``Protocol -> ProtocolGeometry`` (buffer sizes differ between NCCL
        and RCCL).
    local_bw : float
        GB/s one threadblock copies within the GPU (FIFO drain, ``cpy``,
        staging into a NET buffer); reductions cost 1.5 times a copy.
    p2p_efficiency : float
        Share of a GPU link's nominal bandwidth the runtime reaches.
    net_efficiency : float
        Share of a NIC / network link's nominal bandwidth the runtime reaches.
    max_threadblocks : int
        Threadblocks a GPU runs at once (SMs / CUs); the executor needs all of
        a rank's threadblocks co-resident.
    credit_p2p, credit_net : float
        us for a released FIFO slot to be seen by the sender (a flag write
        over the GPU link; a clear-to-send message between the proxies).
        The tuning tables' per-hop latencies cover a whole step and are not
        used for credits.
    latency_scale : float
        Calibrated factor on every hop, call and base latency of the tuning
        tables (``bench/calibrate.py``): the tables are NCCL's estimates; the
        factor makes the simulator match measured times.
    net_latency_scale : float or None
        A separate factor for the network hop latency (None:
        ``latency_scale``), when the calibration can tell them apart.
    note : str
        Where the numbers come from.
    """

    name: str
    protocols: dict[Protocol, ProtocolCosts]
    geometry: dict[Protocol, ProtocolGeometry]
    local_bw: float
    p2p_efficiency: float
    net_efficiency: float
    max_threadblocks: int
    credit_p2p: float = 1.0
    credit_net: float = 5.0
    latency_scale: float = 1.0
    net_latency_scale: float | None = None
    note: str = ""

    def costs(self, protocol: Protocol) -> ProtocolCosts:
        """The ``ProtocolCosts`` of ``protocol``.

        Raises
        ------
        ColcError
            The runtime does not offer ``protocol`` on this machine.
        """
        try:
            return self.protocols[protocol]
        except KeyError:
            raise ColcError(f"protocol {protocol.value} is not available on machine "
                            f"{self.name}") from None

    def with_changes(self, **changes: object) -> RuntimeModel:
        """A copy with some fields replaced (used by the calibration)."""
        return replace(self, **changes)

    def latency(self, protocol: Protocol) -> ProtocolCosts:
        """``costs(protocol)`` with the latencies multiplied by ``latency_scale``."""
        c = self.costs(protocol)
        k = self.latency_scale
        kn = k if self.net_latency_scale is None else self.net_latency_scale
        return replace(c, hop_p2p=c.hop_p2p * k, hop_net=c.hop_net * kn, call=c.call * k,
                       base=c.base * k)


def _costs(**rows: tuple[float, ...]) -> dict[Protocol, ProtocolCosts]:
    names = {"simple": Protocol.SIMPLE, "ll": Protocol.LL, "ll128": Protocol.LL128}
    return {names[k]: ProtocolCosts(*v) for k, v in rows.items()}


#: RCCL's LL and LL128 buffers (256 threads per block, 64-byte LL128 lines).
RCCL_GEOMETRY: dict[Protocol, ProtocolGeometry] = {
    Protocol.SIMPLE: GEOMETRY[Protocol.SIMPLE],
    Protocol.LL: ProtocolGeometry((8 * 256 * 8 * 16) // NCCL_STEPS // 2, 1, 8, 2.0),
    Protocol.LL128: ProtocolGeometry((28 * 256 * 8 * 8) // NCCL_STEPS // 8 * 7, 1, 8, 8 / 7),
}

# The presets.  Row fields: tb_p2p, conn_net (GB/s), hop_p2p, hop_net, call, base
# (us).  Sources: docs/runtime-constants.md; calibration: docs/cost-model.md.
A100 = RuntimeModel(
    name="a100",
    protocols=_costs(simple=(20.0, 12.5, 3.4, 14.0, 0.4, 8.4),
                     ll=(5.0, 3.1, 0.6, 2.7, 0.2, 6.6),
                     ll128=(18.4, 11.5, 1.9, 4.0, 0.3, 14.0)),
    geometry=GEOMETRY, local_bw=100.0, p2p_efficiency=0.8, net_efficiency=0.887,
    max_threadblocks=108, latency_scale=2.567,
    note="NVIDIA A100 (SM80): NVLink3 via NVSwitch, HDR InfiniBand; NCCL 2.18 tables")

H100 = RuntimeModel(
    name="h100",
    protocols=_costs(simple=(36.7, 25.0, 3.4, 14.0, 0.4, 8.4),
                     ll=(9.2, 6.2, 0.6, 2.7, 0.2, 6.6),
                     ll128=(33.8, 23.0, 1.9, 4.0, 0.3, 14.0)),
    geometry=GEOMETRY, local_bw=150.0, p2p_efficiency=0.82, net_efficiency=0.9,
    max_threadblocks=132,
    note="NVIDIA H100 (SM90): NVLink4 via NVSwitch, NDR InfiniBand; NCCL 2.18 tables "
         "(uncalibrated: no published H100 measurement of a file colc can write)")

MI250 = RuntimeModel(
    name="mi250",
    protocols=_costs(simple=(24.0, 12.5, 4.5, 68.8, 0.6, 17.0),
                     ll=(1.9, 1.0, 1.5, 12.1, 0.3, 12.0)),
    geometry=RCCL_GEOMETRY, local_bw=80.0, p2p_efficiency=0.859, net_efficiency=0.577,
    max_threadblocks=104, latency_scale=0.271,
    note="AMD MI250 GCD (gfx90a): xGMI links, HDR InfiniBand; "
         "RCCL tuning model 2; LL128 off as in RCCL's default")

GENERIC = RuntimeModel(
    name="generic",
    protocols=_costs(simple=(20.0, 20.0, 3.4, 14.0, 0.4, 8.4),
                     ll=(5.0, 5.0, 0.6, 2.7, 0.2, 6.6),
                     ll128=(18.4, 18.4, 1.9, 4.0, 0.3, 14.0)),
    geometry=GEOMETRY, local_bw=100.0, p2p_efficiency=1.0, net_efficiency=1.0,
    max_threadblocks=108,
    note="links at their nominal bandwidth; threadblock figures of the A100")

PRESETS: dict[str, RuntimeModel] = {m.name: m for m in (A100, H100, MI250, GENERIC)}


def model_named(name: str) -> RuntimeModel:
    """The preset called ``name``.

    Raises
    ------
    ColcError
        Unknown name.
    """
    try:
        return PRESETS[name]
    except KeyError:
        raise ColcError(f"unknown machine '{name}'; choose from {', '.join(PRESETS)}") from None


def model_for(topo: Topology) -> RuntimeModel:
    """The preset of the hardware family that built ``topo``, else the one its
    name mentions (``dgx-a100-*``, ``mi250-*``, ...), else ``generic``.

    Examples
    --------
    >>> from colc.frontends.families import dgx_a100
    >>> model_for(dgx_a100(2)).name
    'a100'
    """
    if topo.hardware in PRESETS:  # built by a hardware family, whatever its name
        return PRESETS[topo.hardware]
    name = topo.name.lower()
    for key, preset in (("a100", A100), ("h100", H100), ("mi250", MI250)):
        if key in name:
            return preset
    return GENERIC
