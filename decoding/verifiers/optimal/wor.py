"""The optimal verifier for ``k`` drafts without replacement (water levels), batched.

The rule of :mod:`otm.rules.optimal_wor` (derivation:
docs/optimal-verifier.md#water-levels-for-drafts-without-replacement; the proof that its levels
are probabilities: docs/optimal-verifier-proofs.md#water-levels-are-probabilities): give the
tokens with ``q > 0`` ranks by ``p/q`` (ties by id), with the optimal cut ``m`` and the water levels ``L`` (``L(m) = 0``).
Going down from the highest-ranked draft through the others by rank, the walk goes on while
``u < M_i``, the least level between member ``i`` and the highest; the last member reached
is selected. The selected draft ``Z`` is accepted with probability ``min(1, p(Z) / x(Z))``
(``x`` the selection law), otherwise the output is drawn from ``norm(max(p - x, 0))``.
Output law ``p``; a draft is accepted with probability ``alpha*(p, Q_wor)``.

``k = 2`` is :mod:`decoding.verifiers.optimal.pair` (the walk is its yield), at any
vocabulary. For ``k >= 3`` the levels come from :func:`otm.rules.water_levels.parameters.wor_parameters`,
which sums the set masses over every draft tuple up to 1,000 of them, and beyond takes them
from the clock integral compiled with the whole nesting
(:class:`decoding.verifiers.optimal.clock_masses.CompiledClockSetMasses`, which keeps no tables
of ``e^{-q s}``, so any vocabulary; its nesting within a minute where the runs of flux span up
to about 2,000 ranks). On that path each distinct row of a call is first set up without the
levels (:func:`row_setup`: cut, flux, ``x``, the compiled set masses; the pass up the ranks by
the set-up backend :func:`decoding.verifiers.optimal.setup.pick` finds for the row's
device, ``k`` and threads: at Chebyshev points or node by node on the CPU, as CUDA kernels on a
GPU), and the walk of each of its drafted sets is
decided from the bounds of docs/optimal-verifier-proofs.md#bounds-on-a-water-level-from-the-flux where they settle it
(:func:`otm.rules.water_levels.bounds.walk_decision`); only the walks they leave open build the
levels. Open walks on rows past the nesting's time limit raise
:class:`otm.errors.NotApplicableError` (:func:`caveat`; how often, at the real vocabulary:
docs/optimal-verifier.md#the-water-level-verifier-for-k-drafts). The levels come from
the rule's certified float64 construction (wider arithmetic where float64 is not certified), the
last 256 distinct rows kept (a batch of equal rows, as the tests draw, costs one construction;
the cost of a distinct row: ``python -m research.optimal_wor.wor_water_levels --cost``).

Exhausted support (at most ``k`` tokens with ``q > 0``): the drafted set is always the same
(:func:`decoding.verifiers.base.sample_without_replacement`), and the draft at position ``j``
is selected with probability ``x`` of it, by inverse CDF over the positions.

Randomness (``uniforms_per_row(k) = 3``, as for two drafts): column 0 walks down the members
(or picks the position of an exhausted support), column 1 accepts ``Z`` when ``u x(Z) <
p(Z)``, column 2 draws the residual by inverse CDF over the ranks
(:func:`decoding.verifiers.optimal.pair.full_ratio_order`). Reference:
:func:`decoding.verifiers.reference.optimal_wor`. Rows with a NaN, an inf, a negative entry
or no mass raise :class:`otm.errors.InvalidDistributionError`; drafts that ``k`` draws without
replacement cannot give raise :class:`otm.errors.NotApplicableError`.
"""
from __future__ import annotations

import dataclasses
import functools

import numpy as np
import torch

from otm.errors import InvalidDraftCountError, NotApplicableError
from otm.rules.water_levels.construction import FluxSetup
from otm.rules.water_levels.parameters import clock_flux_setup, wor_parameters
from otm.rules.water_levels.bounds import walk_decision

from . import pair
from .cache import SizedCache
from ..base import (
    VerifierOutput,
    check_k,
    first_draft_probs,
    sample_weighted,
    sample_without_replacement,
    verify_uniforms,
)

draft_scheme = "without_replacement"


