"""A node's files, written and read back: the trace and the checkpoint (``store``).

``Journal.write`` writes steps down: their trace events, then their checkpoint log
records (OSError: neither counts as written, and a retry writes both again from
the same offsets). ``restore`` rebuilds a node's endpoint from a checkpoint: the
base, then the log's inputs replayed, with what the node itself keeps (the
messages' kinds, a group's unsent messages, the deliveries of the last step and a
joiner's state still owed). A log cut after steps acted on is refused, or, for a
group member, left behind: the process rejoins as its next incarnation, its ids
counting on from the last one its head records.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import Any

import attrs

from mailroom.core.actions import Deliver, StateRequest
from mailroom.core.endpoint import upcoming_ids
from mailroom.core.errors import LocalError, RemoteError
from mailroom.core.messages import Message, MessageId
from mailroom.core.registry import restore_endpoint
from mailroom.core.wire import carried_message_ids, unplain
from mailroom.net.entries import Provided, Received, SendEntry, Sent, entry_of
from mailroom.net.frames import BROADCAST, UNICAST
from mailroom.net.membership import group_of, queues_sends, rejoined
from mailroom.net.seen import Seen
from mailroom.net.settings import NodeConfig
from mailroom.net.steps import Step
from mailroom.net.store import FORMAT, CheckpointLog, Saved, TraceFile, read_checkpoint
from mailroom.net.tracing import Destinations, Unsent, default_header, stack_names

log = logging.getLogger("mailroom.net")


class Journal:
    """The trace file and the checkpoint log of one node (either may be absent)."""

    def __init__(
        self,
        trace: TraceFile | None,
        ckpt: CheckpointLog | None,
        app_state: Any,
        resumed: Any,
        restored: bool,
        seen: Seen | None = None,
        app_changes: Callable[[], list[Any] | None] | None = None,
    ) -> None:
        self.trace, self.ckpt = trace, ckpt
        #: The message ids the node has seen (kept in every base).
        self.seen = seen
        #: Returns the application's JSON data to keep (or None).
        self.app_state = app_state
        #: Returns what the application's data gained since it was last asked (a list of
        #: JSON records), or None when it changed otherwise (``NodeConfig.app_changes``).
        self.app_changes = app_changes
        self._app_json = json.dumps(resumed) if restored else None
        #: Changes taken from the application and not written yet (a write failed).
        self._unwritten: list[Any] = []
        #: The whole state is due in the next record (the last one with it failed).
        self._whole_due = app_changes is not None

    def write(self, steps: Sequence[Step], sent: int, incarnation: int) -> None:
        """Persist ``steps``: the trace lines, then the checkpoint log's records; the log's
        head then counts them, with the endpoint's message count ``sent`` and group
        ``incarnation`` after them."""
        trace, ckpt = self.trace, self.ckpt
        if trace is not None:
            staged = trace.stage([line for s in steps for line in s.lines])
        if ckpt is not None:
            end, count = (trace.end, trace.count) if trace is not None else (0, 0)
            records: list[dict[str, Any]] = []
            for s in steps:
                end += sum(len(line) for line in s.lines)
                count += len(s.lines)
                records.append(
                    {
                        "ops": s.ops,
                        "trace": count,
                        "trace_bytes": end,
                        "sent": s.sent,
                        "delivered": s.delivered,
                    }
                )
            if len(records) > 1:  # steps that waited (a write failed): acted on as one
                records[0]["batch"] = len(records)
            if self.app_state is not None:  # as of before the first of them
                records[0].update(self._app_record())
            try:
                ckpt.append(records, (sent, incarnation, count, end))
            except OSError:
                self._app_json = None  # write it again with the retry
                self._whole_due = self._whole_due or "app" in records[0]
                if trace is not None:
                    trace.rollback()  # no event in the trace that the checkpoint lacks
                raise
            self._unwritten, self._whole_due = [], False
        if trace is not None:
            trace.confirm(*staged)

    def _app_record(self) -> dict[str, Any]:
        """What the step's record keeps of the application: its state whole ("app"),
        when it changed and no list of changes says how, or its changes ("app_log")."""
        changes = None if self.app_changes is None else self.app_changes()
        if changes is None or self._whole_due:
            self._unwritten, self._whole_due = [], True
            text = json.dumps(self.app_state(), allow_nan=False)
            if text == self._app_json:
                return {}
            self._app_json = text
            return {"app": json.loads(text)}
        self._unwritten += changes
        if not self._unwritten:
            return {}
        self._app_json = None  # the state whole is no longer the last one written
        return {"app_log": list(self._unwritten)}

    def compact(
        self,
        endpoint: Any,
        counters: tuple[int, int],
        dests: Destinations,
        unsent: Unsent | None,
        marks: tuple[int, int],
    ) -> None:
        """Write a new base: ``endpoint``'s snapshot, the node's ``counters`` (sent and
        delivered), what it keeps beside the endpoint (the message ids it has seen too),
        the trace position and the application's state; OSError if it could not be
        written."""
        assert self.ckpt is not None
        trace = self.trace
        base: dict[str, Any] = {
            "format": FORMAT,
            "stack": stack_names(endpoint),
            "endpoint": endpoint.snapshot(),
            "sent": counters[0],
            "delivered": counters[1],
            "trace": trace.count if trace else 0,
            "trace_bytes": trace.end if trace else 0,
        }
        kinds = dests.saved()
        if kinds is not None:
            base["kinds"] = kinds
        if unsent is not None and unsent.waiting:
            base["unsent"] = unsent.saved()
        if self.seen is not None:
            base["seen"] = self.seen.saved()
        if self.app_state is not None:
            base["app"] = self.app_state()
        try:
            self.ckpt.compact(base, (*marks, base["trace"], base["trace_bytes"]))
        except OSError:  # the application was asked for its data whole: log it so next
            self._whole_due = self.app_changes is not None
            raise
        self._app_json = json.dumps(base.get("app"))
        self._unwritten, self._whole_due = [], False  # the base holds them

    def close(self) -> None:
        if self.ckpt is not None:
            self.ckpt.close()
        if self.trace is not None:
            self.trace.close()


@attrs.define
class Restored:
    """A node's endpoint and what the node keeps beside it, as of its last step."""

    endpoint: Any
    dests: Destinations
    unsent: Unsent
    #: The highest message id of every process that arrived here.
    seen: Seen
    #: Deliveries of the steps of the last write: the application state saved with it
    #: predates them (one step, or those that waited while writes failed).
    redelivered: list[Message] = attrs.Factory(list)
    #: A joiner's state requested in the last logged steps and not provided yet.
    owed: int | None = None
    #: What ``app_state`` returned last.
    resumed_state: Any = None
    #: What ``app_changes`` returned since, in order.
    resumed_changes: list[Any] = attrs.Factory(list)
    #: The endpoint was replaced (a rejoin): a new base is due at start.
    rebase: bool = False
    #: The checkpoint it came from (None: a fresh start).
    saved: Saved | None = None
    #: Message ids known to be used already (a rejoin counts on after them).
    used: int = 0

    def counters(self) -> tuple[int, int]:
        """The node's counts of messages sent and delivered, as of the last step (after a
        rejoin, at least the ids known to be used)."""
        last: dict[str, Any] = self.saved.last if self.saved is not None else {}
        return max(int(last.get("sent", 0)), self.used), int(last.get("delivered", 0))

    def rejoin(
        self,
        contacts: Collection[int],
        used: int = 0,
        incarnation: int = 0,
        *,
        requeue: bool = True,
    ) -> None:
        """Replace the endpoint by its next incarnation, asking ``contacts``, its ids
        counting on after ``used`` and its own last ones (``membership.rejoined``); what
        the old one queued and never sent is queued again (``requeue``: not after a cut
        log, when it may have gone out), its send events written when it goes out."""
        self.used = max(self.used, used, int(self.endpoint.sent_count))
        self.endpoint = rejoined(
            self.endpoint, contacts, sent=self.used, incarnation=incarnation, requeue=requeue
        )
        self.redelivered, self.owed, self.rebase = [], None, True
        group = group_of(self.endpoint)
        if group is None or not group.unsent():  # else it goes out, and is written, later
            self.unsent = Unsent()


