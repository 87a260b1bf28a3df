"""``otm report``: theorems, real-logit bounds and decoding on the Qwen pair in one folder."""
