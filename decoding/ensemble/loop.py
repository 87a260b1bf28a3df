"""Speculative Ensemble decoding (Speculative Ensemble, Fu et al. 2025): the alternate proposal framework, for two
models (§3.3, App. B.1 Alg. 1) and ``n`` models (§3.4, App. B.2 Alg. 2 / Fig. 7), and
the plain ensemble sampler it accelerates.

Output law: the autoregressive law of the ensemble ``r_t = E(p_1(.|x_<t), .., p_n(.|x_<t))``
(:mod:`decoding.ensemble.verify`), *not* any single model's law.

The framework (our reading of Alg. 1-2 and Fig. 7; every model call is one forward):

- A **turn** of model ``i`` is ``gamma_i`` calls. Each call *scores* every pending token
  (computes model ``i``'s next-token law at its position) and *samples one new token*
  from model ``i`` at the end of the sequence. So the first call of a turn scores the
  previous proposals and its sampled token is the **bonus token**, which becomes the
  first token of model ``i``'s own proposal (§3.3); the next ``gamma_i - 1`` calls
  complete that proposal.
- After every call, the oldest pending token is **verified** as soon as every model has
  scored it: against ``r`` built from the ``n`` laws at its position, with the law of the
  model that generated it as proposal law (:func:`decoding.ensemble.verify.verify_against_ensemble`),
  then the next one, and so on (Alg. 2's inner ``while``).
- On a rejection the residual token is committed, every pending token and cached law is
  dropped, and the **default proposer** (model 0) starts a fresh turn of ``gamma_0``
  calls (§3.3 "the default proposal model will take over"; B.2 "similar to step 1").
- When a turn ends without a rejection, the next turn goes to the model that has scored
  the fewest pending tokens (Alg. 2's ``argmin_i |C_i|``, ties to the lowest index):
  for two models the proposer and verifier swap (Alg. 1's ``Swap``), for ``n`` models
  the turns go round.

Reconstructed where the pseudocode is ambiguous: Alg. 2 as printed calls
``Propose(M_i, S + S_c, gamma_i - 1)`` even after a rejection has emptied the cache;
we follow the text of B.2 instead (after a rejection the default proposer proposes
``gamma_1`` fresh tokens). Either choice is lossless: what makes the output follow
``r`` is that every committed token was drawn from one model's law at its position and
then verified against ``r`` there, and that who proposes a position depends only on the
past. A bonus token is never committed unverified (the mistake §3.3 warns about).

Batching: rows (independent decodes of equal-length prompts) run the same state machine
but not in lock step; each *tick* calls every model once on the rows whose turn it is
(one padded full forward; rows are right-padded, which a causal model ignores), then
verifies. No key/value cache: a call re-reads the whole sequence (the call counts are
what a cached implementation would make). Device and dtype follow the models (or are
moved to ``device``/``dtype``); all randomness comes from ``generator``.
"""
from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from decoding.ensemble.verify import Ensemble, make_ensemble, verify_against_ensemble
from decoding.runtime.loop import probs_from_logits
from decoding.verifiers.base import draw_uniforms, sample_weighted
from otm.errors import InvalidDistributionError, NotApplicableError, ShapeMismatchError


@dataclass(frozen=True)
class EnsembleDecodeResult:
    """What an ensemble decode returns.

    Attributes:
        tokens: ``[batch, max_new_tokens]`` int64, the generated tokens of each row.
        model_calls: per model, its forward calls summed over rows.
        verifications, accepts: per proposing model, the tokens it generated that were
            verified against ``r``, and how many of them were accepted (all zero for the
            plain sampler).
        wall_seconds: wall-clock time of the decode.
        method: ``"speculative_ensemble"`` or ``"ensemble"`` (plain sampling).
    """

    tokens: torch.Tensor  # [batch, max_new_tokens]
    model_calls: list[int]
    verifications: list[int]
    accepts: list[int]
    wall_seconds: float
    method: str

    @property
    def tokens_generated(self) -> int:
        return int(self.tokens.numel())

    @property
    def tokens_per_call(self) -> float:
        """Generated tokens per model call (all models together); ``1 / n`` for the
        plain ensemble sampler, which calls every model for every token."""
        return self.tokens_generated / max(sum(self.model_calls), 1)

    @property
    def acceptance_rate(self) -> float | None:
        """Accepted / verified proposal tokens (``None`` when nothing was verified)."""
        total = sum(self.verifications)
        return sum(self.accepts) / total if total else None

    def acceptance_by_proposer(self) -> list[float | None]:
        """Per model, the acceptance rate of the tokens it generated."""
        return [a / v if v else None for a, v in zip(self.accepts, self.verifications)]

    def summary(self) -> dict:
        return {
            "method": self.method,
            "tokens_generated": self.tokens_generated,
            "model_calls": self.model_calls,
            "tokens_per_call": self.tokens_per_call,
            "acceptance_rate": self.acceptance_rate,
            "acceptance_by_proposer": self.acceptance_by_proposer(),
            "wall_seconds": self.wall_seconds,
        }


