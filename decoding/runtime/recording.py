"""Recording of a speculative decode: every verification, with ``p``, ``q``, drafts and output.

A recording is one ``.npz`` file (``numpy.savez_compressed``) holding one row per *event*:
a verification at a tree node (``k >= 1`` drafts) or a *bonus draw* at a leaf (``k = 0``:
every draft on the path was accepted, and one more token is drawn from ``p``).
``otm validate`` reads it with :func:`load_recording`.

What is kept of ``p`` and ``q`` (version 2). For each event the *recorded tokens* are the
top-``m`` tokens of ``p``, the top-``m`` tokens of ``q`` and, for a law with at most
``sparse_limit`` tokens of positive probability (top-p, a low temperature), every one of
them; both ``p`` and ``q`` are stored on that one set, and the mass of all other tokens, the
*merged tail*, as one remainder per law. A sparse law therefore has a tail of exactly 0,
which makes the rules listed in the registry's ``exact_on_merged_tail`` exact on the merged
row (:mod:`decoding.validation.recordings`, docs/theory.md section 7). ``top_m = None`` (or
``m >= V``) keeps whole rows (``full``): every rule is then exact.

Arrays (``n`` events, ``w`` = most recorded tokens of an event, ``K`` = largest ``k``):

=================  ===============  ====================================================
key                shape, dtype     meaning
=================  ===============  ====================================================
``meta``           0-d str          JSON: ``format`` (``"otm-decode-recording"``),
                                    ``version`` (2), ``rule``, ``tree``, ``temperature``,
                                    ``top_p``, ``vocab_size``, ``dtype`` (of the laws, e.g.
                                    ``"float32"``), ``top_m`` (``null`` = whole rows),
                                    ``sparse_limit``, ``full``, plus caller fields
                                    (``pair``, ``seed``, ...; ``stopped``: a verifier's
                                    refusal that ended the decode, the events being those
                                    before it)
``step``           [n] int64        decoding step (0-based)
``row``            [n] int64        batch row (prompt index)
``depth``          [n] int64        depth of the node whose children are verified (root 0)
``node``           [n] int64        that node's id in the tree (breadth-first, root 0)
``k``              [n] int64        number of drafts verified (0 = bonus draw at a leaf)
``drafts``         [n, K] int64     the draft tokens ``x_1..x_k`` in verification order, -1 padded
``accepted_index`` [n] int64        index of the accepted draft, -1 = residual (or bonus)
``output``         [n] int64        the token emitted
``p_ids``          [n, w] int64     the recorded tokens, by decreasing ``p``, -1 padded
``p_probs``        [n, w] float64   ``p`` at them (0 at padding)
``p_rest``         [n] float64      ``p`` of the merged tail (all other tokens)
``q_ids``          [n, w] int64     the same tokens (all -1 where ``k = 0``: no draft law)
``q_probs``        [n, w] float64   ``q`` at them (0 where ``k = 0``)
``q_rest``         [n] float64      ``q`` of the merged tail (0 where ``k = 0``)
``drafts_p``       [n, K] float64   ``p`` at each draft token (exact, recorded or not)
``drafts_q``       [n, K] float64   ``q`` at each draft token
=================  ===============  ====================================================

``p`` is the target's sampling law at the node (after temperature / top-p); ``q`` is the
draft's law at the parent of the drafts (for i.i.d. rules the merged candidates of SpecTr
(Sun et al. 2023) Alg. 3 can come from several tree nodes with the same prefix: ``q`` is the
first one's, equal to the others up to float rounding). A remainder is the float64 sum of
the law over the tokens not recorded (exactly 0 when they all have probability 0), so
``recorded + remainder`` is the law's own total.

:func:`load_recording` verifies a file before anything trusts it: the format, every array's
shape and dtype, token ids in range and not repeated, ``accepted_index`` in ``-1..k-1`` with
the output equal to the accepted draft, finite non-negative probabilities that equal
``drafts_p`` / ``drafts_q`` at the recorded draft tokens, and ``recorded + remainder = 1``
within :func:`otm.tolerances.sum_tolerance` of the recorded ``dtype`` and ``V`` (the one
tolerance policy for inputs; a recording without ``dtype``, version 1, gets the float64
rule). The joint draft law of an event is the rule's law for ``(q, k)`` (``meta["rule"]``;
nodes with one child use the single-draft rule).
"""
from __future__ import annotations

