"""When a lone writer's sync round runs on the event loop instead of the round thread.

On the round thread (`herald.broker.sync_rounds.RoundThread`) a round costs two
thread hops, loop to thread and back: ~47 us of the ~290 us a lone writer's 1 KiB
append took here, plus the wake-ups' CPU. A round that runs on the loop itself has
none, but blocks the loop for its fdatasync, so it is worth it only for a lone
writer on a quick disk and an idle CPU:

- one append, by the writer of the previous round's lone append too (two writers
  taking turns never qualify: on the thread their next round gathers both);
- a group the commit log takes alone (`CommitLog.takes_lone`) while its fdatasyncs
  average under `HERE_MAX_SYNC_S` (every other connection waits for that one sync);
- while the rounds run here stay quick. With the CPUs busy (load 8, kernel 6.18's
  EEVDF), the loop's fdatasync took 1.9-4.3 ms against 0.09-0.46 ms for the round
  thread's in alternating blocks of the same broker: the loop, a busy thread, waits
  for a CPU once its sync completes. So once the rounds run here average over
  `HERE_MAX_ROUND_S`, the next `HERE_BACKOFF_ROUNDS` go to the thread, a wait that
  doubles each time the next try is slow too (up to `HERE_MAX_BACKOFF_ROUNDS`).

    lone = LoneRounds()
    if lone.runs_here(rounds_so_far, writes, writer):   # on the loop, as a round opens
        ...run it...
        lone.ran_here(rounds_so_far, seconds)
"""

from __future__ import annotations

from collections.abc import Sequence

from herald.fragment.group_write import GroupWrite

__all__ = ["HERE_MAX_ROUND_S", "HERE_MAX_SYNC_S", "LoneRounds"]

#: The commit log's fdatasyncs must average under this for a round to run on the loop.
HERE_MAX_SYNC_S = 0.0005
#: Rounds run on the loop that average longer than this go back to the thread for a while.
HERE_MAX_ROUND_S = 0.001
HERE_ROUND_WEIGHT = 1 / 16
HERE_BACKOFF_ROUNDS = 256
HERE_MAX_BACKOFF_ROUNDS = 1 << 16


class LoneRounds:
    """One broker's choice of where a lone writer's rounds run (see the module doc).
    Loop only."""

    __slots__ = ("_after", "_backoff", "_quick", "_seconds", "_writer", "rounds_here")

    def __init__(self) -> None:
        self._writer: object = None  # who wrote the last round's lone append
        self._seconds = 0.0  # the rounds run here, averaged
        self._after = 0  # the round number from which rounds may run here again
        self._backoff = HERE_BACKOFF_ROUNDS  # rounds on the thread after the next slow spell
        self._quick = 0  # rounds run here since the last slow spell
        self.rounds_here = 0  # statistics

    def runs_here(self, number: int, writes: Sequence[GroupWrite], writer: object) -> bool:
        """Whether round ``number``, of ``writes`` (the last append's ``writer``, None
        if unknown or several), runs on the loop now."""
        lone, self._writer = self._writer, (writer if len(writes) == 1 else None)
        if writer is None or len(writes) != 1 or writer != lone or number < self._after:
            return False
        write = writes[0]
        commit_log = write.spool.commit_log
        return (commit_log is not None and not commit_log.closed and len(write.contents) == 1
                and commit_log.sync_average.seconds < HERE_MAX_SYNC_S and commit_log.takes_lone(write.size))

    def ran_here(self, number: int, seconds: float) -> None:
        """Round ``number`` ran on the loop, its `write_round` in ``seconds``."""
        self.rounds_here += 1
        self._seconds += (seconds - self._seconds) * HERE_ROUND_WEIGHT
        if self._seconds <= HERE_MAX_ROUND_S:
            self._quick += 1
            if self._quick >= self._backoff:  # quick for as long as the next wait would be: start afresh
                self._backoff = HERE_BACKOFF_ROUNDS
            return
        self._after = number + self._backoff
        self._backoff = min(2 * self._backoff, HERE_MAX_BACKOFF_ROUNDS)
        self._seconds, self._quick = 0.0, 0
