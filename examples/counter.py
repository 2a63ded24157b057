"""PySyncObj's README counter on mailroom. Run one per member, MAILROOM_KEY set:
python examples/counter.py 127.0.0.1:4321 127.0.0.1:4322 127.0.0.1:4323"""

import sys
import time

from mailroom.replicated import replicated, serve


class Counter:
    def __init__(self):
        self.value = 0

    @replicated
    def inc(self):
        self.value += 1
        return self.value


counter = serve(Counter(), sys.argv[1], sys.argv[2:])
for _ in range(10):
    counter.sync.inc()  # blocks until applied here
while counter.local.value() < 10 * (len(sys.argv) - 1):
    time.sleep(0.1)  # the others' calls
print("counter", counter.local.value())
counter.close()
