"""The JSON control API under ``/v1/journals/``: list (+ watch), apply, fragments, append.

Every request and response is JSON; errors are ``{status, message, field}`` with the
HTTP code of their status (one table, ``protocol.errors.HTTP_CODES``).
"""

from __future__ import annotations

import time

import orjson
from aiohttp import web

from herald.auth import Claims
from herald.broker import wire
from herald.broker.authz import UNRESTRICTED, authorize_change, claims_of
from herald.broker.endpoints import Endpoint, Param, add_endpoints
from herald.broker.gateway import APPEND_HEADERS, append_from_request, register_headers, serving_journal
from herald.broker.service import Broker
from herald.keyspace.base import Change, Entry
from herald.protocol.errors import ValidationError
from herald.protocol.journal import JournalSpec, validate_journal_name
from herald.protocol.labels import LabelSelector, journal_meta_labels, rewrite_prefix_selector

MAX_PAGE, DEFAULT_PAGE = wire.MAX_PAGE, wire.DEFAULT_PAGE


async def json_body(request: web.Request, model: type) -> dict:
    """The request's JSON object, holding only ``model``'s fields with their JSON
    types (400 naming ``body`` or the field otherwise)."""
    raw = await request.read()
    return wire.check_body(model, wire.json_object(raw)) if raw else {}


def json_response(doc: dict, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(doc), status=status, content_type="application/json")


def parse_selector(text) -> LabelSelector:
    if not isinstance(text, str):
        raise ValidationError("selector", "must be a string")
    try:
        return rewrite_prefix_selector(LabelSelector.parse(text))
    except ValidationError as err:
        raise ValidationError("selector", err.message) from None


def entry_dict(broker: Broker, entry: Entry) -> dict:
    return {"spec": entry.spec.to_dict(), "mod_revision": entry.mod_revision,
            "create_revision": entry.create_revision,
            "route": broker.route(entry.spec.name).to_dict()}


def matching(broker: Broker, selector: LabelSelector, claims: Claims = UNRESTRICTED) -> list[Entry]:
    """Entries matched by ``selector`` among those ``claims`` may see."""
    out = []
    for name, entry in sorted(broker.keyspace.entries().items()):
        labels = journal_meta_labels(entry.spec.labels, name)
        if selector.matches(labels) and (claims is UNRESTRICTED or claims.sees(labels)):
            out.append(entry)
    return out


def snapshot(broker: Broker, selector: LabelSelector, claims: Claims = UNRESTRICTED) -> dict:
    return {"journals": [entry_dict(broker, e) for e in matching(broker, selector, claims)],
            "revision": broker.keyspace.revision}


async def handle_list(request: web.Request) -> web.StreamResponse:
    """List the journals a selector matches; with ``watch``, an NDJSON stream of snapshots.

    A watch writes one line per change of the matched set (names or revisions).
    """
    broker: Broker = request.app["broker"]
    body = await json_body(request, wire.ListRequest)
    selector, claims = parse_selector(body.get("selector", "")), claims_of(request)
    if not body.get("watch"):
        return json_response(snapshot(broker, selector, claims))
    response = web.StreamResponse(headers={"Content-Type": "application/x-ndjson"})
    await response.prepare(request)
    last = None
    while not broker.stopping.is_set():
        changed = broker.next_keyspace_change()
        entries = matching(broker, selector, claims)
        key = [(e.spec.name, e.mod_revision) for e in entries]
        if key != last:
            await response.write(orjson.dumps(snapshot(broker, selector, claims)) + b"\n")
            last = key
        await changed.wait()
    return response


def _check_replication(broker: Broker, spec: JournalSpec, field: str) -> None:
    """An embedded broker is the only broker there will ever be: a spec asking for
    more copies is refused (as Kafka refuses a replication factor above its broker
    count) rather than served with one copy. A cluster takes it, as Gazette does:
    brokers may join, and until they do appends answer INSUFFICIENT_JOURNAL_BROKERS."""
    if not broker.is_cluster and spec.replication > 1:
        raise ValidationError(field, f"{spec.name}: replication {spec.replication} needs {spec.replication} "
                                     "brokers, but this broker is embedded (one broker, no --etcd) and would "
                                     "keep one copy; use replication: 1, or run a cluster (herald serve "
                                     "--etcd …)")


async def handle_apply(request: web.Request) -> web.Response:
    """Apply changes atomically (all or none), then wait until the broker serves them."""
    broker: Broker = request.app["broker"]
    body = await json_body(request, wire.ApplyRequest)
    raw = body.get("changes")
    if not isinstance(raw, list) or not raw:
        raise ValidationError("changes", "must be a non-empty list")
    changes = [Change.from_dict(c, f"changes[{i}]") for i, c in enumerate(raw)]
    for i, change in enumerate(changes):  # every store must open before anything is saved [I-APPLY-1]
        labels = change.upsert.labels if change.upsert is not None else None
        authorize_change(request, change.name, labels, f"changes[{i}]")
        if change.upsert is not None:
            _check_replication(broker, change.upsert, f"changes[{i}].upsert.replication")
            broker.stores_for(change.upsert, f"changes[{i}].upsert.fragment.stores")
    revision = await broker.keyspace.apply(changes)
    await broker.sync_journals()
    return json_response({"revision": revision})


