"""scripts/bench_decoding.py writes its own section of docs/benchmarks.md and keeps the rest
of the file: the other benchmarks' tables and notes above and below it."""
from __future__ import annotations

import shutil
from pathlib import Path

import bench_decoding

ROOT = Path(__file__).resolve().parents[2]

SAVED = ROOT / "docs" / "figures" / "decoding_results.json"


def test_with_section_replaces_only_its_section():
    first = bench_decoding.with_section("# Benchmarks\n\nother tables\n", "## Decoding\n\nold\n")
    assert first.startswith("# Benchmarks\n\nother tables\n\n" + bench_decoding.SECTION_BEGIN)
    around = first + "\n## Notes written later\n"
    again = bench_decoding.with_section(around, "## Decoding\n\nnew\n")
    assert again == around.replace("old", "new")
    assert bench_decoding.with_section(again, "## Decoding\n\nnew\n") == again
    assert bench_decoding.with_section("", "## Decoding\n") == (
        f"{bench_decoding.SECTION_BEGIN}\n## Decoding\n{bench_decoding.SECTION_END}\n")


def test_rendering_keeps_the_rest_of_the_benchmarks_file(tmp_path):
    """Re-rendering from the saved results (no models) into a copy of a benchmarks file
    keeps its text, twice over, with one decoding section."""
    shutil.copy(SAVED, tmp_path / "decoding_results.json")
    out = tmp_path / "benchmarks.md"
    out.write_text("# Benchmarks: the exact optimum\n\n### (a) a table kept\n")
    argv = ["--from-json", str(tmp_path / "decoding_results.json"), "--out", str(out), "--figures", str(tmp_path)]
    bench_decoding.main(argv)
    text = out.read_text()
    assert text.startswith("# Benchmarks: the exact optimum\n\n### (a) a table kept\n")
    assert text.count("### 1. Block efficiency") == 1
    bench_decoding.main(argv)
    assert out.read_text() == text
