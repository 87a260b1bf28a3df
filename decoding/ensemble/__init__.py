"""The Speculative Ensemble (Fu et al., ICML 2025): verification against an ensemble law
``r = E(q, p)`` and the alternate-proposal decoding loop."""
from decoding.ensemble.loop import ensemble_autoregressive_decode, speculative_ensemble_decode
from decoding.ensemble.verify import make_ensemble, verify_against_ensemble

__all__ = ["ensemble_autoregressive_decode", "make_ensemble", "speculative_ensemble_decode", "verify_against_ensemble"]
