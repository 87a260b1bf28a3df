"""Where the optimal verifier's GPU time goes: the CUDA kernels of its full path, eager
(docs/optimal-verifier.md#on-a-gpu).

    python scripts/profile_optimal_cuda.py [--rows 64] [--vocab 151936] [--k 2] [--calls 5]

Rows as in ``scripts/bench_optimal_verifier.py`` (random softmax pairs, float32), on the
GPU. Runs :func:`decoding.verifiers.optimal.iid.verify_sorted` (the full path every CUDA row
takes; eager, so each torch operation is its own kernel) once to warm up, then ``--calls``
times under ``torch.profiler`` and prints the operations by total CUDA time: the share of
the sort, of the scans and of the elementwise passes, and how many kernels one call
launches. Needs a CUDA device.
"""
from __future__ import annotations

import argparse
import sys

import torch
from torch.profiler import ProfilerActivity, profile

from decoding.verifiers.optimal import iid as optimal
from bench_optimal_verifier import QWEN_VOCAB, softmax_rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=64)
    parser.add_argument("--vocab", type=int, default=QWEN_VOCAB)
    parser.add_argument("--k", type=int, default=2)
    parser.add_argument("--calls", type=int, default=5)
    parser.add_argument("--row-limit", type=int, default=25)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        sys.exit("profile_optimal_cuda: needs a CUDA device")
    p, q = (rows.cuda() for rows in softmax_rows(args.rows, args.vocab, torch.float32))
    drafts = optimal.sample_drafts(q, args.k, torch.Generator("cuda").manual_seed(1))
    u = torch.rand(args.rows, optimal.uniforms_per_row(args.k), generator=torch.Generator("cuda").manual_seed(2),
                   dtype=p.dtype, device="cuda")
    optimal.verify_sorted(p, q, drafts, u)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(args.calls):
            optimal.verify_sorted(p, q, drafts, u)
        torch.cuda.synchronize()
    events = prof.key_averages()
    on_device = [e for e in events if e.device_type == torch.autograd.DeviceType.CUDA]  # the kernels themselves
    kernels = sum(e.count for e in on_device)
    cuda_ms = sum(e.self_device_time_total for e in on_device) / 1e3 / args.calls
    print(f"{args.rows} rows, V = {args.vocab:,}, k = {args.k}, {torch.cuda.get_device_name()}, torch {torch.__version__}: "
          f"{cuda_ms:.2f} ms of CUDA time per call, {kernels / args.calls:.0f} kernels per call")
    print(events.table(sort_by="self_cuda_time_total", row_limit=args.row_limit))


if __name__ == "__main__":
    main()
