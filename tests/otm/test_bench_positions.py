"""Smoke test of scripts/bench_positions.py on a small vocabulary: the section it writes (one row
per default column of the report, beside a committed ``otm``), and its replacement in a file."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

import bench_positions

ROOT = Path(__file__).resolve().parents[2]


def _has_git_head() -> bool:
    return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True).returncode == 0


@pytest.mark.skipif(not _has_git_head(), reason="needs the git repository (the baseline is a commit)")
def test_the_section_times_every_default_column_beside_a_commit(tmp_path):
    out = tmp_path / "benchmarks.md"
    out.write_text("# Benchmarks\n\n## Another section\n\nkept\n")
    section = bench_positions.main(["--rows", "1", "--repeats", "1", "--vocab", "300", "--baseline", "HEAD",
                                    "--out", str(out)])
    text = out.read_text()
    assert text.startswith("# Benchmarks\n\n## Another section\n\nkept\n") and text.endswith(section)
    for name in ("optimum_iid", "optimum_without_replacement", "rrs_wor", "kseq", "optimal_wor", "**all**"):
        assert f"| {name} |" in section
    assert "| computation | before (s) | before share | after (s) | after share | ratio |" in section
    assert "Cells compared: 160," in section  # 1 row x 2 temperatures x 10 columns x 8 k
    assert "Projected step 2" in section
    again = bench_positions.main(["--rows", "1", "--repeats", "1", "--vocab", "300", "--out", str(out)])
    assert out.read_text().count(bench_positions.HEADING) == 1 and out.read_text().endswith(again)
    assert "| computation | after (s) | after share |" in again


def test_bad_arguments_are_refused():
    with pytest.raises(SystemExit):
        bench_positions.main(["--rows", "0"])
