"""Fixtures shared by the decoding tests (opt in with ``pytest.mark.usefixtures``)."""
import pytest
import torch


@pytest.fixture(scope="module")
def one_torch_thread():
    """Small tensors: torch's intra-op threads only contend on a shared CPU."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
