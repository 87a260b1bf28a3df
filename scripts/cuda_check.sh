#!/usr/bin/env bash
# The checks of decoding's CUDA path, on a machine with an NVIDIA GPU and a CUDA build of torch
# (docs/optimal-verifier.md#on-a-gpu): run from the repository root, with the project installed or
# on PYTHONPATH. Writes its logs and the verifier-cost tables to OUT_DIR (default cuda-check).
#
#     bash scripts/cuda_check.sh [OUT_DIR]
#
# 1. the CUDA tests: every verifier's seeded law and acceptance tests on CUDA tensors, float32
#    and bfloat16 (tests/decoding/test_verifiers_exactness.py::test_cuda_follows_the_law) and
#    the optimal_pair_wor verifier's outputs on their device, and the CUDA graphs of the optimal
#    verifiers' full path (draw for draw the eager path's; tests/decoding/test_cuda_graphs.py),
#    and the bring-your-own-verifier entry point on CUDA tensors, and optimal_wor's set-up scan
#    as CUDA kernels against the compiled pass (tests/decoding/test_optimal_wor_cuda.py);
# 2. `otm decode --device cuda` with every rule of the registry on the tiny random model pair
#    (binary:3 trees, one chain for a rule of one draft, the ensemble rules without a tree, the
#    sequence verifiers on their own trees), float32 and bfloat16: each must exit 0;
# 3. scripts/bench_optimal_verifier.py --device cuda at V = 151,936, k = 2..8: the optimal
#    verifiers beside one argsort and the RRS verifiers on the same rows, 64 rows and 8 rows.
# Each stage has its own time limit; the script exits non-zero if any stage failed.
set -uo pipefail
out=${1:-cuda-check}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 DEVICE=${DEVICE:-cuda}  # DEVICE=cpu: the same stages on the CPU
status=0
stage() {  # stage NAME SECONDS COMMAND...: run, log to $out/NAME.log, remember a failure
    local name=$1 limit=$2
    shift 2
    local start=$SECONDS
    timeout "$limit" "$@" >"$out/$name.log" 2>&1
    local rc=$?
    echo "== $name: exit $rc in $((SECONDS - start)) s"
    tail -n 40 "$out/$name.log"
    [ "$rc" -eq 0 ] || status=1
}

python3 -c "import torch, numba, numpy; print('torch', torch.__version__, '| numba', numba.__version__, '| numpy', numpy.__version__, '|', torch.cuda.get_device_name() if torch.cuda.is_available() else 'no CUDA device')"
stage cuda_tests 180 python3 -m pytest -q -p no:cacheprovider -k cuda \
    tests/decoding/test_verifiers_exactness.py tests/decoding/test_verifier_optimal_pair_wor.py tests/decoding/test_cuda_graphs.py \
    tests/decoding/test_own_verifier.py tests/decoding/test_optimal_wor_cuda.py

decode_all() {  # one process: `otm decode` for every rule and dtype, exit 1 if any failed
    python3 - <<'PY'
import contextlib, io, os, sys
from otm.rules import rule_specs
from otm.sequences.registry import SEQUENCE_RULES
from otm_app.cli import main
TREES = {spec.name: "binary:3" if spec.allows(2) else "chains:1,4" for spec in rule_specs(verifier=True)}
OWN_TREES = [spec.name for spec in rule_specs(lossless=False)] + list(SEQUENCE_RULES)  # ensembles, sequence verifiers
failed = 0
for dtype in ("float32", "bfloat16"):
    for rule in list(TREES) + OWN_TREES:
        argv = ["decode", "--pair", "tiny", "--prompt", "1,2,3", "--device", os.environ["DEVICE"], "--dtype", dtype,
                "--rule", rule, "--max-new-tokens", "16", "--json"]
        argv += ["--tree", TREES[rule]] if rule in TREES else []
        with contextlib.redirect_stdout(io.StringIO()):
            status = main(argv)
        print(("ok  " if status == 0 else "FAIL"), rule, dtype, flush=True)
        failed |= status != 0
sys.exit(failed)
PY
}
export -f decode_all
stage decode 100 bash -c decode_all

stage bench_64_rows 180 python3 scripts/bench_optimal_verifier.py --device "$DEVICE" --rows 64 --json "$out/bench_cuda_64.json"
stage bench_8_rows 80 python3 scripts/bench_optimal_verifier.py --device "$DEVICE" --rows 8 --ks 2,4,8 --json "$out/bench_cuda_8.json"
exit $status
