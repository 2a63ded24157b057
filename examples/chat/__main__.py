"""``python -m examples.chat``: see ``examples/chat/chat.py`` and the README."""

import sys

from examples.chat.chat import main

sys.exit(main())
