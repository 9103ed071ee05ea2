"""colc.frontends: topology files in, validated ``Topology`` out.

``load_topology(path)`` reads the YAML forms described in
``colc.frontends.yaml_topology``; ``colc.frontends.families`` builds the
generative families; ``colc.frontends.validate`` checks invariants.
"""

from __future__ import annotations

from .families import build_family
from .validate import check_switch_balance, validate_topology
from .yaml_topology import load_topology, parse_topology_text

__all__ = [
    "build_family",
    "check_switch_balance",
    "load_topology",
    "parse_topology_text",
    "validate_topology",
]