def resume(path: Path | None, fresh: Any, n: int, rejoin: Collection[int] | None) -> Restored:
    """The node's endpoint (and what it keeps) from the checkpoint at ``path`` if there
    is one, else ``fresh`` as it is."""
    saved = read_checkpoint(path) if path is not None else None
    if saved is None:
        return Restored(fresh, Destinations(fresh.pid, n, fresh), Unsent(), Seen(n))
    return restore(saved, fresh, f"checkpoint {path}", rejoin)


def restore(saved: Saved, fresh: Any, where: str, rejoin: Collection[int] | None) -> Restored:
    """The endpoint of checkpoint ``saved`` with its log replayed; LocalError if it is
    not a checkpoint of ``fresh``'s process and protocol stack, or if its log was cut
    and the process cannot rejoin as a new incarnation."""
    want = stack_names(fresh)
    named = saved.base.get("stack")
    if named is not None and named != want:
        raise LocalError(f"{where} is of protocol stack {named}, not {want}")
    try:
        endpoint = restore_endpoint(saved.base["endpoint"])
        done = Restored(
            endpoint, Destinations(fresh.pid, fresh.n, endpoint), Unsent(), Seen(fresh.n)
        )
        done.dests.load(saved.base.get("kinds"))
        done.unsent.load(saved.base.get("unsent"))
        done.seen.load(saved.base.get("seen"), where)
    except LocalError as exc:
        raise LocalError(f"{where}: {exc}") from None
    except (TypeError, ValueError, KeyError, IndexError, AttributeError, OverflowError) as exc:
        raise LocalError(f"{where}: bad endpoint snapshot: {type(exc).__name__}: {exc}") from None
    except RecursionError:
        raise LocalError(f"{where}: endpoint snapshot nested too deeply") from None
    if stack_names(endpoint) != want:
        raise LocalError(f"{where} is of protocol stack {stack_names(endpoint)}, not {want}")
    if (endpoint.pid, endpoint.n) != (fresh.pid, fresh.n):
        raise LocalError(
            f"{where} is of P{endpoint.pid} of {endpoint.n}, not P{fresh.pid} of {fresh.n}"
        )
    done.saved = saved
    last = last_write(saved.steps)
    for k, step in enumerate(saved.steps):
        try:
            delivered = _replay(done, step["ops"])
        except (LocalError, TypeError, ValueError, KeyError, IndexError) as exc:
            raise LocalError(f"{where}: log step {k + 1} does not replay: {exc}") from None
        if k >= last:  # the application's state saved with that write predates them
            done.redelivered += delivered
    done.resumed_state = saved.base.get("app")
    for step in saved.steps:  # the state whole when it changed, or what it gained
        if "app" in step:
            done.resumed_state, done.resumed_changes = step["app"], []
        done.resumed_changes += step.get("app_log", [])
    if saved.cut is not None:
        if group_of(done.endpoint) is None or saved.marks is None:
            raise LocalError(
                f"{saved.cut}; resuming would hand its messages again and "
                "reuse their ids (restore the log, or start afresh)"
            )
        log.warning(
            "%s; P%d rejoins its group as a new incarnation, its message ids after %d",
            saved.cut,
            fresh.pid,
            saved.marks.sent,
        )
        rejoin = rejoin or ()
    if rejoin is not None:
        marks = saved.marks
        done.rejoin(
            rejoin,
            marks.sent if marks else 0,
            marks.incarnation if marks else 0,
            requeue=saved.cut is None,
        )
    return done


