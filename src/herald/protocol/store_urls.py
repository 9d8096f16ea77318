"""Fragment store URLs: which schemes and arguments a spec may name, and the checks
that refuse, at apply, a URL a broker could never open (or could open outside its
root). fragment/stores.py opens stores with the same table."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, urlsplit

from herald.protocol.errors import ValidationError

__all__ = ["STORE_QUERY_ARGS", "validate_store_url"]


#: Store URL schemes and the query arguments each accepts (lower-cased name -> the
#: backend's keyword). fragment/stores.py opens stores with it; here it lets apply
#: refuse a spec whose store could never open.
STORE_QUERY_ARGS: dict[str, dict[str, str]] = {
    "file": {},
    "s3": {"endpoint": "endpoint", "region": "region", "profile": "profile", "acl": "ACL",
           "storageclass": "StorageClass", "sse": "ServerSideEncryption",
           "ssekmskeyid": "SSEKMSKeyId"},
    "gs": {},
    "az": {"account": "account"},
}


def validate_store_url(url: Any, field: str) -> None:
    """Refuse a store URL that could never open, or could open outside its root.

    Everything here is checked at apply, before the spec is saved [I-APPLY-1]: a URL
    saved and then refused when the broker opens it would stop the broker restarting
    [I-RESTART-1]. Gazette's rules: a clean path ending in '/', a bucket for cloud
    stores, no host for ``file://``; and no control characters anywhere (a NUL cannot
    reach a file system call).
    """
    if not isinstance(url, str):
        raise ValidationError(field, f"expected a URL string ({url!r})")
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in url):
        raise ValidationError(field, f"store URL holds a control character ({url!r})")
    parts = urlsplit(url)
    if not parts.scheme:
        raise ValidationError(field, f"store URL must be absolute ({url!r})")
    if not parts.path.endswith("/"):
        raise ValidationError(field, f"store URL path must end in '/' ({url!r})")
    if ".." in parts.path.split("/") or "//" in parts.path:
        raise ValidationError(field, f"store URL path must be clean ({url!r})")
    scheme = parts.scheme.lower()
    allowed = STORE_QUERY_ARGS.get(scheme)
    if allowed is None:
        raise ValidationError(field, f"unsupported store scheme {parts.scheme!r} "
                                     f"(one of {', '.join(sorted(STORE_QUERY_ARGS))})")
    if scheme == "file" and parts.netloc:
        raise ValidationError(field, f"file store URLs have no host: file:///path/ ({url!r})")
    if scheme != "file" and not parts.netloc:
        raise ValidationError(field, f"store URL needs a bucket: {scheme}://bucket/path/ ({url!r})")
    for name, _value in parse_qsl(parts.query, keep_blank_values=True):
        if name.lower() not in allowed:
            raise ValidationError(field, f"unknown store URL argument {name!r}")
