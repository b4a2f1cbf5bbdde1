"""Helpers of the launcher's run tests: the cached Ray environment, and the group accounting of a
finished run (every group the API accepted was served to the trainer or is still held, and no env
worker's spool kept a group it had not delivered)."""

from __future__ import annotations

import json
import os
import re
import sqlite3
from pathlib import Path
from typing import Optional

RAY_VERSION = "2.60.0"  # keep equal to VERSION in scripts/setup_ray.sh


def ray_venv() -> Path:
    env = os.environ.get("ATROPOS_RAY_VENV")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "atroposlib" / f"ray-{RAY_VERSION}"


def find_ray_python() -> tuple[Optional[str], str]:
    """(the Python with ray and the project's dependencies, or None; why not)."""
    env = os.environ.get("ATROPOS_RAY_PYTHON")
    if env:
        return env, ""
    venv = ray_venv()
    if (venv / ".atroposlib-ray-ok").exists():
        return str(venv / "bin" / "python"), ""
    failed = venv / "install-failed.txt"
    if failed.exists():
        return None, f"the Ray environment could not be installed: {failed.read_text().strip()}"
    return None, f"no Ray environment at {venv} (scripts/setup_ray.sh installs it)"


def group_accounting(run: Path) -> dict[str, int]:
    """Counts of a run: ``accepted`` (groups in the API's durable store), ``served`` (in batches the
    trainer acknowledged), ``held`` (still queued), ``pending`` (in the batch delivered and not yet
    acknowledged: delivered again when the trainer resumes), ``other`` (any other state),
    ``reported_sent`` (groups the env workers said the API acknowledged, from the lives that exited
    cleanly), ``spooled`` (bytes of groups left undelivered in the env spools), ``lost``."""
    db = sqlite3.connect(run / "api-data" / "trajectories.sqlite3")
    try:
        states = dict(db.execute("SELECT state, count(*) FROM groups GROUP BY state").fetchall())
        acked_seqs: set[int] = set()
        for (seqs,) in db.execute("SELECT seqs FROM batches WHERE acked = 1"):
            acked_seqs.update(json.loads(seqs) if isinstance(seqs, str) else _seqs(seqs))
    finally:
        db.close()
    accepted = sum(states.values())
    served, held, pending = (
        states.get("acked", 0),
        states.get("queued", 0),
        states.get("delivered", 0),
    )
    sent = 0
    for log in (run / "logs").glob("env-*.log"):
        sent += sum(
            int(n) for n in re.findall(r"serve finished: groups_sent=(\d+)", log.read_text())
        )
    spooled = 0
    for spool in (run / "spool").glob("*"):
        size = (spool / "groups.jsonl").stat().st_size if (spool / "groups.jsonl").exists() else 0
        offset_file = spool / "sent.offset"
        offset = int(offset_file.read_text() or 0) if offset_file.exists() else 0
        spooled += max(0, size - offset)
    return {
        "accepted": accepted,
        "served": served,
        "served_in_batches": len(acked_seqs),
        "held": held,
        "pending": pending,
        "other": accepted - served - held - pending,
        "reported_sent": sent,
        "spooled": spooled,
        "lost": accepted - served - held - pending + max(0, sent - accepted),
    }


def _seqs(blob: bytes) -> list[int]:
    try:
        return [int(x) for x in json.loads(blob)]
    except ValueError:
        import orjson

        return [int(x) for x in orjson.loads(blob)]
