"""Labels (a sorted multi-map) and label selectors, with Gazette's semantics.

A journal's labels say what it holds (``content-type``, message type, region);
a selector picks journals by labels, which is how Gazette models topics. Registers
(small per-journal label sets used as write fences) reuse the same types.

    >>> sel = LabelSelector.parse("app.gazette.dev/region in (us, eu), !deprecated")
    >>> sel.matches(LabelSet.of("app.gazette.dev/region", "eu"))
    True
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from herald.protocol.errors import ValidationError, join_field

# Well-known label names (Gazette's `labels` package).
CONTENT_TYPE = "content-type"
MESSAGE_TYPE = "app.gazette.dev/message-type"
MESSAGE_SUBTYPE = "app.gazette.dev/message-subtype"
TAG = "app.gazette.dev/tag"
MANAGED_BY = "app.gazette.dev/managed-by"
INSTANCE = "app.gazette.dev/instance"
REGION = "app.gazette.dev/region"
SINGLE_VALUE_LABELS = frozenset(
    {CONTENT_TYPE, INSTANCE, MANAGED_BY, MESSAGE_SUBTYPE, MESSAGE_TYPE, REGION}
)
# Implicit meta-labels: journals carry `name`; selectors may use `prefix`.
META_NAME = "name"
META_PREFIX = "prefix"
RESERVED_LABELS = frozenset({META_NAME, META_PREFIX})

NAME_SYMBOLS = "-_+/."
VALUE_SYMBOLS = NAME_SYMBOLS + "=%"
MIN_NAME_LEN, MAX_NAME_LEN, MAX_VALUE_LEN = 2, 64, 1024


def validate_token(text: str, symbols: str, min_len: int, max_len: int, field: str) -> None:
    """Check `text` is `min_len..max_len` characters of Unicode letters/digits and
    `symbols`. No symbol at or below ``#`` is ever allowed: it separates keys."""
    if not isinstance(text, str):
        raise ValidationError(field, f"expected a string, got {type(text).__name__}")
    if not min_len <= len(text) <= max_len:
        raise ValidationError(
            field, f"invalid length ({len(text)}; expected {min_len} <= length <= {max_len})"
        )
    for ch in text:
        if ch not in symbols and unicodedata.category(ch)[0] not in "LN":
            raise ValidationError(field, f"not a valid token ({text!r}: bad character {ch!r})")


@dataclass(frozen=True, slots=True, order=True)
class Label:
    """One name/value pair. ``prefix`` (selectors only) matches values by prefix."""

    name: str
    value: str = ""
    prefix: bool = False

    def validate(self) -> None:
        validate_token(self.name, NAME_SYMBOLS, MIN_NAME_LEN, MAX_NAME_LEN, "name")
        validate_token(self.value, VALUE_SYMBOLS, 0, MAX_VALUE_LEN, "value")

    def matches_value(self, value: str) -> bool:
        """Selector-side match: empty means "exists", else prefix or equality."""
        if not self.value:
            return True
        return value.startswith(self.value) if self.prefix else value == self.value


def _grouped(labels: tuple[Label, ...]) -> dict[str, tuple[Label, ...]]:
    out: dict[str, list[Label]] = {}
    for label in labels:
        out.setdefault(label.name, []).append(label)
    return {name: tuple(group) for name, group in out.items()}


