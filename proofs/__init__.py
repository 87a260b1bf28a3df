"""Theorem checks of the papers and reproductions of their tables.

One module per paper (:mod:`proofs.spechub`, :mod:`proofs.khisti`, :mod:`proofs.spectr`,
:mod:`proofs.leviathan`, :mod:`proofs.speculative_ensemble`) plus :mod:`proofs.theory` (the
toolkit's own results, docs/theory.md) and :mod:`proofs.sequences`; each exposes
``CHECKS = {id: fn(instances, rng) -> Check}``. :mod:`proofs.registry` runs them,
:mod:`proofs.suite` is what ``otm theorems`` / ``otm reproduce spechub-table4`` run, and
:mod:`proofs.table4` reproduces SpecHub (Sun et al. 2024), Table 4.
"""
from .check import Check
from .suite import run_table4, run_theorems, theorems_table
from .registry import PAPERS, registry, run_checks

__all__ = ["Check", "PAPERS", "registry", "run_checks", "run_table4", "run_theorems", "theorems_table"]
