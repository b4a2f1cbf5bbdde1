"""The BFCL preset's held-out measurement: BFCL's non-live AST categories, asked greedily in prompt mode
through a real vLLM server serving the model (and the trainer's adapter, hot-loaded as a LoRA), scored
by the official checker (``atroposlib.interop.bfcl``). The entries are a fixed stratified subsample
(``--heldout`` per category, the same entries for a seed at every point of a run; every entry of a
category when it has fewer), written one a line with their verdicts."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from demo.lora import LORA_RANK

if TYPE_CHECKING:  # the library is imported where it is used: the registry loads every preset
    from atroposlib.interop.bfcl import BfclChecker, BfclEntry, BfclReport

ANSWER_TOKENS = 256
"""Reply budget: the longest gold answer of the held-out set is 241 SmolLM2 tokens."""
MAX_MODEL_LEN = 2048  # the longest held-out prompt is 1,396 tokens
CONCURRENCY = 32
SERVED = "heldout"


@contextlib.contextmanager
def served(model_dir: Path, adapter_dir: Optional[Path], log: Path) -> Iterator[str]:
    """A vLLM server on ``model_dir`` (its base URL), the adapter loaded as ``SERVED`` when given."""
    import httpx

    from atroposlib.inference.vllm_launch import vllm_server
    from atroposlib.utils.net import free_port, wait_for_http

    port = free_port()
    name = None if adapter_dir else SERVED
    server = vllm_server(
        str(model_dir),
        port,
        served_name=name,
        max_model_len=MAX_MODEL_LEN,
        lora_rank=LORA_RANK if adapter_dir else 0,
    )
    env = server.full_env()
    cache = tempfile.mkdtemp(prefix="vllm-cache-")
    env["VLLM_CACHE_ROOT"] = cache
    url = f"http://127.0.0.1:{port}"
    with open(log, "ab") as fh:
        proc = subprocess.Popen(server.argv, stdout=fh, stderr=subprocess.STDOUT, env=env)
    try:
        wait_for_http(url + "/health", timeout=600, proc=proc)
        if adapter_dir:
            r = httpx.post(
                url + "/v1/load_lora_adapter",
                json={"lora_name": SERVED, "lora_path": str(adapter_dir)},
                timeout=120,
            )
            r.raise_for_status()
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def heldout_entries(checker: BfclChecker, per_category: int, seed: int) -> list[BfclEntry]:
    """The run's held-out entries: ``per_category`` of each non-live AST category, fixed by ``seed``."""
    from atroposlib.interop.bfcl import NON_LIVE_AST, fixed_subsample

    return fixed_subsample(checker.load(NON_LIVE_AST), per_category, seed)


async def _evaluate(url: str, tokenizer_dir: Path, entries: list[Any], checker: Any) -> Any:
    from atroposlib.inference_clients.config import APIServerConfig
    from atroposlib.inference_clients.server_manager import ServerManager
    from atroposlib.interop.bfcl import PROMPT_MODE, evaluate_entries
    from atroposlib.interop.bfcl.answering import ask_prompt_mode

    config = APIServerConfig(
        base_url=url + "/v1",
        server_type="vllm",
        model_name=SERVED,
        api_key="x",
        health_check=False,
        min_tokens_per_second=0.1,  # 32 questions share 2 cores: a few tokens/s each
        num_requests_for_eval=CONCURRENCY,
        tokenizer_name=str(tokenizer_dir),
    )
    manager = ServerManager([config])
    try:

        async def ask(entry: Any) -> Any:
            return await ask_prompt_mode(manager, entry, ANSWER_TOKENS, split="eval")

        return await evaluate_entries(
            entries, ask, checker, mode=PROMPT_MODE, concurrency=CONCURRENCY
        )
    finally:
        await manager.close()


def evaluate_heldout(
    model_dir: Path,
    entries: list[BfclEntry],
    checker: BfclChecker,
    log: Path,
    adapter_dir: Optional[Path] = None,
) -> BfclReport:
    """Serve ``model_dir`` (+ ``adapter_dir``), ask every entry greedily, score the replies."""
    with served(model_dir, adapter_dir, log) as url:
        return asyncio.run(_evaluate(url, model_dir, entries, checker))


def write_results(path: Path, report: BfclReport) -> None:
    """One JSON line per entry: its reply and the official verdict."""
    with open(path, "w", encoding="utf-8") as fh:
        for r in report.results:
            fh.write(json.dumps(r.record()) + "\n")


def overall(report: BfclReport) -> float:
    """BFCL's non-live AST aggregate of the report (0-1)."""
    return report.aggregates()["non_live_ast"].accuracy


def by_category(report: BfclReport) -> dict[str, float]:
    return {c: s.accuracy for c, s in report.by_category().items()}


def summary_line(report: BfclReport) -> str:
    """``non-live AST 12.3 ± 1.6 (simple_python ..., ...)``, as the demo prints it."""
    agg = report.aggregates()["non_live_ast"]
    cats = ", ".join(f"{c} {s.text()}" for c, s in report.by_category().items())
    return f"non-live AST {agg.text()} points ({cats}); malformed {report.malformed()}"
