"""``python -m mailroom.net``: see ``mailroom.net.cli``."""

import sys

from mailroom.net.cli import main

sys.exit(main())
