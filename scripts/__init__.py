"""The benchmark and figure scripts the docs cite. Each runs as a file from the repository root
(``python scripts/NAME.py``) and imports its siblings by name; research/ imports them as
``scripts.NAME``."""
