"""Chapter 2's analytical model of write contention from transient nodes (thesis ch. 2; A-28 in docs/ambiguities.md)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Contention:
    output_on_transient_gb: float  # D_t [Gb]
    transfer_s: float  # T_t = D_t / bw
    write_s: float  # T_w = D_t / (2 n_c w)


def transient_write_contention(
    n_core: int,
    n_transient: int,
    output_bytes_gb: float,
    *,
    replication: int = 3,
    bandwidth_gbps: float = 10.0,
    disk_write_gbps: float = 0.9,
    disks_per_core: int = 2,
) -> Contention:
    """D_t = n_t · D_out / (n_c + n_t), with D_out = output GB × replication × 8 × 1.024 Gb (A-28).

    The thesis' example (n_c = 10, n_t = 30, 50 GB Sort output) gives 921.6 Gb, 92.2 s, 51.2 s.
    """
    d_out = output_bytes_gb * replication * 8 * 1.024
    d_t = n_transient * d_out / (n_core + n_transient)
    return Contention(d_t, d_t / bandwidth_gbps, d_t / (disks_per_core * n_core * disk_write_gbps))
