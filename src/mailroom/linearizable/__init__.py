"""Is a service linearizable? Black-box histories of its clients, checked per key.

Read a history (``read_history``: Jepsen's EDN or console log, or JSON Lines), pair
its rows into calls (``pair``), and check them against a model (``MODELS``) with the
Wing-Gong-Lowe search, one key at a time (``check_calls``). A history that is not
linearizable has a witness (``witness_lines``, ``witness_svg``). A client records its history with
``HistoryRecorder`` (``merge_histories`` joins several processes' files). The Spark engine
(``mailroom.linearizable.spark``) applies the same per-key rule in Spark tasks.
See docs/checking-histories.md.
"""

from mailroom.linearizable.check import (
    DEFAULT_BUDGET,
    KeyVerdict,
    Verdict,
    check_calls,
    check_key,
    gather,
    partitions,
)
from mailroom.linearizable.edn import EdnError, Keyword, read_edn
from mailroom.linearizable.history import Call, HistoryError, Op, pair
from mailroom.linearizable.models import (
    MODELS,
    Counter,
    DictModel,
    KeyValue,
    Lock,
    Model,
    Queue,
    Register,
    SetModel,
    Whole,
)
from mailroom.linearizable.readers import FORMATS, parse_history, read_history
from mailroom.linearizable.record import Client, HistoryRecorder, merge_histories
from mailroom.linearizable.search import LINEARIZABLE, NOT_LINEARIZABLE, UNKNOWN, search
from mailroom.linearizable.witness import verdict_lines, witness_lines, witness_svg

__all__ = [
    "DEFAULT_BUDGET",
    "FORMATS",
    "LINEARIZABLE",
    "MODELS",
    "NOT_LINEARIZABLE",
    "UNKNOWN",
    "Call",
    "Client",
    "Counter",
    "DictModel",
    "EdnError",
    "HistoryError",
    "HistoryRecorder",
    "KeyValue",
    "KeyVerdict",
    "Keyword",
    "Lock",
    "Model",
    "Op",
    "Queue",
    "Register",
    "SetModel",
    "Verdict",
    "Whole",
    "check_calls",
    "check_key",
    "gather",
    "merge_histories",
    "pair",
    "parse_history",
    "partitions",
    "read_edn",
    "read_history",
    "search",
    "verdict_lines",
    "witness_lines",
    "witness_svg",
]
