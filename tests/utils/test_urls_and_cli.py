"""The one base-URL rule and the console scripts' argument helpers (one-line usage errors, numbers)."""

from __future__ import annotations

import pytest

from atroposlib.utils.cli import (
    CliParser,
    check_log_level,
    non_negative_float,
    port_number,
    positive_int,
)
from atroposlib.utils.net import cannot_listen, listen_problem, listening_socket
from atroposlib.utils.urls import base_url_error, base_url_problem, check_base_url


@pytest.mark.parametrize(
    "url",
    ["http://localhost:8000", "https://api.example.com/v1", "HTTP://H:1", "http://[::1]:9/v1"],
)
def test_good_base_urls(url):
    assert base_url_problem(url) is None and check_base_url(f" {url} ") == url


@pytest.mark.parametrize(
    "url, problem",
    [
        (
            "localhost:8000",
            "must start with http:// or https:// (did you mean 'http://localhost:8000'?)",
        ),
        ("127.0.0.1:8000/v1", "(did you mean 'http://127.0.0.1:8000/v1'?)"),
        ("ftp://host", "must start with http:// or https://"),
        ("http:/host", "must start with http:// or https://"),
        ("http://", "has no host name"),
        ("http://:80", "has no host name"),
        ("http://h:0", "has an invalid port"),
        ("http://h:99999", "has an invalid port"),
        ("http://h:port", "has an invalid port"),
        ("http://local host", "contains a space"),
    ],
)
def test_bad_base_urls_say_why(url, problem):
    assert problem in (base_url_problem(url) or "")
    assert (base_url_error(url, "--api-url") or "").startswith(f"--api-url {url!r} ")
    with pytest.raises(ValueError):
        check_base_url(url)
    if url == "http:/host":
        assert "did you mean" not in (base_url_problem(url) or "")


def test_parser_usage_error_is_one_line(capsys):
    p = CliParser(prog="tool")
    p.add_argument("--n", type=positive_int)
    p.add_argument("--port", type=port_number)
    p.add_argument("--wait", type=non_negative_float)
    for argv, message in [
        (["--n", "0"], "tool: error: argument --n: must be at least 1, got 0"),
        (["--n", "x"], "tool: error: argument --n: must be an integer, got 'x'"),
        (["--port", "70000"], "tool: error: argument --port: port must be between 1 and 65535"),
        (["--wait", "inf"], "tool: error: argument --wait: must be 0 or more, got 'inf'"),
        (["--wait", "nan"], "tool: error: argument --wait: must be 0 or more, got 'nan'"),
        (["--bogus"], "tool: error: unrecognized arguments: --bogus"),
    ]:
        with pytest.raises(SystemExit) as exc:
            p.parse_args(argv)
        err = capsys.readouterr().err
        assert exc.value.code == 2 and err.startswith(message) and err.count("\n") == 1, err
    assert p.parse_args(["--n", "3", "--wait", "0"]).wait == 0.0


def test_log_levels():
    assert check_log_level(" INFO ") == "info" and check_log_level("trace") == "trace"
    with pytest.raises(ValueError, match="must be one of critical, error, warning"):
        check_log_level("loud")


def test_a_taken_port_and_a_foreign_host_are_named():
    with listening_socket("127.0.0.1", 0) as sock:
        sock.listen()
        port = sock.getsockname()[1]
        problem = listen_problem("127.0.0.1", port)
    assert problem is not None and problem.startswith(f"cannot listen on 127.0.0.1:{port} (")
    assert problem.endswith("is another server using it? pick another --port")
    assert listen_problem("127.0.0.1", port) is None  # free again once released
    with pytest.raises(OSError) as e:
        listening_socket("192.0.2.1", 0)  # TEST-NET-1: never this machine's address
    assert "is --host a name or address of this machine?" in cannot_listen("192.0.2.1", 1, e.value)
