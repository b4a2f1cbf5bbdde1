"""Both stores behind one interface: atomic commits, reload, payload segments, corruption, pruning."""

from __future__ import annotations

import threading

import pytest

from atroposlib.api.packing import GroupMeta
from atroposlib.api.store import MemoryStore, SqliteStore
from atroposlib.api.store import segments as segments_mod
from atroposlib.api.store.base import (
    ACKED,
    BUFFERED,
    DELIVERED,
    QUEUED,
    BatchRecord,
    GroupRow,
    Mutation,
)


def _row(seq, state=QUEUED, n=2, gid=None):
    return GroupRow(
        GroupMeta(
            seq, n, env_id=0, policy_version=1, max_len=5, nbytes=10, group_id=gid, received_at=1.0
        ),
        state,
        "env_0",
    )


@pytest.fixture(params=["sqlite", "memory"])
def store(request, tmp_path):
    s = SqliteStore(tmp_path / "d") if request.param == "sqlite" else MemoryStore()
    yield s
    s.close()


def test_commit_load_and_blobs_roundtrip(store):
    m = Mutation(
        meta={"step": 3, "registration": {"batch_size": 4}},
        envs=[{"env_id": 0, "real_name": "e_0"}],
    )
    m.new_groups = [
        (_row(1, gid="a"), store.stage(b'{"x":1}')),
        (_row(2, BUFFERED), store.stage(b'{"x":2}')),
    ]
    store.commit(m)
    store.commit(
        Mutation(
            new_groups=[(_row(3), store.stage(b'{"x":3}'))],
            states={1: DELIVERED},
            new_batch=BatchRecord("b1", 4, [1], 1.0),
        )
    )
    snap = store.load()
    assert snap.meta == {"step": 3, "registration": {"batch_size": 4}}
    assert snap.envs == [{"env_id": 0, "real_name": "e_0"}]
    assert [(r.meta.seq, r.state) for r in snap.live_groups] == [
        (1, DELIVERED),
        (2, BUFFERED),
        (3, QUEUED),
    ]
    assert snap.pending_batch.batch_id == "b1" and snap.pending_batch.seqs == [1]
    assert set(snap.group_ids) == {"a"} and snap.max_seq == 3
    store.commit(Mutation(states={2: QUEUED}, orders={2: 9}))
    snap = store.load()
    assert snap.max_order == 9 and [r.meta.order for r in snap.live_groups if r.meta.seq == 2] == [
        9
    ]
    assert store.get_blobs([3, 1]) == [b'{"x":3}', b'{"x":1}']
    assert store.batch_acked("b1") is False
    store.commit(Mutation(acked_batch="b1", states={1: ACKED}))
    assert store.batch_acked("b1") is True and store.batch_acked("zz") is None
    assert store.load().pending_batch is None
    assert [p.seq for p in store.peek(10, None, None)] == [1, 2, 3]
    assert [p.seq for p in store.peek(10, 1, None)] == [2, 3]
    store.commit(Mutation(prune_below_seq=10))
    assert [p.seq for p in store.peek(10, None, None)] == [2, 3]  # acked 1 left the history
    store.reset()
    assert store.load().live_groups == [] and store.peek(10, None, None) == []


def test_sqlite_survives_reopen(tmp_path):
    s = SqliteStore(tmp_path / "d")
    s.commit(Mutation(meta={"step": 9}, new_groups=[(_row(1), s.stage(b"[1]"))]))
    s.close()
    s2 = SqliteStore(tmp_path / "d")
    assert s2.load().meta["step"] == 9 and s2.get_blobs([1]) == [b"[1]"]
    s2.commit(Mutation(new_groups=[(_row(2), s2.stage(b"[2]"))]))
    assert s2.get_blobs([1, 2]) == [b"[1]", b"[2]"]
    s2.close()


def test_corrupt_payload_is_detected_not_served(tmp_path, caplog):
    s = SqliteStore(tmp_path / "d")
    s.commit(Mutation(new_groups=[(_row(1), s.stage(b'{"tokens":[[1,2]]}'))]))
    seg = next((tmp_path / "d" / "blobs").glob("*.seg"))
    data = bytearray(seg.read_bytes())
    data[3] ^= 0xFF
    seg.write_bytes(bytes(data))
    with pytest.raises(KeyError):
        s.get_blobs([1])
    assert "corrupt" in caplog.text
    s.close()


def test_concurrent_staging_never_overlaps(tmp_path):
    s = SqliteStore(tmp_path / "d")
    handles = {}

    def work(k):
        for i in range(20):
            payload = (f'{{"w":{k},"i":{i}}}' * (i + 1)).encode()
            handles[(k, i)] = (s.stage(payload), payload)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rows = [(_row(seq), h) for seq, (h, _) in enumerate(handles.values(), start=1)]
    s.commit(Mutation(new_groups=rows))
    assert s.get_blobs(list(range(1, len(rows) + 1))) == [p for _, p in handles.values()]
    s.close()


