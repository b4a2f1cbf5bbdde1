"""The GPU check's transfer part: ``--weight-refresh nccl`` on real GPUs, trainer on ``cuda:0``, the
receiving worker on ``cuda:1``.

vLLM is not on the GPU machine, so the worker is ``atroposlib.testing.fake_weight_transfer --device
cuda:1``: vLLM's weight-transfer HTTP routes and its ``nccl`` backend's receiving end (the unique-id
rendezvous, the warm-up all-reduce, one broadcast per tensor into GPU memory). The trainer side is the
trainer's own code (``TransferRefresh``, ``NcclGroup``): a Qwen2.5 model of the given shape (random
weights, fp32 masters on ``cuda:0``) is published in bf16 ``--repeats`` times. Prints one JSON line:
the set-up time, each transfer's seconds, MiB, GB/s, and whether the worker's checksum of what it
received equals the trainer's. Needs two GPUs (NCCL allows one rank per GPU).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", required=True, help="the stand-in worker's base URL")
    p.add_argument("--shape", default="qwen2.5-0.5b")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--timeout-s", type=float, default=120.0)
    a = p.parse_args()

    import httpx
    import torch

    from bench.gpu_train_check import build_model
    from example_trainer.checkpoint import publishable
    from example_trainer.config import TrainingConfig
    from example_trainer.refresh_modes import make_weight_refresh

    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)
    model = build_model(a.shape, device, 4096)
    expected = sum(float(t.to(torch.bfloat16).double().sum()) for t in publishable(model).values())
    with tempfile.TemporaryDirectory() as tmp:
        cfg = TrainingConfig(
            model_name=a.shape,
            save_path=tmp,
            weight_refresh="nccl",
            transfer_backend="nccl",
            transfer_fallback="fail",
            inference_urls=[a.url],
            transfer_timeout_s=a.timeout_s,
        )
        refresher = make_weight_refresh(cfg, publish_dtype=torch.bfloat16, device=device)
        t0 = time.perf_counter()
        try:
            refresher.start(tmp)
            setup_s = time.perf_counter() - t0
            rows = [refresher.refresh(step, model, None) for step in range(1, a.repeats + 1)]
        finally:
            refresher.close()
    checksum = httpx.get(a.url + "/state", timeout=30).json()["checksum"]
    seconds = [r["transfer_s"] for r in rows]
    mib = rows[-1]["transfer_mib"]
    print(
        json.dumps(
            {
                "shape": a.shape,
                "params": sum(p.numel() for p in model.parameters()),
                "setup_s": round(setup_s, 3),
                "transfer_s": [round(s, 4) for s in seconds],
                "mib": mib,
                "gb_per_s": round(mib * 2**20 / min(seconds) / 1e9, 2),
                "checksum_ok": abs(checksum - a.repeats * expected)
                <= 1e-6 * max(1.0, abs(a.repeats * expected)),
                "weights_version": rows[-1]["weights_version"],
            }
        ),
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