import json
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from otm.errors import InputFileError, InvalidDistributionError
from otm.files import load_numpy
from otm.tolerances import sum_tolerance

RECORDING_FORMAT = "otm-decode-recording"
RECORDING_VERSION = 2
#: Versions :func:`load_recording` reads (version 1 kept ``p`` and ``q`` on separate token sets).
READABLE_VERSIONS = (1, 2)
#: Default number of most likely tokens of ``p`` and of ``q`` kept per event.
DEFAULT_TOP_M = 64
#: A law with at most this many tokens of positive probability is recorded whole, so its
#: merged tail is exactly 0 (a top-p nucleus usually is; 24 bytes per token and event).
SPARSE_LIMIT = 4096

_INT_KEYS = ("step", "row", "depth", "node", "k", "accepted_index", "output")
_ROW_KEYS = ("drafts", "p_ids", "q_ids", "p_probs", "q_probs", "drafts_p", "drafts_q")
_FLOAT_KEYS = ("p_probs", "p_rest", "q_probs", "q_rest", "drafts_p", "drafts_q")
_ALL_KEYS = _INT_KEYS + ("drafts", "p_ids", "p_probs", "p_rest", "q_ids", "q_probs", "q_rest", "drafts_p", "drafts_q")
_PAD = {"drafts": -1, "p_ids": -1, "q_ids": -1}


def _recorded_tokens(laws: list, m: int | None, sparse_limit: int) -> torch.Tensor:  # [n, V] bool
    """Which tokens an event records (module docstring): the top-``m`` of each law, and the
    whole support of a law with at most ``sparse_limit`` tokens of positive probability."""
    n, vocab = laws[0].shape
    if m is None or m >= vocab:
        return torch.ones(n, vocab, dtype=torch.bool, device=laws[0].device)
    keep = torch.zeros(n, vocab, dtype=torch.bool, device=laws[0].device)
    for law in laws:
        keep.scatter_(1, law.topk(m, dim=1).indices, True)
        positive = law > 0
        keep |= positive & (positive.sum(dim=1, keepdim=True) <= sparse_limit)
    return keep


def _on_tokens(keep: torch.Tensor, laws: list) -> tuple[np.ndarray, list, list]:
    """``ids`` ``[n, w]`` of the recorded tokens (by decreasing first law; all ``V`` in id order
    when every token is kept), each law at them ``[n, w]`` and its remainder ``[n]``."""
    n, vocab = keep.shape
    if bool(keep.all()):
        ids = torch.arange(vocab, device=keep.device).expand(n, -1)
        return ids.cpu().numpy().astype(np.int64), [law.cpu().numpy() for law in laws], [np.zeros(n)] * len(laws)
    width = int(keep.sum(dim=1).max())
    order, ids = torch.where(keep, laws[0], -1.0).topk(width, dim=1)
    ids = torch.where(order >= 0, ids, -1)
    kept = [torch.where(ids >= 0, law.gather(1, ids.clamp(min=0)), 0.0) for law in laws]
    rests = [torch.where(keep, 0.0, law).sum(dim=1) for law in laws]
    return ids.cpu().numpy().astype(np.int64), [k.cpu().numpy() for k in kept], [r.cpu().numpy() for r in rests]


def _dtype_name(tensor: torch.Tensor) -> str:
    return str(tensor.dtype).replace("torch.", "")


