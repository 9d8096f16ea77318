"""Type stub of the C extension `herald.spark._scan_native` (see its source)."""

from collections.abc import Sequence

from _typeshed import ReadableBuffer as Buffer

def scan_lines(parts: Sequence[Buffer], prefix: Buffer, base: int, values: bool, /) -> tuple[
    int, int, bytearray, bytearray, bytearray, bytearray, bytearray, bytearray]: ...
def uuid_columns(packed: Buffer, text: bool, numbers: bool, gregorian_offset: int, /) -> tuple[
    bytearray | None, bytearray | None, bytearray | None, bytearray | None, bytearray | None]: ...
