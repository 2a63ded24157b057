"""The replica's rules, by exact examples: what a call may carry (refused before anything
is sent), the same error everywhere and the state unchanged, reads, snapshots (never
pickle), the journal's compaction, checkpoint and restart, malformed operations, and
the batteries' behaviour (PySyncObj's and more)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from mailroom.core.actions import View, ViewChange
from mailroom.core.errors import LocalError
from mailroom.core.messages import Message, MessageId
from mailroom.replicated import (
    MAX_OPERATION_BYTES,
    Bundle,
    Caller,
    OutcomeUnknown,
    ReplCounter,
    ReplDict,
    Replica,
    ReplList,
    ReplLockManager,
    ReplPriorityQueue,
    ReplQueue,
    ReplSet,
    SimGroup,
    replicated,
)
from mailroom.replicated.operations import cut_batches
from mailroom.replicated.state import NESTED_LOOK, put_state, take_state

VIEW = View(1, (0, 1))


class Notes:
    """A user class: one replicated method that changes the state before it may raise."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    @replicated
    def add(self, line: str, *, strict: bool = False) -> int:
        self.lines.append(line)
        if strict and not line:
            raise ValueError("an empty line")
        return len(self.lines)

    def count(self) -> int:
        return len(self.lines)


def pair(factory: Any = Notes, **options: Any) -> list[Replica]:
    return [Replica(factory(), p, view=VIEW, **options) for p in (0, 1)]


def run(replicas: list[Replica], origin: int, method: str, *args: Any, **kwargs: Any) -> Any:
    """``origin`` calls; every replica applies; the caller's outcome."""
    mid = MessageId(origin, len(replicas[origin].pending) + replicas[origin].applied + 1)
    payload = replicas[origin].submit(mid, method, *args, **kwargs)
    outcomes = [r.deliver(Message(mid, origin, payload)) for r in replicas]
    return outcomes[origin][0]


# -- what a call may carry -------------------------------------------------------------------
@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        (({1, 2},), {}, "cannot be encoded"),
        ((("a", "b"),), {}, "cannot be encoded"),
        ((float("nan"),), {}, "not finite"),
        ((2**70,), {}, "64 bits"),
        (({1: "x"},), {}, "not a string"),
        (("x" * MAX_OPERATION_BYTES,), {}, "above the limit"),
        ((), {}, "missing a required argument"),
        (("a", "b"), {}, "too many positional"),
        (("a",), {"loud": True}, "unexpected keyword"),
    ],
)
def test_a_call_the_codec_cannot_carry_is_refused_before_anything_is_sent(
    args: tuple[Any, ...], kwargs: dict[str, Any], message: str
) -> None:
    r = Replica(Notes(), 0, view=VIEW)
    with pytest.raises(LocalError, match=message):
        r.submit(MessageId(0, 1), "add", *args, **kwargs)
    assert r.pending == {} and r.obj.lines == []  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("method", "message"),
    [("count", "not @replicated"), ("_secret", "not a public"), ("nope", "has no method")],
)
def test_only_replicated_public_methods_are_calls(method: str, message: str) -> None:
    with pytest.raises(LocalError, match=message):
        Replica(Notes(), 0, view=VIEW).submit(MessageId(0, 1), method)


def test_reads_are_reads_and_calls_are_calls() -> None:
    r = Replica(Notes(), 0, view=VIEW)
    with pytest.raises(LocalError, match="would diverge"):
        r.read("add", "x")
    with pytest.raises(LocalError, match="a call, not a read"):
        r.submit_read(MessageId(0, 1), "add", "x")
    assert r.read("count") == 0 and r.read("lines") == []
    with pytest.raises(LocalError, match="not a member"):
        Replica(Notes(), 0).read("count")  # a joiner before its state


def test_the_arguments_are_copied_at_the_call() -> None:
    r = pair(ReplList)
    item = [1, 2]
    mid = MessageId(0, 1)
    payload = r[0].submit(mid, "append", item)
    item.append(3)  # the caller changes its list after the call
    for x in r:
        x.deliver(Message(mid, 0, payload))
    assert r[0].read("items") == r[1].read("items") == [[1, 2]]
    assert r[0].obj._list[0] is not r[1].obj._list[0]  # type: ignore[attr-defined]


