"""Adapters from inference engines' calling conventions to the toolkit's verifier contracts,
one file per engine, each with a plain PyTorch implementation of the engine's published
algorithm in that engine's layout: :mod:`.vllm` (vLLM's rejection sampler),
:mod:`.transformers` (Hugging Face transformers' ``_speculative_sampling``), and, for draft
trees (:mod:`decoding.certify.trees`), :mod:`.sglang` (SGLang's tree speculative sampling),
:mod:`.eagle` (EAGLE's ``evaluate_posterior``) and :mod:`.trtllm` (TensorRT-LLM's EAGLE-3
dynamic-tree rejection sampling)."""
