"""The water-level engine: the optimal rule for drafts without replacement, one row at a time.

Modules by role (docs/optimal-verifier.md#water-levels-for-drafts-without-replacement):

- :mod:`~otm.rules.water_levels.construction`: ranks, cut, minimal flux and the nesting of the
  water levels, for any draft law given by its set masses; the float arithmetic and its
  wider redo.
- :mod:`~otm.rules.water_levels.pair`: the masses of two drafts (``O(1)`` per cut) and a
  pair's yield, with its bounds from the flux.
- :mod:`~otm.rules.water_levels.set_masses`: the masses of ``k`` drafts from the enumerated
  draft sets.
- :mod:`~otm.rules.water_levels.clock_masses`: the masses of ``k`` drafts by the clock
  integral, without tuples.
- :mod:`~otm.rules.water_levels.bounds`: bounds on the levels from the flux alone, which
  decide most walks without the nesting.
- :mod:`~otm.rules.water_levels.parameters`: one row's levels for ``k`` drafts (which masses,
  which arithmetic, the certificate) and their cost.

The rule built on them is :mod:`otm.rules.optimal_wor` (``optimal_pair_wor`` is its old name
for ``k = 2``).
"""
from __future__ import annotations

from .construction import FluxSetup, PairParameters, WaterLevelRangeError, flux_setup, water_level_parameters
from .pair import pair_parameters
from .parameters import CERTIFICATE_TOLERANCE, clock_flux_setup, wor_parameters

__all__ = [
    "CERTIFICATE_TOLERANCE", "FluxSetup", "PairParameters", "WaterLevelRangeError", "clock_flux_setup", "flux_setup",
    "pair_parameters", "water_level_parameters", "wor_parameters",
]
