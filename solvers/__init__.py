"""Generic LP and max-flow backends. Knows nothing of speculative decoding.

``solve(lp, backend="highs")`` dispatches to one of :data:`BACKENDS`;
``max_flow(edges_or_graph, source, sink)`` returns a flow with its min-cut certificate.
"""
from solvers.capabilities import BackendCapabilities
from solvers.certify import Certificate, certify
from solvers.errors import InvalidProblemError, SolverError, UnboundedFlowError, UnknownBackendError
from solvers.max_flow import FlowResult, check_flow, max_flow
from solvers.problem import LinearProgram, LPResult, LPStatus
from solvers.registry import BACKENDS, backend_capabilities, solve

__all__ = [
    "BACKENDS",
    "BackendCapabilities",
    "Certificate",
    "FlowResult",
    "InvalidProblemError",
    "LinearProgram",
    "LPResult",
    "LPStatus",
    "SolverError",
    "UnboundedFlowError",
    "UnknownBackendError",
    "backend_capabilities",
    "certify",
    "check_flow",
    "max_flow",
    "solve",
]
