"""The generated messages and gRPC stub of proto/hypertune.proto.

The build generates them (protoc and grpc_python_plugin) into the package's
``v1`` folder of the build tree (build/python/hypertune/v1); they are never
kept in the source tree, so that the proto stays the one definition.
"""

try:
    from hypertune.v1 import hypertune_pb2 as pb
    from hypertune.v1 import hypertune_pb2_grpc as pb_grpc
except ImportError as err:  # pragma: no cover - depends on how it is run
    raise ImportError(
        "hypertune: the generated gRPC stubs (hypertune.v1) are missing. They are "
        "made by the build: run `make build` and use the package from build/python "
        "(PYTHONPATH=build/python), or install it with `make install`."
    ) from err



def objective_metrics(spec, roles=()) -> list:
    """The MetricSpecs a study optimizes: those whose role is OBJECTIVE in
    ``roles`` (the study's ``metric_roles``, as the server resolves them).
    From a server that predates metric_roles (``roles`` empty): those with
    role OBJECTIVE, or, where no metric sets a role, the first metric."""
    metrics = list(spec.metrics) if spec is not None else []
    if len(roles) == len(metrics) and metrics:
        return [m for m, role in zip(metrics, roles) if role == pb.MetricSpec.OBJECTIVE]
    if any(m.role != pb.MetricSpec.ROLE_UNSPECIFIED for m in metrics):
        return [m for m in metrics if m.role == pb.MetricSpec.OBJECTIVE]
    return metrics[:1]


__all__ = ["objective_metrics", "pb", "pb_grpc"]
