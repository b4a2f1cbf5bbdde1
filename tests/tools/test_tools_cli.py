"""The tools' command lines as real subprocesses: offline from JSONL and against a real run-api."""

from __future__ import annotations

import json
import socket

import pytest
from tools_helpers import run_cli

from atroposlib.api.client import TrajectoryClient
from atroposlib.datagen import cli as datagen_cli
from atroposlib.type_definitions import Registration
from atroposlib.utils.net import free_port
from atroposlib.viewer.samples import sample_groups
from tests.cli_checks import one_line_error
from tests.jsonl import read_jsonl

SFT = "atroposlib.cli.sft"
DPO = "atroposlib.cli.dpo"


def assert_clean_error(proc, code, *needles):
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    for n in needles:
        assert n in proc.stderr, proc.stderr


# ---------------------------------------------------------------------------------------------
# atropos-jsonl2html
# ---------------------------------------------------------------------------------------------
def test_jsonl2html_writes_next_to_input_and_reports_counts(groups_jsonl):
    with groups_jsonl.open("a") as fh:
        fh.write("{broken\n")
    proc = run_cli("atroposlib.cli.jsonl2html", str(groups_jsonl))
    assert proc.returncode == 0, proc.stderr
    out = groups_jsonl.with_suffix(".html")
    assert "4 groups" in proc.stdout and "1 lines skipped (invalid JSON: 1)" in proc.stdout
    html = out.read_text()
    assert html.count('<details class="group"') == 4 and "&lt;script&gt;" in html


def test_jsonl2html_user_errors(tmp_path, groups_jsonl):
    assert_clean_error(
        run_cli("atroposlib.cli.jsonl2html", str(tmp_path / "nope.jsonl")), 2, "not found"
    )
    assert_clean_error(
        run_cli("atroposlib.cli.jsonl2html", str(groups_jsonl), "-o", str(groups_jsonl)),
        2,
        "overwrite the input",
    )


