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


@pytest.fixture(scope="session")
def qwen_wheels():
    """Skip unless the embedded Qwen pair's model packages (its GGUF parts) are installed:
    the set-up every test of the real Qwen models shares."""
    from decoding.models import ModelPackageMissingError, qwen

    try:
        qwen.part_files(qwen.DRAFT_GGUF)
        qwen.part_files(qwen.TARGET_GGUF)
    except ModelPackageMissingError as exc:
        pytest.skip(str(exc))
