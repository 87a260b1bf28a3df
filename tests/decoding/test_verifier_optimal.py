"""The batched optimal verifiers (decoding.verifiers.optimal.iid, optimal_latent) against their
plain-Python references and their exact laws (otm.rules.optimal).

- draw for draw: on the same uniforms the batched verifier and the reference give the
  same tokens and accepted indices (float64 rows with zeros and one-hot rows mixed in);
- statistics, as tests/decoding/test_verifiers_exactness.py does for the other rules:
  a chi-square of the output tokens against the exact output law (``p``) and z-tests of
  the membership acceptance and of ``accepted_index >= 0`` against the exact values
  (``alpha*``), ``ALPHA = 1e-4`` each, seeds fixed; deliberately broken verifiers fail;
- a smoke test at V = 151,936 on random softmax rows (float32 and float64): valid
  tokens, consistent indices, and the cut's value equal to the prefix scan's ``alpha*``.
"""
from __future__ import annotations

import dataclasses
import zlib

import numpy as np
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from decoding.validation.stats import binomial_z_test, chi_square_test
from decoding.verifiers.optimal import iid as optimal
from decoding.verifiers.optimal import latent as optimal_latent
from decoding.verifiers.base import VerifierOutput, draw_uniforms
from decoding.verifiers.reference import run_reference
from otm.errors import InvalidDraftCountError, ShapeMismatchError, UnknownNameError
from otm.formulations.prefix_scan import prefix_scan
from otm.rules.optimal import exact_law
from otm.tolerances import AGREEMENT_TOLERANCE

from . import optimal_cases
from .optimal_cases import softmax_rows

ALPHA = 1e-4
ROWS = 20_000
V = 6

pytestmark = pytest.mark.usefixtures("one_torch_thread")

MODULES = {"optimal": optimal, "optimal_latent": optimal_latent}

_rng = np.random.default_rng(20240601)
_P = _rng.dirichlet(np.ones(V))
_Q = _rng.dirichlet(np.ones(V))


def _one_hot(i: int) -> np.ndarray:
    out = np.zeros(V)
    out[i] = 1.0
    return out


#: (p, q) instances over V = 6 tokens: generic and degenerate.
INSTANCES = {
    "generic": (_P, _Q),
    "p_equals_q": (_Q, _Q),
    "one_hot_q": (_P, _one_hot(2)),
    "temperature_zero": (_one_hot(1), _one_hot(3)),
    "q_zero_where_p_positive": (_P, np.array([0.0, 0.5, 0.0, 0.3, 0.2, 0.0])),
    "disjoint": (np.array([0.6, 0.4, 0, 0, 0, 0]), np.array([0, 0, 0.1, 0.2, 0.3, 0.4])),
    "exchanges": (np.array([0.30, 0.05, 0.25, 0.05, 0.15, 0.20]), np.array([0.10, 0.30, 0.05, 0.25, 0.20, 0.10])),
}

CASES = [(name, instance, k) for name in MODULES for instance in INSTANCES for k in (2, 3)]


def _seed(*parts) -> int:
    return zlib.crc32(repr(parts).encode())


def _rows(seed: int, rows: int, k: int, vocab: int, distinct_q: bool):
    """``(p [rows, vocab], draft_probs [rows, k, vocab])`` with zeros and one-hot rows."""
    rng = np.random.default_rng(seed)

    def laws():
        x = rng.dirichlet(np.full(vocab, 0.6), size=rows)
        x[rng.random(x.shape) < 0.2] = 0.0
        x[rng.random(rows) < 0.05] = np.eye(vocab)[rng.integers(vocab)]
        x[:, 0] += 1e-3
        return x / x.sum(-1, keepdims=True)

    p = laws()
    q = rng.dirichlet(np.ones(vocab), size=rows) if distinct_q else laws()
    return torch.as_tensor(p), torch.as_tensor(np.repeat(q[:, None], k, axis=1))


@pytest.mark.parametrize("name", list(MODULES))
@pytest.mark.parametrize("k, vocab", [(1, 6), (2, 6), (3, 6), (4, 6), (3, 40), (8, 40)])
def test_batched_equals_reference_draw_for_draw(name, k, vocab):
    module = MODULES[name]
    p, qs = _rows(_seed(name, k, vocab), 400, k, vocab, distinct_q=name == "optimal_latent")
    g = torch.Generator().manual_seed(7)
    drafts = module.sample_drafts(qs[:, 0], k, g)
    state = g.get_state()
    out = module.verify(p, qs, drafts, g)
    g.set_state(state)
    uniforms = draw_uniforms(g, p.shape[0], module.uniforms_per_row(k), p)
    tokens, indices = run_reference(name, p, qs, drafts, uniforms)
    assert out.tokens.tolist() == tokens
    assert out.accepted_index.tolist() == indices