class Recorder:
    """Collects events during :func:`decoding.runtime.loop.speculative_decode` (``record=``) and
    writes them with :meth:`save`. ``top_m``: tokens kept per law and event (``None``: whole
    rows); ``sparse_limit``: a law with at most this many tokens of positive probability is
    kept whole (0: never)."""

    def __init__(self, top_m: int | None = DEFAULT_TOP_M, sparse_limit: int = SPARSE_LIMIT, **meta):
        if top_m is not None and (isinstance(top_m, bool) or not isinstance(top_m, (int, np.integer)) or top_m < 1):
            raise InvalidDistributionError(f"top_m must be an integer >= 1 or None (whole rows), got {top_m!r}")
        self.top_m = top_m
        self.sparse_limit = int(sparse_limit)
        self.meta = dict(meta)
        self.step = -1
        self._chunks: list[dict] = []

    def begin_step(self) -> None:
        self.step += 1

    @property
    def events(self) -> int:
        """How many events have been recorded."""
        return sum(len(c["step"]) for c in self._chunks)

    def add(
        self,
        rows: torch.Tensor,  # [n]
        depth: int,
        nodes: torch.Tensor,  # [n]
        target_probs: torch.Tensor,  # [n, vocab]
        draft_probs: torch.Tensor | None,  # [n, vocab]; None for a bonus draw
        drafts: torch.Tensor | None,  # [n, k]; None for a bonus draw
        accepted_index: torch.Tensor | None,  # [n]
        output: torch.Tensor,  # [n]
    ) -> None:
        n, vocab = target_probs.shape
        self.meta.update(vocab_size=vocab, dtype=_dtype_name(target_probs))
        laws = [target_probs.detach().double()] + ([] if draft_probs is None else [draft_probs.detach().double()])
        ids, kept, rests = _on_tokens(_recorded_tokens(laws, self.top_m, self.sparse_limit), laws)
        chunk = {
            "step": np.full(n, self.step), "row": rows.cpu().numpy(), "depth": np.full(n, depth),
            "node": nodes.cpu().numpy(), "output": output.cpu().numpy(),
            "p_ids": ids, "p_probs": kept[0], "p_rest": rests[0],
        }
        if drafts is None:
            chunk.update(k=np.zeros(n), accepted_index=np.full(n, -1), drafts=np.zeros((n, 0)),
                         q_ids=np.full(ids.shape, -1), q_probs=np.zeros(ids.shape), q_rest=np.zeros(n),
                         drafts_p=np.zeros((n, 0)), drafts_q=np.zeros((n, 0)))
        else:
            chunk.update(k=np.full(n, drafts.shape[1]), accepted_index=accepted_index.cpu().numpy(),
                         drafts=drafts.cpu().numpy(), q_ids=ids, q_probs=kept[1], q_rest=rests[1],
                         drafts_p=laws[0].gather(1, drafts).cpu().numpy(),
                         drafts_q=laws[1].gather(1, drafts).cpu().numpy())
        self._chunks.append(chunk)

    def arrays(self) -> dict[str, np.ndarray]:
        """The recording's arrays (module docstring), events in recording order."""
        if not self._chunks:
            raise InvalidDistributionError("nothing was recorded")
        out = {}
        for key in _ALL_KEYS:
            parts = [np.asarray(c[key]) for c in self._chunks]
            if key in _ROW_KEYS:
                width = max(a.shape[1] for a in parts)
                parts = [np.pad(a, ((0, 0), (0, width - a.shape[1])), constant_values=_PAD.get(key, 0)) for a in parts]
            out[key] = np.concatenate(parts).astype(np.float64 if key in _FLOAT_KEYS else np.int64)
        return out

    def save(self, path: str | Path) -> Path:
        """Write the ``.npz`` recording; returns its path (:class:`InputFileError` when it
        cannot be written)."""
        meta = {"format": RECORDING_FORMAT, "version": RECORDING_VERSION, "top_m": self.top_m,
                "sparse_limit": self.sparse_limit, **self.meta}
        meta["full"] = self.top_m is None or self.top_m >= meta.get("vocab_size", self.top_m + 1)
        path = Path(path)
        try:
            np.savez_compressed(path, meta=np.asarray(json.dumps(meta)), **self.arrays())
        except OSError as exc:
            raise InputFileError(f"cannot write the recording {path}: {exc}") from None
        return path if path.suffix == ".npz" else path.with_name(path.name + ".npz")


