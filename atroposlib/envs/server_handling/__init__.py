"""Inference server handling: configs, backends per server_type, ServerManager, ManagedServer."""
