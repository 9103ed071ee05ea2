"""All-to-all schedules (issue 19): block ``j`` of rank ``i``'s input ends in
block ``i`` of rank ``j``'s output.

* ``mcf``: LP (A.1) of seed 001 (appendix A.1.5), the all-to-all throughput
  optimum, and its bounds (Moore tree, distances);
* ``direct``: every block straight to its rank through the switches (NCCL's
  all-to-all written as a file: the baseline);
* ``rails_alltoall``: boxes behind a box switch, aggregated inside the box so
  each rank sends one message per remote box on its own rail;
* ``routed``: direct-connect fabrics, along the LP's optimal flow, relayed
  by the ranks on the way (``--algorithm mcf``).
"""