@dataclass(frozen=True)
class Recording:
    """A loaded recording: ``meta`` (dict) and ``arrays`` (module docstring)."""

    meta: dict
    arrays: dict

    @property
    def n_events(self) -> int:
        return len(self.arrays["k"])

    @property
    def sum_tolerance(self) -> float:
        """How far ``recorded + remainder`` may be from 1: :func:`otm.tolerances.sum_tolerance`
        of the laws' dtype (float64 when not recorded) and ``V``."""
        return sum_tolerance(self.meta.get("dtype", "float64"), self.meta["vocab_size"])

    def dense(self, event: int, which: str = "p") -> np.ndarray:  # [V]
        """The full ``p`` or ``q`` of an event; exact for a ``full`` recording, otherwise the
        recorded masses with the remainder spread evenly over the other tokens."""
        ids, probs, rest = (self.arrays[f"{which}_{s}"][event] for s in ("ids", "probs", "rest"))
        vocab = self.meta["vocab_size"]
        out = np.zeros(vocab)
        keep = ids >= 0
        out[ids[keep]] = probs[keep]
        others = np.ones(vocab, dtype=bool)
        others[ids[keep]] = False
        if rest > 0 and others.any():
            out[others] = rest / others.sum()
        return out


def load_recording(path: str | Path) -> Recording:
    """Read a recording written by :meth:`Recorder.save` and verify it (module docstring).

    Raises :class:`InputFileError` for a file that cannot be read as an ``.npz`` archive
    (missing, truncated, corrupt) and :class:`InvalidDistributionError` for one that is not
    a consistent recording, each with a one-line message that names the event at fault.
    """
    try:
        with load_numpy(path, "npz") as data:
            if "meta" not in data.files:
                raise InvalidDistributionError(f"{path}: not an otm decode recording (no 'meta')")
            meta = json.loads(str(data["meta"]))
            missing = [k for k in _ALL_KEYS if k not in data.files]
            arrays = {k: data[k] for k in _ALL_KEYS if k in data.files}
    except InvalidDistributionError:
        raise
    except (OSError, ValueError, EOFError, KeyError, NotImplementedError, zipfile.BadZipFile, zlib.error) as exc:
        raise InputFileError(f"{path}: not a readable otm decode recording (.npz): {type(exc).__name__}: {exc}") from None
    if not isinstance(meta, dict) or meta.get("format") != RECORDING_FORMAT or missing:
        what = meta.get("format") if isinstance(meta, dict) else type(meta).__name__
        raise InvalidDistributionError(f"{path}: not an otm decode recording (format {what!r}, missing {missing})")
    _check_meta(path, meta)
    arrays = _checked_arrays(path, arrays, meta["vocab_size"])
    recording = Recording(meta, arrays)
    _check_laws(path, recording)
    return recording


def _check_meta(path, meta: dict) -> None:
    if meta.get("version") not in READABLE_VERSIONS:
        raise InvalidDistributionError(f"{path}: recording version {meta.get('version')!r}; this toolkit reads {READABLE_VERSIONS}")
    vocab = meta.get("vocab_size")
    if isinstance(vocab, bool) or not isinstance(vocab, int) or vocab < 1:
        raise InvalidDistributionError(f"{path}: meta vocab_size must be an integer >= 1, got {vocab!r}")
    if not isinstance(meta.get("rule"), str):
        raise InvalidDistributionError(f"{path}: meta has no rule name, got {meta.get('rule')!r}")
    if not isinstance(meta.get("dtype", "float64"), str):
        raise InvalidDistributionError(f"{path}: meta dtype must be a dtype name, got {meta.get('dtype')!r}")


