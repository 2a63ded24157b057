import sys

from mailroom.cli import main

sys.exit(main())
