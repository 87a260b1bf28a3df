"""The false-alarm rate measured on correct verifiers over many seeds, at a large alpha so
that a rate above the stated one would show."""
import numpy as np
from scipy import stats

from decoding.certify import CertificationError, assert_lossless, assert_rule
from decoding.verifiers import get_verifier

#: The rate stated for these runs, and the runs.
ALPHA, SEEDS = 1e-2, 200

#: A correct verifier fails each run with probability at most ALPHA, so the failures are at most
#: Binomial(SEEDS, ALPHA); more than its 1 - 1e-6 quantile would contradict the stated rate.
ALLOWED = int(stats.binom.ppf(1 - 1e-6, SEEDS, ALPHA))

P = np.array([0.30, 0.25, 0.20, 0.12, 0.08, 0.05])
Q = np.array([0.10, 0.30, 0.25, 0.15, 0.12, 0.08])
N = 2_000


def failures(run) -> int:
    count = 0
    for seed in range(SEEDS):
        try:
            run(seed)
        except CertificationError:
            count += 1
    return count


def test_assert_lossless_false_alarms_within_the_stated_rate():
    verify = get_verifier("rrs_wor").verify
    count = failures(lambda seed: assert_lossless(verify, P, Q, 2, "without_replacement", n=N, alpha=ALPHA, seed=seed,
                                                  control=False))
    assert count <= ALLOWED, f"{count} false alarms in {SEEDS} runs at alpha={ALPHA}"


def test_assert_rule_false_alarms_within_the_stated_rate():
    verify = get_verifier("rrs").verify
    count = failures(lambda seed: assert_rule(verify, "rrs", P, Q, 2, n=N, alpha=ALPHA, seed=seed, control=False))
    assert count <= ALLOWED, f"{count} false alarms in {SEEDS} runs at alpha={ALPHA}"


def test_sampled_drafts_false_alarms_within_the_stated_rate():
    verify = get_verifier("rrs").verify
    count = failures(lambda seed: assert_lossless(verify, P, Q, 2, n=N, alpha=ALPHA, seed=seed, control=False,
                                                  max_tuples=0))
    assert count <= ALLOWED, f"{count} false alarms in {SEEDS} runs at alpha={ALPHA}"