def _check_models(models, device, dtype) -> tuple[list[torch.nn.Module], torch.device]:
    """``models`` (a sequence, or a :class:`decoding.models.hf.ModelPair` read as
    ``(draft, target)``) as a list of at least two, moved to ``device``/``dtype`` if given."""
    if hasattr(models, "draft") and hasattr(models, "target"):
        models = [models.draft, models.target]
    models = list(models)
    if len(models) < 2:
        raise NotApplicableError(f"an ensemble needs at least two models, got {len(models)}")
    device = torch.device(device) if device is not None else next(models[0].parameters()).device
    for model in models:
        if dtype is not None or next(model.parameters()).device != device:
            model.to(device=device, dtype=dtype)
    return models, device


def _check_prompts(prompt_ids, device) -> torch.Tensor:  # [batch, prompt_len]
    """One prompt (ids or ``[L]`` tensor) or several of equal length (``[batch, L]``)."""
    try:
        ids = torch.as_tensor(prompt_ids, dtype=torch.int64, device=device)
    except (ValueError, TypeError) as exc:
        raise ShapeMismatchError(f"prompts must be token ids of equal lengths ([L] or [batch, L]): {exc}") from None
    ids = ids.unsqueeze(0) if ids.ndim == 1 else ids
    if ids.ndim != 2 or ids.shape[0] < 1 or ids.shape[1] < 1:
        raise ShapeMismatchError(f"prompts must be non-empty [L] or [batch, L] token ids, got shape {tuple(ids.shape)}")
    return ids


def _check_gammas(gammas, n_models: int) -> list[int]:
    gammas = [gammas] * n_models if isinstance(gammas, int) else list(gammas)
    if len(gammas) != n_models or any(isinstance(g, bool) or not isinstance(g, int) or g < 1 for g in gammas):
        raise InvalidDistributionError(f"need one proposal length gamma >= 1 per model ({n_models}), got {gammas}")
    return gammas


def _check_length(max_new_tokens) -> int:
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 0:
        raise InvalidDistributionError(f"max_new_tokens must be an integer >= 0, got {max_new_tokens!r}")
    return max_new_tokens


def _forward(model: torch.nn.Module, ids: torch.Tensor) -> torch.Tensor:  # [batch, L, vocab]
    """Logits of a causal LM (a Hugging Face model, or any module returning logits)."""
    with torch.inference_mode():
        out = model(input_ids=ids, use_cache=False) if hasattr(model, "config") else model(input_ids=ids)
    return getattr(out, "logits", out)


def speculative_ensemble_decode(
    models,
    prompt_ids,
    ensemble: str | Ensemble = "weighted",
    *,
    weights: Sequence[float] | None = None,
    lam: float | None = None,
    mu: float | None = None,
    gammas: int | Sequence[int] = 1,
    temperature: float = 1.0,
    max_new_tokens: int = 32,
    generator: torch.Generator | None = None,
    device=None,
    dtype: torch.dtype | None = None,
    verifier=None,
) -> EnsembleDecodeResult:
    """Speculative Ensemble (Speculative Ensemble, Fu et al. 2025, Alg. 1 for two models, Alg. 2 for ``n``; see the
    module docstring): the first ``max_new_tokens`` tokens follow the autoregressive law
    of ``r = E(p_1, .., p_n)``.

    Args:
        models: causal LMs sharing a vocabulary; model 0 is the default proposer (for two
            models: ``(q, p)``, e.g. a :class:`decoding.models.hf.ModelPair`).
        prompt_ids: ``[L]`` or ``[batch, L]`` token ids (rows are independent decodes).
        ensemble, weights, lam, mu: the ensemble (:func:`decoding.ensemble.verify.make_ensemble`).
        gammas: proposal length of each model (an int: the same for all). The paper's
            illustrations (Figs. 2-3) use 1.
        temperature: each model's law is ``softmax(logits / T)``; ``T = 0`` is greedy
            (:mod:`decoding.ensemble.verify`).
        generator: a ``torch.Generator`` on ``device``.
        device, dtype: where the models run (default: model 0's device); moved there.
        verifier: ``None`` for eq. (6) (:func:`decoding.ensemble.verify.verify_against_ensemble`),
            or ``verifier(ensemble_probs, proposal_probs, tokens, proposer_ids, generator)
            -> VerifierOutput`` (``[batch, vocab]``, ``[batch, vocab]``, ``[batch]``,
            ``[batch]`` index of the model that generated each token): a hook for
            instrumented or deliberately broken verifiers (the tests use it).
    """
    start = time.perf_counter()
    models, device = _check_models(models, device, dtype)
    gammas = _check_gammas(gammas, len(models))
    max_new = _check_length(max_new_tokens)
    ensemble_fn = make_ensemble(ensemble, len(models), weights=weights, lam=lam, mu=mu)
    prompt = _check_prompts(prompt_ids, device)
    prompt_len = prompt.shape[1]
    state = _TurnState.start(prompt, gammas, max_new)
    done = state.n_commit - prompt_len >= max_new
    while not bool(done.all()):
        state.call_models(models, done, temperature, generator)
        while state.verify_front(ensemble_fn, done, temperature, generator, verifier):
            done = state.n_commit - prompt_len >= max_new
        state.pass_turns(done)
    return EnsembleDecodeResult(
        tokens=state.tokens[:, prompt_len : prompt_len + max_new].clone(),
        model_calls=state.calls,
        verifications=state.verifications,
        accepts=state.accepts,
        wall_seconds=time.perf_counter() - start,
        method="speculative_ensemble",
    )


