"""The wire codec, re-exported: ``mailroom.codec.encode(packet)`` and ``decode(data)``.

See ``mailroom.core.codec`` for the format and the decode budget.
"""

from mailroom.core.codec import (
    DECODE_BASE_BYTES,
    DECODE_BASE_CELLS,
    DECODE_BYTES_PER_BYTE,
    DECODE_CELLS_PER_BYTE,
    MAX_ELEMENTS,
    VERSION,
    decode,
    decode_budget,
    encode,
    metadata_bytes,
    packet_tag,
)

__all__ = [
    "DECODE_BASE_BYTES",
    "DECODE_BASE_CELLS",
    "DECODE_BYTES_PER_BYTE",
    "DECODE_CELLS_PER_BYTE",
    "MAX_ELEMENTS",
    "VERSION",
    "decode",
    "decode_budget",
    "encode",
    "metadata_bytes",
    "packet_tag",
]
