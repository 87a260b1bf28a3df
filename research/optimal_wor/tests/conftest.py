"""Shared settings of the research tests."""
import pytest
import torch


@pytest.fixture(autouse=True)
def _torch_threads_restored():
    """The scripts' ``main`` set torch's thread count for their timings (one thread); put it back,
    so the tests that run after them in this process keep theirs."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)
