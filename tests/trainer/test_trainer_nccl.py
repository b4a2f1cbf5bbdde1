"""The trainer's own NCCL calls (``atroposlib.utils.nccl``, ctypes) as far as a machine without a GPU
goes: where torch is a CUDA build (it brings libnccl: the GPU machine's torch 2.11+cu130, which installs
and runs here without a driver) the library loads, mints unique ids in vLLM's encoding, and joining a
communicator without a GPU fails with one line, within the deadline. On torch's CPU build (the suite's)
there is no NCCL and the tests skip, saying so. The broadcast itself needs two GPUs:
``bench/gpu_check.py``'s transfer part."""

from __future__ import annotations

import base64
import time

import pytest
import torch

from atroposlib.errors import WeightTransferError
from example_trainer.transfer_group import NcclGroup


@pytest.fixture(scope="module")
def nccl():
    from atroposlib.utils.nccl import NcclLibrary

    try:
        return NcclLibrary()
    except WeightTransferError as e:
        pytest.skip(f"no NCCL library here ({e}); torch {torch.__version__}")


# the fields of vLLM's NCCLWeightTransferInitInfo (vllm/distributed/weight_transfer/nccl_common.py,
# vLLM 0.32): anything else is refused by the server
VLLM_NCCL_INIT_FIELDS = {
    "master_address",
    "master_port",
    "rank_offset",
    "world_size",
    "nccl_unique_id_b64",
    "packed",
    "packed_buffer_size_bytes",
    "packed_num_buffers",
}


def test_the_library_mints_unique_ids_in_vllms_encoding(nccl):
    from atroposlib.utils.nccl import nccl_dtype

    assert nccl.version() >= 21000  # 2.10+: bfloat16 is type 9
    a, b = nccl.unique_id(), nccl.unique_id()
    assert len(a) == 128 and a != b
    group = NcclGroup(torch.device("cuda", 0), library=nccl)
    info = group.init_info(1, 2, 30)
    assert set(info) <= VLLM_NCCL_INIT_FIELDS
    uid = base64.b64decode(info["nccl_unique_id_b64"], validate=True)  # standard, not URL-safe
    assert len(uid) == 128 and info["packed"] is False
    assert (info["rank_offset"], info["world_size"]) == (1, 2)
    assert nccl_dtype(torch.bfloat16) == 9 and nccl_dtype(torch.float32) == 7


def test_joining_without_a_gpu_fails_with_one_line(nccl):
    if torch.cuda.is_available():
        pytest.skip("a GPU is here: joining would wait for a peer")
    group = NcclGroup(torch.device("cuda", 0), library=nccl)
    t0 = time.monotonic()
    with pytest.raises(WeightTransferError) as err:
        group.connect(2, 20, lambda: None)
    assert "\n" not in str(err.value) and time.monotonic() - t0 < 20
    assert "NVIDIA driver" in str(err.value) or "CUDA" in str(err.value), str(err.value)


def test_the_nccl_backend_needs_the_trainer_on_a_gpu():
    with pytest.raises(WeightTransferError, match="needs the trainer on a CUDA device, not cpu"):
        NcclGroup(torch.device("cpu"))