# -- errors and rollback ------------------------------------------------------------------------
def test_a_method_that_raises_leaves_every_replica_as_it_was() -> None:
    r = pair()
    assert run(r, 0, "add", "one").result() == 1
    failed = run(r, 1, "add", "", strict=True)
    with pytest.raises(ValueError, match="an empty line"):
        failed.result()
    assert [x.read("lines") for x in r] == [["one"], ["one"]]
    assert run(r, 0, "add", "two").result() == 2
    assert [x.applied for x in r] == [3, 3]


def test_a_malformed_operation_is_an_error_everywhere_and_changes_nothing() -> None:
    r = pair()
    singles = (["c", 0, "add"], ["z"], ["c", -1, "add", []], ["c", 0, "count", []], 7)
    # a string is a batch's text: one that is not a list of operations counts as one
    batches = ("add", "[]", "[1]", '[["c",0,"add",["x"]]', "[NaN]", '[["c",0,"add",[1e400]]]')
    for payload in (*singles, *batches):
        mid = MessageId(1, r[1].applied + 1)
        key = (1, mid.seq) if type(payload) is not str else (1, mid.seq, 0)
        r[1].pending[key] = "c"
        outcomes = [x.deliver(Message(mid, 1, payload)) for x in r]
        assert outcomes[0] == [] and len(outcomes[1]) == 1, payload
        assert outcomes[1][0].error is not None and outcomes[1][0].key == key, payload
    assert [x.read("lines") for x in r] == [[], []]
    assert [x.applied for x in r] == [len(singles) + len(batches)] * 2


def test_a_batch_applies_its_operations_in_order_each_with_its_own_outcome() -> None:
    r = pair()
    calls = [r[0].prepare("add", "a"), r[0].prepare("add", ""), r[0].prepare_read("count")]
    calls.append(r[0].prepare("add", "b", strict=True))
    with pytest.raises(LocalError, match="is not @replicated"):
        r[0].prepare("count")  # refused at the call: nothing is sent
    mid = MessageId(0, 1)
    payload = r[0].batch(mid, calls)
    assert type(payload) is str and json.loads(payload) == [c.payload for c in calls]
    with pytest.raises(LocalError, match="already a pending call"):
        r[0].batch(mid, calls)
    outcomes = [x.deliver(Message(mid, 0, payload)) for x in r]
    assert outcomes[1] == []  # P1 made none of them
    assert [(o.part, o.value) for o in outcomes[0]] == [(0, 1), (1, 2), (2, 2), (3, 3)]
    assert [o.key for o in outcomes[0]] == [(0, 1, k) for k in range(4)]
    assert [x.read("lines") for x in r] == [["a", "", "b"]] * 2 and r[0].applied == 4
    failing = [r[1].prepare("add", "c"), r[1].prepare("add", "", strict=True)]
    failing.append(r[1].prepare("add", "d"))
    payload = r[1].batch(MessageId(1, 1), failing)
    outcomes = [x.deliver(Message(MessageId(1, 1), 1, payload)) for x in r]
    assert [type(o.error).__name__ for o in outcomes[1]] == ["NoneType", "ValueError", "NoneType"]
    assert [x.read("lines") for x in r] == [["a", "", "b", "c", "d"]] * 2  # the raise undone


def test_batches_are_cut_at_their_byte_limit_and_a_long_operation_goes_alone() -> None:
    assert cut_batches([]) == []
    texts = ["x" * 10] * 5
    assert cut_batches(texts, limit=23) == [slice(0, 2), slice(2, 4), slice(4, 5)]
    assert cut_batches(["x" * 50, "y"], limit=23) == [slice(0, 1), slice(1, 2)]
    assert all(len("[" + ",".join(texts[run]) + "]") <= 23 for run in cut_batches(texts, limit=23))


