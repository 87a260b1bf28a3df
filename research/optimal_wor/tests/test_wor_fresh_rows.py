"""Smoke tests of research/optimal_wor/wor_fresh_rows.py: each measurement runs in processes of
its own (``python -m research.optimal_wor.wor_fresh_rows`` from the repository root)."""
from __future__ import annotations

from research.optimal_wor import wor_fresh_rows
from tests.decoding.corpus_support import table_rows


def test_wor_fresh_rows_times_every_row(capsys):
    """A process per budget, one time per fresh row; and the same row ten times, kept and
    dropped."""
    assert wor_fresh_rows.main(["--rows", "2", "--kept-floats", "0,20000000"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 2 and all(len(line.split("seconds per fresh row ")[1].split()) == 2 for line in lines)
    assert wor_fresh_rows.main(["--same-row", "--k", "3"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert [line.split(",")[2].split(":")[0].strip() for line in lines] == ["results dropped", "results kept"]
    assert all(len(line.split(": ")[1].split()) == 10 for line in lines)


def test_wor_fresh_rows_compares_checkpoint_spacings(capsys):
    """``--checkpoints``: a row of the table per (round, k, spacing), each verifying the fresh
    rows it names (a time, the rows refused, page faults)."""
    assert wor_fresh_rows.main(["--checkpoints", "64,256", "--ks", "3", "--rows", "2", "--rounds", "1"]) == 0
    rows = table_rows(capsys.readouterr().out)
    assert [(r[1].strip(), r[2].strip()) for r in rows] == [("3", "64"), ("3", "256")]
    for r in rows:
        assert float(r[3]) > 0 and r[4].strip().endswith("of 2") and int(r[5]) >= 0
