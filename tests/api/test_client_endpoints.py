"""The sync and async trajectory clients expose the same typed endpoints, one per request builder."""

from __future__ import annotations

import inspect

from atroposlib.api.client import AsyncTrajectoryClient, TrajectoryClient, _Endpoints


def _endpoints() -> list[str]:
    return sorted(n for n, _ in inspect.getmembers(_Endpoints) if not n.startswith("_"))


def test_each_request_builder_is_a_method_of_both_clients() -> None:
    names = _endpoints()
    assert "get_batch" in names and "post_scored_data" in names
    for name in names:
        sync, async_ = getattr(TrajectoryClient, name), getattr(AsyncTrajectoryClient, name)
        assert not inspect.iscoroutinefunction(sync), name
        assert inspect.iscoroutinefunction(async_), name
        builder = inspect.signature(getattr(_Endpoints, name))
        for method in (sync, async_):
            sig = inspect.signature(method)
            params = list(sig.parameters.values())[1:]  # without self
            assert [(p.name, p.default) for p in params] == [
                (p.name, p.default) for p in builder.parameters.values()
            ], f"{method.__qualname__} does not take {name}'s parameters"
        # the answer's type is the builder's `_Request[T]`'s T, the same for both clients
        ret = inspect.signature(sync).return_annotation
        assert ret == inspect.signature(async_).return_annotation, name
        assert builder.return_annotation == f"_Request[{ret}]", name


def test_no_client_method_without_a_builder() -> None:
    names = set(_endpoints())
    extra = {"close", "aclose"}
    for cls in (TrajectoryClient, AsyncTrajectoryClient):
        public = {n for n, v in vars(cls).items() if callable(v) and not n.startswith("_")} - extra
        assert public == names, cls.__name__
