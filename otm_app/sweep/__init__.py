"""``otm sweep``: exact analysis of every position of a corpus, distributed with Dask.

A corpus (:mod:`otm.corpus`) is cut into tasks of a few positions; each task computes the
optima and rules of :mod:`otm.positions` for every temperature, top-p and ``k`` of the
sweep and writes its rows as one Parquet file (:mod:`otm_app.sweep.tasks`); the engine
(:mod:`otm_app.sweep.engine`) runs the tasks on a Dask cluster (a local one by default,
any scheduler by address) with retries and progress, skipping the tasks whose file is
already written (resumption); :mod:`otm_app.sweep.summary` turns the table into means,
standard errors and figures.
"""
