"""Tree attention over a key/value cache: one model forward for a whole draft tree.

:class:`TreeCache` keeps a Hugging Face causal LM's ``DynamicCache`` for a batch of rows
whose committed lengths differ. Each cache slot has a validity bit per row
(``slot_valid``), and every forward passes an explicit 4-D additive attention mask
``[batch, 1, queries, cached + queries]`` and explicit ``position_ids``. transformers
(5.x, ``masking_utils._preprocess_mask_arguments``) returns a 4-D mask as is, and the
eager and SDPA attentions add it to the scores, so a query attends exactly to the slots the
mask opens; rotary position embeddings are applied before keys are cached, so a cached
slot keeps its position whatever its index in the cache.

One speculative step on a :class:`TreeCache`:

1. :meth:`TreeCache.begin_step` with the tree;
2. :meth:`TreeCache.forward_step` - in its first call, the committed tokens not yet in
   the cache (``[batch, P]``, left-padded, the last one is the tree's root), and/or tree
   nodes, each attending to the committed cache, the pending tokens and its own ancestors
   in the tree (the tree mask, :attr:`decoding.runtime.trees.Tree.ancestor_mask`). The target
   runs the pending token and all nodes in one call; the draft runs one call per depth;
3. :meth:`TreeCache.commit` with the accepted path: the slots of this step that are not
   on it are dropped and the cache is compacted.

The tree-attention logits equal plain causal forwards of every root-to-node path
(``tests/decoding/test_tree_attention.py`` checks it to :data:`TREE_LOGIT_TOLERANCE`).
"""
from __future__ import annotations

import numpy as np
import torch
from transformers import DynamicCache

from decoding.runtime.trees import Tree

#: Largest |difference| between tree-attention logits and plain path forwards in float32
#: (different summation orders). In float64 with SDPA attention they agree to
#: ``otm.tolerances.AGREEMENT_TOLERANCE``; transformers' eager attention takes its softmax
#: in float32, so float64 eager models only agree to about 1e-6.
TREE_LOGIT_TOLERANCE = 1e-4


