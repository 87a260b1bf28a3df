"""Holding real verifiers to the exact laws: recordings of a decoding run against the
optimum (``otm validate``), your own verifier against its exact law and the optimum
(:mod:`decoding.validation.own_verifier`; chains and trees:
:mod:`decoding.validation.own_tree_verifier`), and the statistics both use."""
