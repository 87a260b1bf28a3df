"""Recording of a speculative decode: every verification, with ``p``, ``q``, drafts and output.

A recording is one ``.npz`` file (``numpy.savez_compressed``) holding one row per *event*:
a verification at a tree node (``k >= 1`` drafts) or a bonus draw at a leaf (``k = 0``).
``otm validate`` reads it with :func:`load_recording`.

Arrays (``n`` events, ``m = top_m`` kept tokens, ``K`` = largest ``k``):

=================  ===============  ====================================================
key                shape, dtype     meaning
=================  ===============  ====================================================
``meta``           0-d str          JSON: ``format`` (``"otm-decode-recording"``),
                                    ``version`` (1), ``rule``, ``tree``, ``temperature``,
                                    ``top_p``, ``vocab_size``, ``top_m``, ``full`` (``m = V``),
                                    plus caller fields (``pair``, ``seed``, prompts, ...;
                                    ``stopped``: a verifier's refusal that ended the
                                    decode, the events being those before it)
``step``           [n] int64        decoding step (0-based)
``row``            [n] int64        batch row (prompt index)
``depth``          [n] int64        depth of the node whose children are verified (root 0)
``node``           [n] int64        that node's id in the tree (breadth-first, root 0)
``k``              [n] int64        number of drafts verified (0 = bonus draw at a leaf)
``drafts``         [n, K] int64     the draft tokens ``x_1..x_k`` in verification order, -1 padded
``accepted_index`` [n] int64        index of the accepted draft, -1 = residual (or bonus)
``output``         [n] int64        the token emitted
``p_ids``          [n, m] int64     target's top-m token ids, by decreasing ``p``
``p_probs``        [n, m] float64   their probabilities
``p_rest``         [n] float64      mass of all other tokens (sum of their ``p``)
``q_ids``          [n, m] int64     draft's top-m ids (-1 where ``k = 0``: no draft law)
``q_probs``        [n, m] float64   their probabilities (0 where ``k = 0``)
``q_rest``         [n] float64      remainder (0 where ``k = 0``)
``drafts_p``       [n, K] float64   ``p`` at each draft token (exact, even outside the top-m)
``drafts_q``       [n, K] float64   ``q`` at each draft token
=================  ===============  ====================================================

``p`` is the target's sampling law at the node (after temperature / top-p); ``q`` is the
draft's law at the parent of the drafts (for i.i.d. rules the merged candidates of SpecTr (Sun et al. 2023)
Alg. 3 can come from several tree nodes with the same prefix: ``q`` is the first one's,
equal to the others up to float rounding). With ``top_m >= V`` (``full``) the ids are
``0..V-1`` in order and the rest is 0. :func:`load_recording` checks that every remainder is
``>= -SUM_TOLERANCE`` and that kept mass plus remainder is 1 within ``SUM_TOLERANCE``.
The joint draft law of an event is the rule's law for ``(q, k)`` (``meta["rule"]``;
nodes with one child use the single-draft rule).
"""
from __future__ import annotations

import json
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from otm.errors import InputFileError, InvalidDistributionError
from otm.files import load_numpy
from otm.tolerances import SUM_TOLERANCE

RECORDING_FORMAT = "otm-decode-recording"
RECORDING_VERSION = 1
#: Default number of most likely tokens kept per distribution.
DEFAULT_TOP_M = 64

_INT_KEYS = ("step", "row", "depth", "node", "k", "accepted_index", "output")
_ALL_KEYS = _INT_KEYS + ("drafts", "p_ids", "p_probs", "p_rest", "q_ids", "q_probs", "q_rest", "drafts_p", "drafts_q")


