"""The bug zoo: every correct twin passes, every bug fails with a message naming what is
wrong or, where no practical n sees it, is reported undetectable with its exact TV and the n
it needs; the zoo's exact laws agree with what the certification measured."""
import pytest

from decoding.certify import (
    AcceptanceMismatch,
    IndexMismatch,
    OutputLawMismatch,
    Undetectable,
    assert_lossless,
)
from decoding.certify.bounds import samples_needed_for_law, set_test
from decoding.certify.chains import assert_chain_lossless
from decoding.certify.zoo import single_draft_law, zoo

from .conftest import N, N_PER_ROW_CALLS, P, Q

BUGS = {bug.name: bug for bug in zoo()}

#: The zoo's exact laws are checked against the measured ones at this false-alarm rate.
LAW_CHECK_ALPHA = 1e-6


def test_the_zoo_covers_every_bug_class():
    assert set(BUGS) == {"block_tokenwise_residual", "wrong_logits_slice", "unsampled_q_top_k",
                         "bf16_drafts_fp32_check", "greedy_at_temperature", "hub_above_0999", "without_replacement_iid"}
    for bug in BUGS.values():
        assert bug.exact_tv > 0 and bug.source and bug.what


def test_single_draft_law_is_p_when_the_laws_agree():
    assert single_draft_law(P, Q, Q) == pytest.approx(P, abs=1e-15)


def rows_for(bug) -> int:
    """Fewer rows for the layouts called once per row."""
    return N_PER_ROW_CALLS if bug.layout == "transformers" else N


@pytest.mark.parametrize("name", sorted(BUGS))
def test_the_correct_twin_passes(name):
    bug = BUGS[name]
    if bug.chain:
        assert_chain_lossless(bug.correct, bug.p, bug.q, bug.k, n=rows_for(bug))
    else:
        assert_lossless(bug.correct, bug.p, bug.q, bug.k, bug.scheme, n=rows_for(bug))


@pytest.mark.parametrize("name", sorted(BUGS))
def test_the_bug_fails_or_is_undetectable_never_passes(name):
    bug = BUGS[name]
    if bug.chain:
        with pytest.raises(OutputLawMismatch, match="the emitted tokens are not i.i.d. p") as failure:
            assert_chain_lossless(bug.verify, bug.p, bug.q, bug.k, n=N)
        measured = failure.value.args[0]
        assert "first token: token" in measured
        return
    n = rows_for(bug)
    needed = samples_needed_for_law(bug.p, bug.output_law, 1e-9 / 2)  # rows of weight one: about the n it needs
    if needed <= n / 2:
        with pytest.raises((OutputLawMismatch, AcceptanceMismatch, IndexMismatch)) as failure:
            assert_lossless(bug.verify, bug.p, bug.q, bug.k, bug.scheme, n=n, detect_law=bug.output_law)
        assert str(failure.value).startswith("FAIL: output law is not p") or "above the optimum" in str(failure.value)
        certificate = failure.value.certificate
        law_check = set_test(certificate.output_estimate * n, bug.output_law, n, certificate.rows, LAW_CHECK_ALPHA)
        assert law_check.passed, f"the zoo's exact law of {name} disagrees with the measured one"
    else:
        with pytest.raises(Undetectable) as failure:
            assert_lossless(bug.verify, bug.p, bug.q, bug.k, bug.scheme, n=n, detect_law=bug.output_law)
        message = str(failure.value)
        assert f"at TV {bug.exact_tv:.3g} from p" in message
        # the enumeration's rows weigh less than one: its threshold is ln 2 higher, its need a few % larger
        assert int(message.rsplit("n >= ", 1)[1].replace(",", "")) == pytest.approx(needed, rel=0.05)


def test_the_chain_bug_law_agrees_with_the_measured_one():
    bug = BUGS["block_tokenwise_residual"]
    with pytest.raises(OutputLawMismatch) as failure:
        assert_chain_lossless(bug.verify, bug.p, bug.q, bug.k, n=N)
    certificate = failure.value.certificate
    law_check = set_test(certificate.first_token_law * N, bug.output_law, N, certificate.rows, LAW_CHECK_ALPHA)
    assert law_check.passed
    assert certificate.first_tv_estimate == pytest.approx(bug.exact_tv, abs=3 * certificate.tv)


def test_the_hub_bug_is_caught_at_the_n_it_needs():
    bug = BUGS["hub_above_0999"]
    with pytest.raises(Undetectable) as failure:
        assert_lossless(bug.verify, bug.p, bug.q, bug.k, bug.scheme, n=N, detect_law=bug.output_law)
    needed = int(str(failure.value).rsplit("n >= ", 1)[1].replace(",", ""))
    assert N < needed < 100_000
    with pytest.raises(OutputLawMismatch, match="output law is not p"):
        assert_lossless(bug.verify, bug.p, bug.q, bug.k, bug.scheme, n=needed, detect_law=bug.output_law)