@dataclass(frozen=True, slots=True)
class LabelSet:
    """Immutable multi-map: labels sorted by (name, value) and unique. Building one
    normalises order; parsing constructors (`of`, `from_pairs`, `from_list`,
    `parse`) also `validate()`."""

    labels: tuple[Label, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "labels", tuple(sorted(set(self.labels))))

    # -- construction -------------------------------------------------------
    @classmethod
    def of(cls, *name_values: str, **kw: str) -> LabelSet:
        """``LabelSet.of("content-type", "text/csv", region="eu")``."""
        if len(name_values) % 2:
            raise ValidationError("labels", "expected name, value pairs")
        pairs = list(zip(name_values[::2], name_values[1::2])) + list(kw.items())
        return cls.from_pairs(pairs)

    @classmethod
    def from_pairs(cls, pairs: Iterable[tuple[str, str]]) -> LabelSet:
        out = cls(tuple(Label(n, v) for n, v in pairs))
        out.validate()
        return out

    @classmethod
    def from_list(cls, items: Iterable[Mapping[str, Any]]) -> LabelSet:
        """From ``[{name, value}]`` (``value`` optional, as in Gazette's YAML).
        Field paths of errors are ``[i].name`` relative to the input list."""
        if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Iterable):
            raise ValidationError(None, "expected a list of {name, value}")
        labels = []
        for i, item in enumerate(items):
            if not isinstance(item, Mapping):
                raise ValidationError(f"[{i}]", "expected {name, value}")
            unknown = set(item) - {"name", "value"}
            if unknown:
                raise ValidationError(f"[{i}].{sorted(unknown)[0]}", "unknown field")
            value = item.get("value")
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                value = str(value)  # YAML `value: 1` means the string "1", as in Gazette.
            label = Label(item.get("name", ""), "" if value is None else value)  # type: ignore[arg-type]
            # (a non-string value is refused by validate() just below, naming the field)
            try:
                label.validate()
            except ValidationError as err:
                raise err.with_field_prefix(f"[{i}]") from None
            labels.append(label)
        out = cls(tuple(labels))
        out.validate()
        return out

    @classmethod
    def parse(cls, text: str) -> LabelSet:
        """Parse ``k=v,k=v2,flag`` (the HTTP header form, e.g. registers)."""
        pairs = []
        for term in text.split(","):
            term = term.strip()
            if term:
                name, _, value = term.partition("=")
                pairs.append((name.strip(), value.strip()))
        return cls.from_pairs(pairs)

    def refuse_prefix(self) -> LabelSet:
        """This set, unless it holds ``prefix``: a selector-only meta-label (it means
        "name begins with"), never a label a set can carry. Registers use this."""
        for i, label in enumerate(self.labels):
            if label.name == META_PREFIX:
                raise ValidationError(f"[{i}].name", "'prefix' is only meaningful in a selector")
        return self

    # -- queries ------------------------------------------------------------
    def __iter__(self) -> Iterator[Label]:
        return iter(self.labels)

    def __len__(self) -> int:
        return len(self.labels)

    def __str__(self) -> str:
        return ",".join(f"{label.name}={label.value}" for label in self.labels)

    def names(self) -> tuple[str, ...]:
        return tuple(_grouped(self.labels))

    def values_of(self, name: str) -> tuple[str, ...]:
        return tuple(label.value for label in self.labels if label.name == name)

    def value_of(self, name: str) -> str | None:
        values = self.values_of(name)
        return values[0] if values else None

    def to_list(self) -> list[dict[str, str]]:
        return [{"name": label.name, "value": label.value} for label in self.labels]

    def validate(self) -> None:
        """Each label valid; a name with an empty value has no other values."""
        for i, label in enumerate(self.labels):
            try:
                label.validate()
            except ValidationError as err:
                raise err.with_field_prefix(f"[{i}]") from None
            prev = self.labels[i - 1] if i else None
            if prev and label.value and prev.name == label.name and not prev.value:
                raise ValidationError(
                    f"[{i}]", f"label {label.name} has both empty and non-empty values"
                )

    # -- algebra (Gazette's SetValue/AddValue/Remove/Union/Intersect/Subtract) -
    def with_value(self, name: str, value: str) -> LabelSet:
        """Set `name` to exactly `value`, replacing all its values."""
        out = LabelSet(tuple(lb for lb in self.labels if lb.name != name) + (Label(name, value),))
        out.validate()
        return out

    def adding(self, name: str, value: str) -> LabelSet:
        """Add a value of `name`, keeping its other values."""
        out = LabelSet(self.labels + (Label(name, value),))
        out.validate()
        return out

    def without(self, name: str) -> LabelSet:
        return LabelSet(tuple(label for label in self.labels if label.name != name))

    def union(self, other: LabelSet) -> LabelSet:
        """Per name: all of self's values if self has the name, else other's. So a
        union of ``{author: X}`` replaces every existing ``author`` ([I-REG-1])."""
        mine = {label.name for label in self.labels}
        return LabelSet(self.labels + tuple(lb for lb in other.labels if lb.name not in mine))

    def intersect(self, other: LabelSet) -> LabelSet:
        """Names whose value lists are identical in both."""
        theirs = _grouped(other.labels)
        return LabelSet(
            tuple(
                label
                for name, group in _grouped(self.labels).items()
                if theirs.get(name) == group
                for label in group
            )
        )

    def subtract(self, other: LabelSet) -> LabelSet:
        """Self without the names whose value lists are identical in `other`."""
        theirs = _grouped(other.labels)
        return LabelSet(
            tuple(
                label
                for name, group in _grouped(self.labels).items()
                if theirs.get(name) != group
                for label in group
            )
        )


# -- selectors -----------------------------------------------------------------

_NAME = r"(?P<name>[^\s=!(),:]+)(?P<prefix>:prefix)?"
_RE_EXISTS = re.compile(rf"^(?P<neg>!)?\s*{_NAME}$")
_RE_EQUAL = re.compile(rf"^{_NAME}\s*(?P<op>==|=|!=)\s*(?P<value>[^\s,()]*)$")
_RE_SET = re.compile(rf"^{_NAME}\s+(?P<op>in|notin|not\s+in)\s*\((?P<values>[^()]*)\)$")


def _split_terms(text: str) -> list[str]:
    """Split on commas outside parentheses."""
    terms, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth = max(depth - 1, 0)
        elif ch == "," and depth == 0:
            terms.append(text[start:i])
            start = i + 1
    terms.append(text[start:])
    if terms and not terms[-1].strip() and len(terms) > 1:
        terms.pop()  # Tolerate one trailing comma, as Gazette does.
    return [t.strip() for t in terms]


