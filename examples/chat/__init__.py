"""A causal chat room over mailroom.net: ``python -m examples.chat --pid 0 --peers peers.toml``."""
