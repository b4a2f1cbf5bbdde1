"""Atropos import path of ``launch_api_for_testing``: re-exports ``atroposlib.testing.api_server``."""

from atroposlib.testing.api_server import check_api_running, launch_api_for_testing

__all__ = ["check_api_running", "launch_api_for_testing"]
