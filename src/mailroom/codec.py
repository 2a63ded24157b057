"""The wire codec, re-exported: ``mailroom.codec.encode(packet)`` and ``decode(data)``.

Every name of ``mailroom.core.codec``'s ``__all__``; the format and the decode budget
are specified in ``mailroom.core.wire_format``.
"""

from mailroom.core.codec import *  # noqa: F403  (exactly its __all__)
from mailroom.core.codec import __all__ as __all__