def compile_seconds(device: torch.device) -> float:
    """About how long the first ``verify`` compiles its per-row code on this machine: two drafts
    compile :mod:`decoding.verifiers.optimal.pair`'s code (its
    :func:`~decoding.verifiers.optimal.pair.compile_seconds`), more drafts the compiled clock
    integral (:mod:`decoding.verifiers.optimal.clock_kernels`, estimated at 5 s cold) and its pass
    at Chebyshev points (:mod:`decoding.verifiers.optimal.setup.chebyshev`, 3 s); 0 for what
    numba's cache already holds. On a CUDA device the set-up's kernels
    (:mod:`decoding.verifiers.optimal.setup.cuda_scan`) compile besides, at the first row of each ``k``
    and in every process: 1 s (docs/optimal-verifier-proofs.md#the-set-up-as-a-scan). An estimate for the
    announcement, not a limit. Read by ``otm decode``."""
    from .row_passes import is_cached
    from .setup.chebyshev import _pass as pass_at_points
    from .clock_kernels import lowest_law, water_levels

    clock = 0.0 if is_cached(water_levels) and is_cached(lowest_law) else 5.0
    points = 0.0 if is_cached(pass_at_points) else 3.0
    kernels = 1.0 if device.type == "cuda" else 0.0
    return pair.compile_seconds(device) + clock + points + kernels


def caveat(widest: int, top_p: float) -> str | None:
    """What ``otm decode`` says before it starts (the optional hook of
    :mod:`decoding.verifiers.protocol`): with three or more drafts at a node and no top-p, the
    rows are whole vocabularies, where the verifier sets up each row and refuses a row whose walk
    the bounds leave open and whose nesting it estimates past
    :attr:`~decoding.verifiers.optimal.clock_masses.CompiledClockSetMasses.max_nesting_seconds`
    (module docstring; docs/optimal-verifier.md#water-levels-for-drafts-without-replacement)."""
    if widest < 3 or top_p < 1.0:
        return None
    from .clock_masses import CompiledClockSetMasses

    limit = CompiledClockSetMasses.max_nesting_seconds
    return ("with 3 or more drafts at a node and no --top-p, the optimal_wor verifier sets up every row at the whole "
            f"vocabulary and refuses the rows whose walk its bounds leave open where it estimates building the levels "
            f"past {limit:.0f} s, ending the decode; --top-p truncates the rows first")


def uniforms_per_row(k: int) -> int:
    """3 (module docstring); the rule is defined for ``k >= 2``."""
    if check_k(k) < 2:
        raise InvalidDraftCountError(f"rule 'optimal_wor' is defined for k >= 2, got k={k}")
    return 3


def sample_drafts(draft_probs: torch.Tensor, k: int, generator: torch.Generator | None) -> torch.Tensor:
    """``[batch, k]`` distinct drafts from ``draft_probs`` ``[batch, vocab]``."""
    uniforms_per_row(k)
    return sample_without_replacement(draft_probs, k, generator)


#: ``(p bytes, q bytes, k) -> (rank [V], levels [n + 1], x [V], support n)`` of the last 256
#: rows whose levels were built (a row found here walks on its levels).
_LEVELS = SizedCache(256)


def _row_parameters(key: tuple) -> tuple:
    """``(rank [V], levels [n + 1], x [V], support n)`` in float64 of one normalised row (``key``:
    its ``(p bytes, q bytes, k)``), built once and kept in :data:`_LEVELS`."""
    if key in _LEVELS:
        return _LEVELS.get(key)
    from .clock_masses import CompiledClockSetMasses  # numba only where a row is verified

    p_bytes, q_bytes, k = key
    params = wor_parameters(np.frombuffer(p_bytes), np.frombuffer(q_bytes), k, clock_masses=CompiledClockSetMasses)
    return _LEVELS.put(key, (params.rank, [float(v) for v in params.levels],
                             np.asarray(params.selection, dtype=np.float64), len(params.order)))


def walk(levels: list, ranks: list, u: float) -> int:
    """The index into ``ranks`` (distinct ranks of one side or both) of the member selected
    with uniform ``u``: down from the highest while ``u`` is below the least level between
    the next member and the highest."""
    descending = sorted(range(len(ranks)), key=lambda i: -ranks[i])
    reach, chosen = 1.0, descending[0]
    for upper, lower in zip(descending, descending[1:]):
        reach = min([reach] + levels[ranks[lower] + 1:ranks[upper] + 1])
        if not u < reach:
            break
        chosen = lower
    return chosen


