"""Speculative decoding at run time: draft trees, one target forward per tree with tree
attention, the verification walk, the decoding loop and its recordings."""
