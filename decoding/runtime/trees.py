"""Draft trees: the shape of what the draft model proposes in one speculative step.

A :class:`Tree` is a rooted tree in breadth-first order. Node ``0`` is the root: the last
committed token, whose next-token distributions (``p`` of the target, ``q`` of the draft)
start the step. Every other node holds one draft token; its children are drawn together,
from ``q`` at that node, with the joint draft law of the rule in use (i.i.d., without
replacement, SpecHub's hub law, greedy), ``k`` = its number of children. Verification walks
the tree from the root (SpecTr, Sun et al. 2023, Alg. 3, :mod:`decoding.runtime.tree_walk`).

Spec strings (:func:`parse_tree`; whitespace is ignored):

``chains:K,D``
    ``K`` draft sequences of depth ``D`` (SpecTr §7, SpecTr (Sun et al. 2023), eq. (7)): the root has ``K``
    children and every other non-leaf node has one child. The ``K`` first tokens are
    drawn with the rule's joint law; below the root each chain continues alone.
    ``chain:D`` is ``chains:1,D`` (Leviathan et al.'s single draft sequence).
``kary:K,D``
    The full ``K``-ary tree of depth ``D``. ``binary:D`` = ``kary:2,D``, ``ternary:D`` = ``kary:3,D``.
``prefix:k1,k2,...,kL``
    The prefix tree of SpecTr (Sun et al. 2023), Alg. 5 (App. E): every node at depth ``i - 1`` has ``k_i``
    children, so the tree has ``k1 * ... * kL`` leaves at depth ``L``.
``branching:A;B;C``
    An unbalanced (Sequoia-style) tree given level by level: group ``i`` (0-based, groups
    separated by ``;``) lists, comma-separated, the number of children of each node of
    depth ``i``, left to right in the order the nodes were created. Missing trailing
    counts are 0. Example ``branching:2;2,1;1`` - the root has 2 children; the first of
    them has 2 children, the second 1; the first node of depth 2 has one child (depth 3),
    the other two depth-2 nodes are leaves.
``[[...], ...]`` or ``json:[[...], ...]``
    A nested list: a node is the list of its children, a leaf is ``[]``. The root is the
    outer list. ``[[[],[]],[[]]]`` = ``branching:2;2,1``.

Sizes are limited by :data:`MAX_TREE_NODES` (a tree is one target forward): every syntax
counts its draft nodes from the spec alone, with Python integers and stopping as soon as
the count passes the limit, and refuses a larger tree before building anything.
"""
from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from otm.errors import UnknownNameError
from otm.errors import OTMError

#: Largest number of draft nodes a spec may expand to (one target forward holds them all).
MAX_TREE_NODES = 4096


#: Longest spec quoted whole in an error message (a longer one is shown by its two ends).
SHOWN_SPEC_CHARS = 80


class InvalidTreeSpecError(OTMError, ValueError):
    """A tree spec string that cannot be parsed or describes an impossible tree."""


