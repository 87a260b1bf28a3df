"""otm.plots.plot_check_slacks: every check is visible, whatever the size and sign of its slack."""
import math

import numpy as np

from otm import plots
from otm.tolerances import AGREEMENT_TOLERANCE

ROWS = [
    {"id": "a.margin", "status": "holds", "worst_slack": 0.39, "tolerance": AGREEMENT_TOLERANCE},
    {"id": "a.equality", "status": "holds", "worst_slack": 0.0, "tolerance": 0.0},
    {"id": "a.negative_zero", "status": "holds", "worst_slack": -0.0, "tolerance": AGREEMENT_TOLERANCE},
    {"id": "a.rounding", "status": "holds", "worst_slack": -2.2e-16, "tolerance": AGREEMENT_TOLERANCE},
    {"id": "a.near_tolerance", "status": "holds", "worst_slack": -7.4e-10, "tolerance": AGREEMENT_TOLERANCE},
    {"id": "a.fails", "status": "fails", "worst_slack": -0.1, "tolerance": AGREEMENT_TOLERANCE},
    {"id": "a.nan", "status": "fails", "worst_slack": -math.inf, "tolerance": AGREEMENT_TOLERANCE},
    {"id": "a.unchecked", "status": "not checkable", "worst_slack": None},
]


def _points(ax) -> dict:
    """``{legend label: [(x, y), ...]}`` of the scattered points."""
    return {c.get_label(): [tuple(xy) for xy in c.get_offsets()] for c in ax.collections}


def test_every_check_with_a_slack_is_one_visible_point():
    ax = plots.plot_check_slacks(ROWS).axes[0]
    points = [xy for xys in _points(ax).values() for xy in xys]
    left, right = ax.get_xlim()
    assert sorted(y for _, y in points) == list(range(len(ROWS) - 1))  # one per row that has a slack
    assert all(np.isfinite(x) and left < x < right for x, _ in points)
    assert [t.get_text() for t in ax.get_yticklabels()] == [r["id"] for r in ROWS[:-1]]


def test_sign_and_verdict_pick_the_marker():
    points = _points(plots.plot_check_slacks(ROWS).axes[0])
    rows_of = {label.split(":")[0]: sorted(int(y) for _, y in xys) for label, xys in points.items()}
    assert rows_of == {"slack > 0": [0], "slack = 0": [1, 2], "-tolerance <= slack < 0": [3, 4], "slack < -tolerance": [5, 6]}
    x_of = {int(y): x for xys in points.values() for x, y in xys}
    assert x_of[4] == 7.4e-10 and x_of[0] == 0.39  # |slack| itself where it is finite and nonzero
    assert x_of[1] == x_of[2] < x_of[3] < x_of[4] < x_of[5] < x_of[0] < x_of[6]


def test_the_tolerance_is_drawn_and_named():
    ax = plots.plot_check_slacks(ROWS).axes[0]
    assert [line.get_xdata()[0] for line in ax.get_lines()] == [AGREEMENT_TOLERANCE]
    assert f"tolerance ({AGREEMENT_TOLERANCE:g})" in [t.get_text() for t in ax.get_legend().get_texts()]
