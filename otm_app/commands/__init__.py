"""One module per ``otm`` subcommand: a typed config in, a result out (no argparse here)."""