def _parse_term(term: str) -> tuple[bool, list[Label]]:
    """One term → (is_exclude, labels)."""
    if m := _RE_EXISTS.match(term):
        return bool(m["neg"]), [Label(m["name"], "", bool(m["prefix"]))]
    if m := _RE_EQUAL.match(term):
        return m["op"] == "!=", [Label(m["name"], m["value"], bool(m["prefix"]))]
    if m := _RE_SET.match(term):
        values = [v.strip() for v in m["values"].split(",")]
        if not all(values):
            raise ValidationError("selector", f"empty value in set expression {term!r}")
        labels = [Label(m["name"], v, bool(m["prefix"])) for v in values]
        return m["op"] != "in", labels
    raise ValidationError("selector", f"could not parse label selector expression {term!r}")


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """Include and exclude label sets. `matches` rejects a set if any exclude name
    matches it, and accepts only if every include name matches. Within one name,
    selector values are OR'd; an empty selector value means "exists"."""

    include: LabelSet = field(default_factory=LabelSet)
    exclude: LabelSet = field(default_factory=LabelSet)

    @classmethod
    def parse(cls, text: str) -> LabelSelector:
        """Parse Gazette's grammar: ``k=v``, ``k==v``, ``k!=v``, ``k in (a,b)``,
        ``k notin (a,b)``, ``k not in (a,b)``, ``k``, ``!k``, ``k=``; any name may
        carry ``:prefix``. Raises `ValidationError` naming the bad term."""
        include: list[Label] = []
        exclude: list[Label] = []
        if text.strip():
            for term in _split_terms(text):
                is_exclude, labels = _parse_term(term)
                for label in labels:
                    try:
                        label.validate()
                    except ValidationError as err:
                        raise ValidationError("selector", f"in {term!r}: {err}") from None
                (exclude if is_exclude else include).extend(labels)
        out = cls(LabelSet(tuple(include)), LabelSet(tuple(exclude)))
        out.validate()
        return out

    def validate(self) -> None:
        for part, labels in (("include", self.include), ("exclude", self.exclude)):
            try:
                labels.validate()
            except ValidationError as err:
                raise err.with_field_prefix(f"selector.{part}") from None

    def matches(self, labels: LabelSet) -> bool:
        have = _grouped(labels.labels)
        if any(_name_matches(g, have.get(n, ())) for n, g in _grouped(self.exclude.labels).items()):
            return False
        return all(_name_matches(g, have.get(n, ())) for n, g in _grouped(self.include.labels).items())

    def __str__(self) -> str:
        terms = _format_terms(self.include, exclude=False)
        terms += _format_terms(self.exclude, exclude=True)
        return ",".join(terms)


def _name_matches(selector: tuple[Label, ...], values: tuple[Label, ...]) -> bool:
    return any(s.matches_value(v.value) for s in selector for v in values)


def _format_terms(labels: LabelSet, exclude: bool) -> list[str]:
    """Shortest canonical forms, sorted by name (then plain before ``:prefix``)."""
    groups: dict[tuple[str, bool], list[str]] = {}
    for label in labels:
        groups.setdefault((label.name, label.prefix), []).append(label.value)
    out = []
    for (name, prefix), values in sorted(groups.items()):
        key = name + (":prefix" if prefix else "")
        if values == [""]:
            out.append(("!" if exclude else "") + key)
        elif len(values) == 1:
            out.append(f"{key}{'!=' if exclude else '='}{values[0]}")
        else:
            out.append(f"{key} {'notin' if exclude else 'in'} ({','.join(values)})")
    return out


def journal_meta_labels(spec_labels: LabelSet, name: str) -> LabelSet:
    """A journal's labels plus its implicit ``name=<journal>`` meta-label, which
    selectors (and auth claims) match against."""
    # Not re-validated: this runs per journal on every List/auth check.
    kept = tuple(label for label in spec_labels if label.name != META_NAME)
    return LabelSet(kept + (Label(META_NAME, name),))


def rewrite_prefix_selector(selector: LabelSelector) -> LabelSelector:
    """Rewrite ``prefix=a/b/`` terms to ``name:prefix=a/b/`` (as Gazette's List does).
    A prefix value must end in ``/``: prefixes are whole path components."""

    def rewrite(labels: LabelSet, part: str) -> LabelSet:
        out = []
        for label in labels:
            if label.name == META_PREFIX:
                if not label.value.endswith("/"):
                    raise ValidationError(
                        join_field(f"selector.{part}", META_PREFIX),
                        f"prefix value must end in '/' ({label.value!r})",
                    )
                label = Label(META_NAME, label.value, prefix=True)
            out.append(label)
        return LabelSet(tuple(out))

    return LabelSelector(rewrite(selector.include, "include"), rewrite(selector.exclude, "exclude"))
