"""Recursions over draft trees without Python's recursion limit.

A tree of depth ``D`` walked by a recursive function needs ``D`` nested calls, and CPython
stops at about a thousand (``RecursionError``), below the deepest tree the decoding loop
accepts (:data:`decoding.runtime.trees.MAX_TREE_NODES`). Here a recursive step is written
as a generator: it ``yield``\\ s the generator of a call it would have made and receives
that call's return value as the value of the ``yield``. :func:`run` keeps the pending
calls on a list instead of the interpreter's stack, so the depth is limited by memory only.

>>> def depth(children, node):
...     below = 0
...     for child in children[node]:
...         below = max(below, 1 + (yield depth(children, child)))
...     return below
>>> run(depth({i: [i + 1] for i in range(5000)} | {5000: []}, 0))
5000
"""
from __future__ import annotations

from collections.abc import Generator
from typing import Any

#: A recursive step: yields sub-steps, receives their results, returns its own.
Step = Generator[Any, Any, Any]


def run(step: Step):
    """The return value of ``step``, running every sub-step it yields (module docstring),
    depth first, each to completion before its caller resumes."""
    stack, value = [step], None
    while True:
        try:
            call = stack[-1].send(value)
        except StopIteration as finished:
            stack.pop()
            if not stack:
                return finished.value
            value = finished.value
        else:
            stack.append(call)
            value = None
