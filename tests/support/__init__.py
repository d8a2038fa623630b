"""Test support shared across the suite: the fake model server (a real HTTP server)."""

from .fake_model_server import FakeModelServer, FunctionCall, RecordedRequest, Reply

__all__ = ["FakeModelServer", "FunctionCall", "RecordedRequest", "Reply"]