@dataclass(frozen=True, eq=False)
class Tree:
    """A draft tree in breadth-first order (node 0 = root, parents before children,
    the children of a node consecutive and in creation order).

    Attributes:
        parent: ``[n_nodes]`` int64, ``parent[0] = -1``.
        spec: the spec string it was built from (for reports); for a tree built from its
            ``parent`` array, its nested-list spec.
    """

    parent: np.ndarray  # [n_nodes]
    spec: str = ""

    def __post_init__(self):
        parent = np.asarray(self.parent, dtype=np.int64)
        if parent.ndim != 1 or len(parent) < 1 or parent[0] != -1:
            raise InvalidTreeSpecError("parent must be a 1-D array starting with -1 (the root)")
        if len(parent) > 1 and not (np.all(parent[1:] >= 0) and np.all(parent[1:] < np.arange(1, len(parent)))):
            raise InvalidTreeSpecError("every node's parent must come before it (breadth-first order)")
        if np.any(np.diff(parent[1:]) < 0):
            raise InvalidTreeSpecError("nodes must be in breadth-first order (parents non-decreasing)")
        object.__setattr__(self, "parent", parent)
        if not self.spec:
            object.__setattr__(self, "spec", self.nested_spec())

    @property
    def n_nodes(self) -> int:
        """Number of nodes including the root."""
        return len(self.parent)

    @property
    def n_drafts(self) -> int:
        """Number of draft tokens (nodes other than the root)."""
        return self.n_nodes - 1

    @cached_property
    def depth(self) -> np.ndarray:  # [n_nodes]
        """Depth of each node (root 0)."""
        depth = np.zeros(self.n_nodes, dtype=np.int64)
        for i in range(1, self.n_nodes):
            depth[i] = depth[self.parent[i]] + 1
        return depth

    @property
    def max_depth(self) -> int:
        """Longest root-to-leaf path, in draft tokens."""
        return int(self.depth.max())

    @cached_property
    def n_children(self) -> np.ndarray:  # [n_nodes]
        """Number of children of each node."""
        return np.bincount(self.parent[1:], minlength=self.n_nodes).astype(np.int64)

    def children(self, node: int) -> np.ndarray:
        """Indices of the children of ``node`` (consecutive, in creation order)."""
        return np.flatnonzero(self.parent == node)

    def level(self, depth: int) -> np.ndarray:
        """Indices of the nodes at ``depth`` (consecutive)."""
        return np.flatnonzero(self.depth == depth)

    def path(self, node: int) -> list[int]:
        """Nodes from the root to ``node``, both included."""
        out = [int(node)]
        while out[-1] != 0:
            out.append(int(self.parent[out[-1]]))
        return out[::-1]

    def paths(self) -> list[list[int]]:
        """Root-to-node path of every node, in node order."""
        return [self.path(i) for i in range(self.n_nodes)]

    @cached_property
    def ancestor_mask(self) -> np.ndarray:  # [n_nodes, n_nodes]
        """``mask[i, j]`` is True when ``j`` is ``i`` or an ancestor of ``i``: the tree
        attention mask (node ``i`` attends to ``j``)."""
        mask = np.eye(self.n_nodes, dtype=bool)
        for i in range(1, self.n_nodes):
            mask[i] |= mask[self.parent[i]]
        return mask

    def positions(self, root_position: int = 0) -> np.ndarray:  # [n_nodes]
        """Sequence positions of the nodes when the root sits at ``root_position``."""
        return root_position + self.depth

    def nested(self) -> list:
        """The tree as a nested list (the ``[[...]]`` spec syntax), built without recursion
        (children come after their parent, in creation order)."""
        lists = [[] for _ in range(self.n_nodes)]
        for node in range(1, self.n_nodes):
            lists[self.parent[node]].append(lists[node])
        return lists[0]

    def nested_spec(self) -> str:
        """The tree as a nested-list spec string, e.g. ``"[[[]],[]]"`` (:func:`parse_tree`
        reads it back), built from the leaves up without recursion."""
        parts: list[list[str]] = [[] for _ in range(self.n_nodes)]
        for node in range(self.n_nodes - 1, -1, -1):
            text = "[" + ",".join(reversed(parts[node])) + "]"
            if node == 0:
                return text
            parts[self.parent[node]].append(text)

    def __repr__(self) -> str:
        return f"Tree({self.spec!r}, drafts={self.n_drafts}, depth={self.max_depth})"


def _shown(spec: str) -> str:
    """``spec`` quoted for an error message, its middle elided past :data:`SHOWN_SPEC_CHARS`."""
    if len(spec) <= SHOWN_SPEC_CHARS:
        return repr(spec)
    half = SHOWN_SPEC_CHARS // 2
    return repr(f"{spec[:half]}...{spec[-half:]}") + f" ({len(spec)} characters)"


def _check_size(n_drafts: int, spec: str) -> None:
    """:class:`InvalidTreeSpecError` when ``n_drafts`` exceeds :data:`MAX_TREE_NODES`."""
    if n_drafts > MAX_TREE_NODES:
        raise InvalidTreeSpecError(
            f"tree spec {_shown(spec)} has more than MAX_TREE_NODES={MAX_TREE_NODES} draft nodes "
            "(one target forward holds them all): use a narrower or shallower tree"
        )


def _uniform_levels_size(widths: Iterable[int]) -> int:
    """Draft nodes of the tree whose nodes at depth ``i - 1`` all have ``widths[i - 1]``
    children (``widths >= 1``), counted only until the count passes :data:`MAX_TREE_NODES`:
    every level adds a node or more, so at most ``MAX_TREE_NODES + 1`` widths are read
    and no product grows past ``MAX_TREE_NODES`` times one width."""
    n_drafts, level = 0, 1
    for width in widths:
        level *= width
        n_drafts += level
        if n_drafts > MAX_TREE_NODES:
            break
    return n_drafts


def _from_branching(levels: list[list[int]], spec: str) -> Tree:
    """Tree from per-level child counts (the ``branching:`` syntax)."""
    if any(count < 0 for counts in levels for count in counts):
        raise InvalidTreeSpecError(f"tree spec {_shown(spec)}: child counts must be >= 0")
    _check_size(sum(sum(counts) for counts in levels), spec)
    parent = [-1]
    frontier = [0]
    for depth, counts in enumerate(levels):
        if len(counts) > len(frontier):
            raise InvalidTreeSpecError(
                f"tree spec {_shown(spec)}: level {depth} lists {len(counts)} child counts but only "
                f"{len(frontier)} nodes exist at depth {depth}"
            )
        nxt = []
        for node, count in zip(frontier, counts):
            for _ in range(count):
                parent.append(node)
                nxt.append(len(parent) - 1)
        frontier = nxt
    if len(parent) == 1:
        raise InvalidTreeSpecError(f"tree spec {_shown(spec)} has no draft node")
    return Tree(np.asarray(parent), spec)


