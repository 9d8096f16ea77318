"""``make demo``: start an embedded broker in a temp dir, walk the seed tutorial, stop.

Prints what it does, as the tutorial would show it with curl.
"""

from __future__ import annotations

import concurrent.futures as cf
import tempfile
from pathlib import Path

import httpx

from herald.testing.broker import BrokerProcess, apply_specs, journal_spec


def tutorial(url: str) -> None:
    spec = journal_spec("example/journal", length=131072)
    print(f"$ herald journals apply  # example/journal\n  revision={apply_specs(url, spec)}")
    with httpx.Client(base_url=url, timeout=30) as http:
        body = b'{"Msg": "Hello, Gazette!"}\n{"Msg": "See you later alligator"}\n'
        put = http.put("/example/journal", content=body)
        print(f"$ curl -X PUT {url}/example/journal  -> {put.status_code} "
              f"X-Commit-End={put.headers['X-Commit-End']}")
        print(f"$ curl {url}/example/journal\n{http.get('/example/journal').text}", end="")
        print(f"$ curl '{url}/example/journal?offset=16'\n"
              f"{http.get('/example/journal', params={'offset': 16}).text}", end="")

    def race(i: int) -> int:
        return httpx.put(f"{url}/example/journal", content=f'{{"Msg": "Race!", "N": {i}}}\n'.encode()).status_code

    with cf.ThreadPoolExecutor(20) as pool:
        codes = list(pool.map(race, range(1, 21)))
    print(f"$ 20 raced appends -> {codes.count(204)} acknowledged")
    lines = httpx.get(f"{url}/example/journal").text.splitlines()
    print(f"$ curl {url}/example/journal | wc -l\n{len(lines)}  (every line whole)")


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="herald-demo-") as tmp:
        broker = BrokerProcess(Path(tmp) / "data", Path(tmp) / "fragments").start()
        print(f"started embedded broker at {broker.url} (data in {tmp})")
        try:
            tutorial(broker.url)
        finally:
            code = broker.terminate()
            stored = sorted(p.name for p in (Path(tmp) / "fragments").rglob("*.sz"))
            print(f"stopped broker (exit {code}); persisted fragments: {stored}")


if __name__ == "__main__":
    main()
