"""The application layer: the ``otm`` command line and ``otm report``.

It sits above every library package (``solvers <- otm <- {proofs, decoding} <- otm_app``)
and is the only place that combines them; nothing imports it.
"""