def test_fully_acknowledged_segments_are_deleted(tmp_path, monkeypatch):
    monkeypatch.setattr(segments_mod, "SEGMENT_BYTES", 100)
    s = SqliteStore(tmp_path / "d")
    for seq in range(1, 7):
        s.commit(Mutation(new_groups=[(_row(seq), s.stage(b"x" * 60))]))
    blobs = tmp_path / "d" / "blobs"
    before = len(list(blobs.glob("*.seg")))
    assert before >= 3
    s.commit(Mutation(states={1: ACKED, 2: ACKED, 3: ACKED, 4: ACKED}, prune_below_seq=5))
    after = len(list(blobs.glob("*.seg")))
    assert after < before
    assert s.get_blobs([5, 6]) == [b"x" * 60] * 2
    s.close()


def test_full_synchronous_mode_works(tmp_path):
    s = SqliteStore(tmp_path / "d", synchronous="FULL")
    s.commit(Mutation(new_groups=[(_row(1), s.stage(b"[7]"))]))
    assert s.get_blobs([1]) == [b"[7]"]
    s.close()


def test_a_data_dir_is_used_by_one_server_at_a_time(tmp_path):
    from atroposlib.errors import ConfigError

    s = SqliteStore(tmp_path / "d")
    with pytest.raises(ConfigError, match="in use"):
        SqliteStore(tmp_path / "d")
    s.close()
    SqliteStore(tmp_path / "d").close()  # free again once closed


def _payloads():
    # large ones (direct I/O where the filesystem allows it) interleaved with small ones
    sizes = [70_000, 300, 150_001, 5, 4096 * 20, 65_536, 1_000_003]
    return [(b'{"p":"' + bytes([65 + i]) * n + b'"}') for i, n in enumerate(sizes)]


@pytest.mark.parametrize("direct", [True, False])
def test_large_payloads_round_trip_with_and_without_direct_io(tmp_path, monkeypatch, direct):
    from atroposlib.api.store import direct_io

    if not direct:
        monkeypatch.setattr(direct_io, "_O_DIRECT", 0)
    s = SqliteStore(tmp_path / "d")
    payloads = _payloads()
    handles = [s.stage(p) for p in payloads]
    s.commit(Mutation(new_groups=[(_row(i + 1), h) for i, h in enumerate(handles)]))
    assert s.get_blobs(list(range(1, len(payloads) + 1))) == payloads
    offsets = [h[1] for h in handles]
    assert all(
        b[1] + b[2] <= a[1] for b, a in zip(handles, handles[1:], strict=False)
    )  # no overlap
    if direct and s.segments._direct_writers.get(1) is not None:  # the filesystem took O_DIRECT
        assert all(
            o % direct_io.ALIGN == 0
            for o, p in zip(offsets, payloads, strict=True)
            if len(p) >= 65_536
        )
    s.close()
    s = SqliteStore(tmp_path / "d")  # reopened: same bytes, appends after the last payload
    assert s.get_blobs(list(range(1, len(payloads) + 1))) == payloads
    extra = s.stage(payloads[0])
    assert extra[1] >= handles[-1][1] + handles[-1][2]
    s.close()


def test_refused_direct_write_falls_back_to_buffered(tmp_path, monkeypatch):
    import errno

    def refuse(*a, **k):
        raise OSError(errno.EINVAL, "direct I/O not supported here")

    monkeypatch.setattr(segments_mod, "write_direct", refuse)
    s = SqliteStore(tmp_path / "d")
    payloads = _payloads()
    handles = [s.stage(p) for p in payloads]
    s.commit(Mutation(new_groups=[(_row(i + 1), h) for i, h in enumerate(handles)]))
    assert s.get_blobs(list(range(1, len(payloads) + 1))) == payloads
    s.close()


def test_corrupt_large_payload_is_detected(tmp_path, caplog):
    s = SqliteStore(tmp_path / "d")
    payload = b'{"tokens":[' + b"7," * 100_000 + b"7]}"
    seg_no, off, length, crc = s.stage(payload)
    s.commit(Mutation(new_groups=[(_row(1), (seg_no, off, length, crc))]))
    seg = next((tmp_path / "d" / "blobs").glob("*.seg"))
    with open(seg, "r+b") as f:
        f.seek(off + length // 2)
        f.write(b"X")
    with pytest.raises(KeyError):
        s.get_blobs([1])
    assert "corrupt" in caplog.text
    s.close()