def _checked_arrays(path, arrays: dict, vocab: int) -> dict:
    """The arrays as int64 / float64 after checking kinds, shapes and integer ranges."""
    out = {}
    for key, a in arrays.items():
        floating = key in _FLOAT_KEYS
        if a.dtype.kind not in ("f" if floating else "iu") and not (floating and a.dtype.kind in "iu"):
            raise InvalidDistributionError(f"{path}: array {key!r} has dtype {a.dtype}, expected {'floats' if floating else 'integers'}")
        out[key] = a.astype(np.float64 if floating else np.int64)
    n = len(out["k"]) if out["k"].ndim == 1 else -1
    for key, a in out.items():
        ndim = 2 if key in _ROW_KEYS else 1
        if a.ndim != ndim or a.shape[0] != n:
            raise InvalidDistributionError(f"{path}: array {key!r} has shape {a.shape}, expected {ndim}-D with "
                                           f"{max(n, 0)} events (one per row of 'k')")
    for group in (("drafts", "drafts_p", "drafts_q"), ("p_ids", "p_probs", "q_ids", "q_probs")):
        widths = {out[key].shape[1] for key in group}
        if len(widths) > 1:
            raise InvalidDistributionError(f"{path}: arrays {group} must have the same width, got {sorted(widths)}")
    k, drafts, accepted = out["k"], out["drafts"], out["accepted_index"]
    column = np.arange(drafts.shape[1])
    problems = [
        ("k outside 0..K (the drafts' width)", (k < 0) | (k > drafts.shape[1])),
        ("a draft token outside [0, V)", ((column < k[:, None]) & ((drafts < 0) | (drafts >= vocab))).any(axis=1)),
        ("accepted_index outside -1..k-1", (accepted < -1) | (accepted >= np.maximum(k, 0))),
        ("output token outside [0, V)", (out["output"] < 0) | (out["output"] >= vocab)),
    ]
    for which in ("p", "q"):
        ids = out[f"{which}_ids"]
        ordered = np.sort(ids, axis=1)
        problems.append((f"{which}_ids outside -1..V-1", ((ids < -1) | (ids >= vocab)).any(axis=1)))
        problems.append((f"a token listed twice in {which}_ids", ((ordered[:, 1:] == ordered[:, :-1]) & (ordered[:, 1:] >= 0)).any(axis=1)))
    for what, bad in problems:
        if bad.any():
            raise InvalidDistributionError(f"{path}: event {int(np.argmax(bad))}: {what}")
    chosen = np.take_along_axis(drafts, np.maximum(accepted, 0)[:, None], axis=1)[:, 0] if drafts.shape[1] else out["output"]
    wrong = (accepted >= 0) & (chosen != out["output"])
    if wrong.any():
        raise InvalidDistributionError(f"{path}: event {int(np.argmax(wrong))}: the output is not the accepted draft "
                                       "(accepted_index and output disagree)")
    return out


def _check_laws(path, recording: Recording) -> None:
    """Finite non-negative masses, ``recorded + remainder = 1`` within the recording's sum
    tolerance, and ``drafts_p`` / ``drafts_q`` equal to the recorded masses at the drafts
    (copies of the same numbers)."""
    a, tolerance = recording.arrays, recording.sum_tolerance
    for which in ("p", "q"):
        has_law = a["k"] > 0 if which == "q" else np.ones(len(a["k"]), dtype=bool)
        probs, rest = a[f"{which}_probs"], a[f"{which}_rest"]
        drafted = a[f"drafts_{which}"]
        values = np.concatenate([probs, rest[:, None], drafted], axis=1)
        bad = ~np.isfinite(values).all(axis=1) | (probs < 0).any(axis=1) | (drafted < 0).any(axis=1) | (rest < -tolerance)
        if bad.any():
            raise InvalidDistributionError(f"{path}: event {int(np.argmax(bad))}: a {which} mass or remainder is NaN, inf or negative")
        err = np.where(has_law, np.abs(probs.sum(axis=1) + rest - 1.0), 0.0)
        if len(err) and err.max() > tolerance:
            bad = int(err.argmax())
            raise InvalidDistributionError(
                f"{path}: event {bad}: recorded {which} mass + remainder = {probs[bad].sum() + rest[bad]:.9f}, off from 1 by "
                f"{err[bad]:.3g}, more than a {recording.meta.get('dtype', 'float64')} softmax over V = "
                f"{recording.meta['vocab_size']} can be (tolerance {tolerance:.3g}, otm.tolerances.sum_tolerance)"
            )
        for event in np.flatnonzero(a["k"] > 0):
            k = a["k"][event]
            listed = a[f"{which}_ids"][event][None, :] == a["drafts"][event, :k, None]  # [k, w]
            found = listed.any(axis=1)
            if found.any() and (a[f"{which}_probs"][event][listed.argmax(axis=1)[found]] != drafted[event, :k][found]).any():
                raise InvalidDistributionError(f"{path}: event {int(event)}: drafts_{which} differs from the recorded "
                                               f"{which} mass at a draft token")