def test_a_caller_method_gets_the_calling_member() -> None:
    seen: list[Caller] = []

    class Who:
        @replicated(caller=True)
        def me(self, *, caller: Caller) -> list[int]:
            seen.append(caller)
            return [caller.pid, caller.incarnation]

        def __replicated_state__(self) -> list[Any]:
            return []

        def __replicated_restore__(self, state: Any) -> None:
            return None

    r = pair(Who)
    assert run(r, 1, "me").result() == [1, 0] and seen == [Caller(1, 0)] * 2
    with pytest.raises(LocalError, match="filled in by the replica"):
        r[0].submit(MessageId(0, 1), "me", caller=Caller(5, 5))
    with pytest.raises(LocalError, match="takes no 'caller'"):
        replicated(caller=True)(lambda self: None)


# -- snapshots, compaction, checkpoint, restart -------------------------------------------------
def test_the_default_state_must_be_plain_data() -> None:
    class Loose:
        def __init__(self) -> None:
            self.pair = (1, 2)

    with pytest.raises(LocalError, match="__replicated_state__"):
        take_state(Loose())
    notes = Notes()
    notes.lines.append("x")
    state, _ = take_state(notes)
    notes.lines.append("y")  # the state handed out is a copy
    assert state == {"lines": ["x"]}
    put_state(notes, state)
    assert notes.lines == ["x"]


def test_the_log_is_compacted_and_a_checkpoint_restarts_the_replica() -> None:
    r = pair(ReplDict, compact_bytes=512)
    for k in range(300):
        run(r, k % 2, "set", f"k{k % 7}", k)
    journal = r[0].journal
    assert journal.compactions > 5 and journal.log_bytes < 2 * max(512, journal.base_bytes)
    data = json.loads(json.dumps(r[0].checkpoint()))  # it is plain data
    again = Replica.restart(ReplDict(), 0, data)
    assert again.read("items") == r[0].read("items") and again.applied == r[0].applied == 300
    with pytest.raises(LocalError, match="not a replica checkpoint"):
        Replica.restart(ReplDict(), 0, {"format": 0})
    with pytest.raises(LocalError, match="is of replica"):
        Replica.restart(ReplDict(), 1, data)
    bad = dict(data, log=[["m", "x", 1, []]])
    with pytest.raises(LocalError, match="malformed"):
        Replica.restart(ReplDict(), 0, bad)


def test_a_joiner_takes_the_state_and_views_are_in_the_journal() -> None:
    r = pair(ReplLockManager)
    assert run(r, 1, "acquire", "L").result() is True
    state = r[0].state()
    joiner = Replica(ReplLockManager(), 2, incarnation=0)
    joiner.view_changed(ViewChange(View(2, (0, 1, 2)), (2,), (), state), incarnation=0)
    assert joiner.read("holder", "L") == [1, 0, ""] and joiner.applied == 1
    assert joiner.hello(MessageId(2, 1)) is None  # a first incarnation owes no hello
    for x in [*r, joiner]:
        if x is not joiner:
            x.view_changed(ViewChange(View(3, (0, 2)), (), (1,)))
    assert r[0].read("held") == {} and r[0].journal.log[-1] == ["v", 3, [0, 2]]
    with pytest.raises(LocalError, match="holds object, applied"):
        Replica(Notes(), 3).view_changed(ViewChange(VIEW, (3,), (), {"x": 1}))


def test_an_excluded_replica_tells_its_callers_the_outcome_is_unknown() -> None:
    r = Replica(Notes(), 0, view=VIEW)
    r.submit(MessageId(0, 1), "add", "x")
    (outcome,) = r.excluded()
    with pytest.raises(OutcomeUnknown):
        outcome.result()
    with pytest.raises(LocalError, match="not a member"):
        r.submit(MessageId(0, 2), "add", "y")


