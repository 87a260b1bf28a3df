"""How far from its law does a float32 row get sampled, with float32 and with float64 arithmetic?

Evidence behind docs/theory.md, section 4, "Sampling float32 rows" and "A dominant draft token
with a denormal complement". For ``--positions`` spaced rows of an ``otm corpus`` directory,
the draft model's law at each of ``--temperatures`` as ``otm decode`` forms it (float32
softmax, :func:`decoding.runtime.loop.probs_from_logits`), at the real vocabulary:

- ``band``: whether the mass beside the top token is a float32 denormal (below ``1.2e-38``, not
  0), the rows where ``1 / (1 - q_top)`` overflows float32;
- ``small mass``: the mass of the tokens below ``3e-8``;
- ``TV f32 CDF`` / ``TV f64 CDF``: the total variation between the row's law and the law an
  inverse CDF summed in float32 (the sampler until 2026-11-28) or in float64
  (:func:`decoding.verifiers.base.cumsum_rows` with ``dtype=SAMPLING_DTYPE``) draws from;
- ``first small, f32 / f64 clocks``: the share of ``--draws`` first drafts without replacement
  that fall on the tokens below ``3e-8``, with exponential clocks from float32 uniforms (the
  sampler until 2026-11-28, reproduced here) and from :func:`decoding.verifiers.base.
  sample_without_replacement` (float64 uniforms); the row's own share is ``small mass``.

Then, over ``--band-rows`` spaced rows, how many have a float32 denormal beside their top
token at each temperature.

    python scripts/float32_sampling.py --corpus DIR --positions 4 --temperatures 1,0.6,0.1
"""
from __future__ import annotations

import argparse
import sys

import numpy as np
import torch

SMALL = 3e-8
ROWS_PER_CALL = 250


def _tv(law: torch.Tensor, truth: torch.Tensor) -> float:
    return 0.5 * float((law - truth).abs().sum())


def _cdf_law(q: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The law an inverse CDF of ``q`` summed in ``dtype`` draws from (float64)."""
    cdf = torch.cumsum(q, dim=0, dtype=dtype).double()
    return torch.diff(cdf, prepend=torch.zeros(1, dtype=torch.float64)) / cdf[-1]


def _first_drafts_float32_clocks(q: torch.Tensor, rows: int, generator: torch.Generator) -> torch.Tensor:
    """First drafts by the clocks of the sampler before 2026-11-28: ``E = -log(1 - u)`` from
    float32 uniforms, rings ``E / q`` (the first draft is the earliest ring)."""
    u = torch.rand(rows, q.numel(), generator=generator, dtype=torch.float32)
    ring = -torch.log1p(-u) / q.clamp(min=torch.finfo(torch.float32).tiny)
    return ring.argmin(dim=1)


def first_small_share(q: torch.Tensor, small: torch.Tensor, draws: int, float32_clocks: bool, seed: int) -> float:
    from decoding.verifiers.base import sample_without_replacement

    generator, hits = torch.Generator().manual_seed(seed), 0
    for start in range(0, draws, ROWS_PER_CALL):
        rows = min(ROWS_PER_CALL, draws - start)
        if float32_clocks:
            first = _first_drafts_float32_clocks(q, rows, generator)
        else:
            first = sample_without_replacement(q.expand(rows, -1).contiguous(), 1, generator)[:, 0]
        hits += int(small[first].sum())
    return hits / draws


def main(argv=None) -> None:
    from decoding.runtime.loop import probs_from_logits
    from otm.corpus import Corpus

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", required=True, help="a folder written by `otm corpus`")
    parser.add_argument("--positions", type=int, default=4)
    parser.add_argument("--temperatures", default="1,0.6,0.1")
    parser.add_argument("--draws", type=int, default=10_000, help="first drafts per row and sampler")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--band-rows", type=int, default=128, help="spaced rows counted for the last lines")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    temperatures = [float(t) for t in args.temperatures.split(",")]
    rows = Corpus(args.corpus).spaced_rows(args.positions, 1.0, None)
    print(f"{len(rows)} corpus rows, the draft's law in float32 at each temperature; {args.draws} first drafts per sampler")
    print("| text | position | T | band | small mass | TV f32 CDF | TV f64 CDF | first small, f32 clocks | first small, f64 clocks |")
    print("|---|---|---|---|---|---|---|---|---|")
    for done, (text, position, _, q64) in enumerate(rows, 1):
        logits = _logits(q64)
        for t in temperatures:
            q = probs_from_logits(logits.unsqueeze(0), t, dtype=torch.float32)[0]
            truth = q.double() / q.double().sum()
            band = _in_band(q)
            small = q < SMALL
            cells = [f"{float(truth[small].sum()):.2e}", f"{_tv(_cdf_law(q, torch.float32), truth):.1e}",
                     f"{_tv(_cdf_law(q, torch.float64), truth):.1e}",
                     f"{first_small_share(q, small, args.draws, True, args.seed):.2e}",
                     f"{first_small_share(q, small, args.draws, False, args.seed):.2e}"]
            print(f"| {text} | {position} | {t:g} | {'yes' if band else 'no'} | " + " | ".join(cells) + " |", flush=True)
        print(f"  {done}/{len(rows)} rows", file=sys.stderr, flush=True)
    band_rows = Corpus(args.corpus).spaced_rows(args.band_rows, 1.0, None)
    for t in temperatures:
        count = sum(_in_band(probs_from_logits(_logits(q64).unsqueeze(0), t, dtype=torch.float32)[0])
                    for _, _, _, q64 in band_rows)
        print(f"T = {t:g}: {count} of {len(band_rows)} rows have a float32 denormal beside their top token")


def _logits(q64) -> torch.Tensor:
    """The row's logits up to a constant (a token of probability 0 has logit -inf)."""
    with np.errstate(divide="ignore"):
        return torch.from_numpy(np.log(np.asarray(q64, dtype=np.float64))).float()


def _in_band(q: torch.Tensor) -> bool:
    """Whether the mass beside the top token is a float32 denormal (positive, below 1.2e-38)."""
    top = int(q.argmax())
    rest = float(torch.cat([q[:top], q[top + 1:]]).double().sum())
    return 0 < rest < torch.finfo(torch.float32).tiny


if __name__ == "__main__":
    main()