@dataclass
class _TurnState:
    """Every row's state in :func:`speculative_ensemble_decode`: its tokens (committed, then
    pending), who generated and who scored each pending token, whose turn it is, and each
    model's cached logits at the pending positions."""

    gammas: torch.Tensor  # [n] each model's proposal length
    tokens: torch.Tensor  # [batch, width]
    n_commit: torch.Tensor  # [batch] committed length
    n_total: torch.Tensor  # [batch] committed + pending
    generated_by: torch.Tensor  # [batch, window] model of each pending slot
    coverage: torch.Tensor  # [n, batch] pending slots scored by each model
    turn_model: torch.Tensor  # [batch]
    turn_left: torch.Tensor  # [batch] calls left in the turn
    calls: list[int]
    verifications: list[int]
    accepts: list[int]
    cache: torch.Tensor | None = None  # [n, batch, window, vocab] logits, slot j = position n_commit + j

    @classmethod
    def start(cls, prompt: torch.Tensor, gammas: list[int], max_new: int) -> "_TurnState":
        batch, prompt_len = prompt.shape
        n, device = len(gammas), prompt.device
        window = sum(gammas) + 1  # pending tokens never exceed sum(gammas) (one round of turns)
        tokens = torch.zeros(batch, prompt_len + max_new + window, dtype=torch.int64, device=device)
        tokens[:, :prompt_len] = prompt
        n_commit = torch.full((batch,), prompt_len, dtype=torch.int64, device=device)
        return cls(gammas=torch.tensor(gammas, dtype=torch.int64, device=device), tokens=tokens, n_commit=n_commit, n_total=n_commit.clone(),
                   generated_by=torch.zeros(batch, window, dtype=torch.int64, device=device),
                   coverage=torch.zeros(n, batch, dtype=torch.int64, device=device),
                   turn_model=torch.zeros(batch, dtype=torch.int64, device=device),
                   turn_left=torch.full((batch,), gammas[0], dtype=torch.int64, device=device),
                   calls=[0] * n, verifications=[0] * n, accepts=[0] * n)

    @property
    def window(self) -> int:
        return self.generated_by.shape[1]

    def call_models(self, models, done: torch.Tensor, temperature: float, generator) -> None:
        """1. One call of each model on the rows whose turn it is: it scores every pending
        token and samples one new token at the end."""
        device = self.tokens.device
        rows_all = torch.arange(self.tokens.shape[0], device=device)
        for m, model in enumerate(models):
            rows = rows_all[~done & (self.turn_model == m)]
            if rows.numel() == 0:
                continue
            length = int(self.n_total[rows].max())
            logits = _forward(model, self.tokens[rows, :length])  # [r, length, vocab]
            if self.cache is None:
                cache_dtype = torch.promote_types(logits.dtype, torch.float32)  # as probs_from_logits
                self.cache = torch.zeros(len(models), self.tokens.shape[0], self.window, logits.shape[-1],
                                         dtype=cache_dtype, device=device)
            slots = (self.n_commit[rows, None] - 1 + torch.arange(self.window, device=device)).clamp(max=length - 1)
            scored = logits.gather(1, slots[..., None].expand(-1, -1, logits.shape[-1])).to(self.cache.dtype)
            self.cache[m, rows] = scored  # [r, window, vocab]
            pending = self.n_total[rows] - self.n_commit[rows]
            probs = probs_from_logits(scored[torch.arange(rows.numel(), device=device), pending], temperature)
            new = sample_weighted(probs, draw_uniforms(generator, rows.numel(), 1, probs)[:, 0])
            self.tokens[rows, self.n_total[rows]] = new
            self.generated_by[rows, pending] = m
            self.n_total[rows] += 1
            self.coverage[m, rows] = pending + 1
            self.turn_left[rows] -= 1
            self.calls[m] += rows.numel()
        assert int((self.n_total - self.n_commit).max()) < self.window, "pending tokens overflow the window"

    def verify_front(self, ensemble_fn, done: torch.Tensor, temperature: float, generator, verifier) -> bool:
        """2. Verify the oldest pending token of every row where every model has scored it
        (one pass of Alg. 2's inner ``while``); ``False`` when no row had one. A rejection
        commits the residual token, drops the row's pending tokens and gives the turn to the
        default proposer."""
        device = self.tokens.device
        ready = ~done & (self.n_total > self.n_commit) & (self.coverage.min(dim=0).values >= 1)
        rows = torch.arange(self.tokens.shape[0], device=device)[ready]
        if rows.numel() == 0:
            return False
        front = self.cache[:, rows, 0]  # [n, r, vocab]
        proposer = self.generated_by[rows, 0]
        proposal_probs = probs_from_logits(front[proposer, torch.arange(rows.numel(), device=device)], temperature)
        r, x = ensemble_fn(front, temperature), self.tokens[rows, self.n_commit[rows]]
        if verifier is None:
            out = verify_against_ensemble(r, proposal_probs, x, generator)
        else:
            out = verifier(r, proposal_probs, x, proposer, generator)
        accepted = out.accepted_index == 0
        for m in range(len(self.calls)):
            self.verifications[m] += int((proposer == m).sum())
            self.accepts[m] += int((accepted & (proposer == m)).sum())
        self.tokens[rows, self.n_commit[rows]] = out.tokens
        self.n_commit[rows] += 1
        self.cache[:, rows] = self.cache[:, rows].roll(-1, dims=2)
        self.generated_by[rows] = self.generated_by[rows].roll(-1, dims=1)
        self.coverage[:, rows] -= 1
        rejected = rows[~accepted]
        self.n_total[rejected] = self.n_commit[rejected]
        self.coverage[:, rejected] = 0
        self.turn_model[rejected] = 0
        self.turn_left[rejected] = self.gammas[0]
        return True

    def pass_turns(self, done: torch.Tensor) -> None:
        """3. A finished turn passes to the model that has scored the fewest pending tokens
        (ties to the lowest index)."""
        ended = torch.arange(self.tokens.shape[0], device=self.tokens.device)[~done & (self.turn_left == 0)]
        nxt = self.coverage[:, ended].argmin(dim=0)
        self.turn_model[ended] = nxt
        self.turn_left[ended] = self.gammas[nxt]


