"""The set-up backends of ``optimal_wor`` (decoding.verifiers.optimal.setup): every backend
of the registry against the reference on the same rows (a backend added to the registry is
tested here without a line more), and the one function that picks a backend against the
declared capabilities."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from decoding.verifiers.optimal import clock_masses as compiled
from decoding.verifiers.optimal import setup
from decoding.verifiers.optimal.setup import cuda_scan
from otm.errors import NotApplicableError, UnknownNameError
from otm.rules.water_levels.clock_masses import ClockSetMasses

from .test_optimal_wor_numba import AGREEMENT, _largest_disagreement, _relative
from .test_optimal_wor_torch import SCAN_AGREEMENT, TINY, _ranks, assert_same_walks


def _device_of(name: str) -> str:
    """The device a backend is tested on: the CPU where it runs there, else CUDA (skipped without
    a GPU, or where the backend is not available)."""
    capabilities = setup.backend_capabilities(name)
    device = "cpu" if "cpu" in capabilities.devices else "cuda"
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    if not setup.backend(name).available():
        pytest.skip(f"set-up backend {name!r} is not available here")
    return device


def _worst(got, want) -> float:
    differ = np.abs(np.asarray(got) - np.asarray(want))
    return float(np.max(np.where(differ <= TINY, 0.0, differ / np.maximum(np.abs(want), TINY)), initial=0.0))


@pytest.mark.parametrize("name", setup.BACKENDS)
@pytest.mark.parametrize("seed, n, k", [(1, 9, 3), (2, 14, 4), (3, 20, 6)])
def test_each_backend_gives_the_reference_masses(name, seed, n, k):
    """``sigma``, every interval mass and every lowest-member law of small rows, from the backend's
    pass, within roundoff of the numpy reference :class:`ClockSetMasses`."""
    masses = compiled.clock_masses(_device_of(name), name)
    assert _largest_disagreement(_ranks(seed, n, 6.0), k, fast_class=masses) <= AGREEMENT


@pytest.mark.parametrize("name", setup.BACKENDS)
@pytest.mark.parametrize("k", [3, 8])
def test_each_backend_gives_the_reference_tables(name, k):
    """On a row of 1,200 ranks over 12 decades (two whole groups of ranks and a part): the
    checkpoints, ``sigma`` and every group of ranks within roundoff of the reference backend's at
    the same spacing; the checkpoints' prefixes and ``sigma`` of the numpy reference itself."""
    q = _ranks(10 + k, 1200, 12.0)
    masses = compiled.clock_masses(_device_of(name), name)(q, k)
    reference = compiled.clock_masses("cpu", "reference")
    reference = type("Spaced", (reference,), {"checkpoint": masses.checkpoint})(q, k)
    whole = masses.n // masses.group  # the groups a walk reads: those whole inside the row
    for got, want in zip((masses._E0, masses._D0, masses.sigma, *(G[:whole] for G in masses._group_polynomials())),
                         (reference._E0, reference._D0, reference.sigma, *(G[:whole] for G in reference._group_polynomials()))):
        assert got.shape == want.shape
        assert _worst(got, want) <= SCAN_AGREEMENT
    numpy_reference = ClockSetMasses(q, k)
    assert _relative(numpy_reference.sigma, masses.sigma) <= SCAN_AGREEMENT
    for f in (0, 300, 1199):
        assert all(_worst(got, want) <= SCAN_AGREEMENT for got, want in zip(masses._prefix(f), numpy_reference._prefix(f)))


def test_the_comparison_catches_a_backend_off_by_more_than_roundoff(monkeypatch):
    """A backend whose ``sigma`` is off by ``1e-9`` relative (the reference's pass, scaled) is
    caught by the comparison above."""
    reference = setup.backend("reference")
    original = reference.prefix_tables

    def off(masses):
        E0, D0, sigma, groups = original(masses)
        return E0, D0, sigma * (1.0 + 1e-9), groups

    monkeypatch.setattr(reference, "prefix_tables", off)
    masses = compiled.clock_masses("cpu", "reference")
    assert _largest_disagreement(_ranks(1, 9, 6.0), 3, fast_class=masses) > 1e-10


