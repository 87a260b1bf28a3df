"""Named tolerances, defined once (DESIGN.md: name a tolerance once and use it)."""

#: A probability vector whose sum differs from 1 by more than this is rejected; within
#: it, it is renormalised (float noise from softmax or file round-trips).
SUM_TOLERANCE = 1e-6

#: Two formulations of the same optimum, or an exact law and its closed form, must agree
#: to this in float64 (DESIGN.md "How to know it is right").
AGREEMENT_TOLERANCE = 1e-9

#: Primal/dual feasibility slack accepted when checking a float LP certificate.
FEASIBILITY_TOLERANCE = 1e-9
