"""The periodic activity line the API and the engine share (``utils.activity_log``): each look
compares the counters with the previous look (not with the start), a quiet interval logs nothing, and
the line goes to the server's own logger once per interval."""

from __future__ import annotations

import asyncio
import logging
from typing import Optional

from atroposlib.api.activity import ActivityLog
from atroposlib.inference.activity import EngineActivity
from atroposlib.utils.activity_log import ActivityLine, Totals, increase, total

GROUPS = "atropos_groups_received_total"


class _Counting(ActivityLine):
    def __init__(self, counts: list[Totals], interval: float) -> None:
        self.counts = counts
        super().__init__(lambda: self.counts[0], interval, logging.getLogger("test.activity"))

    def line(self) -> Optional[str]:
        before, now = self.advance()
        grew = increase(before, now, GROUPS)
        return f"{grew:.0f} groups" if grew else None


def test_increase_sums_label_sets_and_counts_from_the_last_look():
    before: Totals = {(GROUPS, (("env", "a"),)): 2.0}
    now: Totals = {(GROUPS, (("env", "a"),)): 5.0, (GROUPS, (("env", "b"),)): 1.0}
    assert total(now, GROUPS) == 6.0
    assert increase(before, now, GROUPS) == 4.0
    log = _Counting([before], 1.0)
    log.counts[0] = now
    assert log.line() == "4 groups"
    assert log.line() is None  # nothing new since the last look
    assert log.last is now


def test_run_logs_one_line_per_interval_with_news_to_its_logger(caplog):
    counts: list[Totals] = [{}]
    log = _Counting(counts, 0.05)

    async def scenario() -> None:
        task = asyncio.create_task(log.run())
        await asyncio.sleep(0.12)  # quiet intervals: no line
        assert not caplog.records
        counts[0] = {(GROUPS, ()): 3.0}
        for _ in range(500):
            if caplog.records:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.15)  # three more intervals without news: no second line
        task.cancel()

    with caplog.at_level(logging.INFO, logger="test.activity"):
        asyncio.run(scenario())
    assert [(r.name, r.getMessage()) for r in caplog.records] == [("test.activity", "3 groups")]


def test_the_api_and_the_engine_lines_are_activity_lines():
    assert issubclass(ActivityLog, ActivityLine) and issubclass(EngineActivity, ActivityLine)
    assert "run" not in vars(ActivityLog) and "run" not in vars(EngineActivity)
