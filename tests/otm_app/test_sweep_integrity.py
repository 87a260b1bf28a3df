"""Nothing a sweep reads back is trusted unverified: a damaged, truncated or unrecorded
Parquet part is recomputed (one line each, naming it and why) and refused by ``read_table``;
an unreadable ``sweep.json`` is a typed error; corpus shards and manifests are checked by
their checksums and contents, and rows of NaN or infinite logits are refused when written and
named (text, position, shard) when read, in one line, without retries."""
from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from otm.corpus import MANIFEST, Corpus, CorpusWriter
from otm.errors import InputFileError, InvalidArgumentError, InvalidDistributionError
from otm_app.cli import main
from otm_app.configs import SweepConfig
from otm_app.sweep import engine
from otm_app.sweep.engine import CHECKSUMS, PARTS, STATE_FILE, run_sweep
from otm_app.sweep.summary import read_table

COMPUTATIONS = ("optimum_iid", "rrs_wor", "spechub")
ORDER = [(c, "ascending") for c in ("text", "position", "temperature", "computation", "k")]


def write_corpus(folder: Path, vocab: int = 10) -> Path:
    """Texts of 5 and 3 positions in shards of 4 positions, seeded."""
    rng = np.random.default_rng(0)
    with CorpusWriter(folder, vocab_size=vocab, shard_size=4, source="test") as writer:
        for i, n in enumerate((5, 3)):
            writer.add(f"text{i}", 2 * rng.standard_normal((n, vocab)), 2 * rng.standard_normal((n, vocab)))
    return folder


def legacy_corpus_with(folder: Path, shard: int, row: int, model: str, value: float) -> Path:
    """A corpus as written before the checks (no checksums), one logit of it set to ``value``."""
    write_corpus(folder)
    path = folder / f"shard-{shard:05d}.npz"
    with np.load(path) as data:
        arrays = dict(data)
    arrays[f"{model}_logits"][row, 3] = value
    np.savez(path, **arrays)
    manifest = json.loads((folder / MANIFEST).read_text())
    manifest.pop("sha256")
    for entry in manifest["shards"]:
        entry.pop("sha256")
    (folder / MANIFEST).write_text(json.dumps(manifest))
    return folder


def config_for(corpus: Path, out: Path, **changes) -> SweepConfig:
    settings = dict(corpus=str(corpus), out=str(out), ks=(1, 2, 3), computations=COMPUTATIONS, workers=1,
                    positions_per_task=2, time_budget=0.0, mc_paths=16, quiet=True)
    return SweepConfig(**{**settings, **changes})


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    """One finished sweep (8 positions, 4 tasks); tests work on copies of its folder."""
    root = tmp_path_factory.mktemp("swept")
    corpus = write_corpus(root / "corpus")
    run_sweep(config_for(corpus, root / "out"))
    return corpus, root / "out"


def copy_of(swept, tmp_path) -> Path:
    return Path(shutil.copytree(swept[1], tmp_path / "out"))


