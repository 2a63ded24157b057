"""``python -m examples.kv``: see ``examples/kv/cli.py`` and the README."""

import sys

from examples.kv.cli import main

sys.exit(main())
