"""The blocked scan of decoding.verifiers.optimal.setup.torch_scan (the set-up's pass up the ranks on a
torch device) against the compiled pass of decoding.verifiers.optimal.clock_masses and the numpy
reference of otm.rules.water_levels.clock_masses: the same checkpoints, sigma and groups of ranks within
roundoff, the same set masses, the same walks through the verifier; a scan without its prefix
products, or with a product that drops a term, is caught by the same comparison."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from decoding.verifiers.optimal import wor as optimal_wor
from decoding.verifiers.optimal.setup import torch_scan as optimal_wor_torch
from decoding.verifiers.optimal.setup.torch_scan import SCAN_CHECKPOINT
from decoding.verifiers.optimal.clock_masses import CompiledClockSetMasses, clock_masses
from otm.rules.water_levels.parameters import clock_flux_setup

from .test_optimal_wor_numba import AGREEMENT, _largest_disagreement

#: Relative agreement of the scan's values with the compiled pass's on rows of up to a few
#: thousand ranks: the same non-negative terms multiplied in another bracketing (measured
#: 7e-14 at 5,000 ranks while writing the module; about 2e-12 on whole Qwen rows of 151,665
#: ranks, where the compiled pass itself is 7e-13 from an 80-bit pass: docs/optimal-verifier-proofs.md#the-set-up-as-a-scan).
SCAN_AGREEMENT = 1e-12

#: Below this, two coefficients both count as 0 (the scan and the pass set subnormals to 0 at
#: different steps).
TINY = 1e-290


#: The compiled masses with their checkpoints at the scan's spacing (``SCAN_CHECKPOINT``, which
#: :func:`~decoding.verifiers.optimal.clock_masses.clock_masses` keeps on a device; the CPU's is wider):
#: what the scans are compared with, at the spacing the verifier scans at.
AtScanSpacing = type("AtScanSpacing", (CompiledClockSetMasses,), {"checkpoint": SCAN_CHECKPOINT})


def _ranks(seed: int, n: int, decades: float) -> np.ndarray:
    rng = np.random.default_rng(seed)
    q = 10.0 ** rng.uniform(-decades, 0.0, n)
    return q / q.sum()


def _scan_of(masses: CompiledClockSetMasses, device: str = "cpu") -> tuple:
    return optimal_wor_torch.scan(masses.q, masses.s, masses.w, masses._above, masses.k, masses.checkpoint,
                                  masses.group, device)


def _scan_disagreement(masses: CompiledClockSetMasses, scanned: tuple) -> float:
    """The largest relative difference of the scan's checkpoints, sigma and whole groups from the
    compiled pass's (:func:`optimal_wor_torch.scan`'s order of outputs)."""
    E0, D0, sigma, GE, GD = scanned
    whole = masses.n // masses.group
    GE_pass, GD_pass = masses._group_polynomials()
    worst = 0.0
    for got, want in ((E0, masses._E0), (D0, masses._D0), (sigma, masses.sigma), (GE[:whole], GE_pass[:whole]),
                      (GD[:whole], GD_pass[:whole])):
        assert got.shape == want.shape
        differ = np.abs(got - want)
        worst = max(worst, float(np.max(np.where(differ <= TINY, 0.0, differ / np.maximum(np.abs(want), TINY)),
                                        initial=0.0)))
    return worst


@pytest.mark.parametrize("n", [40, 64, 65, 700, 1200])
@pytest.mark.parametrize("k", [2, 3, 5, 8])
def test_the_scan_is_the_compiled_pass(n, k):
    masses = AtScanSpacing(_ranks(n * 10 + k, n, 12.0), k)
    assert _scan_disagreement(masses, _scan_of(masses)) <= SCAN_AGREEMENT


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(3, 300), k=st.integers(2, 8), decades=st.sampled_from([1.0, 6.0, 15.0]))
def test_the_scan_is_the_compiled_pass_on_random_rows(seed, n, k, decades):
    masses = AtScanSpacing(_ranks(seed, n, decades), k)
    assert _scan_disagreement(masses, _scan_of(masses)) <= SCAN_AGREEMENT


def test_a_scan_without_its_prefix_products_is_caught(monkeypatch):
    """Each checkpoint the product of the block below it alone, not of every block below."""
    masses = AtScanSpacing(_ranks(5, 700, 12.0), 3)
    monkeypatch.setattr(optimal_wor_torch, "inclusive_products", lambda E, D: (E, D))
    assert _scan_disagreement(masses, _scan_of(masses)) > 1e-3


def test_a_product_without_its_cross_term_is_caught(monkeypatch):
    """Groups united as ``(E F, D F)``: a rank's arrival in the second group is lost."""
    masses = AtScanSpacing(_ranks(6, 1200, 12.0), 4)

    def without_cross_term(E, D, F, G):
        k = E.shape[-1]
        out_E, out_D = torch.zeros_like(E), torch.zeros_like(D)
        for e in range(k):
            out_E[..., e:] += E[..., e:e + 1] * F[..., :k - e]
            out_D[..., e:] += D[..., e:e + 1] * F[..., :k - e]
        return out_E, out_D

    monkeypatch.setattr(optimal_wor_torch, "_times", without_cross_term)
    assert _scan_disagreement(masses, _scan_of(masses)) > 1e-3


