"""Theorem checks of the seed papers and reproductions of their tables (issue 3).

One module per paper (:mod:`proofs.spechub`, :mod:`proofs.khisti`, :mod:`proofs.spectr`,
:mod:`proofs.leviathan`, :mod:`proofs.ensemble`) plus :mod:`proofs.beyond`; each exposes
``CHECKS = {id: fn(instances, rng) -> Check}``. :mod:`proofs.registry` runs them,
:mod:`proofs.cli` is what ``otm theorems`` / ``otm reproduce spechub-table4`` call, and
:mod:`proofs.table4` reproduces seed 000 Table 4.
"""
from .check import Check
from .cli import print_table4, print_theorems, run_table4, run_theorems
from .registry import PAPERS, registry, run_checks

__all__ = ["Check", "PAPERS", "print_table4", "print_theorems", "registry", "run_checks", "run_table4", "run_theorems"]
