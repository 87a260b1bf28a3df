"""The bug zoo: each class of sampler bug that shipped in an inference engine, as a fixture in
that engine's own layout, with its correct twin and the exact law of its output.

Each :class:`Bug` is built on a small instance chosen to show it (:func:`zoo` lists them).
The fixtures reproduce the *class* of each bug from its public report, written here in the
layouts of :mod:`decoding.certify.layouts`; they are not the engines' code.

========================  ==========================================  ==============================
bug                       stands for                                  what it does
========================  ==========================================  ==============================
block_tokenwise_residual  vllm-ascend #7807                           block verification with the
                                                                      token-wise criterion and the
                                                                      unadjusted residual
wrong_logits_slice        TensorRT-LLM #15098                         the target read from the next
                                                                      logits row
unsampled_q_top_k         transformers #47932                         drafts from top-k q, rejection
                                                                      with the unmasked q
bf16_drafts_fp32_check    DeepSpec #31                                drafts from bf16 logits,
                                                                      rejection with the fp32 q
greedy_at_temperature     SGLang #21275, #21369, #39253               argmax verification at T > 0
hub_above_0999            SpecHub authors' code                       the hub accepted whenever
                                                                      p(a) > 0.999
without_replacement_iid   Sequoia's "with replacement" sampler        drafts without replacement
                                                                      verified as i.i.d. (RRS)
========================  ==========================================  ==============================

The tree layouts' bugs (:func:`tree_zoo`, certified by :func:`decoding.certify.trees.assert_tree_lossless`;
each :class:`TreeBug` holds the exact law of the stream its output gives):

=============================  ==========================================  =========================
bug                            stands for                                  what it does
=============================  ==========================================  =========================
sglang_greedy_fallback         SGLang #21275, #31214, #39253               argmax tree verification
                                                                           at T > 0 (the fallback
                                                                           where the sampling kernel
                                                                           is missing)
sglang_stale_sibling_residual  no public report: SGLang's update of a      the token after rejected
                               rejected child removed                      children drawn from p,
                                                                           rejected ones included
eagle_unprocessed_bonus        SafeAILab/EAGLE ``evaluate_posterior``      the bonus token drawn from
                               before commit bf10ac5 (2025-04-08)          the raw logits, not the
                                                                           processed ones
trtllm_root_row_slice          TensorRT-LLM #15098 (a wrong logits         every tree position
                               slice in EAGLE-3 dynamic-tree rejection     verified against its
                               sampling)                                   request's root row
=============================  ==========================================  =========================
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

import numpy as np
import torch

from otm.distributions import logits_to_probs, total_variation
from otm.draft_laws import draft_law, hub_token, iid_law, without_replacement_law
from otm.errors import NotApplicableError
from otm.rules import rule_law
from otm.rules.base import RuleLaw
from otm.sequences import SequenceModel, random_model, sequence_model, tree_walk_law

from decoding.verifiers import get_verifier
from decoding.verifiers.base import VerifierOutput

from .layouts.eagle import eagle_tree_verifier, evaluate_posterior
from .layouts.sglang import inverse_cdf, sglang_tree_verifier, tree_speculative_sampling_target_only, verify_tree_greedy
from .layouts.transformers import speculative_sampling, transformers_verifier
from .layouts.trtllm import trtllm_tree_verifier, verify_dynamic_tree_rejection
from .trees import sequence_law, stream_law
from .layouts.vllm import (
    PLACEHOLDER_TOKEN_ID,
    SpecDecodeMetadata,
    rejection_sampler,
    sentinel_law,
    vllm_chain_verifier,
    vllm_verifier,
)


@dataclass(frozen=True)
class Fixture:
    """What every fixture of the zoo has.

    Attributes:
        name, source (the public report), layout (the engine's, or ``"toolkit"``), what (one line).
        verify: the buggy sampler through its layout's adapter; correct: the same layout
            without the bug.
    """

    name: str
    source: str
    layout: str
    what: str
    verify: Callable
    correct: Callable


@dataclass(frozen=True)
class Bug(Fixture):
    """One bug class on its instance (layouts ``"vllm"``, ``"transformers"``, ``"toolkit"``).

    Attributes:
        verify: the toolkit's verifier contract, or the chain contract of
            :mod:`decoding.certify.chains` when ``chain``.
        p, q: the instance (``q``: the law the drafts really come from); k: drafts (chain
            length when ``chain``); scheme: the draft scheme.
        output_law: ``[V]`` the exact law of the buggy output (of the first emitted token for a
            chain); exact_tv: its total variation from ``p``.
    """

    p: np.ndarray
    q: np.ndarray
    k: int
    scheme: str = "iid"
    chain: bool = False
    output_law: np.ndarray | None = None
    exact_tv: float = 0.0


def single_draft_law(p: np.ndarray, drafted: np.ndarray, claimed: np.ndarray) -> np.ndarray:
    """``[V]`` the exact output law of single-draft speculative sampling (Leviathan et al. 2023,
    Alg. 1) whose draft comes from ``drafted`` but whose check and residual use ``claimed``:
    ``drafted(y) min(1, p(y) / claimed(y)) + (1 - sum_x drafted(x) min(1, p(x) / claimed(x)))
    norm(max(p - claimed, 0))(y)``; ``p`` when the two laws are equal."""
    keep = np.where(drafted > 0, np.minimum(1.0, p / np.where(claimed > 0, claimed, 1.0)) * (claimed > 0), 0.0)
    residual = np.maximum(p - claimed, 0.0)
    residual = residual / residual.sum() if residual.sum() > 0 else p
    return drafted * keep + (1 - float((drafted * keep).sum())) * residual


# --------------------------------------------------------------------------- the instances

#: Target and draft logits of the small instances (V = 8).
TARGET_LOGITS = np.array([2.0, 1.7, 1.5, 1.1, 0.7, 0.2, -0.3, -0.7])
DRAFT_LOGITS = np.array([0.9, 2.0, 0.2, 1.6, 1.3, 0.9, 0.4, 0.0])


#: The draft temperature of the without-replacement instance: a confident draft model, whose
#: repeated drafts are what drawing without replacement removes.
CONFIDENT_DRAFT_TEMPERATURE = 0.4


def _instance() -> tuple[np.ndarray, np.ndarray]:
    return logits_to_probs(TARGET_LOGITS, 1.0), logits_to_probs(DRAFT_LOGITS, 1.0)


# --------------------------------------------------------------------------- vLLM layout


def block_tokenwise_residual_sampler(metadata: SpecDecodeMetadata, draft_probs, logits, temperature, generator):
    """**Deliberately wrong** block verification in vLLM's layout (the class of vllm-ascend
    #7807 and #7603): the weights ``w_i = min(1, prod_{j <= i} p(x_j) / q(x_j))`` (the
    cumulative product of the ratios) are tested with the token-wise criterion (stop at
    ``tau = max{i : eta_i < w_i}``) instead of Sun et al.'s stop probabilities ``h_i`` (ICLR
    2025, arXiv:2403.10444, eq. 5), and the token after ``tau`` is drawn from the token-wise
    residual ``norm(max(p - q, 0))`` instead of ``norm(max(w_tau p - q, 0))`` (eq. 4)."""
    if len(set(metadata.num_draft_tokens)) != 1:
        raise NotApplicableError("this fixture takes requests with equal numbers of drafts")
    batch, g = len(metadata.num_draft_tokens), metadata.max_spec_len
    target = torch.softmax(logits.double() / temperature.double().repeat_interleave(g + 1).unsqueeze(1), dim=-1)
    drafts = metadata.draft_token_ids.long().view(batch, g)
    rows = metadata.target_logits_indices.long().view(batch, g)
    p_x = target[rows, drafts]
    q_x = draft_probs.double().view(batch, g, -1).gather(2, drafts.unsqueeze(2)).squeeze(2)
    weights = torch.cumprod(p_x / q_x, dim=1).clamp(max=1.0)
    coins = torch.rand(batch, g, generator=generator, dtype=torch.float64, device=logits.device)
    passed = coins < weights
    tau = torch.where(passed, torch.arange(1, g + 1, device=logits.device), 0).amax(dim=1)
    at = torch.clamp(tau, max=g - 1)
    residual = (target[rows.gather(1, at.unsqueeze(1)).squeeze(1)] - draft_probs.double().view(batch, g, -1)[
        torch.arange(batch), at]).clamp(min=0)
    law = torch.where((tau < g).unsqueeze(1), residual, target[metadata.bonus_logits_indices.long()])
    token = torch.multinomial(law / law.sum(dim=1, keepdim=True), 1, generator=generator).squeeze(1)
    out = torch.full((batch, g + 1), PLACEHOLDER_TOKEN_ID, dtype=torch.int64, device=logits.device)
    positions = torch.arange(g + 1, device=logits.device)
    padded = torch.cat([drafts, drafts[:, :1]], dim=1)
    out = torch.where(positions < tau.unsqueeze(1), padded, out)
    out = torch.where(positions == tau.unsqueeze(1), token.unsqueeze(1), out)
    return out.to(torch.int32)


def _block_bug_first_token_law(p: np.ndarray, q: np.ndarray, g: int) -> np.ndarray:
    """Exact law of the first emitted token of :func:`block_tokenwise_residual_sampler` on a
    context-free chain (every chain of ``q^g`` enumerated)."""
    law = iid_law(q, g)
    weights = np.minimum(1.0, np.cumprod(p[law.tuples] / q[law.tuples], axis=1))  # [T, g]
    none_after = np.concatenate([np.cumprod((1 - weights)[:, ::-1], axis=1)[:, ::-1], np.ones((len(weights), 1))], axis=1)
    stop_at_zero = none_after[:, 0]  # every coin failed: tau = 0
    residual = np.maximum(p - q, 0.0)
    residual /= residual.sum()
    out = np.bincount(law.tuples[:, 0], weights=law.probs * (1 - stop_at_zero), minlength=p.size)
    return out + float((law.probs * stop_at_zero).sum()) * residual


def wrong_logits_slice_sampler(metadata: SpecDecodeMetadata, draft_probs, logits, temperature, generator):
    """**Deliberately wrong**: vLLM's rejection sampler with each draft's target read one
    logits row further (the class of TensorRT-LLM #15098, a wrong logits slice in EAGLE-3
    tree rejection sampling): with one draft the row read is the bonus row."""
    shifted = replace(metadata, target_logits_indices=metadata.target_logits_indices + 1)
    return rejection_sampler(shifted, draft_probs, logits, temperature, generator)


def greedy_at_temperature_sampler(metadata: SpecDecodeMetadata, draft_probs, logits, temperature, generator):
    """**Deliberately wrong**: argmax verification forced whatever the temperature (the class
    of SGLang #21275, #21369, #39253): accept a draft only if it is the target's argmax, emit
    the argmax."""
    return rejection_sampler(metadata, draft_probs, logits, torch.zeros_like(temperature), generator)


def claimed_draft_probs(sampler, claimed: np.ndarray):
    """**Deliberately wrong**: ``sampler`` handed the draft law ``claimed`` (``[V]``) at every
    draft, whatever the drafts were sampled from (DeepSpec #31: drafts sampled from bf16
    logits, the rejection computed with the fp32 distribution)."""
    claimed_t = torch.as_tensor(claimed)

    def wrong(metadata, draft_probs, logits, temperature, generator):
        return sampler(metadata, claimed_t.to(draft_probs).expand_as(draft_probs).contiguous(), logits, temperature,
                       generator)

    return wrong


# --------------------------------------------------------------------------- transformers layout


def unsampled_candidate_logits(speculative_sampling_function, claimed: np.ndarray):
    """**Deliberately wrong** (the class of transformers #47932): a candidate generator that
    samples its drafts after top-k but returns the logits before it, so
    ``_speculative_sampling`` divides by a ``q`` the drafts did not come from."""
    claimed_logits = torch.log(torch.as_tensor(claimed))

    def wrong(candidate_input_ids, candidate_logits, candidate_length, new_logits):
        logits = claimed_logits.to(candidate_logits).expand_as(candidate_logits)
        return speculative_sampling_function(candidate_input_ids, logits, candidate_length, new_logits)

    return wrong


# --------------------------------------------------------------------------- toolkit layout


def hub_above_0999_verifier(target_probs, draft_probs, draft_tokens, generator):  # [b, V], [b, 2, V], [b, 2]
    """**Deliberately wrong** SpecHub (Sun et al. 2024, Alg. 3): the hub ``a = argmax q`` is
    output, without a test, whenever ``p(a) > 0.999`` (as in the SpecHub authors' code); lossy
    for ``0.999 < p(a) < 1``."""
    out = get_verifier("spechub").verify(target_probs, draft_probs, draft_tokens, generator)
    hub = draft_probs[:, 0].argmax(dim=-1)
    sure = target_probs.gather(1, hub.unsqueeze(1)).squeeze(1) > 0.999
    position = (draft_tokens == hub.unsqueeze(1)).to(torch.int8).argmax(dim=1)
    return VerifierOutput(torch.where(sure, hub, out.tokens), torch.where(sure, position, out.accepted_index))


def _rrs_on(drafts_law, p: np.ndarray, q: np.ndarray, k: int) -> np.ndarray:
    """``[V]`` the exact output law of RRS (i.i.d. kernel) on the tuples of ``drafts_law``."""
    exact = rule_law("rrs", p, q, k, method="enumeration")
    iid = exact.draft_law
    kernel = np.asarray(exact.details["coupling"], dtype=np.float64) / np.asarray(iid.probs, dtype=np.float64)[:, None]
    index = {tuple(t): i for i, t in enumerate(iid.tuples.tolist())}
    rows = np.array([index[tuple(t)] for t in drafts_law.tuples.tolist()])
    return np.asarray(drafts_law.probs, dtype=np.float64) @ kernel[rows]


# --------------------------------------------------------------------------- the zoo


def zoo() -> list[Bug]:
    """Every bug class of the module docstring on its instance."""
    p, q = _instance()
    bugs = []

    g = 3
    bugs.append(Bug(
        "block_tokenwise_residual", "vllm-ascend #7807", "vllm",
        "block verification with the token-wise acceptance test and the unadjusted residual",
        vllm_chain_verifier(block_tokenwise_residual_sampler), vllm_chain_verifier(rejection_sampler), p, q, g,
        chain=True, output_law=_block_bug_first_token_law(p, q, g)))

    sentinel = sentinel_law(torch.as_tensor(p).unsqueeze(0))[0].numpy()
    bugs.append(Bug(
        "wrong_logits_slice", "TensorRT-LLM #15098", "vllm", "each draft checked against the next logits row",
        vllm_verifier(wrong_logits_slice_sampler), vllm_verifier(rejection_sampler), p, q, 1, output_law=sentinel))

    top_k = logits_to_probs(DRAFT_LOGITS, 1.0, top_k=3)
    bugs.append(Bug(
        "unsampled_q_top_k", "transformers #47932", "transformers",
        "drafts sampled after top-k, rejection computed with the q before it",
        transformers_verifier(unsampled_candidate_logits(speculative_sampling, q)),
        transformers_verifier(speculative_sampling), p, top_k, 1, output_law=single_draft_law(p, top_k, q)))

    logits = torch.as_tensor(3 * DRAFT_LOGITS, dtype=torch.float32)
    fp32 = torch.softmax(logits, dim=-1).double().numpy()
    bf16 = torch.softmax(logits.to(torch.bfloat16).float(), dim=-1).double().numpy()
    bf16 /= bf16.sum()
    bugs.append(Bug(
        "bf16_drafts_fp32_check", "DeepSpec #31", "vllm", "drafts sampled from bf16 logits, rejection with the fp32 q",
        vllm_verifier(claimed_draft_probs(rejection_sampler, fp32)), vllm_verifier(rejection_sampler), p, bf16, 1,
        output_law=single_draft_law(p, bf16, fp32)))

    bugs.append(Bug(
        "greedy_at_temperature", "SGLang #21275, #21369, #39253", "vllm", "argmax verification forced at T > 0",
        vllm_verifier(greedy_at_temperature_sampler, temperature=0.8), vllm_verifier(rejection_sampler, temperature=0.8),
        p, q, 1, output_law=np.eye(p.size)[int(np.argmax(p))]))

    hub = hub_token(q)
    sure = np.full(p.size, 5e-4 / (p.size - 1))
    sure[hub] = 1 - 5e-4
    bugs.append(Bug(
        "hub_above_0999", "SpecHub authors' code", "toolkit", "the hub accepted whenever p(a) > 0.999",
        hub_above_0999_verifier, get_verifier("spechub").verify, sure, q, 2, scheme="hub", output_law=np.eye(p.size)[hub]))

    k, confident = 3, logits_to_probs(DRAFT_LOGITS, CONFIDENT_DRAFT_TEMPERATURE)
    bugs.append(Bug(
        "without_replacement_iid", "Sequoia's \"with replacement\" sampler", "toolkit",
        "drafts drawn without replacement (multinomial(replacement=False)) verified by i.i.d. RRS",
        get_verifier("rrs").verify, get_verifier("rrs_wor").verify, p, confident, k, scheme="without_replacement",
        output_law=_rrs_on(without_replacement_law(confident, k), p, confident, k)))
    return [replace(bug, exact_tv=total_variation(bug.output_law, bug.p)) for bug in bugs]


# --------------------------------------------------------------------------- tree layouts


@dataclass(frozen=True)
class TreeBug(Fixture):
    """One bug class of a tree layout on its instance (layouts ``"sglang"``, ``"eagle"``,
    ``"trtllm"``; ``verify`` and ``correct`` in the tree verifier contract of
    :mod:`decoding.certify.trees`).

    Attributes:
        model: the target and draft over sequences; tree: the full ``k``-ary tree (``kary:k,d``);
            scheme: the sibling law.
        stream_law: ``[V^(d + 1)]`` the exact law of the first ``d + 1`` stream tokens of the buggy
            sampler (:func:`decoding.certify.trees.stream_law`); exact_tv: its TV from ``P``.
    """

    model: SequenceModel
    tree: str
    scheme: str
    stream_law: np.ndarray
    exact_tv: float


def target_only_node_law(scheme: str, defect: str | None = None):
    """``(p, q, k) -> RuleLaw``: the exact law at one node of target-only tree sampling (SGLang's
    and EAGLE's, :mod:`decoding.certify.layouts`), for :func:`otm.sequences.tree_walk_law`: ``Y ~ p``
    and the walk moves to the child equal to ``Y``, so ``accepted_per_token = p m`` with ``m(y) =
    P(y in S(X))``, the ``k`` distinct children drawn with ``scheme`` (a single child from ``q``).
    ``defect="stale_residual"``: after every child is rejected the token comes from ``p`` itself,
    so the output is ``p m + (1 - sum p m) p``; ``defect="greedy"``: ``Y`` is the argmax of ``p``."""

    def law(p, q, k: int) -> RuleLaw:
        p = np.asarray(p, dtype=np.float64)
        member = np.asarray(draft_law(scheme if k > 1 else "iid", np.asarray(q, dtype=np.float64), k).membership_probs(),
                            dtype=np.float64)
        drawn = np.eye(p.size)[int(np.argmax(p))] if defect == "greedy" else p
        accepted = drawn * member
        output = accepted + (1 - accepted.sum()) * p if defect == "stale_residual" else drawn
        return RuleLaw(float(accepted.sum()), output, None, {"accepted_per_token": accepted})

    return law


def greedy_fallback_sampler(predicts, accept_index, accept_token_num, candidates, retrive_index, retrive_next_token,
                            retrive_next_sibling, uniform_samples, uniform_samples_for_final_sampling, target_probs,
                            draft_probs, **unused):
    """**Deliberately wrong** (the class of SGLang #21275, #31214, #39253): where the tree
    sampling kernel is missing (ROCm) the verify step falls back to greedy tree verification
    whatever the temperature: the child equal to the target's argmax is accepted, the argmax
    emitted."""
    verify_tree_greedy(predicts, accept_index, accept_token_num, candidates, retrive_index, retrive_next_token,
                       retrive_next_sibling, target_probs.argmax(dim=-1))


def stale_sibling_residual_sampler(predicts, accept_index, accept_token_num, candidates, retrive_index,
                                   retrive_next_token, retrive_next_sibling, uniform_samples,
                                   uniform_samples_for_final_sampling, target_probs, draft_probs, **kwargs):
    """**Deliberately wrong**: SGLang's target-only sampler without the update of a rejected
    child (its ``draft_probs`` entry set to ``p(x)``), so after every child of a node is rejected
    the token comes from ``p`` there, a rejected child included."""
    tree_speculative_sampling_target_only(predicts, accept_index, accept_token_num, candidates, retrive_index,
                                          retrive_next_token, retrive_next_sibling, uniform_samples,
                                          uniform_samples_for_final_sampling, target_probs, draft_probs, **kwargs)
    rows = torch.arange(candidates.shape[0], device=candidates.device)
    node = accept_index.long()[rows, accept_token_num.long()] - retrive_index[:, 0]
    stopped = retrive_next_token[rows, node] >= 0  # a node with children: every one was rejected
    redrawn = inverse_cdf(target_probs[rows, node], uniform_samples_for_final_sampling)
    last = retrive_index[rows, node]
    predicts[last[stopped]] = redrawn[stopped].to(predicts.dtype)


def unprocessed_bonus(evaluate_posterior_function):
    """**Deliberately wrong** (SafeAILab/EAGLE's ``evaluate_posterior`` from 2024-04 until
    commit bf10ac5 of 2025-04-08): when the accepted node is a leaf (or at the full depth) the
    bonus token's law is the softmax of the raw logits, without the logits processor
    (temperature); the rejections and the residual use the processed ones."""

    def wrong(logits, candidates, logits_processor):
        best, length, sample_p = evaluate_posterior_function(logits, candidates, logits_processor)
        sharing = (candidates[:, : length + 1] == candidates[int(best), : length + 1]).all(dim=1)
        leaf = length + 1 == candidates.shape[1] or bool((candidates[sharing, length + 1] < 0).all())
        if logits_processor is not None and leaf:
            sample_p = torch.softmax(logits[int(best), length], dim=-1)
        return best, length, sample_p

    return wrong


def root_row_slice(sampler):
    """**Deliberately wrong** (the class of TensorRT-LLM #15098, "incorrect logits slice for
    verification" in EAGLE-3 dynamic-tree rejection sampling; the PR's public text does not say
    which slice, so this is one representative): ``target_logits_tree`` holds each request's
    root row at every tree position (one row per request repeated, as the linear path's slice
    has), so every child and every bonus token is judged by the root's law."""

    def wrong(**kwargs):
        logits = kwargs["target_logits_tree"]
        per_request = logits.reshape(kwargs["num_gens"], -1, logits.shape[-1])
        kwargs["target_logits_tree"] = per_request[:, :1].expand_as(per_request).reshape(logits.shape)
        return sampler(**kwargs)

    return wrong


#: The tree bugs' model: V = 4, trees up to depth 2.
TREE_MODEL_SEED = 7

#: The temperature of the EAGLE instance: a low one, whose processed law is far from the raw one.
EAGLE_TEMPERATURE = 0.3


def _tree_bug(name, source, layout, what, verify, correct, model, k, depth, scheme, node_law, walk_row=None) -> TreeBug:
    """A :class:`TreeBug` on ``kary:k,depth``; its stream law from the walk's exact law
    (:func:`otm.sequences.tree_walk_law` on the target rows the sampler uses, ``walk_row(prefix,
    p)``, default ``p``) continued by ``model``'s target."""
    walk_model = model if walk_row is None else sequence_model(
        {s: walk_row(s, row) for s, row in model.target_table.items()}, model.draft_table)
    law = stream_law(model, tree_walk_law(walk_model, depth, k, node_law), depth + 1)
    return TreeBug(name, source, layout, what, verify, correct, model, f"kary:{k},{depth}", scheme, law,
                   total_variation(law, sequence_law(model, depth + 1)))


def tree_zoo() -> list[TreeBug]:
    """Every tree-layout bug class of the module docstring on its instance."""
    model = random_model(4, 3, np.random.default_rng(TREE_MODEL_SEED))
    scheme = "without_replacement"
    sglang = sglang_tree_verifier(tree_speculative_sampling_target_only)
    return [
        _tree_bug("sglang_greedy_fallback", "SGLang #21275, #31214, #39253", "sglang",
                  "argmax tree verification at T > 0 where the sampling kernel is missing",
                  sglang_tree_verifier(greedy_fallback_sampler), sglang, model, 2, 2, scheme,
                  target_only_node_law(scheme, "greedy"),
                  walk_row=lambda s, p: np.eye(p.size)[int(np.argmax(p))] if len(s) == 2 else p),
        _tree_bug("sglang_stale_sibling_residual", "no public report: SGLang's update of a rejected child removed",
                  "sglang", "the token after rejected children drawn from p, rejected ones included",
                  sglang_tree_verifier(stale_sibling_residual_sampler), sglang, model, 2, 2, scheme,
                  target_only_node_law(scheme, "stale_residual")),
        _tree_bug("eagle_unprocessed_bonus", "SafeAILab/EAGLE evaluate_posterior before bf10ac5 (2025-04-08)", "eagle",
                  "the bonus token drawn from the raw logits, not the processed ones",
                  eagle_tree_verifier(unprocessed_bonus(evaluate_posterior), temperature=EAGLE_TEMPERATURE),
                  eagle_tree_verifier(evaluate_posterior, temperature=EAGLE_TEMPERATURE), model, 3, 1, scheme,
                  target_only_node_law(scheme),
                  walk_row=lambda s, p: p**EAGLE_TEMPERATURE / (p**EAGLE_TEMPERATURE).sum() if len(s) == 1 else p),
        _tree_bug("trtllm_root_row_slice", "TensorRT-LLM #15098", "trtllm",
                  "every tree position verified against its request's root logits row",
                  trtllm_tree_verifier(root_row_slice(verify_dynamic_tree_rejection)),
                  trtllm_tree_verifier(verify_dynamic_tree_rejection), model, 2, 2, scheme,
                  target_only_node_law(scheme), walk_row=lambda s, p: model.target_table[()]),
    ]


__all__ = ["Bug", "Fixture", "TreeBug", "root_row_slice", "single_draft_law", "target_only_node_law", "tree_zoo", "zoo"]
