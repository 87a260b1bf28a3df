"""The passes up the ranks that set up one row of :mod:`decoding.verifiers.optimal_family.wor`."""
