"""The rules inside real decoding (torch): batched verifiers, draft trees, the decoding loop.

- :mod:`decoding.verifiers` - one batched, seeded sampler per rule (``get_verifier``), each
  beside a slow plain-Python reference (:mod:`decoding.verifiers.reference`);
- :mod:`decoding.trees`, :mod:`decoding.tree_forward`, :mod:`decoding.tree_verify`,
  :mod:`decoding.loop` - draft trees, one target forward per step, the verification walk
  (seed 002 Alg. 3), ``speculative_decode``;
- :mod:`decoding.ensemble` - the Speculative Ensemble (seed 004);
- :mod:`decoding.recording`, :mod:`decoding.validate` - per-node recordings and their gap
  to the OTM optimum (``otm validate``); :mod:`decoding.byov` - validate your own verifier;
- :mod:`decoding.models` - the embedded Qwen pair, any Hugging Face pair, tiny test models;
  :mod:`decoding.scoring` - teacher-forced full distributions; :mod:`decoding.report` -
  ``otm report``.

Device and dtype are always parameters: the same code runs on CPU and CUDA.
"""