def test_a_call_prepared_before_the_exclusion_is_not_sent_after_it() -> None:
    """A call checked while a member, sent after the member was excluded, would carry
    the dead incarnation's name (and its result would reach the next one's callers):
    ``batch`` refuses it, and writes no ``call`` row after the ``out`` row."""
    rows: list[dict[str, Any]] = []
    r = Replica(Notes(), 0, view=VIEW, history=rows.append)
    call = r.prepare("add", "x")
    assert call.incarnation == 0
    assert r.excluded() == []
    with pytest.raises(LocalError, match="left the group since the call add was prepared"):
        r.batch(MessageId(0, 1), [call])
    assert r.pending == {} and [row["row"] for row in rows] == ["start", "out"]
    # rejoined as incarnation 1: the old call is still not sent, a new one is
    state = Replica(Notes(), 1, view=VIEW).state()
    r.view_changed(ViewChange(View(2, (0, 1)), (0,), (), state), incarnation=1)
    with pytest.raises(LocalError, match="not sent"):
        r.batch(MessageId(0, 1), [call])
    fresh = r.prepare("add", "z")
    assert fresh.incarnation == 1 and r.batch(MessageId(0, 3), [fresh]).startswith("[")


@pytest.mark.parametrize(
    "path", ["lines.append", "lines.clear", "lines.__len__", "held.update", "held.setdefault"]
)
def test_a_read_cannot_reach_a_builtin_method_that_changes_one_replica(path: str) -> None:
    class Kept(Notes):
        def __init__(self) -> None:
            super().__init__()
            self.held: dict[str, int] = {}

    r = Replica(Kept(), 0, view=VIEW)
    before = take_state(r.obj)
    with pytest.raises(LocalError):
        r.read(path, "x")
    with pytest.raises(LocalError):
        r.prepare_read(path, "x")
    assert take_state(r.obj) == before and r.pending == {}
    assert r.read("count") == 0 and r.read("lines") == []  # methods and attributes still read


class Sum:
    """A float that the calls' finite arguments can overflow, and a list of results."""

    def __init__(self) -> None:
        self.total = 0.0
        self.results: list[float] = []

    @replicated
    def add(self, x: float) -> float:
        self.total += x
        return self.total

    @replicated(checks_first=True)  # it says so, but overflows after changing the object
    def scale(self, k: float) -> float:
        self.total *= k
        return self.total

    @replicated
    def note(self, x: float) -> None:
        self.results.append(x * 10)  # inside a list

    @replicated
    def fill(self, count: int) -> None:
        self.results.extend([0.0] * count)


class Counter:
    """An int one call can push beyond the codec's 64 bits."""

    def __init__(self) -> None:
        self.n = 2**63

    @replicated
    def inc(self, k: int) -> int:
        self.n += k
        return self.n


@pytest.mark.parametrize("method", ["add", "scale"])
def test_a_call_whose_effect_cannot_be_carried_is_undone_everywhere(method: str) -> None:
    """Two add(1e308) make the total inf, which no state could carry: the second call
    is undone on every replica, its caller gets the error, and delivery goes on (the
    next compaction, at each replica, takes the state as it was)."""
    r = pair(Sum, compact_bytes=64)
    assert run(r, 0, "add", 1e308).result() == 1e308
    outcome = run(r, 1, method, 1e308 if method == "add" else 10.0)
    with pytest.raises(LocalError, match="cannot be carried \\(total became inf\\): undone"):
        outcome.result()
    assert [x.read("total") for x in r] == [1e308, 1e308]
    assert run(r, 0, "add", -1e308).result() == 0.0
    for k in range(20):  # more than enough to compact, at both replicas
        assert run(r, k % 2, "add", 1.0).result() == k + 1
    assert all(x.journal.compactions > 0 for x in r)
    assert take_state(r[0].obj) == take_state(r[1].obj)
    with pytest.raises(LocalError, match="beyond 64 bits"):
        run([Replica(Counter(), p, view=VIEW) for p in (0, 1)], 0, "inc", 2**63).result()


def test_a_value_that_cannot_be_carried_inside_a_small_list_is_undone_too() -> None:
    """Inside a list or dict the look goes on while the state holds at most NESTED_LOOK
    numbers there: note(1e308) puts inf in the list, and is undone as add is."""
    r = pair(Sum, compact_bytes=64)
    assert run(r, 0, "note", 1.0).result() is None
    with pytest.raises(LocalError, match=r"cannot be carried \(results holds inf\): undone"):
        run(r, 1, "note", 1e308).result()
    assert [x.read("results") for x in r] == [[10.0], [10.0]]
    for k in range(20):
        assert run(r, k % 2, "add", 1.0).result() == k + 1
    assert all(x.journal.compactions > 0 for x in r)


