"""What the stream-memory benchmarks (watch_memory.py over gRPC,
http_stream_memory.py over HTTP) share: two owners' tokens, the server's
resident memory, and alice's study of large trials."""

from __future__ import annotations

from hypertune.v1 import hypertune_pb2 as pb

ALICE = "alice-token-0123456789"
BOB = "bob-token-0123456789"
TOKENS = f"{ALICE} alice\n{BOB} bob\n"


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def auth(token: str) -> list:
    return [("authorization", f"Bearer {token}")]


def make_study(stub, name: str, token: str) -> None:
    study = pb.Study(name=name)
    study.spec.parameters.add(name="x").double_spec.max = 1.0
    study.spec.metrics.add(name="loss", goal=pb.MetricSpec.MINIMIZE)
    stub.CreateStudy(pb.CreateStudyRequest(study=study), metadata=auth(token))


def fill(stub, name: str, trials: int, trial_kb: int, token: str) -> None:
    """Adds `trials` trials of about `trial_kb` KB each (attributes)."""
    per_attribute = 4000
    attributes = max(1, trial_kb * 1000 // per_attribute)
    for i in range(trials):
        trial = pb.Trial()
        trial.parameters.add(name="x", double_value=(i + 0.5) / trials)
        for a in range(min(attributes, 64)):
            trial.attributes[f"a{a}"] = "x" * per_attribute
        stub.CreateTrial(pb.CreateTrialRequest(study_name=name, trial=trial),
                         metadata=auth(token))
