"""Links of a switchless full mesh (AMD Infinity Fabric / xGMI) that a collective keeps busy.

An 8-GPU MI300X / MI325X / MI355X platform links every OAM to each of its 7 peers by one link
(ROCm docs, MI300 microarchitecture): a GPU's `scaleup_bandwidth_gbps` is split evenly over its
domain - 1 peers, so one peer gets 1 / (domain - 1) of it, per direction. How many of those links a
collective uses depends on its pattern: an all-to-all uses the links to every rank of the group,
rings use the links `mesh_ring_links` counts.
"""

from __future__ import annotations

import numpy as np


def mesh_ring_links(ranks_in_domain, domain_gpus: int):
    """Links per GPU (each to one peer, of the domain_gpus - 1 a full mesh has) that concurrent rings
    over r ranks of a switchless full mesh (xGMI) keep busy in each direction.

    - r = domain_gpus (the whole mesh): all r - 1. RCCL's 8-GPU MI300X model (ROCm/rccl
      src/graph/rome_models.cc rome_model_79: nLinks 7, full-mesh connMatrix) runs 14 rings, 7
      orders and their reverses, that together use each of the 56 directed GPU-to-GPU links exactly
      twice, so every GPU sends on all 7 of its links (K_r* decomposes into r - 1 directed
      Hamiltonian cycles for r other than 4 and 6: Tillson 1980).
    - fewer ranks (RCCL's generic ring search; no hand-built model): 2 floor((r - 1) / 2), at least
      1 (Walecki: K_r has floor((r - 1) / 2) edge-disjoint Hamiltonian cycles, each run in both
      directions; r = 2 uses its one link).
    numpy-broadcasting in r."""
    r = np.asarray(ranks_in_domain, dtype=np.float64)
    walecki = np.maximum(1.0, 2.0 * np.floor((r - 1.0) / 2.0))
    return np.where(r >= domain_gpus, np.maximum(1.0, domain_gpus - 1.0), walecki)


__all__ = ["mesh_ring_links"]
