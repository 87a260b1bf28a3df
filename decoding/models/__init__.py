"""Draft/target model pairs: any Hugging Face causal-LM pair sharing a tokenizer
(:mod:`decoding.models.hf`) and the embedded Qwen2.5-Coder pair (:mod:`decoding.models.qwen`)."""
from decoding.models.errors import (
    ModelHashMismatchError,
    ModelNotFoundError,
    ModelPackageMissingError,
    TokenizerMismatchError,
)
from decoding.models.hf import ModelPair, check_tokenizers_agree, load_pair
from decoding.models.qwen import QwenCachePaths, ensure_qwen_cache, load_qwen_pair

__all__ = [
    "ModelHashMismatchError",
    "ModelNotFoundError",
    "ModelPackageMissingError",
    "ModelPair",
    "QwenCachePaths",
    "TokenizerMismatchError",
    "check_tokenizers_agree",
    "ensure_qwen_cache",
    "load_pair",
    "load_qwen_pair",
]
