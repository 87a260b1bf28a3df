"""Smoke tests of research/optimal_wor/pair_wor_verifier_at_scale.py and
research/optimal_wor/pair_wor_undecided_pairs.py on a synthetic corpus."""
from __future__ import annotations

from research.optimal_wor import pair_wor_undecided_pairs, pair_wor_verifier_at_scale
from tests.decoding.corpus_support import synthetic_corpus


def test_pair_wor_verifier_at_scale_on_a_small_corpus(tmp_path):
    """Every position gets a row, and the float levels realise the selection law (checked in
    200-bit floats) to the figures the docs quote for real rows."""
    synthetic_corpus(tmp_path, seed=1, rows=6, vocab=40, scale=3)
    text = pair_wor_verifier_at_scale.main(["--corpus", str(tmp_path / "corpus"), "--positions", "3", "--pairs", "2"])
    rows = [line.split(" | ") for line in text.splitlines() if line.startswith("| synthetic")]
    assert len(rows) == 3
    assert all(float(row[9]) <= 1e-12 and abs(float(row[10])) <= 1e-12 for row in rows)  # sum |x' - x|, alpha* - accepted


def test_pair_wor_undecided_pairs_on_a_small_corpus(tmp_path):
    """Every position and temperature gets a row and the totals a line; the nesting's answers
    for the pairs the first-run bounds leave agree with the full nesting."""
    synthetic_corpus(tmp_path, seed=2, rows=6, vocab=60, scale=4)
    text = pair_wor_undecided_pairs.main(["--corpus", str(tmp_path / "corpus"), "--positions", "3", "--checks", "200"])
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in text.splitlines()]
    rows = [row for row in cells if row[1:2] == ["synthetic"]]
    assert len(rows) == 6  # 3 positions x 2 temperatures
    (total,) = [row for row in cells if row[0] == "all"]
    assert int(total[3]) > 0  # some pairs were left to the nesting (105 with this seed)
    assert total[-1] == "0" and all(row[-1] == "0" for row in rows)


def test_pair_wor_undecided_pairs_tally(tmp_path):
    """With ``--tally`` the refreshes' bins add up to the refreshes, row by row and in all,
    and the answers are the same."""
    synthetic_corpus(tmp_path, seed=2, rows=6, vocab=60, scale=4)
    args = ["--corpus", str(tmp_path / "corpus"), "--positions", "3", "--checks", "200"]
    plain = pair_wor_undecided_pairs.main(args)
    text = pair_wor_undecided_pairs.main(args + ["--tally"])
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in text.splitlines()]
    rows = [row for row in cells if row[1:2] == ["synthetic"] or row[0] == "all"]
    assert len(rows) == 7
    assert all(sum(int(v) for v in row[8:12]) == int(row[6]) for row in rows)
    assert int(rows[-1][12]) + int(rows[-1][13]) > 0  # the chains emptied cuts
    plain_rows = [line.split("|")[1:9] for line in plain.splitlines() if line.startswith(("| 1.0", "| 0.6", "| all"))]
    assert [row[:5] + row[6:8] for row in plain_rows] == [
        line.split("|")[1:6] + line.split("|")[7:9] for line in text.splitlines() if line.startswith(("| 1.0", "| 0.6", "| all"))]
