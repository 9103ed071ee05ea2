"""Hierarchical schedules for boxes behind a box switch joined by network rails
(seed 004 section 5.3): ``rails`` (allgather, reduce-scatter, allreduce within the
threadblock budget; all-to-all lives in ``compiler/alltoall``).  Hierarchical
*trees* (``hier``) are tree packings and live in ``compiler/trees``."""