def _run(module, p, q, k, rows, seed, dtype=torch.float64, verify=None):
    g = torch.Generator().manual_seed(seed)
    target = torch.as_tensor(p, dtype=dtype).expand(rows, -1).contiguous()
    draft_probs = torch.as_tensor(q, dtype=dtype).expand(rows, k, -1).contiguous()
    drafts = module.sample_drafts(draft_probs[:, 0], k, g)
    return drafts, (verify or module.verify)(target, draft_probs, drafts, g)


def _law_checks(law, drafts: torch.Tensor, out: VerifierOutput) -> dict:
    y, x = out.tokens.numpy(), drafts.numpy()
    n = len(y)
    return {
        "output": chi_square_test(np.bincount(y, minlength=V), law.output_distribution.astype(float), ALPHA),
        "membership": binomial_z_test(int((x == y[:, None]).any(axis=1).sum()), n, float(law.acceptance), ALPHA),
        "draft_accepted": binomial_z_test(
            int((out.accepted_index.numpy() >= 0).sum()), n, float(law.details["draft_accepted"]), ALPHA
        ),
    }


@pytest.mark.parametrize("name, instance, k", CASES)
def test_sampler_matches_exact_law(name, instance, k):
    p, q = INSTANCES[instance]
    if name == "optimal_latent" and k > V:
        pytest.skip("k > V")
    law = exact_law(p, q, k, MODULES[name].draft_scheme)
    if name == "optimal":
        assert abs(float(law.acceptance) - prefix_scan(p, q, k).value) <= AGREEMENT_TOLERANCE
    drafts, out = _run(MODULES[name], p, q, k, ROWS, _seed(name, instance, k))
    assert out.tokens.dtype == torch.int64 and out.accepted_index.dtype == torch.int64
    assert (torch.as_tensor(p)[out.tokens] > 0).all(), "a token of target probability 0 was output"
    accepted = out.accepted_index >= 0
    chosen = drafts.gather(1, out.accepted_index.clamp(min=0).unsqueeze(1)).squeeze(1)
    assert (chosen[accepted] == out.tokens[accepted]).all(), "accepted_index does not point at the output token"
    for check, result in _law_checks(law, drafts, out).items():
        assert result.passed, f"{name}/{instance}/k={k} {check}: {result.reason}"


def test_without_replacement_exhausted_support_matches_exact_law():
    p, q, k = _P, np.array([0.0, 0.7, 0.0, 0.0, 0.3, 0.0]), 4
    law = exact_law(p, q, k, "without_replacement")
    drafts, out = _run(optimal_latent, p, q, k, ROWS, _seed("exhausted"))
    for check, result in _law_checks(law, drafts, out).items():
        assert result.passed, f"exhausted {check}: {result.reason}"


@pytest.mark.parametrize("name", list(MODULES))
def test_float32_inputs_follow_the_law(name):
    p, q = INSTANCES["exchanges"]
    law = exact_law(p, q, 3, MODULES[name].draft_scheme)
    drafts, out = _run(MODULES[name], p, q, 3, ROWS, _seed(name, "f32"), torch.float32)
    for check, result in _law_checks(law, drafts, out).items():
        assert result.passed, f"{name} float32 {check}: {result.reason}"


def _without_exchanges(target_probs, draft_probs, draft_tokens, generator):
    """Broken: the exchanges switched off (max-ratio selection, verified against it):
    still lossless, but below alpha*."""
    uniforms = draw_uniforms(generator, target_probs.shape[0], optimal.uniforms_per_row(draft_tokens.shape[1]), target_probs)
    q = draft_probs[:, 0]
    params = optimal.row_parameters(target_probs, q, draft_tokens.shape[1])
    params = dataclasses.replace(params, flow_u=params.flow_u * 0, flow_h=params.flow_h * 0)
    return optimal.verify_rows(params, target_probs, q, draft_tokens, uniforms)


def _residual_from_p(params, u5):
    """Broken step 5: a rejected draft is followed by a draw from ``p`` instead of
    ``max(p - x, 0)``."""
    cdf = params.target_cumulative
    return torch.searchsorted(cdf, (u5.unsqueeze(1) * cdf[:, -1:]).contiguous(), right=True).clamp(max=cdf.shape[1] - 1).squeeze(1)


def test_broken_verifiers_fail_the_same_checks(monkeypatch):
    p, q = INSTANCES["exchanges"]
    law = exact_law(p, q, 3)
    drafts, out = _run(optimal, p, q, 3, ROWS, _seed("broken", "exchanges"), verify=_without_exchanges)
    assert not _law_checks(law, drafts, out)["membership"].passed
    monkeypatch.setattr(optimal, "residual_ranks", _residual_from_p)
    drafts, out = _run(optimal, p, q, 3, ROWS, _seed("broken", "residual"))
    assert not _law_checks(law, drafts, out)["output"].passed


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("name", list(MODULES))
def test_vocabulary_scale_smoke(name, dtype):
    module, rows, vocab = MODULES[name], 3, 151_936
    p, q = softmax_rows(rows, vocab, _seed(name, str(dtype)), dtype)
    for k in (2, 8):
        g = torch.Generator().manual_seed(k)
        draft_probs = q.unsqueeze(1).expand(rows, k, vocab)
        drafts = module.sample_drafts(q, k, g)
        out = module.verify(p, draft_probs, drafts, g)
        assert out.tokens.shape == (rows,) and (p.gather(1, out.tokens.unsqueeze(1)) > 0).all()
        accepted = out.accepted_index >= 0
        chosen = drafts.gather(1, out.accepted_index.clamp(min=0).unsqueeze(1)).squeeze(1)
        assert (chosen[accepted] == out.tokens[accepted]).all()
        cut_values = _cut_value(optimal.row_parameters(p, q, k))
        for b in range(rows):
            alpha = prefix_scan(p[b].double().numpy(), q[b].double().numpy(), k).value
            assert abs(float(cut_values[b]) - alpha) <= AGREEMENT_TOLERANCE


