"""Gazette's hierarchical JournalSpec YAML ("journalspace"): flatten and hoist.

Operators write a tree: a *directory* node (name ending in ``/``) holds fields
shared by its ``children``; a *journal* node (any other name) is one spec. A child
inherits each field it leaves unset from its nearest ancestor (labels merge, the
child's values winning per label name; ``suspend`` is never inherited), and
``delete: true`` on a directory applies to its whole subtree.

    >>> tree = {"name": "foobar/", "replication": 3,
    ...         "children": [{"name": "foobar/part-000"}, {"name": "foobar/part-001"}]}
    >>> [(spec.name, spec.replication) for spec, _rev, _delete in push_down(tree)]
    [('foobar/part-000', 3), ('foobar/part-001', 3)]

`hoist` goes the other way: it groups specs into directories at shared ``/``
prefixes and lifts the fields all children share into the parent, so
``push_down(hoist(specs)) == specs`` (sorted by name).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from herald.protocol._duration import format_duration, parse_duration
from herald.protocol.errors import ValidationError, with_field_prefix
from herald.protocol.journal import (
    _FRAGMENT_KEYS,
    _SPEC_KEYS,
    CompressionCodec,
    JournalFlags,
    JournalSpec,
    _check_keys,
    _enum,
    _int,
)
from herald.protocol.labels import LabelSet

_NODE_KEYS = ("comment", "delete", "revision", "children")
_DURATIONS = ("refresh_interval", "retention", "flush_interval")

# A "flat" partial spec maps a field path ("replication", "fragment.length") to a
# canonical value; unset (zero) fields are absent. Inheritance, intersection and
# subtraction are then plain per-key operations.
Flat = dict[str, Any]


def _flatten(d: Mapping[str, Any]) -> Flat:
    """A partial spec mapping (node keys removed) → canonical flat form."""
    _check_keys(d, _SPEC_KEYS)
    out: Flat = {}
    if d.get("replication"):
        out["replication"] = _int(d["replication"], "replication")
    with with_field_prefix("labels"):
        labels = LabelSet.from_list(d.get("labels") or [])
    if labels:
        out["labels"] = labels
    with with_field_prefix("fragment"):
        out.update(_flatten_fragment(d.get("fragment") or {}))
    flags = _enum(JournalFlags, d.get("flags", 0), "flags")
    if flags:
        out["flags"] = flags.name
    if d.get("max_append_rate"):
        out["max_append_rate"] = _int(d["max_append_rate"], "max_append_rate")
    if d.get("suspend"):
        out["suspend"] = d["suspend"]  # Passed through as-is; never inherited.
    return out


def _flatten_fragment(d: Mapping[str, Any]) -> Flat:
    _check_keys(d, _FRAGMENT_KEYS)
    out: Flat = {}
    if d.get("length"):
        out["fragment.length"] = _int(d["length"], "length")
    codec = _enum(CompressionCodec, d.get("compression_codec", 0), "compression_codec")
    if codec:
        out["fragment.compression_codec"] = codec.name
    if d.get("stores"):
        out["fragment.stores"] = tuple(d["stores"])
    for key in _DURATIONS:
        if seconds := parse_duration(d.get(key, 0), key):
            out[f"fragment.{key}"] = seconds
    if d.get("path_postfix_template"):
        out["fragment.path_postfix_template"] = str(d["path_postfix_template"])
    return out


def _unflatten(flat: Flat) -> dict[str, Any]:
    """Canonical flat form → Gazette's YAML shape (key order as `JournalSpec.to_dict`)."""
    out: dict[str, Any] = {}
    fragment: dict[str, Any] = {}
    for key in _SPEC_KEYS[1:]:
        if key == "fragment":
            for sub in _FRAGMENT_KEYS:
                if (value := flat.get(f"fragment.{sub}")) is not None:
                    fragment[sub] = _render(sub, value)
            if fragment:
                out["fragment"] = fragment
        elif (value := flat.get(key)) is not None:
            out[key] = _render(key, value)
    return out


def _render(key: str, value: Any) -> Any:
    if key == "labels":
        return [{"name": lb.name, "value": lb.value} if lb.value else {"name": lb.name} for lb in value]
    if key in _DURATIONS:
        return format_duration(value)
    if key == "stores":
        return list(value)
    return value


def _union(child: Flat, parent: Flat) -> Flat:
    """Child's set fields win; labels merge per name (child's names win)."""
    out = {k: v for k, v in parent.items() if k != "suspend"}
    out.update(child)
    if "labels" in child and "labels" in parent:
        out["labels"] = child["labels"].union(parent["labels"])
    return out


def _intersect(a: Flat, b: Flat) -> Flat:
    out = {k: v for k, v in a.items() if k not in ("labels", "suspend") and b.get(k) == v}
    labels = a.get("labels", LabelSet()).intersect(b.get("labels", LabelSet()))
    if labels:
        out["labels"] = labels
    return out


def _subtract(a: Flat, b: Flat) -> Flat:
    out = {k: v for k, v in a.items() if k == "suspend" or (k != "labels" and b.get(k) != v)}
    labels = a.get("labels", LabelSet()).subtract(b.get("labels", LabelSet()))
    if labels:
        out["labels"] = labels
    return out


def _is_dir(name: str) -> bool:
    return name == "" or name.endswith("/")


