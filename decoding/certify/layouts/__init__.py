"""Adapters from inference engines' calling conventions to the toolkit's verifier contracts,
one file per engine, each with a plain PyTorch implementation of the engine's published
algorithm in that engine's layout: :mod:`.vllm` (vLLM's rejection sampler) and
:mod:`.transformers` (Hugging Face transformers' ``_speculative_sampling``)."""
