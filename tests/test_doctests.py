"""Every docstring example in the packages runs and shows what it says (POT-style
doctests are part of the documentation, so they are tested)."""
import doctest
import importlib
import pkgutil

import pytest

PACKAGES = ("otm", "solvers", "proofs", "decoding")


def _modules():
    for name in PACKAGES:
        package = importlib.import_module(name)
        yield name
        for info in pkgutil.walk_packages(package.__path__, prefix=f"{name}."):
            yield info.name


@pytest.mark.parametrize("module_name", sorted(_modules()))
def test_docstring_examples(module_name):
    module = importlib.import_module(module_name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {module_name}"
