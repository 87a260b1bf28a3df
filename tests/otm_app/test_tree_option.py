"""``--tree`` of ``otm decode`` and ``otm report``: the help states the default once and
truly, and a tree too large for one target forward is a one-line error before any model
is built."""
import re

import pytest

from decoding.runtime.trees import MAX_TREE_NODES
from otm_app.cli import EXIT_USAGE, build_parser, main
from otm_app.commands.decode import DEFAULT_CHAIN, DEFAULT_TREE
from otm_app.configs import ReportConfig


def _tree_help(command: str) -> str:
    sub = next(a for a in build_parser()._subparsers._group_actions if a.dest == "command").choices[command]
    entry = re.search(r"\n  --tree TREE(.*?)\n  --", sub.format_help(), re.S).group(1)
    return " ".join(entry.split())


def test_decode_tree_help_states_the_rule_dependent_default_once():
    text = _tree_help("decode")
    assert text.count("(default:") == 1
    assert "None" not in text
    assert f"default: {DEFAULT_TREE}" in text and f"{DEFAULT_CHAIN} for --rule block" in text


def test_report_tree_help_states_its_default_once():
    text = _tree_help("report")
    assert text.count("(default:") == 1
    assert text.endswith(f"(default: {ReportConfig.tree})")


@pytest.mark.parametrize("spec", ["kary:2,40", "chain:1000000000", f"chain:{MAX_TREE_NODES + 1}"])
def test_decode_refuses_a_too_large_tree_in_one_line(capsys, spec):
    status = main(["decode", "--pair", "tiny", "--rule", "traversal", "--tree", spec, "--prompt", "1,2",
                   "--max-new-tokens", "4"])
    err = capsys.readouterr().err
    assert status == EXIT_USAGE
    assert err.count("\n") == 1 and err.startswith("otm decode: error: ") and "MAX_TREE_NODES" in err
