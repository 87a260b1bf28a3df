"""Replaying a verifier's fixed-shape GPU work as CUDA graphs.

On a GPU, a verification at the batch sizes of decoding is bound by kernel launches, not
by memory traffic: at ``V = 151,936`` and 64 rows, the optimal verifier's full path
(:func:`decoding.verifiers.optimal.iid.verify_sorted`) is about 400 torch operations and 250
kernels, and took about 6 ms per call on an H200 run eagerly, 8 rows about 4 ms
(docs/optimal-verifier.md#on-a-gpu; 0.9 ms at 8 rows replayed). A CUDA graph records those kernels once and
launches them again
with one call (PyTorch, "CUDA Graphs", ``torch.cuda.graph``). The kernels are the same, so a
replay computes the same floats as the eager call, bit for bit.

:class:`GraphedFunction` wraps a function of tensors that returns a tuple of tensors and
does nothing a capture forbids (no host synchronisation, no control flow on tensor values,
no random draws: the uniforms are an input). Per input signature (shapes, dtypes, device)
the first call runs eagerly (the warm-up a capture needs) and the second captures; later
calls copy their inputs into the captured ones, replay, and clone the outputs. A capture
that fails (a function or torch build doing something a capture forbids) is said once in
a ``RuntimeWarning``, and the function runs eagerly from then on: the same results, slower.

Memory: every graph of one :class:`GraphedFunction` draws from one private memory pool
(``torch.cuda.graph_pool_handle``), so the graphs together hold about the peak of one
call, not one peak per shape. That is safe here because replays run one at a time on the
caller's stream and each replay's outputs are cloned before anything else replays: a
later graph may reuse an earlier one's freed work memory, never memory that is read
afterwards. At most :data:`MAX_GRAPHS` signatures are kept (the least recently used is
dropped), since decoding sees a new batch size whenever the number of open rows changes;
each also keeps a copy of its inputs (two ``[rows, V]`` arrays: 78 MB in float32 at 64 rows
and ``V = 151,936``). A capture is not free: ``torch.cuda.graph`` synchronises the device and
empties torch's allocator cache first, so a decode that keeps meeting more than
:data:`MAX_GRAPHS` new batch shapes recaptures each time; we have not measured that case.
"""
from __future__ import annotations

import warnings
from collections import OrderedDict
from typing import Callable

import torch

#: Input signatures kept captured per :class:`GraphedFunction`.
MAX_GRAPHS = 16
#: Signatures remembered as called once (forgotten all together beyond this many).
SEEN_LIMIT = 1024

Signature = tuple[tuple[tuple[int, ...], torch.dtype, torch.device], ...]


class _Graph:
    """One captured call: its static inputs, the graph, its static outputs."""

    def __init__(self, function: Callable[..., tuple[torch.Tensor, ...]], tensors: tuple[torch.Tensor, ...], pool) -> None:
        self.inputs = tuple(torch.empty(t.shape, dtype=t.dtype, device=t.device).copy_(t) for t in tensors)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph, pool=pool):
            self.outputs = function(*self.inputs)

    def __call__(self, tensors: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
        for static, tensor in zip(self.inputs, tensors):
            static.copy_(tensor)
        self.graph.replay()
        return tuple(out.clone() for out in self.outputs)


class GraphedFunction:
    """``function(*tensors)`` (a tuple of tensors), replayed from a CUDA graph per input
    signature once that signature has been called before (module docstring). Inputs off
    CUDA, or on a torch build without CUDA, run eagerly."""

    def __init__(self, function: Callable[..., tuple[torch.Tensor, ...]], max_graphs: int = MAX_GRAPHS) -> None:
        self.function = function
        self.max_graphs = max_graphs
        self._graphs: OrderedDict[Signature, _Graph] = OrderedDict()
        self._seen: set[Signature] = set()
        self._pool = None
        #: Why a capture failed (then every call runs eagerly), or None.
        self.failed: str | None = None

    def __call__(self, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
        if not tensors or tensors[0].device.type != "cuda":
            return self.function(*tensors)
        signature = tuple((tuple(t.shape), t.dtype, t.device) for t in tensors)
        graph = self._graphs.get(signature)
        if graph is not None:
            self._graphs.move_to_end(signature)
            return graph(tensors)
        if signature not in self._seen:  # first call: eager, the warm-up of a later capture
            if len(self._seen) >= SEEN_LIMIT:
                self._seen.clear()
            self._seen.add(signature)
            return self.function(*tensors)
        if self.failed is not None:
            return self.function(*tensors)
        if self._pool is None:
            self._pool = torch.cuda.graph_pool_handle()
        try:
            graph = _Graph(self.function, tensors, self._pool)
        except RuntimeError as error:  # a capture this torch build refuses: eager from now on
            self.failed = f"{type(error).__name__}: {error}"
            warnings.warn(f"CUDA graph capture of {self.function.__qualname__} failed, running it eagerly: {self.failed}",
                          RuntimeWarning, stacklevel=2)
            return self.function(*tensors)
        self._graphs[signature] = graph
        if len(self._graphs) > self.max_graphs:
            self._graphs.popitem(last=False)
        return graph(tensors)

    @property
    def captured(self) -> int:
        """How many signatures are held as graphs."""
        return len(self._graphs)