def test_damaged_or_unrecorded_parts_are_recomputed_with_one_line_each(swept, tmp_path, capsys):
    """Flipped bytes (the old engine trusted them: a stored acceptance became another
    number), a truncated file (the old engine stopped on it for good) and a part whose
    checksum was never recorded are each recomputed, with one line naming the part and why;
    the recomputed table is the original one. A leftover hidden temporary file is ignored."""
    out = copy_of(swept, tmp_path)
    before = read_table(out).sort_by(ORDER).drop(["seconds"])
    parts = sorted((out / PARTS).glob("*.parquet"))
    flipped, truncated, unrecorded, intact = parts
    data = bytearray(flipped.read_bytes())
    data[len(data) // 2] ^= 0x10
    flipped.write_bytes(bytes(data))
    truncated.write_bytes(truncated.read_bytes()[:100])
    log = out / CHECKSUMS
    log.write_text("".join(line + "\n" for line in log.read_text().splitlines() if unrecorded.name not in line) + "cut sho")
    (out / PARTS / f".{intact.name}.tmp").write_bytes(b"half a part")
    for damaged in (flipped, truncated, unrecorded):
        with pytest.raises(InputFileError, match=damaged.name):
            read_table(out)
        damaged.rename(damaged.with_suffix(".aside"))  # the next one is reported once this one is out of the way
    for damaged in (flipped, truncated, unrecorded):
        damaged.with_suffix(".aside").rename(damaged)
    capsys.readouterr()

    result = run_sweep(config_for(swept[0], out))
    lines = capsys.readouterr().err.strip().splitlines()
    assert result["ran"] == 3 and result["skipped"] == 1
    assert lines == [f"otm sweep: recomputing {PARTS}/{flipped.name}: its bytes do not match the recorded checksum "
                     "(damaged after it was written)",
                     f"otm sweep: recomputing {PARTS}/{truncated.name}: its bytes do not match the recorded checksum "
                     "(damaged after it was written)",
                     f"otm sweep: recomputing {PARTS}/{unrecorded.name}: no checksum recorded (the sweep stopped before "
                     "recording it, or an older otm wrote it)"]
    assert read_table(out).sort_by(ORDER).drop(["seconds"]).equals(before)


def test_a_part_recorded_but_missing_is_refused_by_read_table(swept, tmp_path):
    out = copy_of(swept, tmp_path)
    part = sorted((out / PARTS).glob("*.parquet"))[1]
    part.unlink()
    with pytest.raises(InputFileError, match=f"{part.name}: missing, though {CHECKSUMS} records it"):
        read_table(out)


def test_an_unreadable_sweep_manifest_is_a_typed_error(swept, tmp_path):
    out = copy_of(swept, tmp_path)
    (out / STATE_FILE).write_text('{"fingerprint": "abc')  # cut short
    with pytest.raises(InputFileError, match="not a readable sweep manifest"):
        run_sweep(config_for(swept[0], out))
    (out / STATE_FILE).write_text("[1, 2]")
    with pytest.raises(InputFileError, match="not a readable sweep manifest"):
        run_sweep(config_for(swept[0], out))


def test_another_task_size_is_another_sweep(swept, tmp_path):
    """The task size names the parts: resuming with another would take a part of 2 positions
    for one of 3 (positions lost) or count positions twice, so it is refused."""
    out = copy_of(swept, tmp_path)
    with pytest.raises(InputFileError, match="different sweep"):
        run_sweep(config_for(swept[0], out, positions_per_task=3))


def test_corpus_manifest_and_shards_are_verified(tmp_path):
    corpus = write_corpus(tmp_path / "c")
    manifest = (corpus / MANIFEST).read_text()
    (corpus / MANIFEST).write_text(manifest.replace('"text1"', '"text7"'))  # still valid JSON
    with pytest.raises(InputFileError, match="checksum mismatch"):
        Corpus(corpus)
    (corpus / MANIFEST).write_text(manifest)
    shard = corpus / "shard-00001.npz"
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0x01
    shard.write_bytes(bytes(data))
    with pytest.raises(InputFileError, match="shard-00001.npz: not a readable corpus shard: checksum mismatch"):
        Corpus(corpus).load(1)
    (corpus / MANIFEST).write_text(json.dumps({"format": "otm-corpus-1", "vocab_size": 10}))
    with pytest.raises(InputFileError, match="not a valid corpus manifest"):
        Corpus(corpus)


def test_an_empty_corpus_and_no_positions_are_refused(tmp_path):
    """A corpus of no text made a sweep end in 'no sweep results; run otm sweep first', and
    ``spaced_rows(0)`` returned nothing silently (a negative count raised numpy's error)."""
    with CorpusWriter(tmp_path / "empty", vocab_size=4):
        pass
    with pytest.raises(InputFileError, match="the corpus holds no positions"):
        Corpus(tmp_path / "empty")
    corpus = Corpus(write_corpus(tmp_path / "c"))
    for positions in (0, -1):
        with pytest.raises(InvalidArgumentError, match="positions must be an integer >= 1"):
            corpus.spaced_rows(positions, 1.0)
    with pytest.raises(InvalidArgumentError, match="a text's name must be a string"):
        CorpusWriter(tmp_path / "d", vocab_size=4).add(7, np.zeros((1, 4)), np.zeros((1, 4)))


def test_a_damaged_shard_without_checksums_is_a_typed_error(tmp_path):
    """A corpus written before the checksums: the archive's own CRC catches flipped bytes
    (it raised an untyped ``BadZipFile`` before)."""
    corpus = legacy_corpus_with(tmp_path / "c", shard=0, row=0, model="target", value=0.5)
    shard = corpus / "shard-00000.npz"
    data = bytearray(shard.read_bytes())
    data[400] ^= 0xFF
    shard.write_bytes(bytes(data))
    with pytest.raises(InputFileError, match="shard-00000.npz: not a readable corpus shard"):
        Corpus(corpus).load(0)


@pytest.mark.parametrize("value, says", [(np.nan, "a logit nan at vocabulary index 3"),
                                         (np.inf, "a logit inf at vocabulary index 3")])
def test_the_writer_refuses_non_finite_logits_naming_text_and_position(tmp_path, value, says):
    logits = np.zeros((4, 6))
    logits[2, 3] = value
    writer = CorpusWriter(tmp_path / "c", vocab_size=6)
    with pytest.raises(InvalidDistributionError, match=f"text 'doc' position 2: the draft logits hold {says}"):
        writer.add("doc", np.zeros((4, 6)), logits)


def test_the_writer_refuses_a_row_without_mass_and_a_float16_overflow(tmp_path):
    empty = np.zeros((3, 6))
    empty[1] = -np.inf
    with pytest.raises(InvalidDistributionError, match="text 'doc' position 1: the target logits hold only -inf logits"):
        CorpusWriter(tmp_path / "a", vocab_size=6).add("doc", empty, np.zeros((3, 6)))
    large = np.zeros((3, 6))
    large[2, 4] = 1e5  # finite in float32, inf in float16
    with pytest.raises(InvalidDistributionError, match="text 'doc' position 2: the target logit 100000 at vocabulary index 4 overflows float16"):
        CorpusWriter(tmp_path / "b", vocab_size=6, dtype="float16").add("doc", large, np.zeros((3, 6)))
    CorpusWriter(tmp_path / "c", vocab_size=6, dtype="float32").add("doc", large, np.zeros((3, 6)))  # float32 holds it


def test_a_non_finite_row_is_named_by_the_reader(tmp_path):
    corpus = legacy_corpus_with(tmp_path / "c", shard=1, row=2, model="draft", value=np.nan)
    with pytest.raises(InputFileError, match=r"shard-00001.npz: text 'text1' position 1: the draft logits hold a logit nan"):
        Corpus(corpus).load(1)


def test_a_sweep_over_a_bad_corpus_is_one_line_without_retries(tmp_path, capfd, monkeypatch):
    """The old sweep retried the deterministic failure (``--retries`` times per task), printed
    worker tracebacks and named only a vocabulary index: now each task runs once and the
    error is one line naming the shard, the text and the position."""
    corpus = legacy_corpus_with(tmp_path / "c", shard=1, row=2, model="draft", value=np.nan)
    attempts = tmp_path / "attempts"
    attempts.mkdir()
    real = engine.run_task

    def counted(corpus_folder, task, settings, parts):
        marker = attempts / task.file
        marker.write_text(marker.read_text() + "x" if marker.exists() else "x")
        return real(corpus_folder, task, settings, parts)

    monkeypatch.setattr(engine, "run_task", counted)
    status = main(["sweep", str(corpus), "--out", str(tmp_path / "out"), "--ks", "1-2", "--computations", "optimum_iid",
                   "--workers", "1", "--positions-per-task", "4", "--retries", "2", "--quiet", "--no-figures"])
    err = capfd.readouterr().err
    assert status == 2
    assert err.strip().splitlines() == [f"otm sweep: error: {corpus / 'shard-00001.npz'}: text 'text1' position 1: the draft "
                                        "logits hold a logit nan at vocabulary index 3; write the corpus again from finite logits"]
    assert (attempts / "part-00001-000000.parquet").read_text() == "x"  # one attempt: no retry


def test_settings_repeat_nothing(swept):
    """A repeated ``k`` (or temperature, computation alias) would count its positions twice."""
    config = dataclasses.replace(config_for(*swept), ks=(2, 1, 2), temperatures=(1.0, 1.0),
                                 computations=("is_truncated", "importance_sampling_truncated"))
    settings = engine.settings_of(config)
    assert (settings.ks, settings.temperatures, settings.computations) == ((2, 1), (1.0,), ("importance_sampling_truncated",))
