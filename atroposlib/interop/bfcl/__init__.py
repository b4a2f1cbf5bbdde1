"""BFCL (the Berkeley Function Calling Leaderboard) in and out: its test entries, its prompts and its
official AST checker, run from ``bfcl-eval`` in its own environment (``scripts/setup_bfcl.sh``) by a worker
process that speaks JSON lines (``checker.BfclChecker``); evaluating any served model on them
(``evaluate``, in the leaderboard's Prompt or FC mode: ``answering``), its aggregates and error bars
(``scores``, ``report``), and a training pool with no held-out entry in it (``pool``). The env is
``environments/bfcl_env.py``; docs/interop.md and docs/training.md say how to use it."""

from atroposlib.interop.bfcl.answering import FC_MODE, MODES, PROMPT_MODE, Reply
from atroposlib.interop.bfcl.checker import BfclChecker
from atroposlib.interop.bfcl.entries import Answer, BfclEntry, Verdict
from atroposlib.interop.bfcl.evaluate import evaluate_entries, fixed_subsample
from atroposlib.interop.bfcl.gold import gold_text
from atroposlib.interop.bfcl.locate import bfcl_missing, find_bfcl_python
from atroposlib.interop.bfcl.pool import TrainingPool, build_pool, held_out_overlap
from atroposlib.interop.bfcl.report import BfclReport, ItemResult
from atroposlib.interop.bfcl.scores import LIVE_AST, NON_LIVE_AST, Score, aggregates

__all__ = [
    "FC_MODE",
    "LIVE_AST",
    "MODES",
    "NON_LIVE_AST",
    "PROMPT_MODE",
    "Answer",
    "BfclChecker",
    "BfclEntry",
    "BfclReport",
    "ItemResult",
    "Reply",
    "Score",
    "TrainingPool",
    "Verdict",
    "aggregates",
    "bfcl_missing",
    "build_pool",
    "evaluate_entries",
    "find_bfcl_python",
    "fixed_subsample",
    "gold_text",
    "held_out_overlap",
]
