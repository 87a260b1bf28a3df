"""The set-up of one row of :mod:`decoding.verifiers.optimal.wor`: the pass up the ranks
of the clock integral (``sigma``, the checkpointed prefix polynomials, the groups of ranks a
walk reads) for :class:`~decoding.verifiers.optimal.clock_masses.CompiledClockSetMasses`.
One backend per module, each with a ``CAPABILITIES`` constant
(:class:`~decoding.verifiers.optimal.setup.capabilities.SetupCapabilities`), an
``available()`` function and the protocol::

    prefix_tables(masses) -> (E0, D0, sigma, groups)   # groups: (GE, GD) of every group, or None
    group_tables(masses, GE, GD, first, last, start, nodes) -> int
                                                       # the groups first..last - 1 at least at
                                                       # the nodes [start, nodes); the nodes now held
                                                       # (where CAPABILITIES.all_groups is False)

``masses`` is the row's :class:`~decoding.verifiers.optimal.clock_masses.CompiledClockSetMasses`
(its ``q`` by rank, nodes ``s``, weights ``w``, ``_above``, ``k``, ``checkpoint``, ``group``,
``device`` and ``pass_threads()``).

The backends give the reference's values within roundoff (tests/decoding/test_optimal_wor_setup.py
holds each to ``reference`` on the same rows). :func:`pick` is the one place that chooses: the
first backend of :data:`BACKENDS` (in order of preference) whose capabilities fit the device,
``k`` and the threads, and that is available. Modules are imported on first use, so a CPU
process never imports the CUDA kernels.
"""
from __future__ import annotations

import importlib
from types import ModuleType

from otm.errors import NotApplicableError, UnknownNameError

from .capabilities import SetupCapabilities

_MODULES = {  # in order of preference
    "chebyshev": f"{__name__}.chebyshev",
    "numba": f"{__name__}.numba_nodes",
    "cuda": f"{__name__}.cuda_scan",
    "torch": f"{__name__}.torch_scan",
    "reference": f"{__name__}.reference",
}

#: The names of the set-up backends, in the order :func:`pick` tries them.
BACKENDS: tuple[str, ...] = tuple(_MODULES)


def backend(name: str) -> ModuleType:
    """The module of backend ``name``; :class:`otm.errors.UnknownNameError` for another name."""
    if name not in _MODULES:
        raise UnknownNameError(f"unknown set-up backend {name!r}; choose one of {', '.join(BACKENDS)}")
    return importlib.import_module(_MODULES[name])


def backend_capabilities(name: str) -> SetupCapabilities:
    """The declared capabilities of backend ``name``."""
    return backend(name).CAPABILITIES


def _device_type(device: str) -> str:
    return device.split(":")[0]


def pick(device: str, k: int, threads: int, name: str | None = None) -> ModuleType:
    """The backend that sets up a row on the torch device ``device`` (``"cpu"``, ``"cuda:1"``) at
    ``k`` drafts, its pass shared among ``threads`` threads: the first automatic one of
    :data:`BACKENDS` that handles them and is available, or the one named (whatever the threads).
    :class:`otm.errors.NotApplicableError` where none does."""
    kind = _device_type(device)
    if name is not None:
        module = backend(name)
        why = module.CAPABILITIES.handles(kind, k) or (None if module.available() else "is not available here")
        if why is not None:
            raise NotApplicableError(f"set-up backend {name!r} {why}")
        return module
    for candidate in BACKENDS:
        module = backend(candidate)
        if module.CAPABILITIES.automatic and module.CAPABILITIES.handles(kind, k, threads) is None and module.available():
            return module
    raise NotApplicableError(f"no set-up backend handles a row on {device} at k={k}")


def setup_checkpoint(device: str, name: str | None = None) -> int:
    """The checkpoints' spacing of rows set up on ``device``: that of backend ``name``, or that of
    the backends :func:`pick` takes there (one spacing for every ``k`` and thread count: the CPU's
    compiled passes 256, the scans on a GPU 64; tests/decoding/test_optimal_wor_setup.py)."""
    return (backend_capabilities(name) if name is not None else pick(device, 3, 1).CAPABILITIES).checkpoint


__all__ = ["BACKENDS", "SetupCapabilities", "backend", "backend_capabilities", "pick", "setup_checkpoint"]
