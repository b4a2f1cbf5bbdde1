"""Fixtures of the inference-client tests: the env tests' tiny tokenizer and fake inference server."""

from tests.envs.conftest import fake_server, tok_dir

__all__ = ["fake_server", "tok_dir"]
