"""Families of target/draft pairs ``(p, q)`` that stress the exact optimum at any vocabulary
size: low temperature, independent models, near one-hot, Zipf, flat, disjoint supports, top-p masks, ``p = q``
and mixtures of a peaked and a flat distribution.

A plain module (no package): ``scripts/bench_wor_families.py`` and
``tests/otm/test_wor_families.py`` import it. Every generator is a pure function of an
explicit ``numpy.random.Generator`` and the vocabulary size; :data:`FAMILIES` maps a family
name to its variants, each ``(label, generator)`` with ``generator(rng, vocab) -> (p, q)``
(``p`` = target, ``q`` = draft, float64 ``[vocab]`` summing to 1).

Logits are softmaxed with ``otm.distributions.logits_to_probs`` (shifted by the maximum, so
``T = 0.1`` underflows far tokens to exact zeros, as a real float64 softmax does).
"""
from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

from otm.distributions import logits_to_probs

Generator = Callable[[np.random.Generator, int], tuple[np.ndarray, np.ndarray]]


def gaussian_logits(rng: np.random.Generator, vocab: int, scale: float = 3.0) -> np.ndarray:  # [vocab]
    """I.i.d. ``N(0, scale^2)`` logits."""
    return scale * rng.standard_normal(vocab)


def realistic_logits(rng: np.random.Generator, vocab: int) -> np.ndarray:  # [vocab]
    """Zipf-like logits plus Gumbel noise: ``-4.8 log(rank) + G`` over a random ranking
    (the shape of a language model's next-token logits)."""
    return -4.8 * np.log(rng.permutation(vocab) + 1.0) + rng.gumbel(size=vocab)


def _logits(kind: str, rng: np.random.Generator, vocab: int) -> np.ndarray:
    return gaussian_logits(rng, vocab) if kind == "gaussian" else realistic_logits(rng, vocab)


def low_temperature(kind: str, temperature: float, noise: float = 0.7) -> Generator:
    """Target and draft from correlated logits (draft = target logits + ``N(0, noise^2)``),
    both at ``temperature``."""
    def generate(rng, vocab):
        base = _logits(kind, rng, vocab)
        draft = base + noise * rng.standard_normal(vocab)
        return logits_to_probs(base, temperature), logits_to_probs(draft, temperature)
    return generate


def independent(kind: str, temperature: float = 1.0) -> Generator:
    """Target and draft from independent logits of the same ``kind`` at ``temperature``:
    unrelated models, almost no overlap (the hardest case for the bounds of the
    without-replacement scan, which then prune few prefixes)."""
    def generate(rng, vocab):
        return logits_to_probs(_logits(kind, rng, vocab), temperature), logits_to_probs(_logits(kind, rng, vocab), temperature)
    return generate


def peaked(rng: np.random.Generator, vocab: int, rest: float, token: int | None = None) -> np.ndarray:  # [vocab]
    """``1 - rest`` on one token (random unless given), ``rest`` spread over the others
    like a temperature-1 softmax of realistic logits."""
    token = int(rng.integers(vocab)) if token is None else token
    spread = logits_to_probs(realistic_logits(rng, vocab))
    spread[token] = 0.0
    out = rest * spread / spread.sum()
    out[token] = 1.0 - rest
    return out / out.sum()


def near_one_hot(rest: float, which: str) -> Generator:
    """``which`` in ``p``, ``q``, ``both`` (same peak token), ``both_apart`` (different
    peak tokens): those are :func:`peaked` with mass ``rest`` off the peak; the other is a
    temperature-1 softmax of realistic logits."""
    def generate(rng, vocab):
        token = int(rng.integers(vocab))
        other = (token + 1 + int(rng.integers(vocab - 1))) % vocab
        flat = logits_to_probs(realistic_logits(rng, vocab))
        p = peaked(rng, vocab, rest, token) if which != "q" else flat
        q = {"p": flat, "q": peaked(rng, vocab, rest, token), "both": peaked(rng, vocab, rest, token),
             "both_apart": peaked(rng, vocab, rest, other)}[which]
        return p, q
    return generate


def zipf(exponent: float, noise: float = 1.0) -> Generator:
    """``q(x) ∝ rank(x)^-exponent`` over a random ranking; ``p`` the same law over a
    ranking perturbed by ``noise`` in log rank."""
    def generate(rng, vocab):
        log_rank = np.log(rng.permutation(vocab) + 1.0)
        q = logits_to_probs(-exponent * log_rank)
        p = logits_to_probs(-exponent * (log_rank + noise * rng.standard_normal(vocab)))
        return p, q
    return generate


