"""The verifier registry, its API and its typed errors."""
from __future__ import annotations

import pytest
import torch

from decoding.verifiers import DRAFT_SCHEMES, VERIFIERS, VerifierOutput, get_verifier
from otm.errors import InvalidDistributionError, InvalidDraftCountError, ShapeMismatchError, UnknownNameError
from otm.rules import RULES
from otm.rules.registry import rule_spec

P = torch.tensor([[0.1, 0.6, 0.3], [0.3, 0.3, 0.4]], dtype=torch.float64)
Q = torch.tensor([[0.5, 0.3, 0.2], [0.2, 0.2, 0.6]], dtype=torch.float64)


def _k(name: str) -> int:
    """Two drafts where the rule allows them, else its one count (the registry's ``ks``)."""
    spec = rule_spec(name)
    return 2 if spec.allows(2) else spec.ks[0]


def test_registry_names_are_otm_rules_and_modules_have_the_api():
    assert set(VERIFIERS) <= set(RULES)
    for name, verifier in VERIFIERS.items():
        assert get_verifier(name) is verifier
        assert verifier.draft_scheme in DRAFT_SCHEMES
        assert callable(verifier.sample_drafts)
        assert callable(verifier.verify)
        assert verifier.uniforms_per_row(_k(name)) >= 1


@pytest.mark.parametrize("name", ["nope", "", None, "importance_sampling"])
def test_unknown_name(name):
    with pytest.raises(UnknownNameError, match="no verifier"):
        get_verifier(name)


@pytest.mark.parametrize("name", list(VERIFIERS))
def test_output_type_shapes_and_seeding(name):
    verifier, k = get_verifier(name), _k(name)
    qs = Q.unsqueeze(1).expand(-1, k, -1).contiguous()
    runs = []
    for _ in range(2):
        g = torch.Generator().manual_seed(5)
        drafts = verifier.sample_drafts(qs if verifier.draft_scheme == "independent" else Q, k, g)
        out = verifier.verify(P, qs, drafts, g)
        runs.append((drafts.tolist(), out.tokens.tolist(), out.accepted_index.tolist()))
        assert isinstance(out, VerifierOutput)
        assert drafts.shape == (2, k)
        assert drafts.dtype == torch.int64
        assert out.tokens.shape == (2,)
        assert out.tokens.dtype == torch.int64
        assert out.accepted_index.shape == (2,)
        assert out.accepted_index.dtype == torch.int64
    assert runs[0] == runs[1], "the same seed must give the same draws"


@pytest.mark.parametrize("name", list(VERIFIERS))
def test_shape_errors(name):
    verifier, k = get_verifier(name), _k(name)
    qs = Q.unsqueeze(1).expand(-1, k, -1)
    drafts = torch.zeros(2, k, dtype=torch.int64)
    with pytest.raises(ShapeMismatchError):
        verifier.verify(P[:1], qs, drafts, None)
    with pytest.raises(ShapeMismatchError):
        verifier.verify(P, qs, drafts[:, :0], None)
    with pytest.raises(ShapeMismatchError):
        verifier.verify(P, qs, drafts.to(torch.int32), None)
    with pytest.raises(InvalidDistributionError):
        verifier.verify(P.float(), qs, drafts, None)
    with pytest.raises(InvalidDistributionError):
        verifier.sample_drafts(torch.ones(2, 3, dtype=torch.int64), k, None)


@pytest.mark.parametrize(
    "name, k",
    [("single", 2), ("spechub", 3), ("spechub", 1), ("greedy", 4), ("rrs", 0), ("kseq", True), ("rrs_wor", 4),
     ("optimal_pair_wor", 1), ("optimal_wor", 1), ("optimal_wor", 4)],
)
def test_impossible_draft_counts(name, k):
    with pytest.raises(InvalidDraftCountError):
        get_verifier(name).sample_drafts(Q, k, None)


@pytest.mark.parametrize("name", list(VERIFIERS))
def test_a_single_token_vocabulary(name):
    """V = 1: every rule outputs the only token, accepted from draft 0; a rule that needs two
    distinct drafts says that it cannot have them."""
    verifier = get_verifier(name)
    k = rule_spec(name).ks[0]
    p = torch.ones(4, 1, dtype=torch.float64)
    qs = p.unsqueeze(1).expand(-1, k, -1)
    if verifier.draft_scheme == "without_replacement" and k > 1:
        with pytest.raises(InvalidDraftCountError):
            verifier.sample_drafts(p, k, None)
        return
    drafts = verifier.sample_drafts(qs if verifier.draft_scheme == "independent" else p, k, None)
    out = verifier.verify(p, qs, drafts, None)
    assert out.tokens.tolist() == [0] * 4
    assert out.accepted_index.tolist() == [0] * 4
