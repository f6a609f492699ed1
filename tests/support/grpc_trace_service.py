"""A gRPC OTLP ``TraceService`` served on a free port of 127.0.0.1, for export tests."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent import futures
from contextlib import contextmanager
from typing import Any


@contextmanager
def serving(service: Any, options: list[tuple[str, Any]] | None = None
            ) -> Iterator[tuple[str, Any]]:
    """``service`` (an object with the generated service's ``Export``) served by gRPC with
    the server ``options``: its address and the server, which is stopped on leaving."""
    import grpc
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2_grpc import (
        add_TraceServiceServicer_to_server,
    )

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2), options=options or [])
    add_TraceServiceServicer_to_server(service, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"127.0.0.1:{port}", server
    finally:
        server.stop(grace=None).wait(60)
