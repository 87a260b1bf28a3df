"""The optimal verifiers, one module per role.

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
(:data:`otm.rules.registry.RULE_SPECS`, field ``verifier``) names them ``optimal_family.wor`` and
``optimal_family.latent``. This package imports none of its modules, so the module of another
draft law (the i.i.d. verifier, ``iid``) is added beside them with its registry entry alone.
"""
