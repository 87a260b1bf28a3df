"""``otm report``'s engine (otm_app/report): the per-position tiers against direct calls,
the report end to end (``--no-models``, ``--pair tiny``) and the missing-models error."""
import json
import math
import re

import numpy as np
import pytest

from decoding.models import ModelPackageMissingError
from decoding.models import qwen
from otm_app.configs import ReportConfig
from otm_app.report.decode import rule_tree
from otm_app.report.position_sweep import PositionSettings, analyse_positions, optimum_vs_temperature, spaced_rows
from otm_app.report.run import command_line, run_report, summarise_theorems, summary_table
from otm_app.report.sources import resolve_texts
from otm.tables import OPTIMAL_IID, OPTIMAL_WOR
from otm.distributions import logits_to_probs
from otm.errors import OTMError, UnknownNameError
from otm.optimum import optimal_acceptance
from otm.rules import rule_acceptance
from otm.tolerances import AGREEMENT_TOLERANCE

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: Standard errors a seeded Monte Carlo estimate may stray from the exact value.
MC_SIGMAS = 5.0


def _pair(rng, vocab, scale=2.0):
    return logits_to_probs(scale * rng.standard_normal(vocab)), logits_to_probs(scale * rng.standard_normal(vocab))


# --------------------------------------------------------------------------- per-position tiers


def test_spaced_rows():
    assert spaced_rows(5, 0).tolist() == [0, 1, 2, 3, 4]
    assert spaced_rows(5, 9).tolist() == [0, 1, 2, 3, 4]
    assert spaced_rows(101, 3).tolist() == [0, 50, 100]


def _scored(rng, positions=5, vocab=6):
    from decoding.models.teacher_forcing import TextScores
    from otm_app.report.sources import ScoredTexts

    z, w = 2.0 * rng.standard_normal((positions, vocab)), 2.0 * rng.standard_normal((positions, vocab))
    return ScoredTexts([TextScores("toy", np.arange(positions + 1), z.astype(np.float32), w.astype(np.float32))], ["toy"], "test"), z, w


def test_analyse_positions_matches_direct_calls(tmp_path):
    rng = np.random.default_rng(9)
    scored, z, w = _scored(rng)
    rules = ("single", "rrs", "rrs_wor", "kseq", "spechub")
    settings = PositionSettings(ks=(1, 2, 3), rules=rules, positions=3, workers=1)
    result = analyse_positions(scored, (0.7,), settings, tmp_path)[0.7]
    assert result.rows.tolist() == [0, 2, 4]
    columns = result.table.columns
    for j, i in enumerate(result.rows):
        p = logits_to_probs(z[i].astype(np.float32).astype(np.float64), 0.7)
        q = logits_to_probs(w[i].astype(np.float32).astype(np.float64), 0.7)
        for a, k in enumerate((1, 2, 3)):
            assert abs(columns[OPTIMAL_IID][j, a] - optimal_acceptance(p, q, k)) < AGREEMENT_TOLERANCE
            assert abs(columns[OPTIMAL_WOR][j, a] - optimal_acceptance(p, q, k, draft_scheme="without_replacement")) < AGREEMENT_TOLERANCE
            assert abs(columns["kseq"][j, a] - float(rule_acceptance("kseq", p, q, k))) < AGREEMENT_TOLERANCE
            assert abs(columns["rrs_wor"][j, a] - float(rule_acceptance("rrs_wor", p, q, k))) < AGREEMENT_TOLERANCE
        assert np.isnan(columns["single"][j, 1])
        assert np.isnan(columns["spechub"][j, 0])
    assert (result.mc_error == 0).all()  # V = 6: rrs_wor is enumerated exactly at every k
    assert "exact" in result.notes["rrs_wor"]
    assert not np.isnan(columns[OPTIMAL_IID]).any()


def test_optimum_vs_temperature_averages_the_optimum():
    rng = np.random.default_rng(10)
    z, w = rng.standard_normal((3, 5)), rng.standard_normal((3, 5))
    table = optimum_vs_temperature(z, w, [0, 2], [0.5, 1.0], [1, 2])
    expected = np.mean([optimal_acceptance(logits_to_probs(z[i], 0.5), logits_to_probs(w[i], 0.5), 2) for i in (0, 2)])
    assert abs(table.columns["k = 2"][0] - expected) < AGREEMENT_TOLERANCE


# --------------------------------------------------------------------------- small helpers


def test_summarise_theorems_counts_and_lists_failures():
    rows = [{"id": "a", "status": "holds"}, {"id": "b", "status": "fails", "note": "x"}, {"id": "c", "status": "not checkable"}]
    summary = summarise_theorems(rows)
    assert (summary["total"], summary["holds"], summary["fails"], summary["not checkable"]) == (3, 1, 1, 1)
    assert [r["id"] for r in summary["failing"]] == ["b", "c"]


