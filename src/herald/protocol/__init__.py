"""Herald's pure protocol vocabulary (no I/O, no clock): statuses and typed errors,
labels and selectors, journal names and JournalSpecs, and the hierarchical
journalspace YAML form. Everything else in Herald speaks these types.

    >>> from herald.protocol import JournalSpec, LabelSelector
    >>> spec = JournalSpec.from_dict({"name": "example/journal",
    ...     "labels": [{"name": "content-type", "value": "application/x-ndjson"}]})
    >>> LabelSelector.parse("content-type=application/x-ndjson").matches(spec.meta_labels())
    True
"""

from herald.protocol._duration import format_duration, parse_duration
from herald.protocol.errors import (
    HTTP_CODES,
    HeraldError,
    JournalNotFoundError,
    OffsetNotYetAvailableError,
    RegisterMismatchError,
    Status,
    ValidationError,
    join_field,
    with_field_prefix,
)
from herald.protocol.journal import (
    CompressionCodec,
    FragmentSpec,
    JournalFlags,
    JournalSpec,
    JournalSuspend,
    SuspendLevel,
    is_readable,
    is_writable,
    split_journal_meta,
    validate_journal_name,
)
from herald.protocol.journalspace import hoist, push_down
from herald.protocol.labels import (
    Label,
    LabelSelector,
    LabelSet,
    journal_meta_labels,
    rewrite_prefix_selector,
)

__all__ = [
    "CompressionCodec",
    "FragmentSpec",
    "HTTP_CODES",
    "HeraldError",
    "JournalFlags",
    "JournalNotFoundError",
    "JournalSpec",
    "JournalSuspend",
    "Label",
    "LabelSelector",
    "LabelSet",
    "OffsetNotYetAvailableError",
    "RegisterMismatchError",
    "Status",
    "SuspendLevel",
    "ValidationError",
    "format_duration",
    "hoist",
    "is_readable",
    "is_writable",
    "join_field",
    "journal_meta_labels",
    "parse_duration",
    "push_down",
    "rewrite_prefix_selector",
    "split_journal_meta",
    "validate_journal_name",
    "with_field_prefix",
]