def flat(kind: str) -> Generator:
    """``uniform`` (p = q = uniform), ``uniform_draft`` (near-uniform p: 1 +- 1%),
    ``near_uniform`` (both 1 +- 1%, independent), ``half`` (p uniform on half the tokens)."""
    def generate(rng, vocab):
        uniform = np.full(vocab, 1.0 / vocab)
        def near():
            w = 1.0 + 0.01 * rng.uniform(-1.0, 1.0, vocab)
            return w / w.sum()
        if kind == "uniform":
            return uniform, uniform.copy()
        if kind == "uniform_draft":
            return near(), uniform
        if kind == "near_uniform":
            return near(), near()
        p = np.where(rng.permutation(vocab) < vocab // 2, 1.0, 0.0)
        return p / p.sum(), uniform
    return generate


def disjoint(temperature: float) -> Generator:
    """Target on a random half of the tokens, draft on the other half (softmaxes of
    realistic logits at ``temperature``)."""
    def generate(rng, vocab):
        half = rng.permutation(vocab) < vocab // 2
        p = logits_to_probs(np.where(half, realistic_logits(rng, vocab), -np.inf), temperature)
        q = logits_to_probs(np.where(half, -np.inf, realistic_logits(rng, vocab)), temperature)
        return p, q
    return generate


def top_p(mask: str, kind: str, top: float, temperature: float) -> Generator:
    """Correlated logits (``kind``: ``gaussian`` keeps thousands of tokens, ``realistic``
    one to three) at ``temperature``; top-p ``top`` applied to ``mask`` in ``q``, ``p`` or
    ``both`` (many exact zeros; a masked ``q`` may hold fewer than ``k`` tokens)."""
    def generate(rng, vocab):
        base = _logits(kind, rng, vocab)
        draft = base + 0.7 * rng.standard_normal(vocab)
        p = logits_to_probs(base, temperature, top_p=top if mask in ("p", "both") else None)
        q = logits_to_probs(draft, temperature, top_p=top if mask in ("q", "both") else None)
        return p, q
    return generate


def equal(kind: str) -> Generator:
    """``p = q``: realistic at T = 1, low temperature (T = 0.1), Zipf 1.2, or near one-hot."""
    def generate(rng, vocab):
        if kind == "realistic":
            q = logits_to_probs(realistic_logits(rng, vocab))
        elif kind == "low_temperature":
            q = logits_to_probs(gaussian_logits(rng, vocab), 0.1)
        elif kind == "zipf":
            q = logits_to_probs(-1.2 * np.log(rng.permutation(vocab) + 1.0))
        else:
            q = peaked(rng, vocab, 1e-9)
        return q.copy(), q
    return generate


def mixture(peak: str, kind: str) -> Generator:
    """One of the pair peaked, the other flat: ``peak`` in ``p``, ``q`` is the peaked one;
    ``kind`` ``temperature`` (T = 0.1 against T = 3 on the same realistic logits),
    ``one_hot`` (``peaked(1e-12)`` against uniform)."""
    def generate(rng, vocab):
        if kind == "temperature":
            logits = realistic_logits(rng, vocab)
            sharp, soft = logits_to_probs(logits, 0.1), logits_to_probs(logits, 3.0)
        else:
            sharp, soft = peaked(rng, vocab, 1e-12), np.full(vocab, 1.0 / vocab)
        return (sharp, soft) if peak == "p" else (soft, sharp)
    return generate


FAMILIES: dict[str, list[tuple[str, Generator]]] = {
    "low_temperature": [
        (f"{kind} T={t}", low_temperature(kind, t)) for kind in ("gaussian", "realistic") for t in (0.1, 0.3)
    ],
    "independent": [(f"{kind} T={t}", independent(kind, t)) for kind in ("gaussian", "realistic") for t in (1.0, 0.3)],
    "near_one_hot": [
        (f"{which} 1-{rest:g}", near_one_hot(rest, which))
        for which in ("p", "q", "both", "both_apart") for rest in (1e-3, 1e-6, 1e-9, 1e-12)
    ],
    "zipf": [(f"s={s}", zipf(s)) for s in (0.8, 1.0, 1.5, 2.0)],
    "flat": [(kind, flat(kind)) for kind in ("uniform", "uniform_draft", "near_uniform", "half")],
    "disjoint": [(f"T={t}", disjoint(t)) for t in (1.0, 0.1)],
    "top_p": [
        (f"{mask} {kind} top_p={top} T={t}", top_p(mask, kind, top, t))
        for mask in ("q", "p", "both")
        for kind, top, t in (("gaussian", 0.9, 1.0), ("gaussian", 0.99, 0.3), ("realistic", 0.99, 1.0))
    ],
    "equal": [(kind, equal(kind)) for kind in ("realistic", "low_temperature", "zipf", "one_hot")],
    "mixture": [(f"{peak} peaked, {kind}", mixture(peak, kind)) for peak in ("p", "q") for kind in ("temperature", "one_hot")],
}


def family_pairs(rng: np.random.Generator, vocab: int, families=None) -> Iterator[tuple[str, str, np.ndarray, np.ndarray]]:
    """``(family, label, p, q)`` for every variant of every family in ``families``
    (default: all of :data:`FAMILIES`)."""
    for family in families or FAMILIES:
        for label, generate in FAMILIES[family]:
            p, q = generate(rng, vocab)
            yield family, label, p, q