def test_resolve_texts(tmp_path):
    assert len(resolve_texts(None)) == 6
    assert [t.name for t in resolve_texts("binary_search, river_town")] == ["binary_search", "river_town"]
    path = tmp_path / "mine.txt"
    path.write_text("def f():\n    return 1\n")
    assert resolve_texts(str(path))[0].kind == "user"
    with pytest.raises(UnknownNameError, match="binary_search"):
        resolve_texts("no_such_text")


def test_rule_tree_gives_single_a_chain():
    assert rule_tree("single", "binary:3") == "chain:3"
    assert rule_tree("block", "binary:2") == "chain:2"
    assert rule_tree("rrs", "binary:3") == "binary:3"


def _args(*argv):
    """The ReportConfig that ``otm report ARGV`` builds."""
    from otm_app.cli import build_parser

    return ReportConfig.from_mapping(build_parser().parse_args(["report", *argv]))


def test_command_line_lists_non_default_options():
    assert command_line(_args()) == "otm report"
    assert command_line(_args("--no-models", "--k-max", "3")) == "otm report --k-max 3 --no-models"
    assert command_line(ReportConfig(k_max=3, no_models=True)) == "otm report --k-max 3 --no-models"


@pytest.mark.parametrize("changes, error", [({"k_max": 0}, OTMError), ({"rules": ("rrs", "nope")}, UnknownNameError),
                                            ({"rules": ("ensemble_weighted",)}, UnknownNameError)])
def test_bad_options_raise_typed_errors(tmp_path, changes, error):
    with pytest.raises(error):
        run_report(ReportConfig(no_models=True, out=str(tmp_path), quiet=True, **changes))


# --------------------------------------------------------------------------- end to end


THEOREM_ROWS = [
    {"id": "x.holds", "status": "holds", "worst_slack": 0.5, "note": ""},
    {"id": "x.fails", "status": "fails", "worst_slack": -0.1, "note": "a counterexample"},
]


def _check_folder(folder, summary):
    assert (folder / "report.md").is_file()
    assert (folder / "summary.json").is_file()
    for name in summary["figures"].values():
        data = (folder / name).read_bytes()
        assert data.startswith(PNG_SIGNATURE)
        assert len(data) > 5000
    assert json.loads((folder / "summary.json").read_text())["mode"] == summary["mode"]


def test_no_models_report_end_to_end(tmp_path, capsys):
    folder = tmp_path / "toy-report"
    summary = run_report(_args("--no-models", "--out", str(folder), "--k-max", "3", "--quiet", "--positions", "6", "--sweep-positions", "4",
                               "--workers", "1"), THEOREM_ROWS)
    _check_folder(folder, summary)
    assert {"theorems", "acceptance", "decoding", "figures", "texts", "wall_seconds", "optimum_vs_temperature", "report"} <= set(summary)
    assert summary["mode"] == "toy"
    assert summary["decoding"]["rows"] == []
    assert summary["sequence_verifiers"]["rows"] == [] and "--no-models" in summary["sequence_verifiers"]["reason"]
    assert summary["theorems"]["fails"] == 1
    assert summary["theorems"]["failing"][0]["id"] == "x.fails"
    assert set(summary["acceptance"]) == {"0.6", "1"}
    block = summary["acceptance"]["1"]
    assert len(block["columns"]["rrs"]) == 3
    assert block["positions"] == 6
    assert not (folder / "corpus").exists()  # deleted unless --keep-corpus
    gains = block["optimal_gains"]
    assert set(gains) == {"rrs", "rrs_wor", "spechub"}
    assert min(gains["rrs"]["mean"]) >= -1e-12  # the optimum of the i.i.d. law is never below rrs on it
    assert gains["rrs"]["mean"][0] == pytest.approx(0.0, abs=1e-12)  # k = 1: both are the single-draft rule
    water = block["columns"]["optimal_wor"]  # k >= 2, where it attains the optimum without replacement
    assert math.isnan(water[0]) and water[1:] == block["columns"]["optimum_without_replacement"][1:]
    water_gain = block["optimal_wor_gains"]["rrs_wor"]["mean"]
    assert math.isnan(water_gain[0]) and water_gain[1] >= -1e-12  # RRSw (exact at k = 2) never beats its law's optimum
    assert block["optimal_wor_gains"]["rrs_wor"]["positions"] == [0, 6, 6]
    assert {"acceptance_vs_k_T1", "gaps_T1_k2", "gaps_T1_k3", "optimum_vs_temperature", "theorem_slacks"} <= set(summary["figures"])
    text = (folder / "report.md").read_text()
    assert "No model was run" in text
    assert "x.fails" in text
    assert "toy distributions only" in capsys.readouterr().out


