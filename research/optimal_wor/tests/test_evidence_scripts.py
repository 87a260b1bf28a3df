"""Smoke tests of the evidence scripts that docs/optimal-verifier.md cites and that have no test of
their own elsewhere: research/optimal_wor/wor_pair_rules.py, wor_water_levels.py,
wor_run_structure.py and wor_levels_above_one.py, on a few instances or a small synthetic corpus."""
from __future__ import annotations

from research.optimal_wor import wor_levels_above_one, wor_pair_rules, wor_run_structure, wor_water_levels
from tests.decoding.corpus_support import synthetic_corpus, table_rows


def _table(printed: str) -> list[list[str]]:
    """The body rows of the markdown table in ``printed`` (from its header line on), cells stripped."""
    lines = printed.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("|"))
    table = "\n".join(lines[first:]).split("\n\n")[0]
    return [[cell.strip() for cell in row] for row in table_rows(table)]


def test_wor_pair_rules_water_levels_attain_the_optimum_where_other_families_fall_short(capsys):
    wor_pair_rules.main(["--instances", "20"])
    rows = {row[0].strip("`"): row[1] for row in _table(capsys.readouterr().out)}
    assert rows["water_levels"] == "0 of 20" and rows["all"] == "0 of 20"
    assert rows["exchanges"] != "0 of 20"  # Theorem 1's exchanges do not carry over (the table's point)


def test_wor_water_levels_in_exact_rationals(capsys):
    """Every instance: no level above 1, the acceptance is alpha*, the enumerated selection law is x."""
    wor_water_levels.main(["--instances", "8"])
    rows = _table(capsys.readouterr().out)
    assert sum(int(row[1]) for row in rows) == 8
    assert all(row[2:5] == ["0", "0", "0"] and 0 <= float(row[5]) <= 1 for row in rows)


def test_wor_run_structure_and_levels_above_one_on_a_small_corpus(tmp_path, capsys):
    synthetic_corpus(tmp_path, seed=3, rows=4, vocab=200, scale=3)
    corpus = str(tmp_path / "corpus")
    wor_run_structure.main(["--corpus", corpus, "--positions", "2"])
    rows = _table(capsys.readouterr().out)
    assert len(rows) == 4  # 2 positions x 2 temperatures
    for row in rows:
        cut, ranks = row[3].rstrip(")").split(" (")
        assert 0 <= int(cut) <= int(ranks) == 200 and 0 <= float(row[5]) <= 1 and int(row[7]) <= int(ranks)
    wor_levels_above_one.main(["--corpus", corpus, "--positions", "2", "--top", "100", "--k", "2"])
    rows = _table(capsys.readouterr().out)
    assert len(rows) == 2 and all(row[3] == "0" and float(row[4]) <= 1 and row[11] == "0" for row in rows)