def row_setup(p: np.ndarray, q: np.ndarray, k: int, device: torch.device | None = None,
              row_key: tuple | None = None) -> FluxSetup | None:
    """The cut, flux, ``x`` and compiled clock masses of one normalised row on the clock path
    (:func:`otm.rules.water_levels.parameters.clock_flux_setup`), what :func:`verify_row` decides the walk
    from before it builds levels; ``None`` for a row off that path (``k = 2``, few draft
    tuples, at most ``k`` tokens with ``q > 0``) or past the clock integral's limit (the
    levels' path then enumerates the row or refuses it). Its flux is a float64 array, which
    :func:`~otm.rules.water_levels.bounds.walk_decision` reads a span at a time. The last rows
    set up are kept while their tables hold at most :data:`SETUP_FLOATS_KEPT` floats in all, for
    calls that repeat a row. ``device``: where the rows came from; on a CUDA device the pass up the
    ranks runs there (:func:`~decoding.verifiers.optimal.clock_masses.clock_masses`, within roundoff of
    the CPU's pass), and the rest on the CPU. ``row_key``: ``(p.tobytes(), q.tobytes())`` where the
    caller has it (bytes keep their hash, so a row of the real vocabulary is hashed once, not at
    every cache)."""
    on_gpu = device is not None and device.type == "cuda"
    key = (*(row_key or _row_key(p, q)), k, str(device) if on_gpu else "cpu")
    if key in _SETUPS:
        return _SETUPS.get(key)
    from .clock_masses import clock_masses  # numba only where a row is verified

    try:
        setup = clock_flux_setup(p, q, k, clock_masses=clock_masses(str(device) if on_gpu else "cpu"))
    except NotApplicableError:
        setup = None
    if setup is not None:  # the bounds read the flux a span at a time (walk_decision)
        setup = dataclasses.replace(setup, flux=np.asarray(setup.flux, dtype=np.float64))
    floats = 0 if setup is None else setup.masses.table_floats(setup.masses.n, setup.masses.s.size, k)
    return _SETUPS.put(key, setup, floats)


#: The set-ups kept hold at most this many floats of tables (160 MB: one whole row of 151,936
#: tokens at ``k = 8`` and up to 450 nodes set up on a GPU, about 19 million floats with its groups
#: of ranks and its checkpoints at every 64th rank; three such rows set up on the CPU, whose
#: checkpoints are at every 256th rank; so the calls that repeat a row, as a certification's chunks
#: of the same row do, set it up once), and each at most ``CompiledClockSetMasses.RUN_FLOATS_KEPT``
#: floats of its bounds' runs besides.
#: No more: memory the machine has not used lately can cost about as much to touch as a whole
#: row's pass, so a lower peak meets it less often (``python -m research.optimal_wor.wor_fresh_rows``;
#: research/optimal_wor/JOURNAL.md, "The set-up's pass at Chebyshev points").
SETUP_FLOATS_KEPT = 20_000_000

#: ``(p bytes, q bytes, k) ->`` the set-up (or ``None``) of the last rows set up, weighed by their
#: table floats.
_SETUPS = SizedCache(SETUP_FLOATS_KEPT)


def _row_key(p: np.ndarray, q: np.ndarray) -> tuple[bytes, bytes]:
    """The bytes of a row's ``p`` and ``q``: what the caches of set-ups and levels know it by."""
    return p.tobytes(), q.tobytes()


def residual_order(p: np.ndarray, q: np.ndarray, setup: FluxSetup | None) -> np.ndarray:
    """``[V]`` the order the residual is drawn in,
    :func:`decoding.verifiers.optimal.pair.full_ratio_order`: from the row's set-up where it
    has one (its ratio order of the ``q > 0``, :func:`otm.formulations.prefix_scan.ratio_order`,
    the same float64 ``p / q`` ascending with ties by id, then the ``q = 0`` by id), which spares a
    second sort of the row, else sorted here."""
    if setup is None:
        return pair.full_ratio_order(p, q)
    return np.concatenate([np.asarray(setup.order, dtype=np.int64), np.flatnonzero(q == 0)])


