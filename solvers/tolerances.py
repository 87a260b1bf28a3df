"""Named tolerances of the solver layer, defined once.

``solvers`` sits below ``otm`` and cannot import ``otm.tolerances``; these carry the same
values where the meaning is the same.
"""

#: A float backend's "optimal" answer is verified before it is returned: the primal
#: residuals (equalities, inequalities, bounds), the dual sign/reduced-cost violations and
#: the duality gap, each divided by ``1 + `` the largest magnitude in the data it involves,
#: must not exceed this. Same value as ``otm.tolerances.FEASIBILITY_TOLERANCE``. It is also
#: the feasibility tolerance handed to the float solvers (HiGHS' own default is 1e-7), so
#: that "infeasible" and "verified feasible" are judged at the same scale.
FEASIBILITY_TOLERANCE = 1e-9


#: Max-flow certificate: |cut capacity - flow value| <= this * (1 + |flow value|), and
#: flow conservation / capacity violations <= this * (1 + largest capacity).
FLOW_TOLERANCE = 1e-9