def last_write(steps: Sequence[dict[str, Any]]) -> int:
    """The index of the first step of the last write: a record with ``batch`` m began a
    write of m steps, any other one a write of its own."""
    k = first = 0
    while k < len(steps):
        first, k = k, k + steps[k].get("batch", 1)
    return first


def _replay(done: Restored, ops: list[Any]) -> list[Message]:
    """Replay one logged step's inputs on ``done``'s endpoint and bookkeeping; returns
    its deliveries."""
    endpoint, dests = done.endpoint, done.dests
    delivered: list[Message] = []
    for op in ops:
        entry = entry_of(op)
        if isinstance(entry, SendEntry):
            _replay_send(done, entry)
        actions = entry.replay(endpoint)
        if isinstance(entry, Received):
            for mid in _carried(entry):
                done.seen.saw(mid)
                if entry.said is not None:  # the kind its frame said (both kinds possible)
                    dests.held[mid] = entry.said
        elif isinstance(entry, Provided):
            done.owed = None
        for a in actions:
            if isinstance(a, Deliver):
                delivered.append(a.message)
                if dests.fixed is None:
                    dests.delivered(a.message.id)
            elif isinstance(a, StateRequest):
                done.owed = a.view
        done.unsent.replayed(actions)
    return delivered


def _replay_send(done: Restored, entry: SendEntry) -> None:
    """What a logged send tells besides the endpoint's own replay: the messages a group
    endpoint queues are unsent until it sends them, and each send's destinations."""
    endpoint, dests = done.endpoint, done.dests
    payloads = entry.payloads()
    if queues_sends(endpoint):  # written when sent
        dest = (entry.to,) if isinstance(entry, Sent) else dests.everyone
        for mid, payload in zip(upcoming_ids(endpoint, len(payloads)), payloads, strict=True):
            done.unsent.add(mid, dest, unplain(payload))
    dests.issued(UNICAST if isinstance(entry, Sent) else BROADCAST, len(payloads))


def _carried(entry: Received) -> tuple[MessageId, ...]:
    try:
        return carried_message_ids(entry.decoded())
    except RemoteError:
        return ()


def open_files(
    saved: Saved | None, checkpoint: Path | None, config: NodeConfig, endpoint: Any, n: int
) -> tuple[TraceFile | None, CheckpointLog | None]:
    """The trace that ``config`` names (cut at the checkpoint's position; a new one starts
    with the header of what ``endpoint`` promises, or ``config.trace_header``) and the
    checkpoint log to continue."""
    trace = Path(config.trace) if config.trace else None
    sync = config.sync
    header = b""
    if trace is not None:
        known = config.trace_header or default_header(endpoint, n)
        header = (known.to_line() + "\n").encode()
    last: dict[str, Any] = saved.last if saved is not None else {}
    if saved is not None and saved.cut is not None and saved.marks is not None:
        last = saved.marks.counters()  # the events of the steps acted on stay
    trace_file = None
    if trace is not None:
        keep, keep_bytes = int(last.get("trace", 0)), last.get("trace_bytes")
        trace_file = TraceFile(trace, keep, keep_bytes, sync=sync, header=header)
    ckpt = CheckpointLog(checkpoint, saved, sync=sync) if checkpoint is not None else None
    return trace_file, ckpt


__all__ = ["Journal", "Restored", "open_files", "restore", "resume"]
