"""The false-alarm rate of the certification assertions, measured on correct verifiers over
many seeds at a large alpha (so that a rate above the stated one would show), for
docs/certify-engine-sampler.md.

Each run is one assertion on a correct verifier with its own seed and no negative control; a
failure is a false alarm. The count over ``runs`` seeds is at most Binomial(runs, alpha) when the
stated bound holds; the table prints each count beside ``P(Binomial(runs, alpha) >= count)``
(a small value would contradict the bound) and the largest count that keeps that above 1e-6.
Seeded: every machine prints the same counts.

    python scripts/certify_false_alarms.py                        # alpha = 1e-2, 200 and 1,000 seeds
    python scripts/certify_false_alarms.py --alpha 0.05 --seeds 100 --sampled-seeds 400
"""
from __future__ import annotations

import argparse
from typing import Callable

import numpy as np
from scipy import stats

from decoding.certify import CertificationError, assert_lossless, assert_rule
from decoding.certify.layouts.trtllm import trtllm_tree_verifier, verify_dynamic_tree_rejection
from decoding.certify.trees import assert_tree_lossless
from decoding.verifiers import get_verifier
from otm.sequences import random_model

#: The instance: six tokens, p and q apart.
P = np.array([0.30, 0.25, 0.20, 0.12, 0.08, 0.05])
Q = np.array([0.10, 0.30, 0.25, 0.15, 0.12, 0.08])

#: Rows per run.
N = 2_000

#: The tree instance: V = 3, trees up to depth 2.
TREE_MODEL = random_model(3, 3, np.random.default_rng(0))

#: A count whose upper tail under Binomial(runs, alpha) is below this contradicts the stated rate.
CONTRADICTION = 1e-6


def runs(alpha: float) -> dict[str, tuple[str, Callable[[int], object]]]:
    """``{name: (design, run(seed))}``: the measured assertions on correct verifiers."""
    rrs, rrs_wor = get_verifier("rrs").verify, get_verifier("rrs_wor").verify
    common = dict(n=N, alpha=alpha, control=False)
    trtllm = trtllm_tree_verifier(verify_dynamic_tree_rejection)
    return {
        "assert_lossless, rrs_wor, k = 2": (
            "enumerated", lambda seed: assert_lossless(rrs_wor, P, Q, 2, "without_replacement", seed=seed, **common)),
        "assert_rule, rrs, k = 2": ("enumerated", lambda seed: assert_rule(rrs, "rrs", P, Q, 2, seed=seed, **common)),
        "assert_tree_lossless, TensorRT-LLM layout, kary:2,2": (
            "enumerated", lambda seed: assert_tree_lossless(trtllm, "kary:2,2", TREE_MODEL, scheme="without_replacement",
                                                            seed=seed, **common)),
        "assert_lossless, rrs, k = 2": (
            "sampled", lambda seed: assert_lossless(rrs, P, Q, 2, seed=seed, max_tuples=0, **common)),
    }


def false_alarms(run: Callable[[int], object], seeds: int) -> int:
    """How many of ``run(0) .. run(seeds - 1)`` raise a :class:`CertificationError`."""
    count = 0
    for seed in range(seeds):
        try:
            run(seed)
        except CertificationError:
            count += 1
    return count


def allowed(seeds: int, alpha: float) -> int:
    """The largest count of false alarms in ``seeds`` runs that the rate ``alpha`` explains
    (upper tail at least :data:`CONTRADICTION`)."""
    return int(stats.binom.ppf(1 - CONTRADICTION, seeds, alpha))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--alpha", type=float, default=1e-2, help="the stated false-alarm rate of each run")
    parser.add_argument("--seeds", type=int, default=200, help="runs of each enumerated design")
    parser.add_argument("--sampled-seeds", type=int, default=1_000, help="runs of the sampled design")
    args = parser.parse_args()
    print(f"alpha = {args.alpha:g}, {N:,} rows a run, no negative control\n")
    print("| assertion | drafts | runs | false alarms | P(Binomial(runs, alpha) >= count) | largest count explained |")
    print("|---|---|---|---|---|---|")
    for name, (design, run) in runs(args.alpha).items():
        seeds = args.sampled_seeds if design == "sampled" else args.seeds
        count = false_alarms(run, seeds)
        tail = float(stats.binom.sf(count - 1, seeds, args.alpha))
        print(f"| {name} | {design} | {seeds:,} | {count} | {tail:.3g} | {allowed(seeds, args.alpha)} |", flush=True)


if __name__ == "__main__":
    main()
