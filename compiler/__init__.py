"""colc.compiler: topology in, verified runtime program out.

The story, in the order a compile runs (``pipeline`` is its one written-down
form):

- ``runtime_limits``: the threadblock budget and the MSCCL rank ceiling,
  refused before anything is built;
- ``choose_variants``: which algorithms, chunkings and protocols ``auto``
  tries at this scale;
- ``algorithms``: the generators, one family per subpackage (``rings/``,
  ``trees/``, ``bfb/``, ``hierarchical/``, ``alltoall/``), each a chunk
  schedule the IR's checker proves;
- ``lowering/``: lanes, threadblocks and channels, the runtime program;
- ``pipeline``: ``Compiler`` runs a variant through generation, proof,
  lowering, simulation and the backend's verifier; ``compile_topology``
  keeps the fastest that verifies;
- ``portfolio``: one file per message-size window;
- ``analyze``, ``estimate_bandwidth``, ``estimate_time``, ``report_data``:
  what ``colc analyze`` and ``colc report`` show.
"""
