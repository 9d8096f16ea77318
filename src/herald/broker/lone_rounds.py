"""When a lone writer's sync round runs on the event loop instead of the round thread.

On the round thread (`herald.broker.sync_rounds.RoundThread`) a round costs two
thread hops, loop to thread and back: ~47 us of the ~290 us a lone writer's 1 KiB
append took here, plus the wake-ups' CPU. A round that runs on the loop itself has
none, but blocks the loop for its fdatasync, so it is worth it only for a lone
writer on a quick disk:

- one append, by the writer of the previous round's lone append too (two writers
  taking turns never qualify: on the thread their next round gathers both);
- a group the commit log takes alone (`CommitLog.takes_lone`) while its fdatasyncs
  average under `HERE_MAX_SYNC_S` (every other connection waits for that one sync);
- while the rounds run here are no slower than those the thread runs. With the
  CPUs busy (load 8, kernel 6.18's EEVDF), the loop's fdatasync took 1.9-4.3 ms
  against 0.09-0.46 ms for the round thread's in alternating blocks of the same
  broker: the loop, a busy thread, waits for a CPU once its sync completes. Busy
  or not, each way's rounds are timed as the writer waits for them (the thread's
  from its hand-off to its outcome back on the loop) and averaged, and a lone round
  goes the way that averages quicker (the thread's by `THERE_MARGIN`); one in
  `PROBE_ROUNDS` goes the other way, so that its average follows the machine too.
  (A fixed limit of 1 ms on the loop's rounds sent them to the thread under load
  even where the thread was no quicker: on tmpfs at load 13, a quarter of the
  rounds, for a few preempted ones.)

    lone = LoneRounds()
    way = lone.way(writes, writer)                # on the loop, as a round opens
    if way is HERE: ...run it...; lone.ran(HERE, seconds)
    else: ...hand it off...                       # THERE: lone.ran(THERE, seconds) once back
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum

from herald.fragment.group_write import GroupWrite

__all__ = ["HERE", "HERE_MAX_SYNC_S", "PROBE_ROUNDS", "THERE", "LoneRounds", "Way"]

#: The commit log's fdatasyncs must average under this for a round to run on the loop.
HERE_MAX_SYNC_S = 0.0005
#: How much a lone round's time weighs in its way's average: one of the way that
#: averages quicker, and one of the other (a probe: one in `PROBE_ROUNDS`, so that a
#: way quick again is taken again after a few probes, not a few dozen).
ROUND_WEIGHT = 1 / 8
PROBE_WEIGHT = 1 / 4
#: One lone round in this many goes the way that averages slower, to time it again
#: (a probe of the thread costs its hops' CPU, ~50-80 us, so not too often).
PROBE_ROUNDS = 128
#: A round counts in its way's average as at most this many times that average.
OUTLIER_FACTOR = 4.0
#: The thread's rounds must average this much quicker than the loop's to be chosen:
#: at par the loop is cheaper (no hops), and noise alone must not send rounds there.
THERE_MARGIN = 0.8


class Way(Enum):
    """Where a lone writer's round runs: on the loop, or on the round thread."""

    HERE = "loop"
    THERE = "thread"


HERE, THERE = Way.HERE, Way.THERE


class LoneRounds:
    """One broker's choice of where a lone writer's rounds run (see the module doc).
    Loop only."""

    __slots__ = ("_here_s", "_lone", "_there_s", "_writer", "rounds_here")

    def __init__(self) -> None:
        self._writer: object = None  # who wrote the last round's lone append
        #: Each way's lone rounds, averaged (seconds; 0: not timed yet). Not a dict
        #: keyed by `Way`: an Enum's hash is a Python call, paid per round.
        self._here_s = self._there_s = 0.0
        self._lone = 0  # lone rounds so far (every `PROBE_ROUNDS`-th goes the slower way)
        self.rounds_here = 0  # statistics

    def way(self, writes: Sequence[GroupWrite], writer: object) -> Way | None:
        """Where a round of ``writes`` (the last append's ``writer``, None if unknown
        or several) runs: `HERE`, `THERE` (a lone round, to be timed with `ran`), or
        None: not a lone writer's (the thread, untimed)."""
        lone, self._writer = self._writer, (writer if len(writes) == 1 else None)
        if writer is None or len(writes) != 1 or writer != lone:
            return None
        write = writes[0]
        commit_log = write.spool.commit_log
        if (commit_log is None or commit_log.closed or len(write.contents) != 1
                or commit_log.sync_average.seconds >= HERE_MAX_SYNC_S or not commit_log.takes_lone(write.size)):
            return None
        self._lone += 1
        quicker = self._quicker()
        if self._lone % PROBE_ROUNDS:
            return quicker
        return THERE if quicker is HERE else HERE

    def ran(self, way: Way, seconds: float) -> None:
        """A lone round went ``way`` (`way`'s answer) and took ``seconds``, from its
        start to its outcome on the loop."""
        weight = ROUND_WEIGHT if way is self._quicker() else PROBE_WEIGHT
        if way is HERE:
            self.rounds_here += 1
            self._here_s = _averaged(self._here_s, seconds, weight)
        else:
            self._there_s = _averaged(self._there_s, seconds, weight)

    def _quicker(self) -> Way:
        return THERE if self._there_s and self._there_s < self._here_s * THERE_MARGIN else HERE

    def statistics(self) -> dict[str, float]:
        """Rounds run here, and each way's average (us; 0: not timed yet)."""
        return {"rounds_here": self.rounds_here, "here_us": self._here_s * 1e6, "there_us": self._there_s * 1e6}


def _averaged(average: float, seconds: float, weight: float) -> float:
    """``average`` moved towards ``seconds`` by ``weight``, a sample counted as at most
    `OUTLIER_FACTOR` times the average: one round preempted for 10 ms (a loaded
    machine) must not swing the choice for hundreds of rounds, while rounds that
    stay slow still raise it by a third each."""
    if not average:
        return seconds
    return average + (min(seconds, OUTLIER_FACTOR * average) - average) * weight
