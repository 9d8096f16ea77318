"""``herald pipelines dedupe --metrics-port`` on a port already taken: one error line
naming the flag, before any Spark starts."""

from __future__ import annotations

import socket

from typer.testing import CliRunner

from herald.cli.pipelines import pipelines_app


def test_a_metrics_port_in_use_is_refused_naming_the_flag(tmp_path):
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        result = CliRunner().invoke(pipelines_app, [
            "dedupe", "--input", "prefix=events/", "--output", "prefix=deduped/",
            "--checkpoint", str(tmp_path / "ckpt"), "--metrics-port", str(port), "--broker", "http://127.0.0.1:9"])
    assert result.exit_code == 2, result.output
    assert "--metrics-port" in result.output and f"127.0.0.1:{port}" in result.output
    assert "Traceback" not in result.output and not (tmp_path / "ckpt").exists()
