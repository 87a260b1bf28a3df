"""Every exact entry point of ``otm`` on real-scale rows: does it answer, refuse with a typed
error, or misbehave (an untyped exception, a value outside ``[0, 1]``, a slow call)?

Evidence behind docs/theory.md, section 4 ("A draft on few tokens at a large vocabulary" and
the paragraphs after it). The rows are softmax rows of ``--vocab`` tokens (151,936 by
default, the Qwen vocabulary), in float32 and bfloat16, at temperatures 1, 0.1 and 0.01,
one-hot, equal, disjoint, and with the draft on 3 or 20 tokens (a top-k draft). For each row
and each ``k`` of ``--ks`` it calls:

- ``otm.optimal_acceptance`` for every draft scheme;
- ``otm.solve_optimum`` for i.i.d. drafts with every method (``--methods``);
- ``otm.rule_acceptance`` for every rule of the registry.

Each call is timed; a call is *flagged* when it raises anything but an ``OTMError``, returns
a value outside ``[0, 1]`` or NaN, or takes more than ``--slow`` seconds. It prints the
flagged calls as they come, then per entry point how many calls answered, were refused with
a typed error and were flagged. Exit status 1 when any call was flagged.

    python scripts/real_scale_entry_points.py                       # a few minutes
    python scripts/real_scale_entry_points.py --vocab 5000 --ks 2   # seconds
"""
from __future__ import annotations

import argparse
import math
import sys
import time
import warnings
from collections import Counter

import numpy as np
import torch

import otm
from otm.draft_laws import ONE_Q_SCHEMES
from otm.errors import OTMError
from otm.rules.registry import RULE_SPECS


def _softmax(logits: np.ndarray, temperature: float, dtype: torch.dtype) -> torch.Tensor:
    """The row as a model gives it: a softmax computed in ``dtype``, handed over as that tensor."""
    return torch.softmax(torch.from_numpy(logits / temperature).to(dtype), dim=0)


def _top(logits: np.ndarray, tokens: int) -> np.ndarray:
    """A draft on the ``tokens`` likeliest tokens of ``logits`` (zeros elsewhere), float64."""
    row = np.zeros(logits.size)
    top = np.argsort(-logits, kind="stable")[:tokens]
    row[top] = np.exp(logits[top] - logits[top].max())
    return row / row.sum()


def rows(vocab: int, seed: int) -> dict[str, tuple]:
    """The named ``(p, q)`` pairs of the module docstring."""
    rng = np.random.default_rng(seed)
    target = 3.0 * rng.standard_normal(vocab)
    draft = target + rng.standard_normal(vocab)
    one_hot = np.zeros(vocab)
    one_hot[int(np.argmax(draft))] = 1.0
    return {
        "float32, T = 1": (_softmax(target, 1.0, torch.float32), _softmax(draft, 1.0, torch.float32)),
        "bfloat16, T = 1": (_softmax(target, 1.0, torch.bfloat16), _softmax(draft, 1.0, torch.bfloat16)),
        "float32, T = 0.1": (_softmax(target, 0.1, torch.float32), _softmax(draft, 0.1, torch.float32)),
        "float32, T = 0.01": (_softmax(target, 0.01, torch.float32), _softmax(draft, 0.01, torch.float32)),
        "one-hot p": (one_hot, _softmax(draft, 1.0, torch.float32)),
        "one-hot q": (_softmax(target, 1.0, torch.float32), one_hot),
        "p = q": (_softmax(target, 1.0, torch.float32), _softmax(target, 1.0, torch.float32)),
        "disjoint, 5 tokens each": (_top(target, 5), _top(-target, 5)),
        "q on 3 tokens": (_softmax(target, 1.0, torch.float32), _top(draft, 3)),
        "q on 20 tokens": (_softmax(target, 1.0, torch.float32), _top(draft, 20)),
    }


def entry_points(methods: list[str]) -> list[tuple[str, object]]:
    """``(name, call(p, q, k))`` for every entry point of the module docstring."""
    calls = [(f"optimal_acceptance[{scheme}]", lambda p, q, k, s=scheme: otm.optimal_acceptance(p, q, k, draft_scheme=s))
             for scheme in ONE_Q_SCHEMES]
    calls += [(f"solve_optimum[{method}]", lambda p, q, k, m=method: otm.solve_optimum(p, q, k, method=m).value)
              for method in methods]
    calls += [(f"rule_acceptance[{name}]", lambda p, q, k, n=name: otm.rule_acceptance(n, p, q, k)) for name in RULE_SPECS]
    return calls


def outcome(call, p, q, k: int, slow: float) -> tuple[str, str, float]:
    """``(kind, what, seconds)``: kind ``answered``, ``refused`` (an ``OTMError``) or ``flagged``."""
    start = time.perf_counter()
    try:
        value = float(call(p, q, k))
    except OTMError as exc:
        seconds = time.perf_counter() - start
        return ("flagged" if seconds > slow else "refused"), f"{type(exc).__name__}: {str(exc)[:90]}", seconds
    except Exception as exc:  # noqa: BLE001 - an untyped error is what this script looks for
        return "flagged", f"untyped {type(exc).__name__}: {str(exc)[:90]}", time.perf_counter() - start
    seconds = time.perf_counter() - start
    bad = not (math.isfinite(value) and -1e-9 <= value <= 1 + 1e-9)
    return ("flagged" if bad or seconds > slow else "answered"), f"{value:.6f}", seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vocab", type=int, default=151_936)
    parser.add_argument("--ks", default="1,2,3,5", help="comma-separated numbers of drafts")
    parser.add_argument("--methods", default=",".join(m for m in otm.optimum.METHODS if m != "auto"),
                        help="solve_optimum methods to call (i.i.d. drafts)")
    parser.add_argument("--slow", type=float, default=5.0, help="seconds above which a call is flagged")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")  # the normalisation notes of float32 rows
    ks = [int(k) for k in args.ks.split(",")]
    calls = entry_points(args.methods.split(","))
    tally: dict[str, Counter] = {name: Counter() for name, _ in calls}
    slowest: dict[str, float] = dict.fromkeys(tally, 0.0)
    pairs = rows(args.vocab, args.seed)
    print(f"{len(pairs)} rows of {args.vocab:,} tokens x k in {ks} x {len(calls)} entry points; flagged calls:", flush=True)
    for row, (p, q) in pairs.items():
        started = time.perf_counter()
        for k in ks:
            for name, call in calls:
                kind, what, seconds = outcome(call, p, q, k, args.slow)
                tally[name][kind] += 1
                slowest[name] = max(slowest[name], seconds)
                if kind == "flagged":
                    print(f"  FLAGGED {row}, k = {k}, {name}: {what} ({seconds:.2f} s)", flush=True)
        print(f"row {row!r} done in {time.perf_counter() - started:.1f} s", flush=True)
    print("\n| entry point | answered | refused (typed) | flagged | slowest call (s) |\n|---|---|---|---|---|")
    for name, counts in tally.items():
        print(f"| {name} | {counts['answered']} | {counts['refused']} | {counts['flagged']} | {slowest[name]:.2f} |")
    flagged = sum(counts["flagged"] for counts in tally.values())
    print(f"\n{flagged} flagged calls")
    return 1 if flagged else 0


if __name__ == "__main__":
    sys.exit(main())
