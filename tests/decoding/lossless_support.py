"""End-to-end losslessness of a speculative decode on the tiny pair, shared by
tests/decoding/test_e2e_lossless.py (node-wise rules) and
tests/decoding/test_sequence_decoding.py (block and traversal verification).

Oracle: the exact law of the first ``LENGTH`` generated tokens under the target's
autoregressive sampling, by enumerating all ``VOCAB^LENGTH`` sequences (products of the
target's conditional laws). Sample: the first ``LENGTH`` tokens of ``RUNS`` independent
speculative decodes (one batch of ``RUNS`` copies of ``PROMPT``, one seed). Test: Pearson
chi-square, cells with expected count < 5 lumped into one, rejected at p-value <
``FALSE_ALARM`` (the false-alarm rate of each test for a correct sampler; seeds are fixed,
so the outcome is deterministic).
"""
import itertools

import numpy as np
import torch
from scipy.stats import chisquare

from decoding.models.tiny import build_tiny_pair
from decoding.runtime.loop import probs_from_logits, speculative_decode

#: False-alarm rate of each chi-square test (probability that a correct sampler fails).
FALSE_ALARM = 1e-3
VOCAB = 5
LENGTH = 3
RUNS = 6000
PROMPT = [1, 3]


def tiny_lossless_pair():
    """The float64 tiny pair the losslessness tests decode with."""
    return build_tiny_pair(vocab_size=VOCAB, seed=0, draft_noise=0.6, dtype=torch.float64)


def exact_law(model, temperature: float = 1.0, top_p: float = 1.0) -> np.ndarray:  # [VOCAB ** LENGTH]
    """Law of the first LENGTH tokens of autoregressive sampling after PROMPT, sequences in
    lexicographic order."""
    law = np.ones(1)
    for length in range(LENGTH):
        prefixes = [PROMPT + list(s) for s in itertools.product(range(VOCAB), repeat=length)]
        with torch.no_grad():
            logits = model(input_ids=torch.tensor(prefixes)).logits[:, -1]
        cond = probs_from_logits(logits, temperature, top_p).numpy()  # [V ** length, V]
        law = (law[:, None] * cond).ravel()
    return law


def empirical_counts(tokens) -> np.ndarray:  # [VOCAB ** LENGTH]
    counts = np.zeros(VOCAB**LENGTH)
    for row in tokens:
        counts[np.ravel_multi_index(row[:LENGTH], (VOCAB,) * LENGTH)] += 1
    return counts


def chi_square_pvalue(counts: np.ndarray, law: np.ndarray) -> float:
    n = counts.sum()
    expected = law * n
    big = expected >= 5
    observed = np.append(counts[big], counts[~big].sum())
    expected = np.append(expected[big], expected[~big].sum())
    if expected[-1] == 0:
        assert observed[-1] == 0, "a sequence of probability 0 was generated"
        observed, expected = observed[:-1], expected[:-1]
    return float(chisquare(observed, expected).pvalue)


def decode_law_pvalue(pair, rule, tree, temperature=1.0, top_p=1.0, seed=0, single_rule=None):
    """``(p-value, DecodeResult)`` of RUNS seeded decodes with ``rule`` on ``tree``."""
    generator = torch.Generator().manual_seed(seed)
    result = speculative_decode(
        pair, [PROMPT] * RUNS, rule, tree, temperature=temperature, top_p=top_p, max_new_tokens=LENGTH,
        generator=generator, progress=False, single_rule=single_rule,
    )
    assert all(len(t) == LENGTH for t in result.tokens)
    return chi_square_pvalue(empirical_counts(result.tokens), exact_law(pair.target, temperature, top_p)), result
