"""Fixtures of the runtime tests: the env tests' tiny tokenizer and fake inference servers."""

from tests.envs.conftest import fake_server, slow_fake_server, tok_dir

__all__ = ["fake_server", "slow_fake_server", "tok_dir"]
