"""The rules inside real decoding (torch): batched verifiers, draft trees, the decoding loop.

- :mod:`decoding.verifiers` - one batched, seeded sampler per rule (``get_verifier``), each
  beside a slow plain-Python reference (:mod:`decoding.verifiers.reference`);
- :mod:`decoding.runtime.trees`, :mod:`decoding.runtime.tree_attention`, :mod:`decoding.runtime.tree_walk`,
  :mod:`decoding.runtime.loop` - draft trees, one target forward per step, the verification walk
  (SpecTr, Sun et al. 2023, Alg. 3), ``speculative_decode``;
- :mod:`decoding.ensemble.loop` - the Speculative Ensemble (Speculative Ensemble, Fu et al. 2025);
- :mod:`decoding.runtime.recording`, :mod:`decoding.validation.recordings` - per-node recordings and their gap
  to the OTM optimum (``otm validate``); :mod:`decoding.validation.own_verifier` - validate your own verifier;
- :mod:`decoding.models` - the embedded Qwen pair, any Hugging Face pair, tiny test models;
  :mod:`decoding.models.teacher_forcing` - teacher-forced full distributions; :mod:`otm_app.report.run` -
  ``otm report``.

Device and dtype are always parameters: the same code runs on CPU and CUDA.
"""

try:
    import torch  # noqa: F401
except ImportError as exc:  # the decoding extra is optional
    raise ImportError(f"decoding needs torch ({exc}): pip install torch, then pip install 'otm-toolkit[decoding]'") from None
