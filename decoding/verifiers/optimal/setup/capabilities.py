"""What a set-up backend can do, declared next to its code (one ``CAPABILITIES`` per backend
module of :mod:`decoding.verifiers.optimal.setup`)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SetupCapabilities:
    """``devices``: the torch device types it runs on (``"cpu"``, ``"cuda"``); ``max_k``: the
    largest ``k`` it handles (``None``: any); ``max_threads``: it is picked only where the pass
    would be shared among at most this many threads (``None``: any); ``checkpoint``: the spacing
    of the prefix checkpoints it is run at (the masses class of a device takes that of the
    backends it may pick); ``all_groups``: its pass makes every group of ranks at once (else
    ``group_tables`` makes those a walk reads); ``automatic``: :func:`~decoding.verifiers.optimal.setup.pick`
    may choose it (the reference is named by the tests only)."""

    name: str
    devices: tuple[str, ...]
    max_k: int | None
    max_threads: int | None
    checkpoint: int
    all_groups: bool
    automatic: bool
    description: str

    def handles(self, device_type: str, k: int, threads: int | None = None) -> str | None:
        """``None`` where it runs on ``device_type`` at ``k`` shared among ``threads`` threads
        (``None``: whatever the threads), else why not (a phrase)."""
        if device_type not in self.devices:
            return f"runs on {', '.join(self.devices)}, not {device_type}"
        if self.max_k is not None and k > self.max_k:
            return f"handles k <= {self.max_k}, not k={k}"
        if self.max_threads is not None and threads is not None and threads > self.max_threads:
            return f"is picked for at most {self.max_threads} threads, not {threads}"
        return None


__all__ = ["SetupCapabilities"]