def test_jsonl2html_with_no_readable_group_fails_and_writes_nothing(tmp_path):
    empty, junk = tmp_path / "empty.jsonl", tmp_path / "junk.jsonl"
    empty.write_text("\n")
    junk.write_text('{"tokens": [[1]]}\n{broken\n')
    line = one_line_error(run_cli("atroposlib.cli.jsonl2html", str(empty)), 1)
    assert (
        line
        == f"atropos-jsonl2html: error: no readable group in {empty} (the file has no lines); nothing written"
    )
    line = one_line_error(run_cli("atroposlib.cli.jsonl2html", str(junk)), 1)
    assert line == (
        f"atropos-jsonl2html: error: no readable group in {junk}, 2 lines skipped "
        "(not a scored group: 1, invalid JSON: 1); nothing written"
    )
    kept = tmp_path / "kept.html"
    kept.write_text("an earlier report")
    one_line_error(run_cli("atroposlib.cli.jsonl2html", str(junk), "-o", str(kept)), 1)
    assert kept.read_text() == "an earlier report"
    one_line_error(
        run_cli("atroposlib.cli.jsonl2html", str(junk), "-o", str(tmp_path / "new" / "r.html")), 1
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.jsonl", "junk.jsonl", "kept.html"]


# ---------------------------------------------------------------------------------------------
# offline SFT / DPO
# ---------------------------------------------------------------------------------------------
def test_sft_offline_prefix_completion_with_local_tokenizer(tmp_path, groups_jsonl, tokenizer_dir):
    out, summary = tmp_path / "sft.jsonl", tmp_path / "summary.json"
    proc = run_cli(
        SFT,
        str(out),
        "--input",
        str(groups_jsonl),
        "--tokenizer",
        str(tokenizer_dir),
        "--summary-json",
        str(summary),
    )
    assert proc.returncode == 0, proc.stderr
    recs = read_jsonl(out)
    groups = sample_groups()
    positives = sum(min(3, sum(s > 0 for s in g["scores"])) for g in groups)
    assert len(recs) == positives and all(
        set(r) == {"prefix", "completion", "score", "segments"} for r in recs
    )
    assert recs[0]["prefix"].endswith("What is 7 + 5?<|im_end|>\n<|im_start|>assistant\n")
    assert recs[0]["completion"] == "12<|im_end|>" and recs[0]["score"] == 1.0
    assert all(r["score"] > 0 for r in recs)
    s = json.loads(summary.read_text())
    assert s["groups_read"] == 4 and s["records_written"] == positives
    assert s["sequences_rejected_by_rule"] == {
        "score <= 0 (see --allow-negative-scores)": 16 - positives
    }
    assert "groups read: 4" in proc.stdout and "dropped" in proc.stdout


def test_sft_without_a_tokenizer_needs_no_hub_and_says_what_it_wrote(tmp_path, groups_jsonl):
    """No --tokenizer and no hub: message records, said once; the summary and the progress count
    what the input held, so a run that writes fewer records than asked reads as finished."""
    out = tmp_path / "sft.jsonl"
    proc = run_cli(SFT, str(out), "--input", str(groups_jsonl), env_extra={"HF_HUB_OFFLINE": "1"})
    assert proc.returncode == 0, proc.stderr
    recs = read_jsonl(out)
    assert recs and all(set(r) == {"messages", "score"} for r in recs)
    assert proc.stderr.count("no --tokenizer: writing the groups' messages") == 1, proc.stderr
    assert "Grabbing SFT data: 4/4 groups" in proc.stderr, proc.stderr  # not "n/100"
    assert f"records written: {len(recs)} of the 100 asked for" in proc.stdout, proc.stdout
    assert "rejected" not in proc.stdout, proc.stdout
    stopped = [line for line in proc.stdout.splitlines() if line.startswith("stopped:")]
    assert stopped == [
        f"stopped: input exhausted (every group read): {len(recs)} of the 100 records asked for "
        "passed the rules"
    ], proc.stdout


def test_sft_offline_messages_stops_at_target_and_protects_output(tmp_path, groups_jsonl):
    out = tmp_path / "sft.jsonl"
    args = [
        str(out),
        "--input",
        str(groups_jsonl),
        "--save-messages",
        "--num-seqs-to-save",
        "3",
        "--allow-negative-scores",
        "--save-top-n-per-group",
        "2",
    ]
    proc = run_cli(SFT, *args)
    assert proc.returncode == 0, proc.stderr
    recs = read_jsonl(out)
    assert len(recs) == 3 and all(set(r) == {"messages", "score"} for r in recs)
    assert recs[0]["messages"][-1] == {"role": "assistant", "content": "12"}
    assert "stopped: 3 seqs saved" in proc.stdout
    before = out.read_text()
    assert_clean_error(run_cli(SFT, *args), 2, "already exists", "--append-to-previous")
    assert out.read_text() == before
    proc = run_cli(SFT, *args, "--append-to-previous")
    assert proc.returncode == 0 and len(read_jsonl(out)) == 6


def test_dpo_offline_pairs(tmp_path, groups_jsonl, tokenizer_dir):
    out = tmp_path / "dpo.jsonl"
    proc = run_cli(
        DPO,
        str(out),
        "--input",
        str(groups_jsonl),
        "--tokenizer",
        str(tokenizer_dir),
        "--save-n-pairs-per-group",
        "1",
    )
    assert proc.returncode == 0, proc.stderr
    recs = read_jsonl(out)
    assert len(recs) == 4
    assert all(
        set(r) == {"prefix", "pos", "neg", "score", "neg_score", "pos_segments", "neg_segments"}
        for r in recs
    )
    assert all(r["score"] - r["neg_score"] > 0.5 for r in recs)
    assert recs[0]["pos"] == "12<|im_end|>" and recs[0]["neg"] == "13<|im_end|>"


def test_datagen_user_errors(tmp_path, groups_jsonl, capsys):
    out = str(tmp_path / "o.jsonl")
    assert_clean_error(
        run_cli(SFT, out, "--input", str(tmp_path / "none.jsonl"), "--save-messages"),
        2,
        "--input file not found",
    )
    # the same entry point in-process (faster): one line on stderr, a non-zero status
    cases = [
        (
            "sft",
            ["--input", str(groups_jsonl), "--tokenizer", str(tmp_path / "tok")],
            2,
            "tokenizer directory not found",
        ),
        (
            "dpo",
            ["--input", str(groups_jsonl), "--save-messages", "--reset"],
            2,
            "not to --input files",
        ),
        (
            "sft",
            ["--input", str(groups_jsonl), "--save-messages", "--save-top-n-per-group", "-1"],
            2,
            "--save-top-n-per-group: Input should be greater than or equal to 0 (got -1)",
        ),
    ]
    for kind, args, code, needle in cases:
        assert datagen_cli.run(kind, [out, *args]) == code
        err = capsys.readouterr().err
        assert needle in err and len(err.strip().splitlines()) == 1, err
    for flag, value in [
        ("--num-seqs-to-save", "0"),
        ("--group-size", "-2"),
        ("--idle-timeout", "-1"),
        ("--poll-interval", "nan"),
    ]:  # numbers are checked while the flags are read: argparse's error, in one line
        with pytest.raises(SystemExit) as exc:
            datagen_cli.run("sft", [out, "--input", str(groups_jsonl), flag, value])
        err = capsys.readouterr().err
        assert exc.value.code == 2 and len(err.strip().splitlines()) == 1, err
        assert err.startswith(f"atropos-sft-gen: error: argument {flag}: must be"), err
    assert not (tmp_path / "o.jsonl").exists()


@pytest.mark.parametrize("module", [SFT, DPO])
@pytest.mark.parametrize("url", ["localhost:8000", "http://", "http://127.0.0.1:99999"])
def test_datagen_api_url_follows_the_one_url_rule(tmp_path, module, url):
    proc = run_cli(module, str(tmp_path / "o.jsonl"), "--api-url", url, "--save-messages")
    line = one_line_error(proc, 2, f"--api-url {url!r} ")
    assert line.startswith(f"atropos-{module.rsplit('.', 1)[1]}-gen: error:")
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------------------------------------
# against a real run-api
# ---------------------------------------------------------------------------------------------
def api_args(api, *extra):
    return [
        "--api-url",
        api.url,
        "--api-token",
        "tok",
        "--group-size",
        "4",
        "--tasks-per-step",
        "1",
        "--idle-timeout",
        "1.5",
        "--poll-interval",
        "0.1",
        "--no-progress",
        "--save-messages",
        *extra,
    ]


def queued_api(run_api):
    api = run_api("--store", "memory", "--api-token", "tok")
    client = TrajectoryClient(api.url, token="tok")
    for g in sample_groups():
        client.post_scored_data(g)
    return api, client


def test_sft_as_the_trainer_of_a_fresh_api(tmp_path, run_api):
    api, client = queued_api(run_api)
    out = tmp_path / "sft.jsonl"
    proc = run_cli(SFT, str(out), *api_args(api))
    assert proc.returncode == 0, proc.stderr
    assert "registered as the trainer (batch_size=4)" in proc.stderr
    positives = sum(min(3, sum(s > 0 for s in g["scores"])) for g in sample_groups())
    assert len(read_jsonl(out)) == positives == 9
    st = client.status()
    assert st.queue_size == 0 and st.current_step == 4  # four batches pulled and acknowledged
    assert "groups read: 4" in proc.stdout


def test_refuses_when_a_trainer_is_registered_and_never_resets(tmp_path, run_api):
    api, client = queued_api(run_api)
    client.register(Registration(batch_size=8, max_token_len=4096))
    out = tmp_path / "dpo.jsonl"
    proc = run_cli(DPO, str(out), *api_args(api))
    assert_clean_error(proc, 3, "already has a trainer registered (batch_size=8)", "--consume")
    assert not out.exists()
    st = client.status()
    assert (st.queue_size, st.current_step) == (4, 0) and client.info().batch_size == 8
    assert len(client.peek(10).groups) == 4  # nothing consumed, nothing reset
    # --consume: pull the registered run's batches (batch_size 8 = two groups) without resetting
    proc = run_cli(DPO, str(out), *api_args(api, "--consume"))
    assert proc.returncode == 0, proc.stderr
    assert "consuming batches of the registered run" in proc.stderr
    assert client.info().batch_size == 8 and client.status().queue_size == 0
    assert len(read_jsonl(out)) >= 4


def test_reset_only_when_asked(tmp_path, run_api):
    api, client = queued_api(run_api)
    client.register(Registration(batch_size=8, max_token_len=4096))
    out = tmp_path / "sft.jsonl"
    proc = run_cli(SFT, str(out), *api_args(api, "--reset"))
    assert proc.returncode == 0, proc.stderr
    assert (
        "reset the API (--reset)" in proc.stderr
        and "registered as the trainer (batch_size=4)" in proc.stderr
    )
    assert read_jsonl(out) == []  # the queue was wiped before we registered
    assert client.info().batch_size == 4 and client.status().queue_size == 0


def test_unreachable_api_is_a_one_line_error(tmp_path):
    from atroposlib.utils.net import free_port

    proc = run_cli(
        SFT,
        str(tmp_path / "o.jsonl"),
        "--api-url",
        f"http://127.0.0.1:{free_port()}",
        "--save-messages",
        "--no-progress",
        "--wait-for-api",  # the default waits 60 s for an API that is starting
        "2",
    )
    assert_clean_error(proc, 1, "cannot reach the API")
    assert not (tmp_path / "o.jsonl").exists()


def test_dry_run_registers_nothing(tmp_path, run_api):
    api, client = queued_api(run_api)
    out = tmp_path / "o.jsonl"
    proc = run_cli(SFT, str(out), *api_args(api, "--dry-run"))
    assert proc.returncode == 0, proc.stderr
    assert "reachable: no trainer registered, step 0, 4 groups queued" in proc.stdout
    assert client.info().batch_size == -1 and client.status().queue_size == 4 and not out.exists()


def test_view_run_is_local_only_by_default_and_reports_a_missing_file(tmp_path):
    from atroposlib.cli.view_run import build_parser

    args = build_parser().parse_args([])
    assert (args.host, args.share, args.api_url, args.file) == ("127.0.0.1", False, None, None)
    assert build_parser().parse_args(["--share"]).share is True
    proc = run_cli("atroposlib.cli.view_run", "--file", str(tmp_path / "missing.jsonl"))
    assert_clean_error(proc, 2, "--file not found")


def test_view_run_rejects_a_bad_port_before_serving(tmp_path):
    groups = tmp_path / "g.jsonl"
    groups.write_text("")
    proc = run_cli("atroposlib.cli.view_run", "--file", str(groups), "--port", "99999")
    assert_clean_error(proc, 2, "port must be between 1 and 65535")


def test_view_run_against_an_api_that_is_not_running_says_so_and_exits():
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    proc = run_cli("atroposlib.cli.view_run", "--api-url", url, "--port", str(free_port()))
    assert proc.returncode == 1, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith(f"view-run: error: cannot reach the trajectory API at {url}"), line
    assert "--file" in line and "serving on" not in proc.stdout


def test_view_run_port_in_use_is_one_line_before_serving(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = run_cli("atroposlib.cli.view_run", "--demo", "--port", str(port))
    line = one_line_error(proc, 2, f"cannot listen on 127.0.0.1:{port}", "pick another --port")
    assert line.startswith("view-run: error:") and "serving on" not in proc.stdout
    assert "GRADIO_SERVER_PORT" not in proc.stdout + proc.stderr


@pytest.mark.parametrize("url", ["localhost:8000", "ftp://host", "http://:80"])
def test_view_run_api_url_follows_the_one_url_rule(url):
    proc = run_cli("atroposlib.cli.view_run", "--api-url", url)
    line = one_line_error(proc, 2, f"--api-url {url!r} ")
    assert line.startswith("view-run: error:") and proc.stdout == ""


def test_view_run_start_prints_one_line_and_no_gradio_hints(tmp_path):
    import os
    import signal
    import subprocess
    import sys

    import httpx

    from atroposlib.utils.net import free_port

    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "atroposlib.cli.view_run", "--demo", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONFAULTHANDLER="1"),  # SIGABRT dumps every thread's stack
    )
    try:
        first = proc.stdout.readline()
        assert first.startswith("view-run: reading built-in example groups; serving on"), first
        assert httpx.get(f"http://127.0.0.1:{port}/", timeout=30).status_code == 200
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            out, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:  # say where it is stuck, not only that it is
            proc.send_signal(signal.SIGABRT)
            out, err = proc.communicate(timeout=30)
            blocked = signal.pthread_sigmask(signal.SIG_BLOCK, [])  # inherited by the child
            pytest.fail(
                f"view-run still running 60 s after SIGINT (this process: SIGINT handler "
                f"{signal.getsignal(signal.SIGINT)}, blocked {blocked}); its threads:\n{err[-6000:]}"
            )
    assert proc.returncode == 0, err
    assert out.strip() == "" and "share=True" not in err and "Running on" not in err, (out, err)


def test_sft_gen_on_a_file_with_no_readable_group_fails_and_leaves_no_file(tmp_path):
    junk = tmp_path / "junk.jsonl"
    junk.write_text('not json\n{"tokens": 3}\n')
    out = tmp_path / "sft.jsonl"
    proc = run_cli(SFT, str(out), "--input", str(junk), "--save-messages")
    assert_clean_error(proc, 1, "no readable scored group", "2 lines unreadable")
    assert proc.stderr.strip().splitlines()[-1].startswith("atropos-sft-gen: error: ")
    assert not out.exists()
