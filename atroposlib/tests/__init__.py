"""Helpers Atropos shipped for tests of env and trainer code (``atroposlib.tests.api_test_utils``).

The project's own test suite lives in the repository's ``tests/`` folder, not here."""
