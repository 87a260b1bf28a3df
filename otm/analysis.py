"""Deprecated: the tables moved to :mod:`otm.tables`, the toy families to :mod:`otm.families`.

``from otm.analysis import X`` keeps working for every public name and warns once.
"""
import warnings

from .families import *  # noqa: F401,F403
from .families import __all__ as _families
from .tables import *  # noqa: F401,F403
from .tables import __all__ as _tables

warnings.warn("otm.analysis is deprecated: import from otm.tables and otm.families", DeprecationWarning, stacklevel=2)

__all__ = [*_tables, *_families]
