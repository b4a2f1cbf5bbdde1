"""Atropos's path for its test helpers (``atroposlib.tests.api_test_utils``), re-exported from
``atroposlib.testing``, the one home of the test doubles.

The project's own test suite lives in the repository's ``tests/`` folder, not here."""
