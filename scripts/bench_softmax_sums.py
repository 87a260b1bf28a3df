"""How far from 1 the float64 sum of a real softmax output is, per dtype and vocabulary
size: the measurement behind :func:`otm.tolerances.softmax_sum_tolerance`.

    python scripts/bench_softmax_sums.py [--trials 10]

For each dtype (float32, bfloat16, float16) and V in {1,000, 32,000, 151,936}: Gaussian
logits at scales 0.1-30 and temperatures 0.1-2, softmax computed by torch in the dtype and
also in float32 then cast; prints the worst ``|sum - 1|`` beside the stated tolerance.
"""
from __future__ import annotations

import argparse

import torch
from tqdm import tqdm

from otm.tolerances import softmax_sum_tolerance


def worst_sum_error(dtype: torch.dtype, vocab: int, trials: int, generator: torch.Generator) -> float:
    worst = 0.0
    for scale in (0.1, 1.0, 3.0, 10.0, 30.0):
        for _ in range(trials):
            z = torch.randn(vocab, generator=generator) * scale
            for temperature in (0.1, 1.0, 2.0):
                for probs in (torch.softmax((z / temperature).to(dtype), dim=-1), torch.softmax(z / temperature, dim=-1).to(dtype)):
                    worst = max(worst, abs(probs.double().sum().item() - 1.0))
    return worst


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10, help="logit draws per scale")
    args = parser.parse_args(argv)
    generator = torch.Generator().manual_seed(0)
    rows = ["| dtype | V | worst measured abs(sum - 1) | tolerance (rule) | margin |", "|---|---|---|---|---|"]
    cells = [(d, v) for d in (torch.float32, torch.bfloat16, torch.float16) for v in (1_000, 32_000, 151_936)]
    for dtype, vocab in tqdm(cells, desc="dtype x V"):
        name = str(dtype).replace("torch.", "")
        worst = worst_sum_error(dtype, vocab, args.trials, generator)
        rule = softmax_sum_tolerance(name, vocab)
        rows.append(f"| {name} | {vocab:,} | {worst:.3g} | {rule:.3g} | {rule / max(worst, 1e-300):.1f}x |")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
