"""The Wing-Gong-Lowe search for a linearization of one partition of a history.

The calls' invocations and completions form a doubly linked list in real-time
order. The search walks it from the front: an invocation whose call the model can
take next is *lifted* (it and its completion leave the list) and the walk restarts;
reaching a completion whose call is not yet linearized means the choices so far
cannot be extended, so the last lifted call is put back (*unlifted*) and the walk
goes on after it. A (set of linearized calls, state) pair already seen is never
explored again (memoization, as in Knossos and Porcupine). Open calls (``info``, or
never completed) have no completion in the list: they may be linearized anywhere
after their invocation, or never. The walk is deterministic: the same partition
always gives the same verdict and witness.

``budget`` bounds the (calls, state) pairs explored; past it the verdict is
``unknown``, with how far the search got, never a guess.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import attrs

from mailroom.linearizable.history import Call
from mailroom.linearizable.models import Model

LINEARIZABLE = "linearizable"
NOT_LINEARIZABLE = "not linearizable"
UNKNOWN = "unknown"


@attrs.frozen
class Found:
    """The outcome of one search: the verdict, the pairs explored, and the longest
    linearizable prefix found (positions in the searched calls, in linearization
    order) with the completed call that could not follow it."""

    verdict: str
    explored: int
    prefix: tuple[int, ...] = ()
    blocked: int | None = None


@attrs.define
class _Entries:
    """The linked list: entry 0 is the head, ``n + 1`` the tail; entries in between
    are invocations (``call[e]`` the call, ``match[e]`` its completion or -1) and
    completions (``match[e]`` is -2)."""

    nxt: list[int]
    prv: list[int]
    call: list[int]
    match: list[int]

    @classmethod
    def of(cls, calls: Sequence[Call]) -> _Entries:
        events = [(c.called, 0, i) for i, c in enumerate(calls)]
        events += [(c.returned, 1, i) for i, c in enumerate(calls) if c.returned is not None]
        events.sort()
        n = len(events)
        call, match = [-1] * (n + 2), [-1] * (n + 2)
        where: dict[int, int] = {}
        for e, (_, kind, i) in enumerate(events, 1):
            call[e] = i
            if kind:
                match[where[i]], match[e] = e, -2
            else:
                where[i] = e
        return cls([*range(1, n + 2), n + 1], [0, *range(0, n + 1)], call, match)

    @property
    def tail(self) -> int:
        """The tail sentinel's entry."""
        return len(self.nxt) - 1

    def lift(self, e: int) -> None:
        """Take invocation ``e`` and its completion out of the list."""
        for x in (e, self.match[e]):
            if x >= 0:
                self.nxt[self.prv[x]] = self.nxt[x]
                self.prv[self.nxt[x]] = self.prv[x]

    def unlift(self, e: int) -> None:
        """Put invocation ``e`` and its completion back where they were."""
        for x in (self.match[e], e):
            if x >= 0:
                self.nxt[self.prv[x]] = x
                self.prv[self.nxt[x]] = x


def twins(calls: Sequence[Call], model: Model) -> list[int]:
    """For each open call, the open call invoked just before it that has the same
    ``f``, key and value (and process, unless the model says ``uses_process = False``),
    else -1. Such calls are interchangeable: either may take the other's place in a
    linearization (neither has a completion to respect, the earlier one was invoked
    first, and their effects are equal), so the search lifts them in invocation order
    only; a burst of n ``info`` calls then costs n + 1 states, not 2 ** n."""
    by_process = getattr(model, "uses_process", True)
    last: dict[tuple[Hashable, ...], int] = {}
    before = [-1] * len(calls)
    for i, c in enumerate(calls):
        if not c.open:
            continue
        try:
            sig = (c.f, c.key, c.arg, c.process if by_process else None)
            hash(sig)
        except TypeError:  # pragma: no cover - histories' values are frozen
            continue
        before[i] = last.get(sig, -1)
        last[sig] = i
    return before


def search(calls: Sequence[Call], model: Model, budget: int, *, symmetry: bool = True) -> Found:
    """Is there a linearization of ``calls`` (one partition, in invocation order)?
    ``symmetry``: lift interchangeable open calls in order only (``twins``)."""
    entries = _Entries.of(calls)
    nxt, call, match, tail = entries.nxt, entries.call, entries.match, entries.tail
    is_open = [c.open for c in calls]
    twin = twins(calls, model) if symmetry else [-1] * len(calls)
    step, completed = model.step, is_open.count(False)
    state: Hashable = model.init()
    seen: set[tuple[int, Hashable]] = {(0, state)}
    stack: list[tuple[int, Hashable]] = []
    bits, done, best = 0, 0, Found(NOT_LINEARIZABLE, 0)
    entry = nxt[0]
    while done < completed:
        if match[entry] != -2 and entry != tail:  # an invocation
            i = call[entry]
            if twin[i] >= 0 and not bits >> twin[i] & 1:  # its earlier twin goes first
                entry = nxt[entry]
                continue
            ok, new = step(state, calls[i])
            lifted = bits | (1 << i)
            if ok and (lifted, new) not in seen:
                if len(seen) > budget:
                    return Found(UNKNOWN, len(seen), best.prefix, best.blocked)
                seen.add((lifted, new))
                stack.append((entry, state))
                state, bits, done = new, lifted, done + (not is_open[i])
                entries.lift(entry)
                entry = nxt[0]
            else:
                entry = nxt[entry]
            continue
        if len(stack) > len(best.prefix) or best.blocked is None:
            blocked = call[entry] if entry != tail else None
            best = Found(NOT_LINEARIZABLE, 0, tuple(call[e] for e, _ in stack), blocked)
        if not stack:
            return attrs.evolve(best, explored=len(seen))
        entry, state = stack.pop()
        bits &= ~(1 << call[entry])
        done -= not is_open[call[entry]]
        entries.unlift(entry)
        entry = nxt[entry]
    return Found(LINEARIZABLE, len(seen), tuple(call[e] for e, _ in stack))