async def handle_fragments(request: web.Request) -> web.Response:
    """A page of a journal's fragments, with signed URLs when ``signature_ttl`` is set."""
    body = await json_body(request, wire.FragmentsRequest)
    journal = await serving_journal(request, _str(body, "journal"), False, await request.read())
    begin_mod, end_mod = _num(body, "begin_mod_time", 0), _num(body, "end_mod_time", 0)
    token = int(_num(body, "next_page_token", 0))
    limit = int(_num(body, "page_limit", DEFAULT_PAGE))
    if not 0 < limit <= MAX_PAGE:
        raise ValidationError("page_limit", f"must be in 1..{MAX_PAGE}")
    ttl = _num(body, "signature_ttl", 0)
    stores = {s.url: s for s in journal.stores}
    page, next_token = [], 0
    for fragment in journal.index.fragments():
        if fragment.begin < token or not _in_mod_window(fragment, begin_mod, end_mod):
            continue
        if len(page) == limit:
            next_token = fragment.begin
            break
        item = {"fragment": fragment.to_dict()}
        if ttl and fragment.store in stores:
            item["signed_url"] = stores[fragment.store].sign_get(fragment.content_path, ttl)
        page.append(item)
    return json_response({"fragments": page, "next_page_token": next_token})


def _in_mod_window(fragment, begin_mod: float, end_mod: float) -> bool:
    if not fragment.mod_time:
        return not end_mod  # local-only fragments: only when the window is open-ended.
    return fragment.mod_time >= begin_mod and (not end_mod or fragment.mod_time < end_mod)


async def handle_append(request: web.Request) -> web.Response:
    """Append the raw body to a journal; the commit comes back as JSON."""
    broker: Broker = request.app["broker"]
    for key in request.query:
        if key != "journal":
            raise ValidationError(key, "unknown query parameter")
    name = request.query.get("journal", "")
    validate_journal_name(name, field="journal")
    register_headers(request.headers)
    journal = await serving_journal(request, name, need_primary=True)
    result = await append_from_request(broker, request, journal)
    return json_response({"commit": {"journal": name, "begin": result.begin, "end": result.end,
                                     "sum": result.sha1_hex},
                          "registers": result.registers.to_list(),
                          "write_head": result.write_head}, status=200)


async def handle_prune(request: web.Request) -> web.Response:
    """Remove a journal's persisted fragments older than ``fragment.retention``.

    Brokers never prune by themselves (as Gazette); an operator runs
    ``herald journals prune``. ``now`` may be given to prune "as of" a time.
    """
    body = await json_body(request, wire.PruneRequest)
    journal = await serving_journal(request, _str(body, "journal"), True, await request.read())
    dry_run = bool(body.get("dry_run", False))
    now = _num(body, "now", 0) or time.time()
    removed = await journal.fragments.prune(now, dry_run)
    return json_response({"removed": [f.to_dict() for f in removed], "dry_run": dry_run})


async def handle_members(request: web.Request) -> web.Response:
    """The brokers of the cluster, their zones, and how many journals each serves."""
    broker: Broker = request.app["broker"]
    await json_body(request, wire.MembersRequest)
    if not broker.is_cluster:
        members = {broker.member_id: broker.endpoint}
    else:
        members = {m: spec.endpoint for m, spec in broker.keyspace.members().items()}
    primaries, replicas = {m: 0 for m in members}, {m: 0 for m in members}
    for name in broker.keyspace.entries():
        route = broker.route(name)
        for i, member in enumerate(route.members):
            if member in members:
                (primaries if i == route.primary else replicas)[member] += 1
    return json_response({"members": [
        {"zone": m.zone, "suffix": m.suffix, "endpoint": members[m], "primary_journals": primaries[m],
         "replica_journals": replicas[m]} for m in sorted(members)]})


def _str(body: dict, key: str) -> str:
    value = body.get(key)
    if not isinstance(value, str):
        raise ValidationError(key, "is required and must be a string")
    return value


def _num(body: dict, key: str, default: float) -> float:
    value = body.get(key, default)
    if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
        raise ValidationError(key, "must be a number ≥ 0")
    return value


ENDPOINTS = (
    Endpoint("POST", "/v1/journals/list", handle_list, "journals", wire.ListRequest, wire.ListResponse,
             response_media_types=("application/x-ndjson",)),
    Endpoint("POST", "/v1/journals/apply", handle_apply, "journals", wire.ApplyRequest, wire.ApplyResponse),
    Endpoint("POST", "/v1/journals/fragments", handle_fragments, "journals", wire.FragmentsRequest,
             wire.FragmentsResponse),
    Endpoint("POST", "/v1/journals/append", handle_append, "journals", "application/octet-stream",
             wire.AppendResponse, query=(Param("journal", "The journal to append to.", required=True),),
             headers=APPEND_HEADERS),
    Endpoint("POST", "/v1/journals/prune", handle_prune, "journals", wire.PruneRequest, wire.PruneResponse),
    Endpoint("POST", "/v1/members/list", handle_members, "members", wire.MembersRequest,
             wire.MembersResponse),
)


def add_routes(app: web.Application) -> None:
    add_endpoints(app, ENDPOINTS)