def test_a_value_that_cannot_be_carried_inside_a_large_state_postpones_compaction_only() -> None:
    """Past NESTED_LOOK nested numbers the per-call look stops (a bounded cost per call):
    a non-finite value there is found when the state is next taken, so compaction is
    postponed, not raised out of the delivery; every replica goes on alike, and a
    checkpoint still holds it."""
    r = pair(Sum, compact_bytes=1 << 20)
    assert run(r, 0, "fill", NESTED_LOOK).result() is None
    assert run(r, 0, "note", 1e308).result() is None  # 1e309: inf, past the look
    for x in r:
        x.journal.compact_bytes = 64
    for k in range(20):
        assert run(r, k % 2, "add", 1.0).result() == k + 1
    assert [x.journal.compactions for x in r] == [0, 0]
    assert [len(x.journal.log) for x in r] == [22, 22]
    again = Replica.restart(Sum(), 0, r[0].checkpoint())
    assert again.read("total") == 20.0 and again.read("results")[-1] == float("inf")
    with pytest.raises(LocalError, match="not finite"):
        r[0].state()


def test_a_bundle_holds_several_objects_in_one_order() -> None:
    def make() -> Bundle:
        return Bundle(hits=ReplCounter(), tags=ReplSet())

    r = pair(make)
    assert run(r, 0, "hits.inc").result() == 1
    assert run(r, 1, "tags.add", "x").result() is True
    state = r[1].state()
    fresh = Replica(make(), 2)
    fresh.view_changed(ViewChange(View(2, (0, 1, 2)), (2,), (), state))
    assert fresh.read("hits.get") == 1 and fresh.read("tags.items") == ["x"]
    with pytest.raises(TypeError, match="public"):
        Bundle(_x=ReplCounter())


# -- the batteries -------------------------------------------------------------------------------
def calls(factory: Any, *steps: tuple[str, tuple[Any, ...]]) -> list[Any]:
    """Apply ``steps`` on two replicas; the results (or error type names)."""
    r = pair(factory)
    out = []
    for method, args in steps:
        outcome = run(r, 0, method, *args)
        out.append(type(outcome.error).__name__ if outcome.error else outcome.value)
    assert take_state(r[0].obj) == take_state(r[1].obj)
    return out


def test_the_dict() -> None:
    got = calls(
        ReplDict,
        ("set", ("a", [1])),
        ("setdefault", ("a", 5)),
        ("setdefault", (2, "two")),
        ("incr", ("n",)),
        ("incr", ("a",)),
        ("cas", ("n", 1, 10)),
        ("cas", ("n", 1, 11)),
        ("pop", ("missing",)),
        ("pop", ("missing", "d")),
        ("delete", (2,)),
        ("update", ([["b", 2], ["c", 3]],)),
        ("update", ([["b", 2], [[], 3]],)),
        ("set", ([], 1)),
        ("pop", ("c",)),
    )
    assert got == [
        None,
        [1],
        "two",
        1,
        "TypeError",
        True,
        False,
        "KeyError",
        "d",
        True,
        None,
        "TypeError",
        "TypeError",
        3,
    ]


def test_the_counter_set_and_list() -> None:
    assert calls(ReplCounter, ("add", (5,)), ("sub", (2,)), ("inc", ()), ("add", ("x",))) == [
        5,
        3,
        4,
        "TypeError",
    ]
    assert calls(
        ReplSet,
        ("add", ("x",)),
        ("add", ("x",)),
        ("update", (["y", "z", "y"],)),
        ("discard", ("q",)),
        ("remove", ("q",)),
        ("pop", ()),
        ("add", ([1],)),
    ) == [True, False, 2, False, "KeyError", "x", "TypeError"]
    assert calls(
        ReplList,
        ("append", (3,)),
        ("extend", ([1, 2],)),
        ("insert", (0, 9)),
        ("sort", ()),
        ("pop", ()),
        ("remove", (7,)),
        ("set", (5, 0)),
        ("append", ("s",)),
        ("sort", ()),
    ) == [1, 3, None, None, 9, "ValueError", "IndexError", 4, "TypeError"]


