"""The CUDA kernels of decoding.verifiers.optimal.setup.cuda_scan against their reference, the torch scan
of decoding.verifiers.optimal.setup.torch_scan: the same checkpoints, sigma and groups of ranks within
roundoff, through numba's CUDA simulator on any machine (a subprocess: the simulator is chosen
when numba is first imported) and on a CUDA device where there is one; a kernel whose blocks'
prefixes leave the products out is caught by the same comparison."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from decoding.verifiers.optimal import wor as optimal_wor
from .test_optimal_wor_torch import SCAN_AGREEMENT, AtScanSpacing, _ranks, _scan_disagreement

#: What the subprocess runs under the simulator: the kernels' scan and the torch scan of small
#: rows, printing the largest relative difference of their outputs; then the same with the
#: kernel of the blocks' prefixes replaced by one that gives every block its group's prefix (the
#: blocks of the group below it left out). One process for both: the simulator's start-up is
#: a good part of the cost.
SIMULATED = r"""
import numpy as np
from numba import cuda
from decoding.verifiers.optimal.setup import cuda_scan as optimal_wor_cuda
from decoding.verifiers.optimal.setup import torch_scan as optimal_wor_torch
from decoding.verifiers.optimal.clock_masses import CompiledClockSetMasses


def worst_difference():
    worst = 0.0
    for seed, n, k, group in ((1, 200, 3, 128), (2, 128, 5, 64), (3, 329, 2, 128)):
        rng = np.random.default_rng(seed)
        q = 10.0 ** rng.uniform(-9, 0, n)
        masses = CompiledClockSetMasses(q / q.sum(), k)
        args = (masses.q, masses.s, masses.w, masses._above, k, 64, group, "cpu")
        for got, want in zip(optimal_wor_cuda.scan(*args), optimal_wor_torch.scan(*args)):
            assert got.shape == want.shape
            differ = np.abs(got - want)
            worst = max(worst, float(np.max(np.where(differ <= 1e-290, 0.0, differ / np.maximum(np.abs(want), 1e-290)))))
    return worst


print("kernels", worst_difference())


@cuda.jit
def group_prefix_only(BE, BD, PG, PGD, per_group, PE, PD):
    t = cuda.grid(1)
    nodes = BE.shape[1]
    if t >= (PG.shape[0] - 1) * nodes:
        return
    g, i = t // nodes, t % nodes
    for c in range(g * per_group, min((g + 1) * per_group, BE.shape[0])):
        for d in range(PE.shape[2]):
            PE[c, i, d], PD[c, i, d] = PG[g, i, d], PGD[g, i, d]


for k in (2, 3, 5):
    optimal_wor_cuda.kernels(k).block_prefixes = group_prefix_only
print("broken", worst_difference())
"""


@pytest.fixture(scope="module")
def simulated() -> dict:
    """``{"kernels": worst difference, "broken": worst difference}`` from one simulator process."""
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", PYTHONPATH=str(root))
    done = subprocess.run([sys.executable, "-c", SIMULATED], env=env, capture_output=True, text=True,
                          timeout=300, cwd=root)
    assert done.returncode == 0, done.stderr[-2000:]
    return {name: float(value) for name, value in (line.split() for line in done.stdout.strip().splitlines()[-2:])}


def test_the_kernels_are_the_torch_scan_under_the_simulator(simulated):
    assert simulated["kernels"] <= SCAN_AGREEMENT


def test_kernels_without_the_prefix_products_are_caught_under_the_simulator(simulated):
    assert simulated["broken"] > 1e-3


needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")


@needs_cuda
@pytest.mark.parametrize("n, k", [(5000, 3), (5000, 8), (151_936, 4), (3000, 16), (700, 20)])
def test_cuda_kernels_are_the_compiled_pass(n, k):
    """On the GPU, by the scan the registry picks there (``k = 20``: past the kernels' ``MAX_K``,
    the torch scan on the device)."""
    from decoding.verifiers.optimal.setup import pick
    masses = AtScanSpacing(_ranks(n + k, n, 12.0), k)
    assert pick("cuda", k, 1).CAPABILITIES.name == ("cuda" if k <= 16 else "torch")
    scanned = pick("cuda", k, 1).scan(masses.q, masses.s, masses.w, masses._above, k, masses.checkpoint,
                                    masses.group, "cuda")
    assert _scan_disagreement(masses, scanned) <= SCAN_AGREEMENT


@needs_cuda
def test_cuda_rows_are_set_up_by_the_kernels():
    rng = np.random.default_rng(8)
    p, q = rng.dirichlet(np.full(3000, 0.3)), rng.dirichlet(np.full(3000, 0.3))
    setup = optimal_wor.row_setup(p, q, 4, torch.device("cuda"))
    assert setup.masses.device == "cuda" and setup.masses._backend.CAPABILITIES.name == "cuda"
    on_cpu = optimal_wor.row_setup(p, q, 4)
    assert setup.cut == on_cpu.cut
    np.testing.assert_allclose(np.asarray(setup.flux), np.asarray(on_cpu.flux), rtol=0, atol=1e-14)


def test_row_stack_is_lent_to_numpy_only_while_kernels_launch(monkeypatch):
    """NumPy 2.5 has no ``row_stack``, which numba-cuda's first compile looks up: the alias is
    there inside the block and gone after; a NumPy that has it keeps its own."""
    from decoding.verifiers.optimal.setup.cuda_scan import _with_row_stack

    monkeypatch.delattr(np, "row_stack", raising=False)
    with _with_row_stack():
        assert np.row_stack is np.vstack
    assert not hasattr(np, "row_stack")
    own = object()
    monkeypatch.setattr(np, "row_stack", own, raising=False)
    with _with_row_stack():
        assert np.row_stack is own
    assert np.row_stack is own