def verify_row(p: np.ndarray, q: np.ndarray, drafts: tuple, uniforms: np.ndarray,
               setup: FluxSetup | None = None, order=None, row_key: tuple | None = None) -> tuple[int, int]:
    """``(token, accepted index)`` of one row (``p``, ``q`` ``[V]`` float64, normalised; ``-1``:
    the residual), ``k = len(drafts) >= 3``. With the row's :func:`row_setup`, unless its levels
    are already built, the walk is first decided from the flux and the set masses alone
    (:func:`otm.rules.water_levels.bounds.walk_decision`, a decision taken only where it clears
    its threshold by the relative :data:`BOUND_MARGIN`), and the levels are built only where
    that leaves it open. ``order``: the residual's order, as
    :func:`decoding.verifiers.optimal.pair.checked_draw` takes it (by default
    :func:`residual_order`, made at a residual); ``row_key`` as :func:`row_setup` takes it."""
    k = len(drafts)
    order = order if order is not None else functools.partial(residual_order, p, q, setup)
    support = int(np.count_nonzero(q > 0))
    if len(set(drafts)) < k or int((q[list(drafts)] > 0).sum()) < min(k, support):
        raise NotApplicableError(f"drafts {tuple(drafts)} cannot come from {k} draws without replacement from q "
                                 f"({support} tokens of positive probability)")
    key = (*(row_key or _row_key(p, q)), k)
    if setup is not None and key not in _LEVELS:
        index = walk_decision(setup.flux, setup.masses, [int(setup.rank[t]) for t in drafts], float(uniforms[0]),
                              margin=BOUND_MARGIN, windows=BOUND_WINDOWS)
        if index is not None:
            return pair.checked_draw(p, q, setup.selection, drafts, index, uniforms, order)
    try:
        if setup is not None and key not in _LEVELS:  # a nesting past its limit, refused before the levels' path
            flux, n = np.asarray(setup.flux, dtype=np.float64), len(setup.order)  # builds the masses again
            for lo, hi in ((setup.cut, n - 1), (0, setup.cut - 1)):
                setup.masses.check_nesting(flux, lo, hi)
        rank, levels, x, n = _row_parameters(key)
    except NotApplicableError as refusal:
        if setup is None:
            raise
        raise NotApplicableError(f"{refusal} (the bounds from the flux, which decide most walks on such rows, left "
                                 f"this walk open: drafts {tuple(int(t) for t in drafts)}, u = {float(uniforms[0]):.6f})") from None
    if n <= k:  # the same set every time: select a position by x
        weights = torch.tensor([[x[t] for t in drafts]], dtype=torch.float64)
        index = int(sample_weighted(weights, torch.tensor([float(uniforms[0])], dtype=torch.float64)))
    else:
        index = walk(levels, [int(rank[t]) for t in drafts], float(uniforms[0]))
    return pair.checked_draw(p, q, x, drafts, index, uniforms, order)


#: Relative margin of the walk's decisions from bounds (as the pair verifier's,
#: :data:`decoding.verifiers.optimal.pair_levels.BOUND_MARGIN`): the set masses and ``sigma``
#: of the clock integral are accurate to a few ``1e-14`` relative on rows of thousands of tokens
#: and to about ``1e-11`` on whole rows of the real vocabulary, where the products of 151,665
#: clocks near 1 carry their roundings (docs/optimal-verifier-proofs.md#the-set-up-as-a-scan).
BOUND_MARGIN = 1e-9

#: At most this many windows in the walk's integral test (iii)
#: (:func:`otm.rules.water_levels.bounds.span_at_most`): each costs a pass of the clock integral
#: over its ranks.
BOUND_WINDOWS = 4


def _normalised(probs: torch.Tensor, name: str) -> np.ndarray:
    rows = probs.detach().to("cpu", torch.float64).numpy()
    totals = rows.sum(axis=1, keepdims=True)
    if not (np.isfinite(totals).all() and (totals > 0).all() and (rows >= 0).all()):
        pair.refuse_rows(name)
    return rows / totals


def verify(
    target_probs: torch.Tensor,  # [batch, vocab]
    draft_probs: torch.Tensor,  # [batch, k, vocab]
    draft_tokens: torch.Tensor,  # [batch, k]
    generator: torch.Generator | None,
) -> VerifierOutput:
    """The water-level verifier for ``k`` distinct drafts from ``draft_probs[:, 0]``."""
    if draft_tokens.dim() == 2 and draft_tokens.shape[1] == 2:
        return pair.verify(target_probs, draft_probs, draft_tokens, generator)
    uniforms = verify_uniforms(target_probs, draft_probs, draft_tokens, generator, uniforms_per_row)
    p_rows = _normalised(target_probs, "target_probs")
    q_rows = _normalised(first_draft_probs(draft_probs), "draft_probs")
    drafts, u = draft_tokens.cpu().tolist(), uniforms.to(torch.float64).cpu().numpy()
    rows: dict = {}  # the rows of the call by distinct (p, q): one set-up each
    for r in range(len(drafts)):
        rows.setdefault(_row_key(p_rows[r], q_rows[r]), []).append(r)
    results: list = [None] * len(drafts)
    for row_key, members in rows.items():
        p_row, q_row = p_rows[members[0]], q_rows[members[0]]
        setup = row_setup(p_row, q_row, len(drafts[0]), target_probs.device, row_key)
        order = functools.cache(functools.partial(residual_order, p_row, q_row, setup))
        for r in members:  # the equal rows share the residual's order, made at the first residual
            results[r] = verify_row(p_rows[r], q_rows[r], tuple(drafts[r]), u[r], setup, order, row_key)
    device = target_probs.device
    return VerifierOutput(tokens=torch.tensor([t for t, _ in results], dtype=torch.int64, device=device),
                          accepted_index=torch.tensor([i for _, i in results], dtype=torch.int64, device=device))


__all__ = ["BOUND_MARGIN", "BOUND_WINDOWS", "caveat", "compile_seconds", "draft_scheme", "residual_order", "row_setup",
           "sample_drafts", "uniforms_per_row", "verify", "verify_row", "walk"]
