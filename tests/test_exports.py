"""The public API is re-exported from one place (trio's test_exports)."""

from __future__ import annotations

import importlib

import pytest

import mailroom

PROMISED = [
    "LamportClock",
    "VectorClock",
    "SentMatrix",
    "DelivVector",
    "Transmit",
    "Deliver",
    "Stable",
    "Message",
    "MessageId",
    "LocalError",
    "RemoteError",
    "Fifo",
    "RST",
    "CBCAST",
    "Unordered",
    "Stack",
]


def test_promised_names_are_exported() -> None:
    for name in PROMISED:
        assert name in mailroom.__all__, name


def test_what_a_protocol_author_needs_is_exported_from_mailroom_and_core() -> None:
    import mailroom.core
    from mailroom.core import endpoint, packets, persist, validate, wire

    for pkg in (mailroom, mailroom.core):
        assert pkg.packet is packets.packet is wire.packet  # one decorator, old path kept
        assert pkg.EndpointBase is endpoint.EndpointBase
        assert pkg.Field is persist.Field and pkg.COUNTS is persist.COUNTS
        assert pkg.validate is validate
        for name in ("packet", "EndpointBase", "Field", "Kind", "COUNTER", "validate"):
            assert name in pkg.__all__, (pkg.__name__, name)
    assert mailroom.core.hook is not None and "hooks" in mailroom.core.__all__


def test_all_names_resolve_to_mailroom_objects() -> None:
    for name in mailroom.__all__:
        obj = getattr(mailroom, name)
        if not hasattr(obj, "__qualname__"):
            continue  # a type alias such as Action
        module = getattr(obj, "__module__", "mailroom")
        assert module.startswith("mailroom"), (name, module)


def test_subpackages_export_what_they_list() -> None:
    for pkg in (
        "mailroom.core",
        "mailroom.protocols",
        "mailroom.protocols.membership",
        "mailroom.sim",
        "mailroom.trace",
        "mailroom.testing",
        "mailroom.diagram",
        "mailroom.lab",
        "mailroom.clocks",
        "mailroom.replicated",
        "mailroom.replicated.crdt",
    ):
        mod = importlib.import_module(pkg)
        for name in getattr(mod, "__all__", []):
            assert hasattr(mod, name), (pkg, name)


#: Exactly the top-level API: adding a name is a decision (update this list), and
#: known-buggy variants (NaiveTagged and the rest) live in mailroom.testing only.
TOP_LEVEL = {
    "Action",
    "Backpressure",
    "BackpressureError",
    "BroadcastEndpoint",
    "CBCAST",
    "CausalityDetector",
    "CausalityViolation",
    "ConsumingEndpoint",
    "DelivVector",
    "Deliver",
    "Endpoint",
    "Fifo",
    "FlowControlled",
    "KS",
    "LamportClock",
    "LamportTotalOrder",
    "LocalError",
    "MailroomError",
    "Message",
    "MessageId",
    "MulticastEndpoint",
    "Pending",
    "RST",
    "Reliable",
    "RemoteError",
    "SentMatrix",
    "Sequencer",
    "Skeen",
    "Stable",
    "Stack",
    "TaggedCausalBroadcast",
    "TaggedMessage",
    "Transmit",
    "UnicastEndpoint",
    "Unordered",
    "VectorClock",
    "Wait",
    "__version__",
    "compiled",  # which build runs (docs/compiled.md)
    "restore_endpoint",
    # group membership
    "Group",
    "View",
    "ViewChange",
    "StateRequest",
    "Excluded",
    # writing a protocol (docs/writing-a-protocol.md)
    "EndpointBase",
    "packet",
    "Field",
    "Kind",
    "COUNTER",
    "COUNTS",
    "FLAG",
    "PID",
    "PIDS",
    "POSITIVE",
    "TIME",
    "validate",
}


def test_the_top_level_exports_exactly_the_public_api() -> None:
    assert set(mailroom.__all__) == TOP_LEVEL
    assert len(mailroom.__all__) == len(TOP_LEVEL)  # no name listed twice
    for name in mailroom.__all__:  # imported on first use (PEP 562)
        getattr(mailroom, name)
    public = {n for n in vars(mailroom) if not n.startswith("_")}
    modules = {n for n in public if type(getattr(mailroom, n)).__name__ == "module"}
    assert public - modules == TOP_LEVEL - {"__version__", "validate"}  # validate: a module


def test_known_buggy_variants_live_in_testing_only() -> None:
    import mailroom.protocols
    import mailroom.testing

    for name in ("NaiveTagged", "SkeenEagerDelivery", "ReliableNoDedup"):
        assert name in mailroom.testing.__all__
        assert not hasattr(mailroom, name) and not hasattr(mailroom.protocols, name)
    assert "SkeenAllFinal" in mailroom.lab.__all__ and not hasattr(mailroom, "SkeenAllFinal")


def test_restore_endpoint_and_the_registry_live_in_core_with_sim_re_exports() -> None:
    from mailroom.core import registry
    from mailroom.sim import registry as sim_registry
    from mailroom.sim import restore_endpoint

    assert restore_endpoint is registry.restore_endpoint is mailroom.restore_endpoint
    assert sim_registry.PROTOCOLS is registry.PROTOCOLS
    assert sorted(registry.PROTOCOLS) == [
        "cbcast",
        "fifo",
        "ks",
        "lamport",
        "rst",
        "sequencer",
        "skeen",
        "tagged",
        "unordered",
    ]


def test_the_protocol_author_namespace_holds_the_same_objects_as_the_old_paths() -> None:
    import mailroom.core
    import mailroom.lowlevel as low

    for name in ("packet", "EndpointBase", "Field", "Kind", "COUNTER", "PID", "validate"):
        assert getattr(low, name) is getattr(mailroom, name) is getattr(mailroom.core, name)
    assert low.hook is mailroom.core.hook and low.hooks is mailroom.core.hooks
    assert low.register_protocol is mailroom.core.register_protocol
    assert sorted(low.__all__) == sorted(set(low.__all__))
    assert all(not name.startswith("_") for name in low.__all__)
    for name in low.__all__:
        assert getattr(low, name) is not None, name


def test_endpoint_helpers_are_public_and_the_underscore_names_still_work() -> None:
    from mailroom.core import EndpointBase, LocalError

    base = EndpointBase
    for public in ("next_id", "next_ids", "check_dest", "check_payload"):
        assert getattr(base, "_" + public) is getattr(base, public)
    ep = mailroom.Fifo(0, 3)
    assert ep.next_id() == mailroom.MessageId(0, 1) and ep.sent_count == 1
    assert ep.next_ids(3) == mailroom.MessageId(0, 2) and ep.sent_count == 4
    assert ep._next_id() == mailroom.MessageId(0, 5)  # the 0.2 name
    assert ep.check_dest(2) == 2
    with pytest.raises(LocalError):
        ep.check_dest(3)
    with pytest.raises(LocalError):
        ep._check_dest("1")
    with pytest.raises(LocalError):
        ep.check_payload(object())
    assert ep.sent_count == 5  # a refused check counts nothing