class TreeCache:
    """A causal LM's key/value cache for ``batch`` rows with per-row validity.

    Attributes:
        model: a transformers causal LM accepting ``attention_mask`` (4-D), ``position_ids``,
            ``past_key_values``.
        slot_valid: ``[batch, cached]`` bool, committed slots each row attends to.
        length: ``[batch]`` int64, number of committed tokens in the cache (the position of
            the next token).
    """

    def __init__(self, model: torch.nn.Module, batch: int, device):
        self.model = model
        self.device = torch.device(device)
        self.dtype = next(model.parameters()).dtype
        self.cache = DynamicCache(config=model.config)
        self.slot_valid = torch.zeros(batch, 0, dtype=torch.bool, device=self.device)
        self.length = torch.zeros(batch, dtype=torch.int64, device=self.device)
        self._tree: Tree | None = None

    # -- one step -----------------------------------------------------------------------
    def begin_step(self, tree: Tree | None) -> None:
        """Start a step for ``tree`` (``None`` for a plain causal block, e.g. prefill)."""
        self._tree = tree
        self._step_start = self.slot_valid.shape[1]
        self._pending_valid = None
        self._root_position = None
        self._nodes: list[int] = []  # tree nodes (>= 1) forwarded this step, in slot order

    def forward_step(
        self,
        pending_tokens: torch.Tensor | None = None,  # [batch, P] int64, left-padded; last column = root
        pending_valid: torch.Tensor | None = None,  # [batch, P] bool
        node_tokens: torch.Tensor | None = None,  # [batch, n] int64, tokens of `nodes`
        nodes=(),  # n tree node ids (>= 1); their ancestors forwarded before or listed earlier
    ) -> torch.Tensor:  # [batch, P + n, vocab]
        """One forward of the pending committed tokens (first call of a step only; causal
        among the valid ones) and/or of tree nodes (each attends to the committed cache, the
        valid pending tokens and its ancestors in the tree: tree attention)."""
        parts_tokens, parts_positions, rows = [], [], []
        nodes = [int(v) for v in nodes]
        n_pending = 0
        if pending_tokens is not None:
            if self._pending_valid is not None:
                raise RuntimeError("pending tokens are forwarded once, in the first call of a step")
            n_pending = pending_tokens.shape[1]
            batch = pending_tokens.shape[0]
            causal = torch.tril(torch.ones(n_pending, n_pending, dtype=torch.bool, device=self.device))
            see_pending = causal.unsqueeze(0) & pending_valid.unsqueeze(1)  # [batch, P, P]
            positions = self.length.unsqueeze(1) + pending_valid.long().cumsum(1) - 1
            self._pending_valid = pending_valid
            self._root_position = positions[:, -1]
            parts_tokens.append(pending_tokens)
            parts_positions.append(positions.clamp(min=0))
            rows.append(torch.cat([see_pending, torch.zeros(batch, n_pending, len(self._nodes) + len(nodes),
                                                              dtype=torch.bool, device=self.device)], dim=2))
        if nodes:
            batch = node_tokens.shape[0]
            known = self._nodes + nodes
            ancestors = torch.as_tensor(self._tree.ancestor_mask[np.ix_(nodes, known)], device=self.device)
            see_pending = self._pending_valid.unsqueeze(1).expand(batch, len(nodes), -1)
            rows.append(torch.cat([see_pending, ancestors.unsqueeze(0).expand(batch, -1, -1)], dim=2))
            depth = torch.as_tensor(self._tree.depth[nodes], device=self.device)
            parts_tokens.append(node_tokens)
            parts_positions.append(self._root_position.unsqueeze(1) + depth.unsqueeze(0))
            self._nodes = known
        return self._forward(torch.cat(parts_tokens, 1), torch.cat(parts_positions, 1), torch.cat(rows, 1))

    def prefill(
        self,
        tokens: torch.Tensor,  # [batch, L] int64, left-padded
        valid: torch.Tensor,  # [batch, L] bool
    ) -> None:
        """Cache ``tokens`` as committed (causal among the valid ones)."""
        self.begin_step(None)
        self.forward_step(tokens, valid)
        self.commit(torch.zeros(tokens.shape[0], 0, dtype=torch.int64, device=self.device))

    def commit(
        self,
        path_nodes: torch.Tensor,  # [batch, L] int64 tree nodes (>= 1) to keep, -1 = none
    ) -> None:
        """End the step: keep the valid pending slots and the slots of ``path_nodes`` that
        were forwarded (in path order), drop the rest of this step's slots, compact."""
        batch = self.slot_valid.shape[0]
        slot_of_node = torch.full((self._tree.n_nodes if self._tree else 1,), -1, dtype=torch.int64)
        n_pending = self._pending_valid.shape[1]
        for slot, node in enumerate(self._nodes):
            slot_of_node[node] = n_pending + slot
        slot_of_node = slot_of_node.to(self.device)
        path_slots = torch.where(path_nodes >= 0, slot_of_node[path_nodes.clamp(min=0)], -1)
        pending_slots = torch.arange(n_pending, device=self.device).expand(batch, -1)
        pending_slots = torch.where(self._pending_valid, pending_slots, -1)
        keep = torch.cat([pending_slots, path_slots], dim=1)  # [batch, P + L], -1 = drop
        self._keep_step_slots(keep)
        self._tree = None

    # -- internals ----------------------------------------------------------------------
    def _forward(self, tokens, positions, visible_step) -> torch.Tensor:
        """Run the model on ``tokens`` ``[batch, n]``; ``visible_step`` ``[batch, n, S + n]``
        says which of this step's slots (already cached ``S``, then the new ``n``) each
        query sees; committed slots are seen where ``slot_valid``."""
        batch, n = tokens.shape
        committed = self.slot_valid[:, : self._step_start].unsqueeze(1).expand(batch, n, -1)
        visible = torch.cat([committed, visible_step], dim=2)
        # a query (padding) that sees nothing attends to itself, so no row is fully masked
        visible[:, torch.arange(n), visible.shape[2] - n + torch.arange(n)] |= ~visible.any(dim=2)
        mask = torch.zeros(visible.shape, dtype=self.dtype, device=self.device)
        mask.masked_fill_(~visible, torch.finfo(self.dtype).min)
        with torch.no_grad():
            out = self.model(
                input_ids=tokens,
                attention_mask=mask.unsqueeze(1),
                position_ids=positions,
                past_key_values=self.cache,
                use_cache=True,
            )
        self.cache = out.past_key_values
        step_valid = torch.ones(batch, n, dtype=torch.bool, device=self.device)
        self.slot_valid = torch.cat([self.slot_valid, step_valid], dim=1)
        return out.logits

    def _keep_step_slots(self, keep: torch.Tensor) -> None:
        """Replace this step's slots by ``keep`` ``[batch, m]`` (step-relative slot indices,
        -1 = empty slot) in every cache layer."""
        start = self._step_start
        kept = keep >= 0
        # drop all-empty columns (e.g. pending padding in every row)
        columns = kept.any(dim=0)
        keep, kept = keep[:, columns], kept[:, columns]
        index = (start + keep.clamp(min=0)).view(keep.shape[0], 1, -1, 1)
        for layer in self.cache.layers:
            for name in ("keys", "values"):
                tensor = getattr(layer, name)
                gathered = tensor.gather(2, index.expand(-1, tensor.shape[1], -1, tensor.shape[3]))
                setattr(layer, name, torch.cat([tensor[:, :, :start], gathered], dim=2))
        self.slot_valid = torch.cat([self.slot_valid[:, :start], kept], dim=1)
        self.length = self.length + kept.sum(dim=1)
