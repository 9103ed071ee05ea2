"""BFB schedules (seed 001 chapter 3, appendix A): linear programs, their lowering to chunks, expansions and the topology finder."""
