"""The streamed answer of a generation route: rows queued with a follower, then vLLM-shaped SSE.

No router of its own: ``/v1/completions`` and ``/v1/chat/completions`` answer through here when the
request says ``stream: true``. A full queue is still a 503 (raised before any byte is sent); a client
that goes away mid-stream has its rows taken out of the batch.
"""

from __future__ import annotations

import asyncio
from typing import Any, Optional

from fastapi.responses import StreamingResponse

from atroposlib.inference.sampling import RowParams
from atroposlib.inference.served import ServedModel
from atroposlib.inference.streaming import ChunkStream, Kind, RowFollower, StreamSpec, sse_events


def stream_response(
    served: ServedModel,
    kind: Kind,
    req: Any,
    prompts: list[list[int]],
    rows: list[RowParams],
    logprobs: Optional[int],
) -> StreamingResponse:
    """Queue ``rows`` and answer with their SSE stream."""
    eng = served.engine
    follower = RowFollower(asyncio.get_running_loop(), len(rows))
    job = eng.submit_job(rows, on_progress=follower)
    finished = asyncio.wrap_future(job.future)
    finished.add_done_callback(lambda f: f.cancelled() or f.exception())  # seen, not logged
    opts = req.stream_options
    spec = StreamSpec(
        kind=kind,
        model=served.name,
        prompts=prompts,
        n=req.n,
        decode=eng.loaded.decode,
        token_text=served.renderer(req.return_tokens_as_token_ids),
        stop=req.stop or [],
        logprobs=logprobs,
        return_token_ids=req.return_token_ids,
        include_usage=bool(opts and opts.include_usage),
        continuous_usage=bool(opts and opts.include_usage and opts.continuous_usage_stats),
    )
    events = sse_events(ChunkStream(spec), follower, finished, job.abort)
    return StreamingResponse(events, media_type="text/event-stream")


__all__ = ["stream_response"]