def ensemble_autoregressive_decode(
    models,
    prompt_ids,
    ensemble: str | Ensemble = "weighted",
    *,
    weights: Sequence[float] | None = None,
    lam: float | None = None,
    mu: float | None = None,
    temperature: float = 1.0,
    max_new_tokens: int = 32,
    generator: torch.Generator | None = None,
    device=None,
    dtype: torch.dtype | None = None,
) -> EnsembleDecodeResult:
    """The plain ensemble sampler (the paper's baseline "WE"/"CD"): every model is called
    for every token and ``x_t ~ r_t`` directly. Same arguments as
    :func:`speculative_ensemble_decode` (no ``gammas``)."""
    start = time.perf_counter()
    models, device = _check_models(models, device, dtype)
    max_new = _check_length(max_new_tokens)
    ensemble_fn = make_ensemble(ensemble, len(models), weights=weights, lam=lam, mu=mu)
    ids = _check_prompts(prompt_ids, device)
    batch, prompt_len = ids.shape
    for _ in range(max_new):
        logits = torch.stack([_forward(model, ids)[:, -1] for model in models])  # [n, batch, vocab]
        r = ensemble_fn(logits, temperature)
        ids = torch.cat([ids, sample_weighted(r, draw_uniforms(generator, batch, 1, r)[:, 0])[:, None]], dim=1)
    return EnsembleDecodeResult(
        tokens=ids[:, prompt_len:].clone(),
        model_calls=[batch * max_new] * len(models),
        verifications=[0] * len(models),
        accepts=[0] * len(models),
        wall_seconds=time.perf_counter() - start,
        method="ensemble",
    )
