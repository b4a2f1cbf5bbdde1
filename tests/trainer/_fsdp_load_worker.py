"""One rank of ``test_trainer_fsdp_load.py`` (started with torchrun's environment variables): set the
policy up for FSDP2 the way the trainer does, ``sharded`` (meta device, rank 0 reads and shares the
weights) or ``whole`` (every rank loads the whole model, then shards it: the trainer before), and print
one JSON line: how much this rank's peak memory rose during the set-up, the bytes of its shard, and
whether the sharded model holds exactly the weights of the folder.
"""

from __future__ import annotations

import json
import os
import resource
import sys

import torch

from example_trainer.distributed import full_model_state_dict, init_distributed, wrap_model
from example_trainer.model_setup import load_policy_for_training, parameters_on_meta


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def main(model_dir: str, mode: str) -> dict:
    torch.set_num_threads(1)
    info = init_distributed(torch.device("cpu"), timeout_s=300)
    from safetensors.torch import load_file
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    # warm-up, before the baseline: the tokenizer and the model's code imported and run once (on
    # the meta device), so the rise below is the set-up's memory, not the libraries'
    AutoTokenizer.from_pretrained(model_dir)
    with parameters_on_meta():
        AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(model_dir))
    before = _peak_mib()
    model, _, pending = load_policy_for_training(
        model_dir,
        torch.float32,
        torch.device("cpu"),
        info,
        sharded=mode == "sharded",
        probe_head=True,
    )
    model = wrap_model(model, info, "fsdp", torch.device("cpu"))
    pending.load_into(model, torch.device("cpu"))
    rose = _peak_mib() - before
    shard = sum(p.to_local().numel() * p.element_size() for p in model.parameters())
    out = {"rank": info.rank, "peak_rise_mib": rose, "shard_mib": shard / 2**20}
    full = full_model_state_dict(model)  # every rank joins; rank 0 gets the weights
    ids = torch.tensor([[3, 17, 99, 250, 7]])
    with torch.no_grad():
        logits = model(input_ids=ids).logits  # a collective forward on every rank
    if info.is_main:
        want = load_file(os.path.join(model_dir, "model.safetensors"))
        out["same_weights"] = sorted(want) == sorted(full) and all(
            torch.equal(full[k], want[k]) for k in want
        )
        out["logits"] = logits[0, -1, :5].tolist()
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2])), flush=True)