def _top(probs: torch.Tensor, m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Top-``m`` ids/probs of ``[n, V]`` rows (all ``V`` in id order when ``m >= V``) and remainders."""
    probs = probs.detach().to(torch.float64)
    if m >= probs.shape[1]:
        ids = torch.arange(probs.shape[1]).expand(probs.shape[0], -1)
        kept = probs
    else:
        kept, ids = probs.topk(m, dim=1)
    # the mass actually outside the top-m (not 1 - kept), so the load-time check tests the law's total
    rest = probs.sum(dim=1) - kept.sum(dim=1) if m < probs.shape[1] else torch.zeros(probs.shape[0], dtype=torch.float64)
    return ids.cpu().numpy().astype(np.int64), kept.cpu().numpy(), rest.cpu().numpy()


class Recorder:
    """Collects events during :func:`decoding.runtime.loop.speculative_decode` (``record=``) and
    writes them with :meth:`save`."""

    def __init__(self, top_m: int = DEFAULT_TOP_M, **meta):
        if top_m < 1:
            raise ValueError(f"top_m must be >= 1, got {top_m}")
        self.top_m = top_m
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
        self.meta["vocab_size"] = vocab
        p_ids, p_probs, p_rest = _top(target_probs, self.top_m)
        chunk = {
            "step": np.full(n, self.step), "row": rows.cpu().numpy(), "depth": np.full(n, depth),
            "node": nodes.cpu().numpy(), "output": output.cpu().numpy(),
            "p_ids": p_ids, "p_probs": p_probs, "p_rest": p_rest,
        }
        if drafts is None:
            width = p_ids.shape[1]
            chunk.update(k=np.zeros(n), accepted_index=np.full(n, -1), drafts=np.zeros((n, 0)),
                         q_ids=np.full((n, width), -1), q_probs=np.zeros((n, width)), q_rest=np.zeros(n),
                         drafts_p=np.zeros((n, 0)), drafts_q=np.zeros((n, 0)))
        else:
            q_ids, q_probs, q_rest = _top(draft_probs, self.top_m)
            chunk.update(k=np.full(n, drafts.shape[1]), accepted_index=accepted_index.cpu().numpy(),
                         drafts=drafts.cpu().numpy(), q_ids=q_ids, q_probs=q_probs, q_rest=q_rest,
                         drafts_p=target_probs.gather(1, drafts).double().cpu().numpy(),
                         drafts_q=draft_probs.gather(1, drafts).double().cpu().numpy())
        self._chunks.append(chunk)

    def arrays(self) -> dict[str, np.ndarray]:
        """The recording's arrays (module docstring), events in recording order."""
        if not self._chunks:
            raise InvalidDistributionError("nothing was recorded")
        width = max(c["drafts"].shape[1] for c in self._chunks)
        out = {}
        for key in _ALL_KEYS:
            parts = []
            for c in self._chunks:
                a = np.asarray(c[key])
                if key in ("drafts", "drafts_p", "drafts_q"):
                    pad = -1 if key == "drafts" else 0.0
                    a = np.pad(a, ((0, 0), (0, width - a.shape[1])), constant_values=pad)
                parts.append(a)
            dtype = np.float64 if key.endswith(("probs", "rest")) or key in ("drafts_p", "drafts_q") else np.int64
            out[key] = np.concatenate(parts).astype(dtype)
        return out

    def save(self, path: str | Path) -> Path:
        """Write the ``.npz`` recording; returns its path."""
        meta = {"format": RECORDING_FORMAT, "version": RECORDING_VERSION, "top_m": self.top_m, **self.meta}
        meta["full"] = self.top_m >= meta.get("vocab_size", self.top_m + 1)
        path = Path(path)
        np.savez_compressed(path, meta=np.asarray(json.dumps(meta)), **self.arrays())
        return path if path.suffix == ".npz" else path.with_name(path.name + ".npz")


@dataclass(frozen=True)
class Recording:
    """A loaded recording: ``meta`` (dict) and ``arrays`` (module docstring)."""

    meta: dict
    arrays: dict

    @property
    def n_events(self) -> int:
        return len(self.arrays["k"])

    def dense(self, event: int, which: str = "p") -> np.ndarray:  # [V]
        """The full ``p`` or ``q`` of an event; exact for a ``full`` recording, otherwise the
        top-m masses with the remainder spread evenly over the other tokens."""
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
    """Read and check a recording written by :meth:`Recorder.save`.

    Raises :class:`InvalidDistributionError` on a wrong format, missing arrays, or a
    remainder that is negative or does not complete the kept mass to 1 (``SUM_TOLERANCE``).
    """
    try:
        with load_numpy(path, "npz") as data:
            if not hasattr(data, "files") or "meta" not in data:
                raise InvalidDistributionError(f"{path}: not an otm decode recording (no 'meta')")
            meta = json.loads(str(data["meta"]))
            missing = [k for k in _ALL_KEYS if k not in data]
            arrays = {k: data[k] for k in _ALL_KEYS if k in data}
    except InvalidDistributionError:
        raise
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        raise InputFileError(f"{path}: not a readable otm decode recording (.npz): {exc}") from None
    if meta.get("format") != RECORDING_FORMAT or missing:
        raise InvalidDistributionError(f"{path}: not an otm decode recording (format {meta.get('format')!r}, missing {missing})")
    for which in ("p", "q"):
        has_law = arrays["k"] > 0 if which == "q" else np.ones(len(arrays["k"]), dtype=bool)
        probs, rest = arrays[f"{which}_probs"][has_law], arrays[f"{which}_rest"][has_law]
        if (rest < -SUM_TOLERANCE).any() or (probs < 0).any():
            raise InvalidDistributionError(f"{path}: negative {which} probability or remainder")
        err = np.abs(probs.sum(axis=1) + rest - 1.0)
        if len(err) and err.max() > SUM_TOLERANCE:
            bad = int(np.flatnonzero(has_law)[err.argmax()])
            raise InvalidDistributionError(
                f"{path}: event {bad}: kept {which} mass + remainder = {1 - err.max():.9f} (or {1 + err.max():.9f}), "
                f"off from 1 by more than SUM_TOLERANCE={SUM_TOLERANCE}"
            )
    return Recording(meta, arrays)
