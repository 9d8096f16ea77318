"""``make example-bike-share``: Gazette's bike-share example end to end, on one machine.

Starts an embedded broker and a throwaway PostgreSQL in a temp dir, then runs the
steps docs/examples/bike-share.md walks through, each with the real CLI: generate
Citi Bike trips with planted cycles, create the journals, load them through
``attach-uuids | awk | journals append --mapping modulo``, run the Spark job to the
end, ask the history API about a bike, and compare the cycles found with the
planted ones (exit 1 on any difference).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx

from herald.examples.bike_share.job import CYCLES_SELECTOR, RIDES_SELECTOR
from herald.testing.broker import BrokerProcess
from herald.testing.postgres import PostgresServer

HERALD = [sys.executable, "-m", "herald.cli.main"]
BIKES = [*HERALD, "examples", "bike-share"]


def step(title: str, args: list[str] | str, cwd: Path) -> str:
    """Run one documented command in ``cwd``, printing it as a reader would type it."""
    shown = args if isinstance(args, str) else " ".join(args)
    print(f"\n$ {shown.replace(' '.join(HERALD), 'herald')}    # {title}", flush=True)
    done = subprocess.run(args, shell=isinstance(args, str), capture_output=True, text=True, check=False, cwd=cwd)
    if done.returncode != 0:
        print(done.stdout + done.stderr, flush=True)
        raise SystemExit(f"error: step failed ({title})")
    return done.stdout


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="herald-bike-share-") as tmp, PostgresServer() as pg:
        root = Path(tmp)
        broker = BrokerProcess(root / "data", root / "fragments").start()
        try:
            return run(root, broker.url, pg.dsn)
        finally:
            broker.kill()


def run(root: Path, url: str, dsn: str) -> int:
    rides = "201909-citibike-tripdata.csv"
    print(step("Citi Bike trips with cycles planted",
               [*BIKES, "generate", rides, "--seed", "7", "--planted", "planted.ndjson"], root), end="")
    print(step("rides and cycles journals", [*BIKES, "setup", "--broker", url], root), end="")
    herald = " ".join(HERALD)
    step("UUIDs first, into a file", f"tail -n +2 {rides} | {herald} attach-uuids --format csv > rides.with_uuids",
         root)
    step("bike ID alone on a line, then the record; modulo on it",
         f"awk -F , '{{print $13}}{{print}}' rides.with_uuids | {herald} journals append --broker {url} "
         f"-l {RIDES_SELECTOR} --framing lines --mapping modulo", root)
    print(step("the Spark job, to the end of the input",
               [*BIKES, "run", "--broker", url, "--checkpoint", "ckpt", "--dsn", dsn], root), end="")
    found_text = step("the cycles it published", [*HERALD, "journals", "read", "--broker", url, "--committed",
                                                  "-l", CYCLES_SELECTOR], root)
    found = sorted((c["BikeID"], tuple(s["StationID"] for s in c["Steps"]))
                   for c in map(json.loads, found_text.splitlines()))
    planted = sorted((p["bike_id"], tuple(p["station_ids"]))
                     for p in map(json.loads, (root / "planted.ndjson").read_text().splitlines()))
    for bike, stations in found:
        print(f"bike {bike}: cycle of {len(stations) - 1} rides from station {stations[0]}")
    serve_history(dsn, planted[0][0])
    print(f"\ncycles: {len(planted)} planted, {len(found)} found, "
          f"{len(set(found) - set(planted))} not planted, {len(set(planted) - set(found))} missed")
    return 0 if found == planted else 1


def serve_history(dsn: str, bike: int) -> None:
    """``herald examples bike-share serve`` and one GET of the history API."""
    proc = subprocess.Popen([*BIKES, "serve", "--dsn", dsn, "--port", "0"], stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        base = line.rsplit(" ", 1)[-1].strip()
        print(f"\n$ curl '{base}/api/bikes?id={bike}&limit=3'", flush=True)
        print(httpx.get(f"{base}/api/bikes", params={"id": bike, "limit": 3}, timeout=30).text, end="")
    finally:
        proc.terminate()
        proc.wait(30)


if __name__ == "__main__":
    sys.exit(main())