@settings(max_examples=6, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(5, 20), k=st.integers(3, 5))
def test_masses_from_the_scan_are_the_references(seed, n, k):
    """Every interval mass and lowest-member law from the scan's checkpoints and groups, against
    the numpy reference (the comparison of tests/decoding/test_optimal_wor_numba.py)."""
    q = _ranks(seed, n, 6.0)
    assert _largest_disagreement(q, min(k, n - 1), fast_class=clock_masses("cpu", "torch")) <= AGREEMENT


def test_masses_of_a_device_and_backend_keep_their_class():
    scanned = clock_masses("cpu", "torch")
    assert scanned is clock_masses("cpu", "torch") and issubclass(scanned, CompiledClockSetMasses)
    assert scanned.setup == "torch" and scanned.checkpoint == SCAN_CHECKPOINT
    assert clock_masses("cpu") is CompiledClockSetMasses and CompiledClockSetMasses.setup is None


def test_scan_refuses_groups_across_blocks():
    masses = CompiledClockSetMasses(_ranks(1, 100, 3.0), 3)
    with pytest.raises(ValueError, match="group a multiple of every"):
        optimal_wor_torch.scan(masses.q, masses.s, masses.w, masses._above, 3, 64, 100, "cpu")


def assert_same_walks(k: int, first, second) -> None:
    """A row of 3,000 tokens set up with the masses classes ``first`` and ``second``: the same cut,
    flux and ``x`` within roundoff, and the same outputs for 30 drafted sets and uniforms."""
    rng = np.random.default_rng(k)
    p, q = rng.dirichlet(np.full(3000, 0.3)), rng.dirichlet(np.full(3000, 0.3))
    one, other = (clock_flux_setup(p, q, k, clock_masses=masses) for masses in (first, second))
    assert one.cut == other.cut
    np.testing.assert_allclose(np.asarray(other.flux), np.asarray(one.flux), rtol=0, atol=1e-14)
    np.testing.assert_allclose(np.asarray(other.selection), np.asarray(one.selection), rtol=0, atol=1e-14)
    for _ in range(30):
        drafts, u = tuple(int(t) for t in rng.choice(3000, k, replace=False, p=q)), rng.random(3)
        assert optimal_wor.verify_row(p, q, drafts, u, other) == optimal_wor.verify_row(p, q, drafts, u, one)


@pytest.mark.parametrize("k", [3, 8])
def test_the_verifier_walks_the_same_on_scanned_masses(k):
    """The compiled pass and the scan (:func:`assert_same_walks`)."""
    assert_same_walks(k, CompiledClockSetMasses, clock_masses("cpu", "torch"))
