"""Tiny causal language models built in code, for fast tests of the decoding loop.

They are ordinary transformers ``Qwen2ForCausalLM`` models (the architecture of the real
Qwen2.5 pair), so the loop runs the same code path on them as on real checkpoints:
4-D custom attention masks, explicit ``position_ids`` and a ``DynamicCache``. There is no
tokenizer: prompts and outputs are token ids.

The target is seeded random weights with a large initialisation scale (so that its
next-token distributions are far from uniform and depend on the context). The draft is the
target with every weight perturbed by Gaussian noise of relative size ``draft_noise``, so
draft and target differ but overlap (``draft_noise = 0`` gives ``q = p``).
"""
from __future__ import annotations

import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from decoding.models.hf import ModelPair

#: Standard deviation of the random initial weights: large enough that next-token
#: distributions are peaked (entropy well below log V) at hidden size 16-32.
TINY_INIT_SCALE = 0.3


def tiny_config(vocab_size: int = 8, hidden_size: int = 16, num_layers: int = 1, max_positions: int = 256) -> Qwen2Config:
    """A Qwen2 configuration with 2 query heads and 1 key/value head (grouped-query
    attention, as in Qwen2.5), untied embeddings, SDPA attention (as real checkpoints load by default)."""
    config = Qwen2Config(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=max_positions,
        tie_word_embeddings=False,
        initializer_range=TINY_INIT_SCALE,
        use_sliding_window=False,
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=None,
    )
    config._attn_implementation = "sdpa"
    return config


def tiny_causal_lm(config: Qwen2Config, seed: int, device="cpu", dtype=torch.float32) -> Qwen2ForCausalLM:
    """A ``Qwen2ForCausalLM`` with seeded weights ``N(0, TINY_INIT_SCALE^2)`` (norm weights 1)."""
    generator = torch.Generator().manual_seed(seed)
    model = Qwen2ForCausalLM(config)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("norm.weight"):
                param.fill_(1.0)
            else:
                param.copy_(torch.randn(param.shape, generator=generator) * TINY_INIT_SCALE)
    return model.to(device=device, dtype=dtype).eval()


def build_tiny_pair(
    vocab_size: int = 8,
    hidden_size: int = 16,
    num_layers: int = 1,
    seed: int = 0,
    draft_noise: float = 0.5,
    device="cpu",
    dtype=torch.float32,
) -> ModelPair:
    """A draft/target :class:`~decoding.models.hf.ModelPair` of tiny Qwen2 models
    (``tokenizer=None``, ``name="tiny"``). The draft is the target's weights plus
    ``draft_noise * TINY_INIT_SCALE`` Gaussian noise (seeded by ``seed + 1``)."""
    config = tiny_config(vocab_size, hidden_size, num_layers)
    target = tiny_causal_lm(config, seed, device, dtype)
    draft = tiny_causal_lm(config, seed, device, dtype)
    generator = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for param in draft.parameters():
            noise = torch.randn(param.shape, generator=generator) * (draft_noise * TINY_INIT_SCALE)
            param.add_(noise.to(device=param.device, dtype=param.dtype))
    return ModelPair(draft=draft, target=target, tokenizer=None, name="tiny")