def test_the_queues() -> None:
    assert calls(
        lambda: ReplQueue(2),
        ("put", ("a",)),
        ("put", ("b",)),
        ("put", ("c",)),
        ("get", ()),
        ("get", ()),
        ("get", ()),
    ) == [True, True, False, "a", "b", None]
    assert calls(
        ReplPriorityQueue,
        ("put", (5,)),
        ("put", (1,)),
        ("put", (3,)),
        ("put", ("x",)),
        ("get", ()),
        ("get", ()),
    ) == [True, True, True, "TypeError", 1, 3]


def test_the_lock_is_released_when_its_holder_leaves_the_view() -> None:
    g = SimGroup(ReplLockManager, 3, "sequencer", adversarial=True)
    a, b = g.call(2, "acquire", "L"), g.call(1, "acquire", "L")
    g.settle()
    assert a.result() is True and b.result() is False
    assert g.call(1, "release", "L") and True
    g.settle()
    assert g.read(0, "holder", "L") == [2, 0, ""]  # only its holder releases it
    g.leave(2)
    g.settle()
    assert g.read(0, "held") == g.read(1, "held") == {}
    c = g.call(1, "acquire", "L")
    g.settle()
    assert c.result() is True and g.read(0, "holder", "L") == [1, 0, ""]


# -- the common call's fast path ---------------------------------------------------------------
class Shapes:
    def __init__(self) -> None:
        self.seen: list[Any] = []

    @replicated
    def put(self, a: Any, b: int = 0) -> int:
        self.seen.append([a, b])
        if a == "boom":
            raise ValueError("boom")
        return len(self.seen)

    @replicated(caller=True)
    def mine(self, x: int, *, caller: Caller) -> list[int]:
        self.seen.append([x, caller.pid])
        return [x, caller.pid]


ODD_PAYLOADS: list[Any] = [
    ["c", 0, "put", [1]],
    ["c", 0, "put", [1, 2]],
    ["c", 0, "put", [1, 2, 3]],  # too many
    ["c", 0, "put", []],  # too few
    ["c", -1, "put", [1]],  # a negative incarnation
    ["c", 1.0, "put", [1]],
    ["c", 0, "put", "1"],  # args not a list
    ["c", 0, "put", [[1, 2]]],  # not a scalar: a copy
    ["c", 0, "put", [1], {"b": 3}],
    ["c", 0, "put", ["boom"]],  # raises: undone
    ["c", 0, "mine", [7]],  # a caller
    ["c", 0, "seen", []],  # not replicated
    ["c", 0, "seen.append", [1]],  # dotted
    ["c", 0, "_private", []],
    ["x", 0, "put", [1]],
    ["c", 2, "put", [None]],  # a later incarnation
]


def test_the_common_calls_fast_path_gives_what_the_general_path_gives() -> None:
    """A replica whose method table keeps nothing takes the general path for every
    operation; one that keeps its methods takes the fast path for the common call: the
    same outcomes, state and journal, operation by operation."""
    warm, cold = Replica(Shapes(), 0, view=VIEW), Replica(Shapes(), 0, view=VIEW)
    cold._methods._keeps = lambda path, fn: False  # type: ignore[method-assign]
    taken = []
    for seq, payload in enumerate(ODD_PAYLOADS * 2, start=1):
        message = Message(MessageId(1, seq), 1, payload)
        a, b = warm.replay(message), cold.replay(message)
        assert (a.value, type(a.error), str(a.error)) == (b.value, type(b.error), str(b.error))
        taken.append(warm._methods.plain(payload) is not None)
    assert warm.obj.seen == cold.obj.seen and warm.incarnations == cold.incarnations
    assert warm.journal.log == cold.journal.log
    assert warm.journal.log_bytes == cold.journal.log_bytes
    assert any(taken) and not all(taken)  # both paths were taken
