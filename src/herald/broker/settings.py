"""The broker's one frozen settings object; the CLI fills it from flags and env vars."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from herald.fragment.commit_log import LONE_BYTES

DEFAULT_MAX_APPEND_BYTES = 64 << 20
# Per-connection limits (broker/limits.py): aiohttp's header-line limit, its
# long-standing idle timeout, and a minute for a whole request body.
DEFAULT_MAX_HEADER_BYTES = 8190
DEFAULT_IDLE_TIMEOUT_S = 75.0
DEFAULT_BODY_TIMEOUT_S = 60.0
# A sync round of one group under this many bytes is made durable by one fdatasync
# of the commit log, not two in place (`herald.fragment.commit_log.LONE_BYTES`).
DEFAULT_LONE_APPEND_BYTES = LONE_BYTES


@dataclass(frozen=True, slots=True)
class BrokerSettings:
    """How one broker process runs. With no flags: embedded, 127.0.0.1:8080."""

    host: str = "127.0.0.1"
    port: int = 8080
    data_dir: Path = Path("herald-data")
    file_root: Path | None = None
    max_append_bytes: int = DEFAULT_MAX_APPEND_BYTES
    max_append_rate: int = 0  # bytes/s cap on every journal, spec or not (0: no cap); ratelimit.py
    max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES
    idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S
    body_timeout_s: float = DEFAULT_BODY_TIMEOUT_S
    # A lone writer's group under this is logged (one fdatasync); 0: always synced in place.
    lone_append_bytes: int = DEFAULT_LONE_APPEND_BYTES
    # Cluster mode (None: embedded, one broker, local keyspace).
    etcd: str | None = None
    etcd_prefix: str = "/herald/cluster"
    etcd_lease_s: int = 20
    zone: str = "local"
    id: str = ""
    advertise: str | None = None
    # Security (off by default): HMAC keys for JWT auth, and TLS for every listener and peer.
    auth_keys: str | None = None
    tls_cert_file: Path | None = None
    tls_key_file: Path | None = None
    tls_ca_file: Path | None = None

    @property
    def resolved_file_root(self) -> Path:
        """Where ``file:///`` store URLs resolve (Gazette's ``--broker.file-root``)."""
        return self.file_root if self.file_root is not None else self.data_dir / "fragments"
