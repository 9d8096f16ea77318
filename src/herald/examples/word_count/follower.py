"""Follow the job's count journals read-committed into a `BigramCounts` model.

One thread per count journal drives Gazette's Sequencer over a blocking read
(`herald.client.read_uncommitted` + `herald.message.sequence`), so only counts of
committed batches are applied, each once ([I-SEQ-1]); an abandoned attempt's
messages are never seen. ``read_through`` is the journal offset below which
every message has been applied to the model: it is advanced only when the
sequencer asks for the next message, i.e. after everything it could deliver so
far was applied. A client that needs "caught up with what the job published"
compares it with the journals' write heads (``GET /api/status``).

A count message that is not ``{"bigram": str, "count": int}`` is logged with
its journal and offset, counted in ``bad_messages``, and skipped.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import orjson

from herald.client import BrokerClient, read_uncommitted
from herald.examples.word_count.model import BigramCounts
from herald.message import Envelope, Framing, Sequencer, framing_for_labels
from herald.message.sequencing import is_ack, sequence
from herald.protocol.labels import LabelSet

__all__ = ["CountsFollower"]

log = logging.getLogger(__name__)
RETRY_PAUSE_S = 1.0


@dataclass
class JournalProgress:
    read_through: int = 0
    bad_messages: int = 0
    error: str = ""


@dataclass
class CountsFollower:
    """Reads every journal of ``selector`` (as listed at `start`) into ``model``."""

    broker: str
    selector: str
    model: BigramCounts
    progress: dict[str, JournalProgress] = field(default_factory=dict)
    _stopping: threading.Event = field(default_factory=threading.Event)

    def start(self) -> list[str]:
        """List the journals and start one daemon thread each; returns their names."""
        with BrokerClient(self.broker) as client:
            infos = client.list(self.selector)
        for info in infos:
            self.progress[info.name] = JournalProgress()
            threading.Thread(target=self._follow, args=(info.name, info.spec.labels), daemon=True,
                             name=f"follow {info.name}").start()
        return [info.name for info in infos]

    def stop(self) -> None:
        self._stopping.set()

    def _follow(self, journal: str, labels: LabelSet) -> None:
        """Thread: apply the journal's committed counts; on a broker error, resume
        from scratch after a pause (a fresh Sequencer re-reads from offset 0, and
        re-applying totals in order lands on the same latest values)."""
        framing = framing_for_labels(labels)
        while not self._stopping.is_set():
            try:
                with BrokerClient(self.broker) as client:
                    self._apply_all(client, journal, framing)
            except Exception as err:  # noqa: BLE001 — a follower thread's edge: log, pause, retry.
                self.progress[journal].error = str(err)
                log.warning("follower journal=%s failed, retrying: %s", journal, err)
                self._stopping.wait(RETRY_PAUSE_S)

    def _apply_all(self, client: BrokerClient, journal: str, framing: Framing) -> None:
        progress = self.progress[journal]

        def replay(name: str, begin: int, end: int) -> Iterator[Envelope]:
            return read_uncommitted(client, name, framing, begin, end)

        def tracked(envelopes: Iterator[Envelope]) -> Iterator[Envelope]:
            for env in envelopes:
                yield env
                progress.read_through = env.end  # The sequencer asks for more: all before is applied.

        raw = read_uncommitted(client, journal, framing, block=True)
        for env in sequence(tracked(raw), Sequencer(), replay):
            if self._stopping.is_set():
                return
            if not is_ack(env):
                self._apply(env, progress)

    def _apply(self, env: Envelope, progress: JournalProgress) -> None:
        try:
            doc = orjson.loads(env.value)
            bigram, count = doc["bigram"], doc["count"]
            if not isinstance(bigram, str) or not isinstance(count, int) or isinstance(count, bool):
                raise TypeError("want {\"bigram\": str, \"count\": int}")
        except (orjson.JSONDecodeError, KeyError, TypeError) as err:
            progress.bad_messages += 1
            log.warning("skipped bad count message journal=%s offset=%d: %s", env.journal, env.begin, err)
            return
        self.model.apply(bigram, count)
