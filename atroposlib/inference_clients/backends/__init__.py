"""One module per inference backend; ``inference_clients.registry`` maps each ``server_type`` to its class."""
