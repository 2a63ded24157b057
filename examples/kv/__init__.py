"""A replicated key-value store over HTTP: three processes, each a ``mailroom.net``
member holding a ``ReplDict`` under safe delivery with synchronous checkpoints.

``python -m examples.kv`` starts three members on 127.0.0.1 and prints their HTTP
addresses; ``python -m examples.kv --pid N --peers PEERS.TOML --http HOST:PORT``
runs one member. See README.md here and docs/kv.md.
"""
