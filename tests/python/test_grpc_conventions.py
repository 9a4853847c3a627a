"""The gRPC conventions of DESIGN.md, against a real hypertuned: the
standard health service (grpc.health.v1) answers SERVING without a token,
and server reflection lists and describes the API, so that generic clients
(grpcurl, load balancers, Kubernetes probes) need no proto file. The
messages are written and read as raw protobuf bytes: Debian's python3-grpcio
ships neither grpc_health nor grpc_reflection."""

from __future__ import annotations

import grpc


def _raw(channel: grpc.Channel, method: str):
    return channel.unary_unary(method, request_serializer=None, response_deserializer=None)


def _field(tag: int, payload: bytes) -> bytes:
    """A length-delimited field (wire type 2) of fewer than 128 bytes."""
    assert len(payload) < 128
    return bytes([tag << 3 | 2, len(payload)]) + payload


def test_health_service_says_serving(server) -> None:
    with grpc.insecure_channel(server.address) as channel:
        # HealthCheckRequest{service: ""} is empty; the answer's field 1 is
        # the status, SERVING = 1.
        answer = _raw(channel, "/grpc.health.v1.Health/Check")(b"", timeout=10)
        assert answer == b"\x08\x01"
        # A service name it does not know: NOT_FOUND, as the protocol says.
        try:
            _raw(channel, "/grpc.health.v1.Health/Check")(_field(1, b"no.such.Service"), timeout=10)
        except grpc.RpcError as error:
            assert error.code() == grpc.StatusCode.NOT_FOUND
        else:
            raise AssertionError("an unknown service's health was answered")


def test_reflection_lists_and_describes_the_api(server) -> None:
    with grpc.insecure_channel(server.address) as channel:
        info = channel.stream_stream(
            "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
            request_serializer=None,
            response_deserializer=None,
        )
        # ServerReflectionRequest: list_services (field 7), then
        # file_containing_symbol (field 4).
        requests = [_field(7, b""), _field(4, b"hypertune.v1.HyperTune")]
        listed, described = list(info(iter(requests), timeout=10))
        assert b"hypertune.v1.HyperTune" in listed
        assert b"grpc.health.v1.Health" in listed
        # The file's descriptor names the service's methods.
        for method in (b"CreateStudy", b"SuggestTrials", b"CompleteTrial"):
            assert method in described
