import sys

from mailroom.replicated import ReplLockManager, serve

# PySyncObj's README lock: python examples/lock.py SELF OTHER... with MAILROOM_KEY set
locks = serve(ReplLockManager(), sys.argv[1], sys.argv[2:])
if locks.sync.acquire("test-lock"):
    print("holding test-lock:", locks.local.holder("test-lock"))  # do some actions
    locks.sync.release("test-lock")