# -- push down -----------------------------------------------------------------


def push_down(tree: Mapping[str, Any]) -> list[tuple[JournalSpec, int, bool]]:
    """Flatten a tree (or a single spec document) into ``(spec, revision, delete)``
    per journal, in tree order. Raises `ValidationError` with the node's path
    (``children[1].fragment.length``)."""
    if isinstance(tree, Mapping) and not tree:
        return []
    out: list[tuple[JournalSpec, int, bool]] = []
    _push(tree, {}, False, out)
    return out


def _push(node: Any, inherited: Flat, delete: bool, out: list[Any]) -> None:
    if not isinstance(node, Mapping):
        raise ValidationError(None, f"expected a mapping, got {type(node).__name__}")
    name = node.get("name", "")
    if not isinstance(name, str):
        raise ValidationError("name", f"expected a string ({name!r})")
    if node.get("delete") is not None:
        if not isinstance(node["delete"], bool):
            raise ValidationError("delete", f"expected true or false ({node['delete']!r})")
        delete = node["delete"]
    revision = _int(node.get("revision") or 0, "revision")
    flat = _flatten({k: v for k, v in node.items() if k not in _NODE_KEYS and k != "name"})
    merged = _union(flat, inherited)
    children = node.get("children") or []
    if not _is_dir(name):
        if children:
            raise ValidationError(
                "children", f"journal {name!r} cannot have children (directories end in '/')"
            )
        spec = JournalSpec.from_dict({"name": name, **_unflatten(merged)})
        out.append((spec, revision, delete))
        return
    if revision:
        raise ValidationError("revision", "only journals (not directories) have a revision")
    if not isinstance(children, list) or not children:
        raise ValidationError("children", f"directory {name!r} needs one or more children")
    _push_children(name, children, merged, delete, out)


def _push_children(name: str, children: list[Any], merged: Flat, delete: bool, out: list[Any]) -> None:
    previous = None
    for i, child in enumerate(children):
        with with_field_prefix(f"children[{i}]"):
            child_name = child.get("name", "") if isinstance(child, Mapping) else ""
            if not isinstance(child_name, str) or not child_name.startswith(name):
                raise ValidationError("name", f"must start with its directory's name {name!r}")
            if previous is not None and child_name <= previous:
                raise ValidationError(
                    "name", f"children must be strictly ordered ({previous!r} >= {child_name!r})"
                )
            previous = child_name
            _push(child, merged, delete, out)


# -- hoist ---------------------------------------------------------------------


@dataclass
class _Node:
    name: str
    flat: Flat = field(default_factory=dict)
    revision: int = 0
    delete: bool | None = None
    children: list[_Node] = field(default_factory=list)


def hoist(specs: Iterable[tuple[Any, ...]]) -> dict[str, Any]:
    """Build the minimal tree for ``(spec, revision)`` or ``(spec, revision, delete)``
    tuples: directories at shared ``/`` prefixes, each holding the fields all its
    children share. Returns ``{}`` for no specs; one spec comes back as itself."""
    leaves = []
    for item in specs:
        spec, revision, *rest = item
        leaves.append(
            _Node(spec.name, _flatten({k: v for k, v in spec.to_dict().items() if k != "name"}),
                  revision, bool(rest[0]) if rest else False)
        )
    leaves.sort(key=lambda n: n.name)
    for a, b in zip(leaves, leaves[1:]):
        if a.name == b.name:
            raise ValidationError("name", f"duplicate journal {a.name!r}")
    if not leaves:
        return {}
    root = _extract_tree(leaves)
    _hoist(root)
    return _render_node(root)


def _shared_prefix(a: str, b: str) -> int:
    """Length of the longest common prefix of `a` and `b` that ends in ``/``."""
    n = 0
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            break
        if x == "/":
            n = i + 1
    return n


def _extract_tree(nodes: list[_Node]) -> _Node:
    """Repeatedly wrap the longest run of neighbours sharing the longest directory
    prefix in a directory node, until one root remains."""
    nodes = list(nodes)
    while len(nodes) > 1:
        best, beg, end = -1, 0, 0
        for i in range(1, len(nodes)):
            length = _shared_prefix(nodes[i - 1].name, nodes[i].name)
            if length > best:
                best, beg, end = length, i - 1, i + 1
            elif length == best and i == end:
                end = i + 1
        nodes[beg:end] = [_Node(nodes[beg].name[:best], children=nodes[beg:end])]
    return nodes[0]


def _hoist(node: _Node) -> None:
    """Bottom-up: a directory takes the intersection of its children, which then
    keep only what differs from it."""
    if not node.children:
        return
    for child in node.children:
        _hoist(child)
    first, *rest = node.children
    node.flat, node.delete = dict(first.flat), first.delete
    for child in rest:
        node.flat = _intersect(node.flat, child.flat)
        if child.delete != node.delete:
            node.delete = None
    for child in node.children:
        child.flat = _subtract(child.flat, node.flat)
        if node.delete is not None:
            child.delete = None


def _render_node(node: _Node) -> dict[str, Any]:
    out: dict[str, Any] = {"name": node.name} if node.name else {}
    if node.delete:
        out["delete"] = True
    out.update(_unflatten(node.flat))
    if node.revision:
        out["revision"] = node.revision
    if node.children:
        out["children"] = [_render_node(child) for child in node.children]
    return out
