"""How each property's Spark rows name their witness: a table of data, one entry per
property of the registry (``mailroom.trace.properties`` says what a witness is).

``COLUMNS`` gives the processes and positions (SQL arrays over the columns of the rows
a check found) and the messages ((origin, seq) column pairs, ``"o s, o s"``);
``REASONS`` the reason, worded exactly as the reference checks word it.
"""

from __future__ import annotations

from typing import Any

from mailroom.spark.rows import message_name as m
from mailroom.spark.rows import violation_rows

#: Where an event happened, as the reference words it, from a view id column.
IN_VIEW = "CASE WHEN {0} IS NULL THEN 'outside any view' ELSE concat('in view ', {0}) END"

COLUMNS = {
    "integrity": ("array(process)", "mo ms", "array(seq)"),
    "fifo": ("array(process)", "mo ms1, mo ms2", "array(pos1, pos2)"),
    "causal": ("array(process)", "mo1 ms1, mo2 ms2", "array(pos1, pos2)"),
    "total": ("array(p, q)", "mo1 ms1, mo2 ms2", "array(pp1, pp2, qp1, qp2)"),
    "liveness": ("array(q)", "mo ms", "array(sseq)"),
    "view_agreement": ("array(p, q)", "0 view", "array(ps, qs)"),
    "going_back": ("array(process)", "0 _prev.view, 0 view", "array(_prev.seq, seq)"),
    "self_inclusion": ("array(process)", "0 view", "array(seq)"),
    "same_view": ("array(process)", "mo ms", "array(seq)"),
    "virtual_synchrony": ("array(least(process, q), greatest(process, q))", "mo ms", "array(dseq)"),
    "clock": ("array(process)", "mo ms", "array(seq)"),
}

REASONS = {
    "integrity": "reason",  # worded by the check itself: one of three faults
    "fifo": "format_string('P%d delivered %s before %s, sent before it', process, "
    f"{m('mo', 'ms2')}, {m('mo', 'ms1')})",
    "causal": "format_string('P%d delivered %s before %s, whose send happened before it', "
    f"process, {m('mo2', 'ms2')}, {m('mo1', 'ms1')})",
    "total": "format_string('P%d delivered %s before %s, P%d the other way round', p, "
    f"{m('mo1', 'ms1')}, {m('mo2', 'ms2')}, q)",
    "liveness": f"format_string('P%d never delivered %s', q, {m('mo', 'ms')})",
    "view_agreement": "format_string('P%d installed view %d as %s and P%d as %s', p, view, "
    "pm, q, qm)",
    "going_back": "format_string('P%d installed view %d after view %d', process, view, _prev.view)",
    "self_inclusion": "format_string('P%d installed view %d [%s], which does not include "
    "it', process, view, array_join(dest, ', '))",
    "same_view": f"format_string('P%d delivered %s %s, but it was sent %s', process, "
    f"{m('mo', 'ms')}, {IN_VIEW.format('view')}, {IN_VIEW.format('sview')})",
    "virtual_synchrony": "format_string('P%d delivered %s in view %d and P%d did not; both "
    f"installed view %d next', process, {m('mo', 'ms')}, _sv, q, _sn)",
    "clock": "format_string('P%d event %d (%s %s): clock %s, expected %s', process, seq, "
    f"kind, {m('mo', 'ms')}, _cvc, _cexp)",
}


def witnessed(df: Any, prop: str, shape: str | None = None) -> Any:
    """The rows ``df`` found as violation rows of ``prop``, their witness named as
    ``shape`` (a key of the tables; default ``prop``) says."""
    processes, messages, positions = COLUMNS[shape or prop]
    columns = [(o, s) for o, s in (pair.split() for pair in messages.split(", "))]
    return violation_rows(df, prop, processes, columns, positions, REASONS[shape or prop])
