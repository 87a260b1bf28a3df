"""Adding a rule is four files (docs/adding-a-rule.md): its exact law under otm/rules/, its
RuleSpec in otm/rules/registry.py, its verifier under decoding/verifiers/ and its reference in
decoding/verifiers/reference.py. Everything else that lists rules is derived from the registry.

The fixture registers a toy rule at runtime (a copy of ``single`` under another name, with a
law module and a verifier module of its own) and each test checks that one derived place picks
it up. A module whose table is built at import time is executed again as a fresh copy
(:func:`fresh`), so the table is derived from the registry as the fixture left it; the loaded
modules stay as they are. A hand-written table of rule names anywhere below fails here.
"""
from __future__ import annotations

import dataclasses
import importlib.util
import sys
import types

import numpy as np
import pytest

import decoding.verifiers
import decoding.verifiers.reference as reference
import otm_app.configs
import otm_app.report.run
import tests.decoding.test_verifiers_api as api_tests
import tests.decoding.test_verifiers_exactness as exactness_tests
import tests.decoding.test_verifiers_reference as reference_tests
from decoding.verifiers import single as single_verifier
from otm.errors import UnknownNameError
from otm.positions import check_computations, position_cells
from otm.rules import registry, rule_law, rule_spec, rule_specs
from otm.rules import single as single_law
from otm.tolerances import AGREEMENT_TOLERANCE
from otm_app.cli import build_parser
from otm_app.commands.acceptance import acceptance_summary
from otm_app.configs import AcceptanceConfig
from otm_app.report.decode import rule_tree
from scripts import gen_rule_table

TOY = "toy_single"
P, Q = np.array([0.5, 0.3, 0.2]), np.array([0.2, 0.3, 0.5])


def fresh(module: types.ModuleType, **names) -> types.ModuleType:
    """A new copy of ``module`` executed now, with ``names`` defined before its body runs; not
    entered in ``sys.modules``, so the loaded module and its importers are untouched."""
    spec = importlib.util.spec_from_file_location(
        module.__name__, module.__file__, submodule_search_locations=getattr(module, "__path__", None))
    copy = importlib.util.module_from_spec(spec)
    copy.__dict__.update(names)
    spec.loader.exec_module(copy)
    return copy


def _module(name: str, source: types.ModuleType, attributes: tuple) -> types.ModuleType:
    module = types.ModuleType(name)
    for attribute in attributes:
        setattr(module, attribute, getattr(source, attribute))
    return module


def register_toy(monkeypatch) -> types.SimpleNamespace:
    """Register the toy rule's four parts through ``monkeypatch`` (undone with it): its law module,
    its spec, its verifier module, and its reference (to give :func:`fresh` copies of the
    reference module as ``reference=``)."""
    law = _module(f"otm.rules.{TOY}", single_law, ("exact_law",))
    verifier = _module(f"decoding.verifiers.{TOY}", single_verifier,
                       ("draft_scheme", "sample_drafts", "uniforms_per_row", "verify"))
    monkeypatch.setitem(sys.modules, law.__name__, law)
    monkeypatch.setitem(sys.modules, verifier.__name__, verifier)
    spec = dataclasses.replace(rule_spec("single"), name=TOY, title="a toy copy of the single-draft rule",
                               module=TOY, verifier=TOY, in_report=True, gain_baselines=("rrs",), aliases=())
    monkeypatch.setitem(registry.RULE_SPECS, TOY, spec)
    return types.SimpleNamespace(spec=spec, law=law, verifier=verifier, reference={TOY: reference.single})


@pytest.fixture
def toy(monkeypatch):
    return register_toy(monkeypatch)


def test_registering_the_toy_is_undone():
    with pytest.MonkeyPatch.context() as monkeypatch:
        register_toy(monkeypatch)
        assert rule_spec(TOY).name == TOY
    assert TOY not in registry.RULE_SPECS and f"otm.rules.{TOY}" not in sys.modules
    with pytest.raises(UnknownNameError):
        rule_spec(TOY)


def test_the_registry_finds_the_law_through_the_spec(toy):
    assert rule_spec(TOY) is toy.spec
    assert TOY in [s.name for s in rule_specs(verifier=True)] and TOY in [s.name for s in rule_specs(lossless=True)]
    assert rule_law(TOY, P, Q, 1).acceptance == pytest.approx(np.minimum(P, Q).sum(), abs=AGREEMENT_TOLERANCE)


def test_the_verifier_and_the_reference_are_found_by_the_rule_name(toy):
    assert fresh(decoding.verifiers).get_verifier(TOY) is toy.verifier
    assert fresh(reference, **toy.reference).REFERENCES[TOY] is reference.single


def test_the_verifier_tests_take_the_rule(toy, monkeypatch):
    """The tests that hold a verifier to its exact law and to its reference list it (at the
    counts its spec allows), and they and the API tests pass on it."""
    assert fresh(exactness_tests).DRAFT_COUNTS[TOY] == (1,)
    assert fresh(reference_tests).DRAFT_COUNTS[TOY] == (1,)
    monkeypatch.setitem(decoding.verifiers.VERIFIERS, TOY, toy.verifier)
    monkeypatch.setitem(reference.REFERENCES, TOY, reference.single)
    api_tests.test_output_type_shapes_and_seeding(TOY)
    api_tests.test_shape_errors(TOY)
    exactness_tests.test_sampler_matches_exact_law(TOY, "generic", 1)
    reference_tests.test_batched_equals_reference_draw_for_draw(TOY, 1)


def test_the_command_line_offers_the_rule(toy):
    parser = build_parser()
    assert parser.parse_args(["decode", "--rule", TOY]).rule == TOY
    assert parser.parse_args(["acceptance", "--rules", TOY]).rules == (TOY,)
    assert parser.parse_args(["report", "--rules", TOY]).rules == (TOY,)
    assert parser.parse_args(["sweep", "corpus", "--computations", TOY]).computations == (TOY,)


def test_acceptance_and_the_sweep_compute_the_rule(toy):
    summary = acceptance_summary(P, Q, AcceptanceConfig(k=1))
    assert summary["rules"][TOY] == pytest.approx(np.minimum(P, Q).sum(), abs=AGREEMENT_TOLERANCE)
    assert check_computations([TOY]) == (TOY,)
    cells = position_cells(P, Q, [1, 2], [TOY], np.random.default_rng(0))
    assert [c.computation for c in cells] == [TOY, TOY]
    assert cells[0].value == pytest.approx(summary["rules"][TOY], abs=AGREEMENT_TOLERANCE)
    assert cells[1].method == "not_applicable"


def test_the_report_takes_the_rule(toy):
    assert TOY in fresh(otm_app.configs).DEFAULT_REPORT_RULES
    assert fresh(otm_app.report.run).GAIN_RULES[TOY] == ("rrs",)
    assert rule_tree(TOY, "binary:3") == "chain:3"  # defined for k = 1 only


def test_the_docs_rule_table_lists_the_rule(toy):
    assert f"| `{TOY}` | {toy.spec.title} |" in gen_rule_table.rule_table()


def test_each_verifier_draws_from_its_specs_draft_law():
    """The one fact a verifier module repeats from its spec agrees with it."""
    for spec in rule_specs(verifier=True):
        assert decoding.verifiers.get_verifier(spec.name).draft_scheme == spec.draft_scheme, spec.name
