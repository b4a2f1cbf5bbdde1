"""The trajectory API: server (``create_app``), stores, packing, and the typed client."""