def test_tiny_pair_report_end_to_end(tmp_path):
    folder = tmp_path / "tiny-report"
    summary = run_report(_args("--pair", "tiny", "--out", str(folder), "--k-max", "2", "--rules", "single,rrs,rrs_wor", "--max-new-tokens", "4",
                               "--quiet", "--json", "--sweep-positions", "4", "--workers", "1", "--keep-corpus"))
    _check_folder(folder, summary)
    rows = {r["rule"]: r for r in summary["decoding"]["rows"]}
    assert set(rows) == {"single", "rrs", "rrs_wor"}
    assert rows["single"]["tree"] == "chain:3"
    assert all(r["block_efficiency"] >= 1.0 for r in rows.values())
    assert summary["theorems"]["total"] == 0
    # the tiny vocabulary is small enough for rrs_wor's exact law
    assert "exact" in summary["acceptance"]["1"]["notes"]["rrs_wor"]
    assert "monte_carlo" not in summary["acceptance"]["1"]["notes"]["rrs_wor"]
    assert (folder / "corpus" / "corpus.json").is_file()  # --keep-corpus: reusable by otm sweep


def test_step_estimates_follow_the_cost_model(monkeypatch):
    """Step 2's estimate is the Dask cluster's start-up plus the columns on the workers, then
    the temperature sweep in the main process, the per-position costs scaled by the
    vocabulary; on a busy machine each part takes (others + its threads) / cores times its
    idle time."""
    from otm_app.report import budget

    full = budget.sweep_parts(760, 2, 8, 151_936, 2, 128, 7)
    assert full == [(budget.DASK_START_SECONDS + 760 * 2 * budget.SECONDS_PER_POSITION / 2, 2),
                    (128 * 7 * budget.SECONDS_PER_SWEEP_CELL, 1)]
    toy = budget.sweep_parts(48, 2, 8, 512, 2, 48, 7)  # --no-models: the start-up is most of it
    assert toy[0][0] == pytest.approx(budget.DASK_START_SECONDS + 48 * 2 * budget.SECONDS_PER_POSITION * 512 / 151_936 / 2)
    monkeypatch.setattr(budget.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(budget, "shares_by_session", lambda: False)  # threads share the cores fairly
    assert budget.slowdown(2, others=0.0) == 1.0 and budget.slowdown(1, others=5.0) == 3.0
    monkeypatch.setattr(budget, "other_busy_threads", lambda: 4.0)
    clock = budget.StepClock(quiet=True)
    clock.start("acceptance", "step 2/4", "the columns", full)
    assert clock.estimated["acceptance"] == pytest.approx(full[0][0] * 3.0 + full[1][0] * 2.5)
    assert clock.end("acceptance") >= 0 and set(clock.actual) == {"acceptance"}


def test_each_slow_step_prints_its_estimate_and_then_its_time(tmp_path, capsys, monkeypatch):
    """--no-models printed no estimate for its Dask step, and its total left out step 1 (the
    theorem suite): it said 14 s for a run of 82 s. Now step 2 is announced in every mode,
    each announced step ends with its actual time beside the estimate, and the total counts
    from the clock that timed step 1."""
    from otm_app.report import budget

    monkeypatch.setattr(budget, "other_busy_threads", lambda: 0.0)
    clock = budget.StepClock(quiet=False)
    clock.start("theorems", "step 1/4", "the theorem suite", [(budget.THEOREM_SUITE_SECONDS, 1)])
    clock.end("theorems")
    summary = run_report(_args("--no-models", "--out", str(tmp_path / "r"), "--k-max", "2", "--positions", "4", "--sweep-positions", "4",
                               "--workers", "1", "--temperatures", "1"), THEOREM_ROWS, clock)
    err = capsys.readouterr().err
    assert re.search(r"step 2/4, every column at 4 positions .*: about \d+ s", err)
    assert re.search(r"step 1/4 took \d+ s \(estimated \d+ s\)", err) and re.search(r"step 2/4 took \d+ s \(estimated \d+ s\)", err)
    seconds = summary["wall_seconds"]
    assert {"theorems", "acceptance", "writing", "total"} <= set(seconds) and set(summary["estimated_seconds"]) == {"theorems", "acceptance"}
    assert seconds["total"] >= seconds["theorems"] + seconds["acceptance"]
    assert "(estimated" in (tmp_path / "r" / "report.md").read_text()


def test_missing_model_packages_suggest_no_models(tmp_path, monkeypatch):
    monkeypatch.setenv("OTM_CACHE_DIR", str(tmp_path / "empty-cache"))
    real_find_spec = qwen.importlib.util.find_spec
    monkeypatch.setattr(qwen.importlib.util, "find_spec", lambda name, *a: None if re.search(r"_part\d+$", name) else real_find_spec(name, *a))
    with pytest.raises(ModelPackageMissingError, match="--no-models"):
        run_report(_args("--out", str(tmp_path / "out"), "--quiet"))


def test_sanity_check_flags_a_rule_above_its_own_optimum(tmp_path):
    from otm_app.report.run import _sanity_checks

    rng = np.random.default_rng(11)
    scored, _, _ = _scored(rng, positions=3)
    settings = PositionSettings(ks=(1, 2, 3), rules=("rrs", "rrs_wor"), workers=1, mc_paths=256)
    result = analyse_positions(scored, (1.0,), settings, tmp_path)[1.0]
    assert _sanity_checks(result, 256) == []
    columns = result.table.columns
    columns["rrs"][0, 1] = columns[OPTIMAL_IID][0, 1] + 0.01  # a broken rule
    columns["rrs_wor"][1, 1] = columns[OPTIMAL_WOR][1, 1] + 0.01  # k = 2: exact, no allowance
    problems = _sanity_checks(result, 256)
    assert len(problems) == 2
    assert "rrs exceeds" in problems[0]
    assert "rrs_wor" in problems[1]


def test_monte_carlo_cells_get_the_unsampled_paths_allowance_and_no_more(tmp_path):
    """A Monte Carlo cell (k = 3 on a vocabulary too large to enumerate) may exceed the
    optimum by its standard errors plus unseen_paths_bound (every sampled path can agree
    while rare paths reject); beyond that it is flagged."""
    from otm_app.report.run import MC_FLAG_SIGMAS, _sanity_checks
    from otm.rules.rrs_wor import unseen_paths_bound

    rng = np.random.default_rng(12)
    scored, _, _ = _scored(rng, positions=2, vocab=400)
    settings = PositionSettings(ks=(3,), rules=("rrs_wor",), workers=1, mc_paths=256)
    result = analyse_positions(scored, (1.0,), settings, tmp_path)[1.0]
    assert result.monte_carlo.all()
    allowed = MC_FLAG_SIGMAS * result.mc_error[0, 0] + unseen_paths_bound(256)
    result.table.columns["rrs_wor"][0, 0] = result.table.columns[OPTIMAL_WOR][0, 0] + 0.9 * allowed
    assert _sanity_checks(result, 256) == []
    result.table.columns["rrs_wor"][0, 0] = result.table.columns[OPTIMAL_WOR][0, 0] + 1.1 * allowed
    assert len(_sanity_checks(result, 256)) == 1


# --------------------------------------------------------------------------- sequence verifiers


def test_tiny_pair_report_has_sane_sequence_verifier_rows(tmp_path):
    """The sequence-verifier part of the report on the tiny pair: block against single on a
    chain, traversal against rrs_wor on the tree, paired per step; the checks pass."""
    folder = tmp_path / "tiny-sequence"
    summary = run_report(_args("--pair", "tiny", "--out", str(folder), "--k-max", "2", "--rules", "single,rrs_wor", "--max-new-tokens", "8",
                               "--quiet", "--json", "--sweep-positions", "4", "--workers", "1", "--tree", "binary:2"))
    sequence = summary["sequence_verifiers"]
    rows = {r["rule"]: r for r in sequence["rows"]}
    assert [(r["rule"], r["baseline"], r["tree"]) for r in sequence["rows"]] == [("block", "single", "chain:2"),
                                                                                   ("traversal", "rrs_wor", "binary:2")]
    assert sequence["checks"] == []
    for row in rows.values():
        assert row["steps"] >= 2 * 8 / 3  # two prompts, at most 3 tokens per step
        for key in ("rule", "baseline"):
            mean, error = row["expected_tokens"][key]
            assert 1.0 <= mean <= 3.0 and 0.0 <= error < 1.0
        gain, error = row["expected_tokens"]["gain"]
        assert gain == pytest.approx(row["expected_tokens"]["rule"][0] - row["expected_tokens"]["baseline"][0], abs=1e-12)
        assert 1.0 <= row["block_efficiency"] <= 3.0
    assert rows["block"]["min_gain"] >= -AGREEMENT_TOLERANCE  # per chain, block >= token-wise
    assert summary["wall_seconds"]["sequence_verifiers"] > 0
    text = (folder / "report.md").read_text()
    assert "## 4. Sequence verifiers" in text and "| traversal | `binary:2` |" in text and "Checks passed" in text
    assert "sequence verifiers:" in summary_table(summary)


def test_sequence_checks_flag_broken_rows():
    from otm_app.report.decode import sequence_checks

    good = {"rule": "block", "baseline": "single", "tree": "chain:3", "min_gain": 0.0,
            "expected_tokens": {"rule": [2.5, 0.1], "baseline": [2.2, 0.1], "gain": [0.3, 0.05]}}
    assert sequence_checks([good]) == []
    below = dict(good, min_gain=-0.01)  # block below token-wise on some chain
    outside = dict(good, tree="chain:1")  # 2.5 tokens per call from one draft
    assert "below token-wise" in sequence_checks([below])[0]
    assert "outside [1, 2]" in sequence_checks([outside])[0]
    assert sequence_checks([dict(good, rule="traversal", baseline="rrs_wor", tree="binary:3", min_gain=-0.2)]) == []


def test_step_values_pair_the_verifiers_on_the_same_drafts():
    """StepValues (the observe callback) gives, on a drafted chain, block >= token-wise per
    row, and on a chain traversal's pair equals block's (docs/sequences.md, section 9)."""
    import torch

    from otm_app.report.decode import StepValues
    from decoding.runtime.trees import parse_tree

    rng = np.random.default_rng(3)
    rows, depth, vocab = 200, 3, 6
    tree = parse_tree(f"chain:{depth}")
    target = torch.as_tensor(rng.dirichlet(np.ones(vocab), size=(rows, depth + 1)))
    draft = torch.as_tensor(rng.dirichlet(np.ones(vocab), size=(rows, depth + 1)))
    tokens = torch.zeros(rows, depth + 1, dtype=torch.int64)
    tokens[:, 1:] = torch.multinomial(draft[:, :depth].reshape(-1, vocab), 1).reshape(rows, depth)
    chain, walk = StepValues("block", "iid"), StepValues("traversal", "iid")
    chain(tree, tokens, target, draft)
    walk(tree, tokens, target, draft)
    assert min(np.subtract(chain.sequence, chain.baseline)) >= -AGREEMENT_TOLERANCE
    assert np.allclose(chain.sequence, walk.sequence, rtol=0, atol=AGREEMENT_TOLERANCE)
    assert np.allclose(chain.baseline, walk.baseline, rtol=0, atol=AGREEMENT_TOLERANCE)
    single = StepValues("block", "iid")  # float32 models: computed in float64 from the float32 laws
    single(tree, tokens, target.float(), draft.float())
    reference = StepValues("block", "iid")
    reference(tree, tokens, target.float().double(), draft.float().double())
    assert single.sequence == reference.sequence and single.baseline == reference.baseline


@pytest.mark.parametrize("change, says", [
    ({"max_new_tokens": 0}, "--max-new-tokens must be >= 1"), ({"positions": -1}, "--positions must be >= 0"),
    ({"seed": -2}, "--seed must be >= 0"), ({"tree": "nonsense"}, "tree spec 'nonsense'"),
    ({"decode_temperature": -1.0}, "--decode-temperature must be"),
])
def test_report_settings_are_checked_before_the_theorem_suite(monkeypatch, change, says):
    """``otm report`` checks its settings before step 1 (the theorem suite, about a minute): a
    ``--max-new-tokens 0`` used to get its error after it, and ``--positions -1`` or a negative
    seed none at all."""
    import dataclasses

    from otm_app.commands import report as command

    monkeypatch.setattr(command, "run_theorems", lambda **kwargs: pytest.fail("the theorem suite ran first"))
    with pytest.raises(OTMError, match=re.escape(says)):
        command.run_report_command(dataclasses.replace(ReportConfig(quiet=True), **change))


# --------------------------------------------------------------------------- paired comparison of the rules

#: Verifications (or walks) sampled per comparison with an exact conditional value.
PAIRED_SAMPLES = 20_000
#: The rules the paired comparison evaluates and a k at which each is defined.
PAIRED_RULES = [("rrs", 3), ("rrs_wor", 3), ("kseq", 3), ("spechub", 2), ("greedy", 3), ("optimal", 3), ("optimal_wor", 3),
                ("optimal_wor", 2)]


@pytest.mark.parametrize("rule, k", PAIRED_RULES)
def test_descent_probabilities_are_the_verifiers_own(rule, k):
    """m(t | x), computed from the rule's exact kernel, against the frequency with which the
    rule's batched verifier, given the same drafts, accepts a draft holding t (the event
    on which the decoding loop moves down the tree)."""
    import torch

    from decoding.verifiers import get_verifier
    from otm_app.report.paired import descent_probabilities

    rng = np.random.default_rng(k + len(rule))
    vocab = 5
    p, q = (torch.as_tensor(rng.dirichlet(0.7 * np.ones(vocab))) for _ in range(2))
    verifier, generator = get_verifier(rule), torch.Generator().manual_seed(3)
    drafts = verifier.sample_drafts(q.unsqueeze(0), k, generator)[0]
    moves = descent_probabilities(rule, p, q, drafts.tolist())
    assert set(moves) == set(drafts.tolist())
    out = verifier.verify(p.expand(PAIRED_SAMPLES, vocab), q.expand(PAIRED_SAMPLES, k, vocab), drafts.expand(PAIRED_SAMPLES, k), generator)
    for token, probability in moves.items():
        seen = float(((out.accepted_index >= 0) & (out.tokens == token)).double().mean())
        error = math.sqrt(probability * (1 - probability) / PAIRED_SAMPLES)
        assert abs(seen - probability) <= MC_SIGMAS * error + AGREEMENT_TOLERANCE, (token, seen, probability)


def _drafted_tree(rules, spec: str, vocab: int, rng, generator):
    """A tree drafted with ``rules``' sampler, ``p`` and ``q`` a function of each node's
    token path (as a model's are: equal tokens under one parent give equal laws)."""
    import torch

    from decoding.runtime.trees import parse_tree

    tree = parse_tree(spec)
    laws: dict = {}

    def law(path):
        if path not in laws:
            laws[path] = tuple(torch.as_tensor(rng.dirichlet(np.ones(vocab))) for _ in range(2))
        return laws[path]

    tokens, paths = [0] * tree.n_nodes, {0: ()}
    for depth in range(tree.max_depth):
        for node in tree.level(depth):
            k = int(tree.n_children[node])
            if k:
                drawn = rules.for_k(k).sample_drafts(law(paths[node])[1].unsqueeze(0), k, generator)[0].tolist()
                for child, token in zip(tree.children(node), drawn):
                    tokens[child], paths[child] = token, paths[node] + (token,)
    target = torch.stack([law(paths[u])[0] for u in range(tree.n_nodes)])
    draft = torch.stack([law(paths[u])[1] for u in range(tree.n_nodes)])
    return tree, tokens, target, draft


@pytest.mark.parametrize("rule, spec", [("single", "chain:3"), ("rrs", "binary:3"), ("rrs", "kary:3,2"), ("rrs_wor", "binary:3"),
                                        ("kseq", "kary:3,2"), ("spechub", "chains:2,3"), ("greedy", "kary:3,2"),
                                        ("optimal", "kary:3,2"), ("optimal_wor", "binary:2")])
def test_expected_accepted_is_the_mean_of_the_loops_walk(rule, spec):
    """E[tau | tree] by the walk's dynamic programme against the mean accepted length of the
    decoding loop's own walk (walk_tree) over many coin draws on the same drafted tree; on
    three tokens equal siblings are common, so the merge of the i.i.d. rules is exercised."""
    import torch

    from decoding.runtime.tree_walk import resolve_rules, walk_tree
    from otm_app.report.paired import expected_accepted

    rules, generator = resolve_rules(rule), torch.Generator().manual_seed(5)
    tree, tokens, target, draft = _drafted_tree(rules, spec, 3, np.random.default_rng(len(spec) + len(rule)), generator)
    inner = [u for u in range(tree.n_nodes) if tree.n_children[u]]
    exact = expected_accepted(rules, tree, tokens, {u: target[u] for u in inner}, {u: draft[u] for u in inner})
    n = PAIRED_SAMPLES
    walked = walk_tree(tree, torch.tensor(tokens).expand(n, -1), target.expand(n, -1, -1), draft.expand(n, -1, -1), rules,
                       generator).n_accepted.double()
    assert abs(float(walked.mean()) - exact) <= MC_SIGMAS * float(walked.std()) / math.sqrt(n) + AGREEMENT_TOLERANCE


def test_forest_holds_every_tree_under_one_root():
    from decoding.runtime.trees import parse_tree
    from otm_app.report.paired import forest

    trees = [parse_tree("chain:2"), parse_tree("binary:2")]
    whole, index = forest(trees)
    assert whole.n_nodes == 1 + 2 + 6
    for tree, at in zip(trees, index):
        assert at[0] == 0 and len(set(at[1:])) == tree.n_nodes - 1
        for u in range(1, tree.n_nodes):
            assert whole.parent[at[u]] == at[tree.parent[u]]


def test_text_caches_give_the_teacher_forced_laws_at_the_root():
    """The forest's root is the context's last token: its p and q are the scored row's."""
    import torch

    from decoding.runtime.loop import probs_from_logits
    from decoding.runtime.trees import parse_tree
    from decoding.runtime.tree_walk import resolve_rules
    from otm_app.report.paired import TextCaches
    from otm_app.report.sources import load_report_pair, score_report_texts

    pair = load_report_pair("tiny")
    text = score_report_texts(pair, [], 0).scores[0]
    caches, generator = TextCaches(pair, text.token_ids), torch.Generator().manual_seed(0)
    for position in (3, 9):  # two contexts of one text: the second forwards only the new tokens
        (tokens, target, draft), = caches.draft(position + 1, [parse_tree("binary:2")], [resolve_rules("rrs")], 1.0, generator)
        assert np.allclose(target[0], probs_from_logits(torch.as_tensor(text.target_logits[position]), 1.0).numpy(), atol=1e-5)
        assert np.allclose(draft[0], probs_from_logits(torch.as_tensor(text.draft_logits[position]), 1.0).numpy(), atol=1e-5)
        assert set(target) == {0, 1, 2} and len(tokens) == 7
        assert target[0].dtype == np.float64 and math.isclose(target[0].sum(), 1.0, rel_tol=1e-12)


def test_trees_drafted_at_one_context_share_the_root_laws():
    """Every tree of the forest hangs under the context's last token: its p and q are computed
    once and shared (they were computed once per tree), and are the law the drafts came from."""
    import torch

    from decoding.runtime.trees import parse_tree
    from decoding.runtime.tree_walk import resolve_rules
    from otm_app.report.paired import TextCaches
    from otm_app.report.sources import load_report_pair, score_report_texts

    pair = load_report_pair("tiny")
    text = score_report_texts(pair, [], 0).scores[0]
    trees, samplers = [parse_tree("binary:2"), parse_tree("chain:2")], [resolve_rules("rrs"), resolve_rules("single")]
    (_, p1, q1), (_, p2, q2) = TextCaches(pair, text.token_ids).draft(6, trees, samplers, 1.0, torch.Generator().manual_seed(0))
    assert p1[0] is p2[0] and q1[0] is q2[0]
    assert set(p1) == {0, 1, 2} and set(p2) == {0, 1}


def test_resolved_needs_two_standard_errors():
    from otm_app.report.paired import resolved

    assert resolved([0.3, 0.1]) and resolved([-0.3, 0.1])
    assert not resolved([0.15, 0.1]) and not resolved([0.0, 0.0]) and not resolved([0.5, math.nan])


def test_tiny_pair_report_compares_the_rules_paired(tmp_path):
    """Step 3 on the tiny pair: every rule's expected tokens per call at the same positions,
    the difference from rrs position by position, the water-level rule once (optimal_pair_wor
    is its old name); the console shows each figure with
    its standard error and labels the decodes' own figures as realised."""
    folder = tmp_path / "tiny-paired"
    summary = run_report(_args("--pair", "tiny", "--out", str(folder), "--k-max", "2", "--rules", "single,rrs,greedy,optimal,optimal_wor,optimal_pair_wor",
                               "--max-new-tokens", "6", "--quiet", "--json", "--sweep-positions", "4", "--workers", "1"))
    paired = summary["paired"]
    rows = {row["rule"]: row for row in paired["rows"]}
    assert paired["baseline"] == "rrs" and paired["positions"] == 2 * 6 and paired["skipped"] == []
    assert list(rows) == ["single", "rrs", "greedy", "optimal", "optimal_wor"]
    assert rows["single"]["tree"] == "chain:3" and rows["optimal_wor"]["draft_law"] == "without_replacement"
    for rule, row in rows.items():
        mean, error = row["expected_tokens"]
        assert 1.0 <= mean <= 4.0 and 0.0 <= error < 1.0
        if rule != "rrs":  # a mean of paired differences is the difference of the means
            assert row["difference"][0] == pytest.approx(mean - rows["rrs"]["expected_tokens"][0], abs=1e-12)
    assert rows["rrs"]["difference"] is None and rows["rrs"]["resolved"]
    realised = {row["rule"]: row for row in summary["decoding"]["rows"]}
    assert all(row["steps"] >= 2 and row["block_efficiency_error"] >= 0 for row in realised.values())
    table = summary_table(summary)
    assert "expected (coins integrated out) at the same 12 positions" in table and "(baseline)" in table
    assert re.search(r"optimal\s+binary:3\s+\d\.\d{3} ± \d\.\d{3}\s+[+-]\d\.\d{3} ± \d\.\d{3}", table)
    assert re.search(r"realised: .*\n(.*\n)*\s+optimal\s+binary:3\s+\d\.\d{3} ± \d\.\d{3}\s+\(\d+ steps\)", table)
    text = (folder / "report.md").read_text()
    assert "**Expected tokens per target call, paired**" in text and "| optimal_wor | `binary:3` | without_replacement |" in text


def test_console_marks_monte_carlo_values_with_their_errors(tmp_path):
    """rrs_wor above k = 2 on a large vocabulary is a Monte Carlo estimate: the console
    marks it and prints its standard error, and the gains over it their Monte Carlo
    standard errors (the console used to print 'rrs_wor 0.879' above an optimum of 0.878,
    and 'optimal_wor - rrs_wor -0.001', with no error)."""
    from otm_app.report.run import _acceptance_summary

    rng = np.random.default_rng(12)
    scored, _, _ = _scored(rng, positions=3, vocab=400)
    settings = PositionSettings(ks=(2, 3), rules=("rrs_wor", "optimal", "optimal_wor"), workers=1, mc_paths=256)
    result = analyse_positions(scored, (1.0,), settings, tmp_path)[1.0]
    block = _acceptance_summary(result, scored, 256)
    assert block["rrs_wor_monte_carlo"] == [False, True]
    errors = block["rrs_wor_standard_error"]
    gain = block["optimal_wor_gains"]["rrs_wor"]
    assert gain["monte_carlo_error"][1] == pytest.approx(errors[1]) and gain["monte_carlo_error"][0] == 0.0
    summary = {"mode": "toy", "source": "test", "theorems": summarise_theorems([]), "ks": [2, 3], "acceptance": {"1": block},
               "decoding": {"rows": [], "reason": "none"}, "report": "r", "wall_seconds": {"total": 1.0}}
    lines = summary_table(summary).splitlines()
    assert any("(* a Monte Carlo estimate; the line below it, its standard error)" in line for line in lines)
    row = next(i for i, line in enumerate(lines) if line.split()[:1] == ["rrs_wor"])
    assert lines[row].rstrip().endswith("*") and lines[row].split()[1][-1] != "*"  # k = 3 estimated, k = 2 exact
    assert lines[row + 1].split() == ["±", "s.e.", "(Monte", "Carlo)", "-", f"{errors[1]:.4f}"]
    water = next(i for i, line in enumerate(lines) if "optimal_wor - rrs_wor" in line)
    assert lines[water].rstrip().endswith("*") and lines[water + 1].split()[-1] == f"{gain['monte_carlo_error'][1]:.4f}"


@pytest.mark.parametrize("seed", range(4))
def test_water_level_moves_from_the_compiled_construction_are_the_exact_laws(seed):
    """At two drafts the paired comparison takes the water-level rule's selection from its
    verifier's compiled construction: the same conditional law as the exact one of
    otm.rules.optimal_wor, on every pair of a small vocabulary (and on an exhausted
    support, a one-hot q)."""
    from otm.rules import optimal_wor, water_levels
    from otm_app.report.paired import descent_probabilities

    rng = np.random.default_rng(seed)
    vocab = 6
    p, q = rng.dirichlet(0.6 * np.ones(vocab)), rng.dirichlet(0.6 * np.ones(vocab))
    params = water_levels.pair_parameters(p, q)
    for a in range(vocab):
        for b in range(vocab):
            if a != b:
                row, _ = optimal_wor.conditional_output_law(params, (a, b))
                moves = descent_probabilities("optimal_wor", p, q, (a, b))
                assert moves == pytest.approx({a: row[a], b: row[b]}, abs=AGREEMENT_TOLERANCE)
    one_hot = np.eye(vocab)[seed]
    drafts = (seed, 1 if seed == 0 else 0)  # the q = 0 draft is the lowest other id, as the sampler draws it
    row, _ = optimal_wor.conditional_output_law(water_levels.pair_parameters(p, one_hot), drafts)
    assert descent_probabilities("optimal_wor", p, one_hot, drafts) == pytest.approx(
        {t: row[t] for t in drafts}, abs=AGREEMENT_TOLERANCE)


def test_a_rule_whose_law_refuses_a_tree_is_left_out_with_the_reason(monkeypatch):
    """A rule's exact law may refuse a drafted tree (NotApplicableError, e.g. the water-level
    rule beyond its nesting's limits): the comparison goes on without that rule and says why,
    rather than stopping the report after its slow steps."""
    from otm.errors import NotApplicableError
    from otm_app.report import paired
    from otm_app.report.sources import load_report_pair, score_report_texts

    def refuse(p, q, k):
        raise NotApplicableError("too wide for this test")

    monkeypatch.setitem(paired.KERNELS, "greedy", refuse)
    pair = load_report_pair("tiny")
    out = paired.compare_rules(pair, score_report_texts(pair, [], 0), ("rrs", "greedy", "optimal"), "binary:2", 1.0, 3, 0)
    assert [row["rule"] for row in out["rows"]] == ["rrs", "optimal"] and out["baseline"] == "rrs"
    assert out["skipped"] == [{"rule": "greedy", "reason": "refused a drafted tree: too wide for this test"}]
