"""Every check, by paper, and the runner behind ``otm theorems``.

Each paper module exposes ``CHECKS = {id: fn(instances, rng) -> Check}``. The runner
gives every check its own generator (seeded from ``seed`` and the check's id), so a
check's result does not depend on which other checks ran; a check whose ``otm`` ingredient
is missing, or that raises, is reported as "not checkable" with the reason.
"""
from __future__ import annotations

import sys
import time
import traceback
import zlib
from typing import Callable

import numpy as np

from . import khisti, leviathan, sequences, spechub, spectr, speculative_ensemble, theory
from .check import NOT_CHECKABLE, Check

#: Paper names accepted by ``otm theorems --paper`` (one per paper), then "theory" (the toolkit's own
#: results, docs/theory.md), then "sequences" (chains and trees of drafts: block and traversal
#: verification, docs/sequences.md).
PAPERS = ("spechub", "khisti", "spectr", "leviathan", "ensemble", "theory", "sequences")

_MODULES = {"spechub": spechub, "khisti": khisti, "spectr": spectr, "leviathan": leviathan, "ensemble": speculative_ensemble, "theory": theory,
            "sequences": sequences}

#: Default instance budget per randomized check: the full run takes a minute or two on 2 cores.
DEFAULT_INSTANCES = 60

#: The most instances per check ``run_checks`` takes: the default's run is a minute or two,
#: so this many would run for weeks.
MAX_INSTANCES = 100_000


def registry(paper: str | None = None) -> dict[str, Callable]:
    """``{check id: fn(instances, rng)}`` for one paper (or all, in seed order)."""
    from otm.errors import UnknownNameError

    if paper is not None and paper not in _MODULES:
        raise UnknownNameError(f"unknown paper {paper!r}; choose one of {', '.join(PAPERS)}")
    papers = PAPERS if paper is None else (paper,)
    return {cid: fn for name in papers for cid, fn in _MODULES[name].CHECKS.items()}


def run_check(check_id: str, fn: Callable, instances: int, seed: int) -> Check:
    """Run one check with its own generator (seeded by ``seed`` and the check's id, so a
    result does not depend on which other checks exist); failures to run become "not checkable"."""
    rng = np.random.default_rng([seed, zlib.crc32(check_id.encode())])
    try:
        return fn(instances, rng)
    except Exception as exc:  # a crash is reported, never a silent pass
        why = f"{type(exc).__name__}: {exc} ({traceback.extract_tb(exc.__traceback__)[-1].name})"
    return Check(id=check_id, paper=check_id.split(".")[0], source="", claim="", formula="", method="", status=NOT_CHECKABLE, note=why)


def run_checks(paper: str | None = None, instances: int | None = None, seed: int = 0, progress=None, only=None) -> list[Check]:
    """Run the checks of ``paper`` (all when ``None``); ``only`` restricts to some ids.

    ``progress(message)`` is called before and after each check (the CLI prints to stderr).
    """
    from otm.errors import InvalidArgumentError

    if instances is not None and (isinstance(instances, bool) or int(instances) != instances
                                  or not 1 <= instances <= MAX_INSTANCES):
        raise InvalidArgumentError(f"instances must be an integer in 1..{MAX_INSTANCES:,} (random instances per check), "
                                   f"got {instances!r}")
    instances = DEFAULT_INSTANCES if instances is None else int(instances)
    checks = registry(paper)
    results = []
    for index, (check_id, fn) in enumerate(checks.items()):
        if only is not None and check_id not in only:
            continue
        start = time.perf_counter()
        if progress:
            progress(f"[{index + 1}/{len(checks)}] {check_id} ...")
        result = run_check(check_id, fn, instances, seed)
        if progress:
            progress(f"[{index + 1}/{len(checks)}] {check_id}: {result.status} ({result.instances} instances, {time.perf_counter() - start:.1f} s)")
        results.append(result)
    return results


def stderr_progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
