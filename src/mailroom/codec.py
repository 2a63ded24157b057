"""The wire codec, re-exported: ``mailroom.codec.encode(packet)`` and ``decode(data)``.

See ``mailroom.core.codec`` for the format.
"""

from mailroom.core.codec import MAX_ELEMENTS, VERSION, decode, encode, metadata_bytes, packet_tag

__all__ = ["MAX_ELEMENTS", "VERSION", "decode", "encode", "metadata_bytes", "packet_tag"]
