"""The README's Python example runs as written and prints the right numbers, checked
against oracles computed here independently of the toolkit's code paths (brute-force
min cut over every token set, the RRS product formula, SpecHub's per-token formula)."""
import itertools
import re
from pathlib import Path

import numpy as np

from otm.draft_laws import without_replacement_law

README = Path(__file__).resolve().parents[1] / "README.md"

#: Printed floats are compared at this tolerance (they are printed with repr precision).
PRINT_TOLERANCE = 1e-12


def _softmax(z):
    e = np.exp(np.asarray(z) - np.max(z))
    return e / e.sum()


def _brute_force_min_cut(p, all_in) -> float:
    """min over every token set H of p(H) + 1 - Q(all drafts in H)."""
    V = len(p)
    return min(p[list(H)].sum() + 1 - all_in(H) for r in range(V + 1) for H in itertools.combinations(range(V), r))


def test_readme_python_example_prints_the_right_numbers(capsys):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks, "the README has no python example"
    for block in blocks:
        exec(compile(block, "README.md", "exec"), {})
    lines = capsys.readouterr().out.splitlines()
    p, q = _softmax([2.0, 1.5, 0.3, -1.0]), _softmax([1.0, 2.0, 0.0, -0.5])
    iid = _brute_force_min_cut(p, lambda H: q[list(H)].sum() ** 2)
    law = without_replacement_law(q, 2)
    wor = _brute_force_min_cut(p, lambda H: law.all_in_probability(list(H)))
    assert abs(float(lines[0]) - iid) <= PRINT_TOLERANCE
    assert abs(float(lines[1]) - wor) <= PRINT_TOLERANCE
    rules = dict(line.split() for line in lines[2:7])
    alpha1 = np.minimum(p, q).sum()
    residual = np.maximum(p - q, 0) / np.maximum(p - q, 0).sum()
    rrs = 1 - (1 - alpha1) * (1 - np.minimum(residual, q).sum())
    a = int(np.argmax(q))
    spechub = p[a] + sum(min(p[x], q[x] / (1 - q[a])) for x in range(4) if x != a)
    assert abs(float(rules["rrs"]) - rrs) <= PRINT_TOLERANCE
    assert abs(float(rules["spechub"]) - spechub) <= PRINT_TOLERANCE
    assert abs(float(rules["greedy"]) - spechub) <= PRINT_TOLERANCE  # greedy = SpecHub at k = 2
    assert float(rules["kseq"]) <= iid + PRINT_TOLERANCE
    assert alpha1 <= float(rules["rrs_wor"]) <= wor + PRINT_TOLERANCE
    value, cut, gap = lines[7].split(" ", 1)[0], lines[7][lines[7].index("["):lines[7].index("]") + 1], lines[7].rsplit(" ", 1)[1]
    assert abs(float(value) - iid) <= PRINT_TOLERANCE
    H = [int(t) for t in cut.strip("[]").split()]
    assert abs(p[H].sum() + 1 - q[H].sum() ** 2 - iid) <= PRINT_TOLERANCE
    assert 0 <= float(gap) <= PRINT_TOLERANCE
