"""Shared instances of the certification tests."""
import numpy as np
import pytest
import torch

#: A small instance with every kind of token: p and q far apart on some tokens, close on others.
P = np.array([0.30, 0.22, 0.18, 0.12, 0.08, 0.05, 0.03, 0.02])
Q = np.array([0.10, 0.30, 0.05, 0.20, 0.15, 0.10, 0.06, 0.04])

#: Rows for the small instance: the tests detect a TV of about 0.03 there.
N = 30_000

#: Rows for the layouts called once per row (transformers): a TV of about 0.08 is detected.
N_PER_ROW_CALLS = 4_000


@pytest.fixture(autouse=True)
def one_torch_thread():
    """Small tensors: torch's intra-op threads only contend on a shared CPU."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


#: The zoo's exact laws are checked against the measured ones at this false-alarm rate.
LAW_CHECK_ALPHA = 1e-6


def check_tree_bug(bug, n: int) -> None:
    """A tree-layout bug of the zoo: its correct twin passes with its control; the bug fails
    naming the wrong stream (its exact stream law agreeing with the measured one) or, where
    ``n`` is too small to be sure to see it, is reported undetectable with its exact TV and the
    ``n`` it needs."""
    from decoding.certify import OutputLawMismatch, Undetectable
    from decoding.certify.bounds import samples_needed_for_law, set_test
    from decoding.certify.trees import assert_tree_lossless, sequence_law
    from decoding.runtime.trees import parse_tree

    run = dict(scheme=bug.scheme, n=n, detect_law=bug.stream_law)
    assert "detected" in assert_tree_lossless(bug.correct, bug.tree, bug.model, scheme=bug.scheme, n=n).control
    reference = sequence_law(bug.model, parse_tree(bug.tree).max_depth + 1)
    needed = samples_needed_for_law(reference, bug.stream_law, 1e-9)
    if needed > n / 2:
        with pytest.raises(Undetectable, match=f"TV {bug.exact_tv:.3g} from P"):
            assert_tree_lossless(bug.verify, bug.tree, bug.model, **run)
        return
    with pytest.raises(OutputLawMismatch, match="the emitted tokens, continued by the target, are not P") as failure:
        assert_tree_lossless(bug.verify, bug.tree, bug.model, **run)
    certificate = failure.value.certificate
    law_check = set_test(certificate.stream_estimate * n, bug.stream_law, n, certificate.rows, LAW_CHECK_ALPHA)
    assert law_check.passed, f"the zoo's exact stream law of {bug.name} disagrees with the measured one"
