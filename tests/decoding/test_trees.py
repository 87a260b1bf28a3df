"""Tree specs (decoding.runtime.trees): shapes of every syntax, masks, positions, errors."""
import tracemalloc

import numpy as np
import pytest

from decoding.runtime.trees import InvalidTreeSpecError, MAX_TREE_NODES, Tree, parse_tree
from otm.errors import UnknownNameError


def test_chains_are_paths_below_the_root():
    tree = parse_tree("chains:3,4")
    assert tree.n_drafts == 12
    assert tree.max_depth == 4
    assert tree.n_children[0] == 3
    assert set(tree.n_children[1:].tolist()) == {0, 1}
    assert len(tree.level(4)) == 3
    assert parse_tree("chain:3").parent.tolist() == [-1, 0, 1, 2]


@pytest.mark.parametrize("spec, k, depth", [("kary:4,2", 4, 2), ("binary:3", 2, 3), ("ternary:2", 3, 2)])
def test_kary_sizes(spec, k, depth):
    tree = parse_tree(spec)
    assert tree.n_drafts == sum(k**d for d in range(1, depth + 1))
    assert all(len(tree.level(d)) == k**d for d in range(depth + 1))
    assert (tree.n_children[tree.depth < depth] == k).all()


def test_prefix_tree_alg5_has_product_leaves():
    tree = parse_tree("prefix:3,2,2")  # SpecTr (Sun et al. 2023), Alg. 5, K = 12
    leaves = np.flatnonzero(tree.n_children == 0)
    assert len(leaves) == 12
    assert (tree.depth[leaves] == 3).all()
    assert parse_tree("prefix:2,2,2").parent.tolist() == parse_tree("binary:3").parent.tolist()


def test_branching_and_nested_agree():
    tree = parse_tree("branching:2;2,1;1")
    assert tree.parent.tolist() == [-1, 0, 0, 1, 1, 2, 3]
    assert tree.nested() == [[[[]], []], [[]]]
    assert parse_tree("[[[[]],[]],[[]]]").parent.tolist() == tree.parent.tolist()
    assert parse_tree("json: [[[[]], []], [[]]]").parent.tolist() == tree.parent.tolist()


def test_ancestor_mask_matches_paths_and_positions():
    tree = parse_tree("branching:3;1,2;1,0,1")
    for node, path in enumerate(tree.paths()):
        assert set(np.flatnonzero(tree.ancestor_mask[node])) == set(path)
        assert path[0] == 0
        assert path[-1] == node
        assert len(path) == tree.depth[node] + 1
    assert (tree.positions(10) == 10 + tree.depth).all()
    for node in range(tree.n_nodes):
        assert (tree.parent[tree.children(node)] == node).all()


@pytest.mark.parametrize("spec", ["binary", "chains:2", "chains:0,3", "kary:2,x", "branching:1;1,1", "[[]", "[1]", "branching:0"])
def test_bad_specs_raise(spec):
    with pytest.raises(InvalidTreeSpecError):
        parse_tree(spec)


def test_unknown_kind_and_size_limit():
    with pytest.raises(UnknownNameError):
        parse_tree("quaternary:2")
    with pytest.raises(InvalidTreeSpecError):
        parse_tree(f"kary:{MAX_TREE_NODES},2")
    with pytest.raises(InvalidTreeSpecError):
        Tree(np.array([-1, 0, 2]))  # parent after child


#: Memory a refused spec may allocate: the refusal is arithmetic on the spec, before any
#: node list or array exists (building the refused trees below would take megabytes).
REFUSAL_MEMORY_BYTES = 1 << 20


@pytest.mark.parametrize("spec", [
    "chain:1000000", "chains:1000,1000", "kary:2,20", "binary:20", "ternary:13", "prefix:" + ",".join(["2"] * 20),
    "branching:1000000", "branching:1;1000000", "[" + ",".join(["[]"] * 100_000) + "]",
    "kary:1,1000000000000000000000", "kary:100000000000000000000,2", "chain:1000000000",
])
def test_too_large_specs_are_refused_before_anything_is_built(spec):
    tracemalloc.start()
    try:
        with pytest.raises(InvalidTreeSpecError, match="MAX_TREE_NODES"):
            parse_tree(spec)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < REFUSAL_MEMORY_BYTES


def test_the_largest_trees_parse():
    assert parse_tree(f"chain:{MAX_TREE_NODES}").n_drafts == MAX_TREE_NODES
    assert parse_tree(f"chains:{MAX_TREE_NODES},1").n_drafts == MAX_TREE_NODES
    assert parse_tree("kary:2,11").n_drafts == 2**12 - 2
    for spec in (f"chain:{MAX_TREE_NODES + 1}", "kary:2,12", f"branching:{MAX_TREE_NODES + 1}"):
        with pytest.raises(InvalidTreeSpecError, match="MAX_TREE_NODES"):
            parse_tree(spec)


def test_deep_trees_in_every_syntax_and_their_nested_forms():
    depth = 3000  # deeper than Python's recursion limit
    chain = parse_tree(f"chain:{depth}")
    nested = "[" * (depth + 1) + "]" * (depth + 1)
    assert parse_tree(nested).parent.tolist() == chain.parent.tolist()
    assert chain.nested_spec() == nested
    unnamed = Tree(chain.parent)
    assert unnamed.spec == nested  # a tree built from its parents is named by its nested spec
    assert f"drafts={depth}" in repr(unnamed)
    lists, levels = chain.nested(), 0
    while lists:
        lists, levels = lists[0], levels + 1
    assert levels == depth


@pytest.mark.parametrize("spec", ["[[],]", "[,[]]", "[[]][]", "[[][]]", "[]]", "json:[[],[1]]"])
def test_malformed_nested_specs(spec):
    with pytest.raises(InvalidTreeSpecError, match="a leaf is"):
        parse_tree(spec)


def test_a_long_spec_is_shown_shortened():
    spec = "branching:" + ";".join(["1"] * 2000) + ";x"
    with pytest.raises(InvalidTreeSpecError) as err:
        parse_tree(spec)
    assert len(str(err.value)) < 400
    assert f"({len(spec)} characters)" in str(err.value)