@pytest.mark.parametrize("name", setup.BACKENDS)
def test_each_backend_sets_up_and_walks_a_row_as_the_reference(name):
    """One row's set-up (cut, flux, ``x``) and 30 walks of the verifier on it, from the backend and
    from the reference backend (:func:`assert_same_walks`, a row of 3,000 tokens)."""
    assert_same_walks(3, compiled.clock_masses("cpu", "reference"), compiled.clock_masses(_device_of(name), name))


@pytest.mark.parametrize("name", setup.BACKENDS)
def test_each_backend_declares_its_capabilities_under_its_name(name):
    module = setup.backend(name)
    capabilities = module.CAPABILITIES
    assert capabilities.name == name and capabilities.devices and capabilities.checkpoint > 0
    assert callable(module.available) and callable(module.prefix_tables)
    assert capabilities.all_groups or callable(module.group_tables)  # the groups a walk reads, where its pass makes none


def test_pick_follows_the_capabilities(monkeypatch):
    """On the CPU: the pass at points below 4 threads, node by node from 4; on a CUDA device the
    kernels up to their ``MAX_K`` where numba sees a GPU, the torch scan otherwise and beyond; the
    reference never unless named."""
    assert [setup.pick("cpu", 3, threads).CAPABILITIES.name for threads in (1, 2, 3, 4, 16)] == \
        ["chebyshev"] * 3 + ["numba"] * 2
    assert setup.pick("cpu", 40, 1).CAPABILITIES.name == "chebyshev"
    for gpu in (True, False):
        monkeypatch.setattr(cuda_scan, "available", lambda gpu=gpu: gpu)
        assert setup.pick("cuda:1", cuda_scan.MAX_K, 1).CAPABILITIES.name == ("cuda" if gpu else "torch")
        assert setup.pick("cuda", cuda_scan.MAX_K + 1, 8).CAPABILITIES.name == "torch"
    assert all(setup.pick(device, 3, threads).CAPABILITIES.automatic
               for device in ("cpu", "cuda") for threads in (1, 8))
    assert setup.pick("cpu", 3, 16, "reference").CAPABILITIES.name == "reference"
    assert setup.pick("cpu", 3, 16, "chebyshev").CAPABILITIES.name == "chebyshev"  # named: whatever the threads


def test_pick_refuses_what_a_backend_cannot_do(monkeypatch):
    with pytest.raises(UnknownNameError, match="unknown set-up backend 'fortran'"):
        setup.pick("cpu", 3, 1, "fortran")
    with pytest.raises(NotApplicableError, match="'chebyshev' runs on cpu, not cuda"):
        setup.pick("cuda", 3, 1, "chebyshev")
    with pytest.raises(NotApplicableError, match="k <= 16, not k=17"):
        setup.pick("cuda", 17, 1, "cuda")
    monkeypatch.setattr(cuda_scan, "available", lambda: False)
    with pytest.raises(NotApplicableError, match="'cuda' is not available here"):
        setup.pick("cuda", 3, 1, "cuda")


def test_the_cuda_kernels_refuse_a_k_past_theirs():
    """The registry gives such rows to the torch scan; called directly, the kernels' scan says so
    (it took the torch scan itself before the registry)."""
    masses = compiled.CompiledClockSetMasses(_ranks(1, 100, 3.0), 3)
    with pytest.raises(ValueError, match="k <= 16, not k=17"):
        cuda_scan.scan(masses.q, masses.s, masses.w, masses._above, cuda_scan.MAX_K + 1, 64, 128, "cpu")


def test_each_device_has_one_checkpoint_spacing():
    """The masses class of a device keeps the spacing of every backend it may pick: 256 on the
    CPU (the compiled passes), 64 on a GPU (the scans), and a named backend's own."""
    assert setup.setup_checkpoint("cpu") == compiled.CompiledClockSetMasses.checkpoint == 256
    assert setup.setup_checkpoint("cuda:0") == compiled.clock_masses("cuda").checkpoint == 64
    for device in ("cpu", "cuda"):
        assert {setup.pick(device, k, threads).CAPABILITIES.checkpoint for k in (3, 17) for threads in (1, 8)} == \
            {setup.setup_checkpoint(device)}
    assert compiled.clock_masses("cpu", "torch").checkpoint == 64
    assert compiled.clock_masses("cpu", "reference").checkpoint == ClockSetMasses.checkpoint
