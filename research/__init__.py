"""Research beside the product: experiments, the evidence scripts the docs cite, and their dated
journals. Research may import the product (otm, solvers, decoding, proofs, otm_app); the product
never imports research (an import-linter contract in pyproject.toml)."""
