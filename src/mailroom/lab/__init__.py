"""The protocol lab: define a variant, let the Hypothesis harness attack it, and
get back the minimal counterexample schedule drawn as a space-time diagram;
or check that two protocols are equivalent under the same schedules.

See docs/lab.md for the open questions of docs/story.md answered with it.
"""

from mailroom.lab.conditions import (
    CONDITIONS,
    Copy,
    all_scenarios,
    c1,
    c2,
    c3,
    chain_scenarios,
    copies,
    event_clocks,
    separate,
)
from mailroom.lab.explore import (
    Difference,
    Finding,
    Watched,
    compare,
    counterexample,
    find_difference,
    rst_state,
    watch,
)
from mailroom.lab.matrix import (
    VARIANTS,
    ColumnForDeliv,
    ColumnForDelivSelfCounter,
    IncrementFirst,
    MatrixLab,
    MatrixWithoutDeliv,
    Seed003Matrix,
)
from mailroom.lab.total import SkeenAllFinal

__all__ = [
    "CONDITIONS",
    "VARIANTS",
    "ColumnForDeliv",
    "ColumnForDelivSelfCounter",
    "Copy",
    "Difference",
    "Finding",
    "IncrementFirst",
    "MatrixLab",
    "MatrixWithoutDeliv",
    "Seed003Matrix",
    "SkeenAllFinal",
    "Watched",
    "all_scenarios",
    "c1",
    "c2",
    "c3",
    "chain_scenarios",
    "compare",
    "copies",
    "counterexample",
    "event_clocks",
    "find_difference",
    "rst_state",
    "separate",
    "watch",
]
