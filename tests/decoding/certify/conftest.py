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
