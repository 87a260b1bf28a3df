"""Holding real verifiers to the exact laws: recordings of a decoding run against the
optimum (``otm validate``), your own verifier against its exact law and the optimum, and
the statistics both use."""
