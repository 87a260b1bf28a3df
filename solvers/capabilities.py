"""What a backend can do, declared next to its code (one ``CAPABILITIES`` per backend file)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BackendCapabilities:
    """``has_duals``: returns constraint multipliers; ``exact``: rational arithmetic, no
    tolerance; ``supports_sparse``: passes sparse matrices to the solver without densifying;
    ``max_variables``: :func:`solvers.solve` refuses larger problems (``None`` = no limit)."""

    name: str
    has_duals: bool
    exact: bool
    supports_sparse: bool
    max_variables: int | None
    description: str
