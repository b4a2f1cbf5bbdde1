"""What an env's own records say about token exactness after a multi-turn run: the groups file it
wrote (``--env.data_path_to_save_groups``: each sequence's ``token_exact`` and its episode's outcome)
and its log's last word on managed sessions."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any, Optional

_COUNTERS_LINE = re.compile(r"env counters: (.*)$", re.MULTILINE)
_MANAGED_LINE = re.compile(r"managed sessions: (\d+) managed session\(s\), (\d+) token drift\(s\)")


def managed_counts(log: Path) -> dict[str, Any]:
    """The env's own last word on its managed sessions (``serve``'s ``managed sessions: ...`` line):
    sessions opened and token drifts the managed server counted (re-rendering the conversation would
    not give the tokens the model saw; the exact tokens are kept). None where the line is missing."""
    text = log.read_text(errors="replace") if log.exists() else ""
    found = _MANAGED_LINE.findall(text)
    if not found:
        return {"managed_sessions": None, "managed_token_drifts": None}
    sessions, drifts = found[-1]
    return {"managed_sessions": int(sessions), "managed_token_drifts": int(drifts)}


def env_counters(log: Path) -> dict[str, str]:
    """The env's counters at the end of ``serve`` (its ``env counters: name=value ...`` line: every
    value set with ``set_metric``, such as the agent harness's ``agent/outcome/<kind>``), as text
    by name; empty where the line is missing."""
    text = log.read_text(errors="replace") if log.exists() else ""
    found = _COUNTERS_LINE.findall(text)
    if not found:
        return {}
    return dict(word.split("=", 1) for word in found[-1].split() if "=" in word)


def episode_outcomes(log: Path, prefix: str = "agent/outcome/") -> Optional[dict[str, int]]:
    """Every episode's outcome the env counted (``<prefix><kind>`` counters; an episode that left
    no sequence, which the groups file cannot show, included); None where the line is missing."""
    counters = env_counters(log)
    if not counters:
        return None
    return {
        k[len(prefix) :].replace("_", " "): int(float(v))
        for k, v in counters.items()
        if k.startswith(prefix)
    }


def training_episodes(out: Path) -> dict[str, Any]:
    """What the env's groups file (``out/groups.jsonl``) says about training: outcomes, and the
    token-exactness check over every sequence it sent (``drifts``: sequences whose tokens differ from
    what vLLM saw and said; ``overlong``: sequences sent marked overlong, cut at ``max_tokens`` or at
    the sequence length)."""
    path = out / "groups.jsonl"
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    groups = [json.loads(line) for line in text.split("\n") if line.strip()]
    outcomes: Counter[str] = Counter()
    checked = drifts = overlong = 0
    for group in groups:
        overlong += sum(bool(x) for x in group.get("overlong") or [])
        for over in group.get("overrides") or []:
            checked += 1
            drifts += not over.get("token_exact", False)
            outcomes[over.get("episode", {}).get("outcome", "unknown")] += 1
    return {
        "sequences_checked": checked,
        "drifts": drifts,
        "outcomes": dict(outcomes),
        "overlong": overlong,
    }
