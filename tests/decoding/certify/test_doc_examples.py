"""docs/certify-engine-sampler.md: every copy-paste test file of the page runs and passes as
written, and its power table is what scripts/certify_power_table.py computes."""
import re
from pathlib import Path

import pytest

from decoding.certify import power
from decoding.certify.bounds import samples_needed

PAGE = Path(__file__).resolve().parents[3] / "docs" / "certify-engine-sampler.md"
BLOCKS = re.findall(r"```python\n(.*?)```", PAGE.read_text(), flags=re.S)


def test_the_page_has_a_test_file_per_layout():
    names = [block.splitlines()[0] for block in BLOCKS]
    assert names == ["# test_certify_verifier.py", "# test_certify_vllm_layout.py", "# test_certify_transformers.py",
                     "# test_certify_sglang_layout.py", "# test_certify_eagle_layout.py",
                     "# test_certify_trtllm_layout.py"]


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_copy_paste_test_file_passes(index):
    namespace: dict = {}
    exec(compile(BLOCKS[index], f"{PAGE.name} block {index}", "exec"), namespace)
    tests = [value for name, value in namespace.items() if name.startswith("test_") and callable(value)]
    assert tests
    for test in tests:
        test()


def test_the_power_table_is_the_bounds():
    text = PAGE.read_text()
    for vocab, twenty_thousand in ((8, 0.0367), (64, 0.0513), (512, 0.1075)):
        assert f"| {vocab} | {twenty_thousand:.4f} |" in text
        assert round(power(20_000, vocab, 2).tv, 4) == twenty_thousand
    assert f"| 0.01 | {samples_needed(0.01, 8, 0.5e-9):,} |" in text
