"""A real broker process for tests: started on port 0, its address read back."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import threading
from pathlib import Path

import httpx

from herald.durable import make_durable_dirs

READY_PREFIX = "herald broker listening on "
START_DEADLINE_S = 30.0


class BrokerProcess:
    """``herald serve`` in a child process. ``start`` blocks until it prints its address."""

    def __init__(self, data_dir: Path, file_root: Path | None = None, *extra_args: str,
                 env: dict[str, str] | None = None, open_files_limit: int | None = None):
        self.data_dir = Path(data_dir)
        self.file_root = Path(file_root) if file_root else self.data_dir / "fragments"
        self.extra_args = list(extra_args)
        self.env = env
        # Soft and hard RLIMIT_NOFILE for the child (None: inherit): with both equal,
        # the broker's raise to the hard limit changes nothing, as under `ulimit -n`.
        self.open_files_limit = open_files_limit
        self.proc: subprocess.Popen | None = None
        self.url = ""
        self.stderr_lines: list[str] = []

    def start(self, port: int = 0) -> BrokerProcess:
        args = [sys.executable, "-m", "herald.cli.main", "serve", "--port", str(port),
                "--data-dir", str(self.data_dir), "--file-root", str(self.file_root),
                "--log.level", "info", *self.extra_args]
        make_durable_dirs(self.file_root)  # as an operator would: it survives a power cut
        env = {**os.environ, **(self.env or {})}
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, env=env, start_new_session=True,
                                     preexec_fn=self._limit_open_files if self.open_files_limit else None)
        self._stderr_thread = threading.Thread(target=self._drain_stderr, daemon=True)
        self._stderr_thread.start()
        self.url = self._await_ready_line()
        return self

    def _limit_open_files(self) -> None:
        """Runs in the child between fork and exec."""
        limit = self.open_files_limit
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

    def _drain_stderr(self) -> None:
        assert self.proc and self.proc.stderr
        for line in self.proc.stderr:
            self.stderr_lines.append(line)

    def _await_ready_line(self) -> str:
        """Read stdout until the ready line, failing after a deadline (no polling sleeps)."""
        assert self.proc and self.proc.stdout
        result: list[str] = []
        reader = threading.Thread(target=lambda: result.append(self.proc.stdout.readline()), daemon=True)
        reader.start()
        reader.join(START_DEADLINE_S)
        line = result[0] if result else ""
        if not line.startswith(READY_PREFIX):
            self.kill()
            self._stderr_thread.join(START_DEADLINE_S)  # all of stderr, for the message
            raise RuntimeError(f"broker did not start: {line!r}\n{''.join(self.stderr_lines[-30:])}")
        return line[len(READY_PREFIX):].strip()

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    @property
    def open_descriptors(self) -> int:
        """How many descriptors the broker process holds now (from /proc)."""
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))

    def kill(self) -> None:
        """``kill -9``: no chance to persist or flush anything."""
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def terminate(self, timeout_s: float = 30) -> int:
        """SIGTERM and wait; returns the exit code."""
        assert self.proc
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout_s)

    def restart(self, same_port: bool = True) -> BrokerProcess:
        port = self.port if same_port else 0
        self.kill()
        return self.start(port)

    def client(self, **kw) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=kw.pop("timeout", 30), **kw)


def journal_spec(name: str, **fragment) -> dict:
    """A test JournalSpec as Gazette's YAML shape: file store, small fragments, SNAPPY."""
    frag = {"length": 1 << 20, "compression_codec": "SNAPPY", "stores": ["file:///"],
            "refresh_interval": "1m0s"}
    frag.update(fragment)
    labels = [{"name": "content-type", "value": "application/x-ndjson"}]
    return {"name": name, "replication": 1, "labels": labels, "fragment": frag}


def apply_specs(url: str, *specs: dict, expect_mod_revision: int = -1) -> int:
    changes = [{"upsert": s, "expect_mod_revision": expect_mod_revision} for s in specs]
    resp = httpx.post(f"{url}/v1/journals/apply", json={"changes": changes}, timeout=30)
    resp.raise_for_status()
    return resp.json()["revision"]


def seed_journal(proc: BrokerProcess, name: str, content: bytes = b"seed\n") -> BrokerProcess:
    """Apply a test spec for ``name`` and append ``content``: the known state that a
    refused request must leave unchanged."""
    apply_specs(proc.url, journal_spec(name))
    with proc.client() as http:
        http.put(f"/{name}", content=content).raise_for_status()
    return proc



def journals_state(url: str, headers: dict[str, str] | None = None) -> dict[str, tuple[int, bytes, str]]:
    """Every journal's spec revision, content and write head: what a refused request
    must leave exactly as it was (hostile-input and authorization tests compare it)."""
    with httpx.Client(base_url=url, timeout=30, headers=headers) as http:
        listed = http.post("/v1/journals/list", json={}).json()["journals"]
        state = {}
        for item in listed:
            name = item["spec"]["name"]
            read = http.get(f"/{name}")
            state[name] = (item["mod_revision"], read.content, read.headers.get("X-Write-Head", ""))
        return state