def _cut_value(params) -> torch.Tensor:
    """``[batch]`` ``f(H) = p(H) + 1 - C_m^k`` at the verifier's cut (``C_m^k`` as the sum
    of ``sigma`` over ``H``)."""
    in_h = torch.arange(params.own.shape[1]).unsqueeze(0) < params.cut.unsqueeze(1)
    p_h = torch.where(params.cut > 0, params.target_cumulative.gather(1, (params.cut - 1).clamp(min=0).unsqueeze(1)).squeeze(1), 0.0)
    return 1 + p_h - torch.where(in_h, params.own, 0.0).sum(dim=1)


def test_contract():
    assert optimal.draft_scheme == "iid" and optimal_latent.draft_scheme == "without_replacement"
    assert [optimal.uniforms_per_row(k) for k in (1, 2, 8)] == [5, 7, 19]
    assert [optimal_latent.uniforms_per_row(k) for k in (1, 2, 8)] == [5, 8, 26]
    with pytest.raises(InvalidDraftCountError):
        optimal.uniforms_per_row(0)
    p, q = (torch.as_tensor(v).unsqueeze(0) for v in INSTANCES["generic"])
    with pytest.raises(ShapeMismatchError):
        optimal.verify(p, q.unsqueeze(1), torch.zeros(1, 2, dtype=torch.int64), None)
    with pytest.raises(UnknownNameError):
        run_reference("nope", p, q.unsqueeze(1), torch.zeros(1, 1, dtype=torch.int64), torch.zeros(1, 5))


@pytest.mark.parametrize("k", [2, 5])
def test_batched_selection_law_equals_the_numpy_one(k):
    """The batched verifier's ``x`` (``sigma`` plus or minus the matched amount, at every
    rank) equals ``otm.rules.optimal.selection_parameters(...).selection``, two separate
    implementations of the matchings."""
    from otm.rules.optimal import selection_parameters

    p, qs = _rows(_seed("law", k), 8, 1, 500, distinct_q=False)
    q = qs[:, 0]
    params = optimal.row_parameters(p, q, k)
    ranks = torch.arange(500).expand(8, -1)
    zeros = torch.zeros(8, 500, dtype=torch.float64)
    p_ranks = p.gather(1, params.order) / params.target_mass
    q_ranks = q.gather(1, params.order) / params.draft_mass
    x_ranks = optimal.position_blocks(params, p_ranks, q_ranks, ranks, zeros, zeros).selection
    for b in range(8):
        expected = selection_parameters(p[b].numpy(), q[b].numpy(), k).selection
        x = np.zeros(500)
        x[params.order[b].numpy()] = x_ranks[b].numpy()
        support = q[b].numpy() > 0
        assert np.abs(x[support] - expected[support]).max() <= AGREEMENT_TOLERANCE


class _OperationCounter(TorchDispatchMode):
    """Counts the torch operations run inside it (``calls``)."""

    def __init__(self):
        super().__init__()
        self.calls = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.calls += 1
        return func(*args, **(kwargs or {}))


#: Torch operations that one call may run more than another of the same family with fewer
#: rows (a branch that only the larger batch takes); a loop over rows runs at least one per row.
BRANCH_OPERATIONS = 50


@pytest.mark.parametrize("family", optimal_cases.FAMILIES)
def test_a_calls_operations_do_not_grow_with_its_rows(family):
    """On short rows (the sorted path) :func:`decoding.verifiers.optimal.iid.verify_tuples` (which
    ``optimal_latent`` calls too) runs a fixed number of torch operations per call, whatever the
    rows: ties of ``p / q``, one-hot rows, ``p = q``, disjoint supports, zeros in ``q``, where a
    loop over the tied drafts (and, on every family, a sort per row) once ran torch operations
    per row. 200 and 2,000 rows of each family, half of them of identical drafts (the lazy rows)."""
    p, q, drafts, uniforms = optimal_cases.case(family, 2000, 7, 3, _seed("operations", family), torch.float64)
    calls = []
    for rows in (200, 2000):
        with _OperationCounter() as counter:
            optimal.verify_tuples(p[:rows], q[:rows], drafts[:rows], uniforms[:rows])
        calls.append(counter.calls)
    assert calls[1] <= calls[0] + BRANCH_OPERATIONS, calls
