"""Access to the ``otm`` core by name, so a check whose ingredient is not importable is
reported as "not checkable" with the missing name instead of crashing the whole run.

The checks never re-implement a formulation or a rule: they call the core through
:func:`core` (or take the function as an argument, which is how the tests feed broken
ingredients).
"""
from __future__ import annotations

import importlib

#: Where each core function lives (first module that has it wins).
LOCATIONS = {
    "solve_full_lp": ("otm.formulations.full_lp", "otm.formulations"),
    "solve_simplified_lp": ("otm.formulations.simplified_lp", "otm.formulations"),
    "reconstruct_coupling": ("otm.formulations.simplified_lp", "otm.formulations"),
    "solve_max_flow": ("otm.formulations.max_flow", "otm.formulations"),
    "min_cut_value": ("otm.formulations.max_flow", "otm.formulations"),
    "solve_canonical_lp": ("otm.formulations.canonical_lp", "otm.formulations"),
    "prefix_scan": ("otm.formulations.prefix_scan", "otm.formulations.closed_form", "otm.formulations"),
    "khisti_k2_closed_form": ("otm.formulations.closed_form", "otm.formulations.khisti_k2", "otm.formulations"),
    "acceptance_is_one": ("otm.formulations.khisti_k2", "otm.formulations.closed_form", "otm.formulations"),
    "spectr_upper_bound": ("otm.formulations.closed_form", "otm.formulations.spectr_bounds", "otm.formulations"),
    "optimal_acceptance": ("otm.optimum", "otm"),
    "optimal_acceptance_for_law": ("otm.optimum", "otm"),
    "rule_law": ("otm.rules",),
    "rule_acceptance": ("otm.rules", "otm"),
    "rule_output_distribution": ("otm.rules", "otm"),
}


class CoreMissing(ImportError):
    """An ``otm`` core function a check needs is not available (yet)."""


def core(name: str):
    """The core function ``name`` (see :data:`LOCATIONS`); raises :class:`CoreMissing`."""
    for module_name in LOCATIONS.get(name, ()):
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        if hasattr(module, name):
            return getattr(module, name)
    raise CoreMissing(f"otm core function {name!r} is not available (looked in {', '.join(LOCATIONS.get(name, ()))})")
