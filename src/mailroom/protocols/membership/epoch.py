"""The old home of ``Epoch`` and ``Retries`` (0.2), kept so that its imports still work.

``Epoch`` (a view's installed view, flush and state transfer) now lives beside the
installed view in ``view.py``; ``Retries`` with the ``Group`` that owns it
(``group.py``); ``lift`` with the other persistent-field helpers (``core.persist``).
"""

from mailroom.core.persist import lift
from mailroom.protocols.membership.group import Retries
from mailroom.protocols.membership.view import Epoch

__all__ = ["Epoch", "Retries", "lift"]
