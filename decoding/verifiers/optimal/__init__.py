"""The optimal verifiers, one module per role.

- :mod:`.iid`: rule ``optimal`` (``k`` i.i.d. drafts: max-ratio priority with block exchanges);
  its full path sorts the row's ratio keys; :mod:`.unsorted` takes the same path without the
  sort on the CPU from 1,024 tokens (ratio buckets refined only where the draw reads them,
  compiled in :mod:`.unsorted_rows`); :mod:`.identical_drafts` decides rows whose drafts are one
  token from a bound, with one masked sum; :mod:`.row_passes` holds the compiled per-row passes
  these share; :mod:`.reference` is the plain-Python reference of ``iid`` and ``latent``;
- :mod:`.latent`: rule ``optimal_latent`` (the i.i.d. optimum on latent draws, drafts without
  replacement);
- :mod:`.wor`: rule ``optimal_wor`` (``k`` drafts without replacement, water levels); its one
  row's set-up is :mod:`.clock_masses` (the compiled clock integral, its kernels in
  :mod:`.clock_kernels`), whose pass up the ranks is taken by a backend of :mod:`.setup` (a
  registry with declared capabilities);
- :mod:`.pair`: the two-draft path of ``optimal_wor`` (``optimal_pair_wor`` is an old name of that
  rule), with :mod:`.pair_levels` (its compiled water levels) and :mod:`.pair_merged_rows` (a row
  without the sort);
- :mod:`.cache`: the sized least-recently-used store of their per-row caches.

Each verifier module follows :mod:`decoding.verifiers.protocol`; the registry
(:data:`otm.rules.registry.RULE_SPECS`, field ``verifier``) names them ``optimal.iid``,
``optimal.latent`` and ``optimal.wor``. This package imports none of its modules, so numba is
loaded only where a compiled path runs.
"""
