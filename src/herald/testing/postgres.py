"""A real PostgreSQL for tests and demos: Debian's server binaries on a temp data dir and free port.

`PostgresServer.start` runs ``initdb`` (trust authentication, one superuser named
``herald``) and ``pg_ctl start`` listening on 127.0.0.1 only, with its Unix
socket inside the data dir; `stop` shuts it down fast and deletes the dir. The
binaries come from Debian's ``postgresql`` package (``/usr/lib/postgresql/<v>/bin``;
``make system-deps`` installs it).

PostgreSQL refuses to run as root. As root, the server runs as the ``postgres``
user (created by the Debian package) via ``runuser``, over a data dir made under
the system temp dir and chowned to it (a pytest ``tmp_path`` is private to root,
so it is not used then); as anyone else, it runs as that user in ``parent``.

    with PostgresServer() as pg:
        psycopg.connect(pg.dsn)
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

from herald.testing.etcd import free_port

__all__ = ["PostgresServer", "postgres_bin_dir"]

START_DEADLINE_S = 60
SERVICE_USER = "postgres"


def postgres_bin_dir() -> Path:
    """The newest installed ``/usr/lib/postgresql/<version>/bin`` (RuntimeError if none)."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    if not found:
        raise RuntimeError("PostgreSQL is not installed (make system-deps installs Debian's postgresql)")
    return Path(found[-1]).parent


class PostgresServer:
    """One throwaway PostgreSQL server; ``dsn`` is its connection string once started."""

    def __init__(self, parent: Path | None = None) -> None:
        self.parent = parent
        self.port = 0
        self.root: Path | None = None
        self.dsn = ""

    def _as_service_user(self) -> list[str]:
        return ["runuser", "-u", SERVICE_USER, "--"] if os.geteuid() == 0 else []

    def _run(self, *args: str) -> None:
        done = subprocess.run([*self._as_service_user(), *args], capture_output=True, text=True,
                              timeout=START_DEADLINE_S)
        if done.returncode != 0:
            raise RuntimeError(f"{Path(args[0]).name} failed ({done.returncode}): {done.stdout}{done.stderr}")

    def _make_root(self) -> Path:
        if os.geteuid() != 0:
            return Path(tempfile.mkdtemp(prefix="herald-pg-", dir=self.parent))
        root = Path(tempfile.mkdtemp(prefix="herald-pg-"))  # /tmp: reachable by the postgres user
        user = pwd.getpwnam(SERVICE_USER)
        os.chown(root, user.pw_uid, user.pw_gid)
        return root

    def start(self) -> PostgresServer:
        """initdb + pg_ctl start; returns once the server accepts connections."""
        bin_dir = postgres_bin_dir()
        self.root = self._make_root()
        data = self.root / "data"
        self.port = free_port()
        self._run(str(bin_dir / "initdb"), "-D", str(data), "-U", "herald", "--auth=trust", "-E", "UTF8",
                  "--no-sync", "--no-instructions")
        options = f"-p {self.port} -k {data} -c listen_addresses=127.0.0.1"
        self._run(str(bin_dir / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(self.root / "server.log"),
                  "-w", "-t", str(START_DEADLINE_S), "start")
        self.dsn = f"postgresql://herald@127.0.0.1:{self.port}/postgres"
        return self

    def log_tail(self, lines: int = 40) -> str:
        path = self.root / "server.log" if self.root else None
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path and path.exists() else ""

    def stop(self) -> None:
        """Stop the server (immediate: a throwaway needs no shutdown checkpoint) and delete its directory."""
        if self.root is None:
            return
        if (self.root / "data" / "postmaster.pid").exists():
            try:
                self._run(str(postgres_bin_dir() / "pg_ctl"), "-D", str(self.root / "data"), "-m", "immediate",
                          "-w", "stop")
            except RuntimeError:
                pass  # Already gone: nothing left to stop.
        shutil.rmtree(self.root, ignore_errors=True)
        self.root = None

    def __enter__(self) -> PostgresServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
