"""atroposlib's grouped LoRA ops against the CPU build's own, inside vLLM's environment: the same
numbers for prefill-sized and decode-sized batches, one adapter or several, and the ``-1`` index (no
adapter) mapped to the slot vLLM's ops pick; and the extension installs them on import."""

from __future__ import annotations

import os
import subprocess

from atroposlib.inference.vllm_plugin import extension_dir

CHECK = r"""
import torch
from vllm.lora.ops.torch_ops import lora_ops
from vllm.lora.punica_wrapper import punica_cpu

originals = {n: getattr(lora_ops, n) for n in ("bgmv_shrink", "bgmv_expand", "bgmv_expand_slice")}
import atropos_vllm_ext  # installs the fixes, as --worker-extension-cls does
assert atropos_vllm_ext.GROUPED_CPU_LORA is True
for n, f in originals.items():
    assert getattr(lora_ops, n) is not f and getattr(punica_cpu, n) is getattr(lora_ops, n), n

torch.manual_seed(0)
worst = 0.0
cases = 0
for tokens in (1, 7, 300):
    for indices in ("one", "mixed", "none"):
        n_slots, rank, d_in, d_out = 3, 8, 48, 40
        if indices == "one":
            idx = torch.full((tokens,), 1)
        elif indices == "mixed":
            idx = torch.randint(-1, n_slots, (tokens,))
        else:
            idx = torch.full((tokens,), -1)
        x = torch.randn(tokens, d_in)
        a = torch.randn(n_slots, 1, rank, d_in)
        b = torch.randn(n_slots, 1, d_out, rank)
        h = torch.randn(tokens, rank)
        for name, args, out_shape in (
            ("bgmv_shrink", (x, a), (tokens, rank)),
            ("bgmv_expand", (h, b), (tokens, d_out)),
            ("bgmv_expand_slice", (h, b), (tokens, 2 * d_out)),
        ):
            for add in (False, True):
                if name == "bgmv_shrink" and add:
                    continue
                base = torch.randn(out_shape)
                mine, theirs = base.clone(), base.clone()
                extra = {"bgmv_shrink": (0.5,), "bgmv_expand": (add,),
                         "bgmv_expand_slice": (d_out, d_out, add)}[name]
                getattr(lora_ops, name)(*args, mine, idx, *extra)
                originals[name](*args, theirs, idx, *extra)
                worst = max(worst, float((mine - theirs).abs().max()))
                cases += 1
print("cases", cases, "worst", worst)
assert cases == 45 and worst < 1e-4, worst
"""


def test_grouped_lora_ops_match_vllms_own(vllm_python):
    done = subprocess.run(
        [vllm_python, "-c", CHECK],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(extension_dir()), "VLLM_TARGET_DEVICE": "cpu"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "cases 45" in done.stdout
