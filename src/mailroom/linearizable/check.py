"""Checking a whole history: partition it by key, search each key, gather a verdict.

``check_key`` is the one rule both engines apply (the local engine in a loop, the
Spark engine in its tasks): it searches one key's calls and returns a ``KeyVerdict``
that holds everything the witness needs. ``gather`` combines the keys' verdicts in
key order, so the verdict and the witness do not depend on which engine ran or in
what order the keys finished: the history is not linearizable if any key is not
(the first such key in key order is the witness), else unknown if any key ran out
of budget, else linearizable.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence

import attrs

from mailroom.linearizable.history import Call, HistoryError
from mailroom.linearizable.models import Model, Whole, order_key
from mailroom.linearizable.search import LINEARIZABLE, NOT_LINEARIZABLE, UNKNOWN, search

#: the (calls, state) pairs one key's search may explore unless told otherwise
DEFAULT_BUDGET = 200_000


@attrs.frozen
class KeyVerdict:
    """One key's verdict. For a key that is not linearizable (or unknown), ``calls`` are
    its calls, ``prefix`` the longest linearizable prefix found and ``blocked`` the
    completed call that cannot follow it; a linearizable key keeps none of them."""

    key: Hashable
    verdict: str
    size: int
    explored: int
    calls: tuple[Call, ...] = ()
    prefix: tuple[Call, ...] = ()
    blocked: Call | None = None


@attrs.frozen
class Verdict:
    """The verdict on a history: ``verdict`` (linearizable, not linearizable, unknown),
    and each key's, in key order."""

    verdict: str
    model: str
    keys: tuple[KeyVerdict, ...]

    @property
    def witness(self) -> KeyVerdict | None:
        """The first key (in key order) that is not linearizable, else the first
        unknown one, else None."""
        for wanted in (NOT_LINEARIZABLE, UNKNOWN):
            for k in self.keys:
                if k.verdict == wanted:
                    return k
        return None

    @property
    def calls(self) -> int:
        return sum(k.size for k in self.keys)

    @property
    def explored(self) -> int:
        return sum(k.explored for k in self.keys)


def validate(calls: Iterable[Call], model: Model) -> None:
    """HistoryError naming the line of the first call ``model`` cannot take."""
    for c in calls:
        why = None if c.f in model.fs else f"the {model.name} model has no operation {c.f!r}"
        why = why or model.validate(c)
        if why:
            raise HistoryError(why, line=c.call_line)


def partitions(calls: Iterable[Call]) -> list[tuple[Hashable, list[Call]]]:
    """The calls of each key, keys in a deterministic order, calls in invocation order."""
    by_key: dict[Hashable, list[Call]] = {}
    for c in calls:
        by_key.setdefault(c.key, []).append(c)
    for group in by_key.values():
        group.sort(key=lambda c: c.called)
    return sorted(by_key.items(), key=lambda kv: order_key(kv[0]))


def check_key(key: Hashable, calls: Sequence[Call], model: Model, budget: int) -> KeyVerdict:
    """Search one key's calls (the rule both engines apply)."""
    found = search(calls, model, budget)
    size = len(calls)
    if found.verdict == LINEARIZABLE:
        return KeyVerdict(key, LINEARIZABLE, size, found.explored)
    blocked = None if found.blocked is None else calls[found.blocked]
    prefix = tuple(calls[i] for i in found.prefix)
    return KeyVerdict(key, found.verdict, size, found.explored, tuple(calls), prefix, blocked)


def gather(model: Model, keys: Iterable[KeyVerdict]) -> Verdict:
    """The history's verdict from its keys' verdicts (in any order)."""
    ordered = tuple(sorted(keys, key=lambda k: order_key(k.key)))
    found = {k.verdict for k in ordered}
    verdict = next((v for v in (NOT_LINEARIZABLE, UNKNOWN) if v in found), LINEARIZABLE)
    return Verdict(verdict, model.name, ordered)


def check_calls(
    calls: Sequence[Call], model: Model, *, budget: int = DEFAULT_BUDGET, partition: bool = True
) -> Verdict:
    """Is the history of ``calls`` linearizable under ``model``? Each key is searched
    on its own (``partition=False``: all keys in one search, with ``Whole(model)``)."""
    validate(calls, model)
    if not partition:
        whole = Whole(model)
        return gather(model, [check_key(None, list(calls), whole, budget)])
    return gather(model, (check_key(k, group, model, budget) for k, group in partitions(calls)))
