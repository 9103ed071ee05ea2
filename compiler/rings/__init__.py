"""Ring schedules (seed 002, Patarasuk-Yuan): rings over a Hamiltonian cycle or a
relayed order (``ring``), NCCL's NIC-aligned rings as a candidate (``nccl_baseline``),
two-level rings inside boxes and along rails (``rings2d``), and dimension-ordered
rings on tori (``dimrings``)."""
