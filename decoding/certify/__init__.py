"""Certify the samplers that inference engines ship: is the output law ``p``, is the
verifier the rule it claims, how far is its acceptance from the optimum, and how large a bug
the run could have seen (docs/certify-engine-sampler.md).

>>> import numpy as np
>>> from decoding.verifiers import get_verifier
>>> p, q = np.array([0.5, 0.3, 0.2]), np.array([0.2, 0.3, 0.5])
>>> certificate = assert_rule(get_verifier("rrs").verify, "rrs", p, q, 2, n=20_000)
>>> certificate.output_test.passed, certificate.power.tv < 0.05
(True, True)
"""
from .assertions import (
    DEFAULT_ALPHA,
    DEFAULT_ROWS,
    AcceptanceMismatch,
    Certificate,
    CertificationError,
    IndexMismatch,
    NoPower,
    OutputLawMismatch,
    Power,
    RuleMismatch,
    Undetectable,
    assert_lossless,
    assert_rule,
    power,
)
from .bounds import samples_needed

__all__ = [
    "DEFAULT_ALPHA", "DEFAULT_ROWS", "AcceptanceMismatch", "Certificate", "CertificationError", "IndexMismatch",
    "NoPower", "OutputLawMismatch", "Power", "RuleMismatch", "Undetectable", "assert_lossless", "assert_rule", "power",
    "samples_needed",
]
