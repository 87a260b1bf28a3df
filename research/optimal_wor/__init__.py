"""The optimum for drafts without replacement: the evidence scripts behind docs/optimal-verifier.md
and the dated journal of how the water-level verifiers came about (README.md, JOURNAL.md). Run a
script from the repository root as a module: ``python -m research.optimal_wor.wor_water_levels``."""
