"""The corpus format (round trip across shard boundaries, damaged input) and the
per-position computations of a sweep against direct calls of the exact core."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

import otm
from otm.corpus import Corpus, CorpusWriter
from otm.distributions import logits_to_probs
from otm.errors import InputFileError, ShapeMismatchError, UnknownNameError
from otm.positions import check_computations, position_cells
from otm.tolerances import AGREEMENT_TOLERANCE


def _write(folder, lengths=(5, 3, 4), vocab=6, shard_size=4, dtype="float32"):
    rng = np.random.default_rng(0)
    rows = {}
    with CorpusWriter(folder, vocab, shard_size, dtype, source="test") as writer:
        for i, n in enumerate(lengths):
            z, w = rng.standard_normal((n, vocab)), rng.standard_normal((n, vocab))
            z[:, -1] = -np.inf  # a masked token survives the round trip
            writer.add(f"text{i}", z, w, np.arange(n) + 100 * i)
            rows[f"text{i}"] = (z, w)
    return rows


def test_round_trip_across_shard_boundaries(tmp_path):
    rows = _write(tmp_path)
    corpus = Corpus(tmp_path)
    assert corpus.n_positions == 12
    assert [s.positions for s in corpus.shards] == [4, 4, 4]
    seen = {}
    for index in range(len(corpus.shards)):
        shard = corpus.load(index)
        for r in range(shard.text.size):
            name = corpus.texts[shard.text[r]]
            seen[(name, int(shard.position[r]))] = (shard.target_logits[r], shard.draft_logits[r], int(shard.next_token[r]))
    assert len(seen) == 12
    for name, (z, w) in rows.items():
        for t in range(z.shape[0]):
            got_z, got_w, nxt = seen[(name, t)]
            np.testing.assert_array_equal(got_z, z[t].astype(np.float32))
            np.testing.assert_array_equal(got_w, w[t].astype(np.float32))
            assert nxt == t + 100 * int(name[-1])


def test_spaced_rows_at_a_temperature_and_top_p_are_the_core_softmax(tmp_path):
    """Evenly spaced rows (first and last included), each law its own softmax at the temperature
    and, with ``top_p``, cut to its own nucleus: :func:`otm.distributions.logits_to_probs`."""
    rows = _write(tmp_path)
    corpus = Corpus(tmp_path)
    for temperature, top_p in ((1.0, None), (0.7, 0.6)):
        spaced = corpus.spaced_rows(3, temperature, top_p)
        cut = sum(np.count_nonzero(p) for _, _, p, _ in spaced)
        assert (cut < 3 * 5) == (top_p is not None)  # 5 finite logits per row: the nucleus drops some
        assert [(name, position) for name, position, _, _ in spaced] == [("text0", 0), ("text1", 1), ("text2", 3)]
        for name, position, p, q in spaced:
            z, w = rows[name]
            np.testing.assert_array_equal(p, logits_to_probs(z[position].astype(np.float32).astype(np.float64),
                                                             temperature, top_p=top_p))
            np.testing.assert_array_equal(q, logits_to_probs(w[position].astype(np.float32).astype(np.float64),
                                                             temperature, top_p=top_p))


def test_float16_halves_the_shards(tmp_path):
    _write(tmp_path / "a", vocab=2000, dtype="float32")
    _write(tmp_path / "b", vocab=2000, dtype="float16")
    assert Corpus(tmp_path / "b").load(0).target_logits.dtype == np.float16
    size = lambda f: sum(p.stat().st_size for p in f.glob("shard-*.npz"))  # noqa: E731
    assert size(tmp_path / "b") < 0.75 * size(tmp_path / "a")


def test_bad_corpora_are_typed_errors(tmp_path):
    with pytest.raises(InputFileError, match="not an otm corpus"):
        Corpus(tmp_path)
    _write(tmp_path)
    (tmp_path / "shard-00001.npz").write_text("damaged")
    with pytest.raises(InputFileError, match="shard"):
        Corpus(tmp_path).load(1)
    manifest = json.loads((tmp_path / "corpus.json").read_text())
    (tmp_path / "corpus.json").write_text(json.dumps({**manifest, "format": "other"}))
    with pytest.raises(InputFileError, match="format"):
        Corpus(tmp_path)
    with pytest.raises(ShapeMismatchError):
        CorpusWriter(tmp_path / "x", 6).add("t", np.zeros((2, 6)), np.zeros((2, 5)))


ALL = ("optimum_iid", "optimum_without_replacement", "optimum_hub", "optimum_greedy", "single", "rrs", "rrs_wor", "kseq",
       "spechub", "greedy", "importance_sampling")


@pytest.mark.parametrize("seed", range(3))
def test_cells_equal_direct_calls_of_the_core(seed):
    rng = np.random.default_rng(seed)
    p, q = logits_to_probs(2 * rng.standard_normal(7)), logits_to_probs(2 * rng.standard_normal(7))
    cells = position_cells(p, q, [1, 2, 3], ALL, np.random.default_rng(1))
    by = {(c.computation, c.k): c for c in cells}
    for k in (1, 2, 3):
        assert abs(by["optimum_iid", k].value - otm.optimal_acceptance(p, q, k)) <= AGREEMENT_TOLERANCE
        assert abs(by["optimum_without_replacement", k].value - otm.optimal_acceptance(p, q, k, draft_scheme="without_replacement", method="max_flow")) <= AGREEMENT_TOLERANCE
        assert abs(by["optimum_greedy", k].value - otm.optimal_acceptance(p, q, k, draft_scheme="greedy", method="max_flow")) <= AGREEMENT_TOLERANCE
        for rule in ("rrs", "rrs_wor", "kseq", "greedy", "importance_sampling"):
            assert by[rule, k].method == "exact"  # V = 7: every law is cheap enough to enumerate
            enumerated = {} if rule == "importance_sampling" else {"method": "enumeration"}  # the slow reference
            assert abs(by[rule, k].value - float(otm.rule_acceptance(rule, p, q, k, **enumerated))) <= AGREEMENT_TOLERANCE
    assert by["optimum_hub", 2].value == pytest.approx(float(otm.rule_acceptance("spechub", p, q, 2)), abs=AGREEMENT_TOLERANCE)
    assert math.isnan(by["spechub", 3].value)
    assert by["spechub", 3].method == "not_applicable"
    assert by["single", 2].method == "not_applicable"


def test_rrs_wor_above_two_drafts_at_scale_is_labelled_monte_carlo_and_lp_rules_are_skipped():
    rng = np.random.default_rng(0)
    V = 5000
    p, q = logits_to_probs(3 * rng.standard_normal(V)), logits_to_probs(3 * rng.standard_normal(V))
    cells = position_cells(p, q, [2, 4], ("rrs_wor", "importance_sampling"), np.random.default_rng(1), mc_paths=512)
    by = {(c.computation, c.k): c for c in cells}
    assert by["rrs_wor", 2].method == "exact"
    assert by["rrs_wor", 4].method == "monte_carlo"
    assert by["rrs_wor", 4].std_error > 0
    assert by["rrs_wor", 2].value - 4 * by["rrs_wor", 4].std_error <= by["rrs_wor", 4].value  # more drafts accept more
    assert by["importance_sampling", 2].method == "skipped"
    assert "estimated" in by["importance_sampling", 2].note


def test_water_level_rules_are_the_optimum_without_replacement_where_they_run():
    """Both water-level columns are the optimum without replacement (water levels are probabilities), at any V:
    ``optimal_wor`` at every ``k``, which on a small row is its exact law too,
    ``optimal_pair_wor`` (its old name) the same; ``k = 1`` is not applicable."""
    rng = np.random.default_rng(4)
    p, q = logits_to_probs(2 * rng.standard_normal(7)), logits_to_probs(2 * rng.standard_normal(7))
    by = {(c.computation, c.k): c for c in position_cells(p, q, [1, 2, 3], ("optimal_pair_wor", "optimal_wor"), rng)}
    for k in (2, 3):
        optimum = otm.optimal_acceptance(p, q, k, draft_scheme="without_replacement", method="max_flow")
        assert abs(by["optimal_wor", k].value - optimum) <= AGREEMENT_TOLERANCE
        assert abs(float(otm.rule_acceptance("optimal_wor", p, q, k)) - optimum) <= AGREEMENT_TOLERANCE
    assert by["optimal_pair_wor", 2].value == by["optimal_wor", 2].value
    assert by["optimal_pair_wor", 3].value == by["optimal_wor", 3].value  # the old name of optimal_wor
    assert by["optimal_wor", 1].method == "not_applicable" and by["optimal_pair_wor", 1].method == "not_applicable"
    V = 5000
    p, q = logits_to_probs(3 * rng.standard_normal(V)), logits_to_probs(3 * rng.standard_normal(V))
    by = {(c.computation, c.k): c for c in position_cells(p, q, [2, 3, 8], ("optimal_wor", "optimum_without_replacement"), rng)}
    for k in (2, 3, 8):
        assert by["optimal_wor", k].method == "exact"
        assert by["optimal_wor", k].value == by["optimum_without_replacement", k].value


def test_computation_names_are_checked_and_aliases_resolved():
    assert check_computations(["optimum_iid", "is_truncated"]) == ("optimum_iid", "importance_sampling_truncated")
    with pytest.raises(UnknownNameError):
        check_computations(["optimum_best"])


@pytest.mark.parametrize("vocab, scale", [(5, 1.0), (3000, 3.0), (3000, 0.3)])
def test_all_k_fast_paths_equal_the_per_k_closed_forms(vocab, scale):
    """rrs / kseq / greedy for every k at once (shared chain or sort) against the rule laws, one k at a time."""
    from otm.positions import greedy_acceptance_for_ks, kseq_acceptance_for_ks, rrs_acceptance_for_ks

    rng = np.random.default_rng(vocab)
    p, q = logits_to_probs(scale * rng.standard_normal(vocab)), logits_to_probs(scale * rng.standard_normal(vocab))
    ks = [1, 2, 3, 5]
    for fast, rule in ((rrs_acceptance_for_ks, "rrs"), (kseq_acceptance_for_ks, "kseq"), (greedy_acceptance_for_ks, "greedy")):
        reference = [float(otm.rule_acceptance(rule, p, q, k, method="closed_form")) for k in ks]
        np.testing.assert_allclose(fast(p, q, ks), reference, rtol=0, atol=AGREEMENT_TOLERANCE, err_msg=rule)
    greedy_optimum = [otm.optimal_acceptance(p, q, k, draft_scheme="greedy") for k in ks]
    np.testing.assert_allclose(greedy_acceptance_for_ks(p, q, ks), greedy_optimum, rtol=0, atol=AGREEMENT_TOLERANCE)


def test_the_fast_path_check_fails_on_a_broken_shortcut():
    """Sharing the chain wrongly (alpha_1 reused for every step) is caught by the same comparison."""
    rng = np.random.default_rng(1)
    p, q = logits_to_probs(2 * rng.standard_normal(50)), logits_to_probs(2 * rng.standard_normal(50))
    alpha1 = float(np.minimum(p, q).sum())
    broken = [1 - (1 - alpha1) ** k for k in (2, 3)]
    reference = [float(otm.rule_acceptance("rrs", p, q, k)) for k in (2, 3)]
    assert np.abs(np.subtract(broken, reference)).max() > AGREEMENT_TOLERANCE
