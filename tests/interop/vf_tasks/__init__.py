"""Small verifiers v1 tasksets the verifiers interop tests train on, one per module (verifiers'
loaders take a module exporting its Taskset, and Env, subclasses in ``__all__``)."""