def _parse_nested(text: str, spec: str) -> list:
    """The nested-list syntax (``text`` without whitespace) as nested Python lists, read
    character by character: no recursion (``json.loads`` recurses once per level and fails
    on deep chains), and a tree with more than :data:`MAX_TREE_NODES` drafts is refused
    as soon as its node count passes it."""
    root, stack, previous, n_nodes = None, [], "", 0
    for position, char in enumerate(text):
        if char == "[" and (previous == "" or (stack and previous in "[,")):
            n_nodes += 1
            _check_size(n_nodes - 1, spec)
            node: list = []
            if stack:
                stack[-1].append(node)
            else:
                root = node
            stack.append(node)
        elif char == "]" and stack and previous in "[]":
            stack.pop()
        elif not (char == "," and stack and previous == "]"):
            raise InvalidTreeSpecError(
                f"tree spec {_shown(spec)}: unexpected {char!r} at character {position}; a node is the list of "
                "its children, a leaf is [], e.g. [[[],[]],[[]]]"
            )
        previous = char
    if root is None or stack:
        raise InvalidTreeSpecError(f"tree spec {_shown(spec)}: unbalanced brackets; a node is the list of its children, "
                                   "a leaf is [], e.g. [[[],[]],[[]]]")
    return root


def _from_nested(nested: list, spec: str) -> Tree:
    levels, frontier = [], [nested]
    while frontier:
        levels.append([len(node) for node in frontier])
        frontier = [child for node in frontier for child in node]
    return _from_branching(levels, spec)


def _ints(text: str, spec: str, n: int | None = None) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v != ""]
    except ValueError:
        raise InvalidTreeSpecError(f"tree spec {_shown(spec)}: expected comma-separated integers, got {_shown(text)}") from None
    if n is not None and len(values) != n:
        raise InvalidTreeSpecError(f"tree spec {_shown(spec)}: expected {n} integers, got {len(values)}")
    return values


def _positive(values: list[int], spec: str) -> list[int]:
    if not values or any(v < 1 for v in values):
        raise InvalidTreeSpecError(f"tree spec {_shown(spec)}: widths and depths must be integers >= 1")
    return values


def chains_tree(k: int, depth: int, spec: str | None = None) -> Tree:
    """``k`` chains of ``depth`` draft tokens sharing the root (SpecTr §7)."""
    spec = spec or f"chains:{k},{depth}"
    k, depth = _positive([k, depth], spec)
    _check_size(k * depth, spec)
    return _from_branching([[k]] + [[1] * k] * (depth - 1), spec)


def prefix_tree(widths: list[int], spec: str | None = None) -> Tree:
    """SpecTr (Sun et al. 2023), Alg. 5: every node at depth ``i - 1`` gets ``widths[i-1]`` children."""
    spec = spec or "prefix:" + ",".join(map(str, widths))
    widths = _positive(list(widths), spec)
    _check_size(_uniform_levels_size(widths), spec)
    levels, n = [], 1
    for w in widths:
        levels.append([w] * n)
        n *= w
    return _from_branching(levels, spec)


def kary_tree(k: int, depth: int, spec: str | None = None) -> Tree:
    """The full ``k``-ary tree of ``depth`` levels of drafts."""
    spec = spec or f"kary:{k},{depth}"
    k, depth = _positive([k, depth], spec)
    _check_size(_uniform_levels_size(itertools.repeat(k, min(depth, MAX_TREE_NODES + 1))), spec)  # depth may be a bignum
    return prefix_tree([k] * depth, spec)


def parse_tree(spec: str | Tree) -> Tree:
    """Build a :class:`Tree` from a spec string (syntax in the module docstring).

    >>> parse_tree("binary:2").n_drafts
    6
    >>> parse_tree("chains:3,2").n_children.tolist()
    [3, 1, 1, 1, 0, 0, 0]
    """
    if isinstance(spec, Tree):
        return spec
    if not isinstance(spec, str):
        raise InvalidTreeSpecError(f"a tree spec must be a string, got {type(spec).__name__}")
    text = "".join(spec.split())
    if text.startswith("json:"):
        text = text[len("json:"):]
    if text.startswith("["):
        return _from_nested(_parse_nested(text, spec), spec)
    kind, sep, args = text.partition(":")
    if not sep:
        raise InvalidTreeSpecError(f"tree spec {_shown(spec)} must look like KIND:ARGS, e.g. 'binary:3' or 'chains:4,3'")
    kind = kind.lower()
    if kind == "chains":
        return chains_tree(*_ints(args, spec, 2), spec=spec)
    if kind == "chain":
        return chains_tree(1, *_ints(args, spec, 1), spec=spec)
    if kind == "kary":
        return kary_tree(*_ints(args, spec, 2), spec=spec)
    if kind in ("binary", "ternary"):
        return kary_tree(2 if kind == "binary" else 3, *_ints(args, spec, 1), spec=spec)
    if kind == "prefix":
        return prefix_tree(_ints(args, spec), spec=spec)
    if kind == "branching":
        return _from_branching([_ints(group, spec) for group in args.split(";")], spec)
    raise UnknownNameError(
        f"unknown tree kind {_shown(kind)} in {_shown(spec)}; use chains:K,D, chain:D, kary:K,D, binary:D, "
        "ternary:D, prefix:k1,..,kL, branching:A;B;..., or a nested list [[...]]"
    )
