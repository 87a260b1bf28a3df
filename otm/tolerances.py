"""Named tolerances, defined once and used everywhere (docs/notation.md lists them)."""
import math

#: The floor of the sum tolerance: a float64 probability vector whose sum differs from 1
#: by more than ``max(SUM_TOLERANCE, softmax_sum_tolerance(dtype, V))`` is rejected;
#: within it, it is renormalised in float64 (float noise from softmax or file round-trips).
SUM_TOLERANCE = 1e-6

#: Machine epsilon of the dtypes a softmax is computed in (bfloat16 and float16 outputs
#: are accumulated in float32 by torch and rounded once).
DTYPE_EPSILON = {"float64": 2.0**-52, "float32": 2.0**-23, "float16": 2.0**-10, "bfloat16": 2.0**-7}


def softmax_sum_tolerance(dtype: str, vocab_size: int) -> float:
    """How far from 1 the sum of a correct softmax output in ``dtype`` can be, as a float64
    sum, over ``vocab_size`` tokens:

        eps(dtype) + eps(accumulation) * sqrt(V),

    the rounding of every output to ``dtype`` (each relative ``eps/2``, at most ``eps`` in
    total) plus the error of the normalising sum, accumulated in float32 for the 16- and
    32-bit dtypes (float64 for float64), which grows like ``sqrt(V)`` for torch's blocked
    reductions. Measured worst cases (``scripts/bench_softmax_sums.py``: torch.softmax of
    Gaussian logits, scales 0.1-30, T = 0.1-2, V up to 151,936) are 3-4x below it:
    float32 1.3e-5 (rule 4.6e-5), bfloat16 2.5e-3 (7.9e-3), float16 3.4e-4 (1.0e-3).
    An unknown dtype gets the float64 rule."""
    eps = DTYPE_EPSILON.get(dtype, DTYPE_EPSILON["float64"])
    accumulation = DTYPE_EPSILON["float64"] if dtype == "float64" else DTYPE_EPSILON["float32"]
    return eps + accumulation * math.sqrt(vocab_size)


def sum_tolerance(dtype: str, vocab_size: int) -> float:
    """The sum tolerance applied to an input of ``dtype`` with ``vocab_size`` tokens:
    ``max(SUM_TOLERANCE, softmax_sum_tolerance(dtype, vocab_size))``."""
    return max(SUM_TOLERANCE, softmax_sum_tolerance(dtype, vocab_size))

#: Two formulations of the same optimum, or an exact law and its closed form, must agree
#: to this in float64 (docs/notation.md, "Tolerances").
AGREEMENT_TOLERANCE = 1e-9

#: Primal/dual feasibility slack accepted when checking a float LP certificate.
FEASIBILITY_TOLERANCE = 1e-9
