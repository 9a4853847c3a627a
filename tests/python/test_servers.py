"""A Client given several servers, as the C++ SDK's ClientCore::MoveOn:
which server the calls move on to after an UNAVAILABLE (the pure logic,
then the retry loop on fake stubs), a list whose first server cannot be
reached, and a real standby on a throwaway PostgreSQL server: the client
follows it to the leader, and follows the lead to the former standby once
the leader is killed."""

from __future__ import annotations

from concurrent import futures
from typing import Any, Iterator

import grpc
import pytest

import hypertune
from helpers import PostgresServer, PostgresUnavailable, study_config, unique_name
from hypertune import _servers
from hypertune._proto import pb, pb_grpc
from hypertune._retry import RetryPolicy, call
from hypertuned_process import Hypertuned, free_port

A, B, C = "10.0.0.1:50051", "10.0.0.2:50051", "10.0.0.3:50051"
REFUSED = "failed to connect to all addresses; last error: UNKNOWN: ipv4:10.0.0.2:50051: refused"


# ----- Which server next (no server) -----


@pytest.mark.parametrize(
    "servers, failed, message, expected",
    [
        # A standby names a listed leader: there, at once.
        ([A, B, C], 0, f"standby: the leader is at {C}", (2, True)),
        ([A, B, C], 2, f"standby: the leader is at {A}", (0, True)),
        # The address ends at a blank or punctuation.
        ([A, B], 0, f"standby: the leader is at {B} (since 12:00)", (1, True)),
        ([A, B], 0, f"standby: the leader is at {B}; try it", (1, True)),
        # It names the server that failed: stay, after a backoff.
        ([A, B], 1, f"standby: the leader is at {B}", (1, False)),
        # A leader not in the list, no leader yet, or no answer at all: the
        # next server (wrapping around), after a backoff.
        ([A, B, C], 0, "standby: the leader is at 10.9.9.9:50051", (1, False)),
        ([A, B, C], 1, "starting, or standby with no leader yet; try again shortly", (2, False)),
        ([A, B, C], 2, REFUSED, (0, False)),
        ([A, B], 0, f"the leader is at {A[:-1]}", (1, False)),  # a prefix is not a match
        # One server: nowhere to go.
        ([A], 0, f"standby: the leader is at {B}", (0, False)),
        ([A], 0, REFUSED, (0, False)),
    ],
    ids=[
        "leader-listed",
        "leader-listed-wraps",
        "leader-then-blank",
        "leader-then-semicolon",
        "leader-is-the-failed-one",
        "leader-not-listed",
        "no-leader-yet",
        "refused-wraps",
        "leader-prefix-only",
        "one-server-standby",
        "one-server-refused",
    ],
)
def test_next_server(servers: list[str], failed: int, message: str, expected: tuple) -> None:
    assert _servers.next_server(servers, failed, message) == expected


def test_named_leader() -> None:
    assert _servers.named_leader(f"standby: the leader is at {A}") == A
    assert _servers.named_leader("starting, or standby with no leader yet; try again") is None
    assert _servers.named_leader(REFUSED) is None


def test_split() -> None:
    assert _servers.split(A) == [A]
    assert _servers.split(f"{A},{B}") == [A, B]
    assert _servers.split(f" {A} ,,{B},") == [A, B]
    assert _servers.split("localhost") == ["localhost"]


@pytest.fixture
def servers() -> Iterator[_servers.Servers]:
    """Three servers that are never dialled (nothing connects a channel
    before a call)."""
    listed = _servers.Servers([A, B, C], grpc.insecure_channel)
    yield listed
    listed.close()


def test_move_on_rotates_once_per_failed_server(servers: _servers.Servers) -> None:
    assert servers.current()[0] == 0
    assert servers.move_on(0, REFUSED) is False
    assert servers.current()[0] == 1
    # Another thread's call failed on server 0 too: the calls have moved
    # on from it already.
    assert servers.move_on(0, REFUSED) is False
    assert servers.current()[0] == 1
    # A standby names the leader: there, whatever the calls use now.
    assert servers.move_on(0, f"standby: the leader is at {C}") is True
    assert servers.current()[0] == 2


class _Failure(grpc.RpcError):
    def __init__(self, code: grpc.StatusCode, details: str):
        self._code, self._details = code, details

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details


class _Stub:
    """A stub whose GetStudy answers ``details`` with ``code``, or a study
    when ``code`` is None; ``calls`` counts the calls."""

    def __init__(self, code: Any = None, details: str = ""):
        self.code, self.details, self.calls = code, details, 0

    def GetStudy(self, request: Any, **kwargs: Any) -> Any:
        self.calls += 1
        if self.code is not None:
            raise _Failure(self.code, self.details)
        return pb.Study(name=request.name)


def _get_study(servers: _servers.Servers, backoffs: list[float], attempts: int = 8) -> Any:
    return call(
        servers,
        pb.GetStudyRequest(name="s"),
        rpc="GetStudy",
        server=",".join(servers.addresses),
        idempotent=True,
        policy=RetryPolicy(max_attempts=attempts),
        metadata=(),
        backoff=backoffs.append,
    )


def test_call_goes_to_the_named_leader_at_once(servers: _servers.Servers) -> None:
    standby = _Stub(grpc.StatusCode.UNAVAILABLE, f"standby: the leader is at {C}")
    stubs = [standby, _Stub(), _Stub()]
    servers._stubs = stubs
    backoffs: list[float] = []
    assert _get_study(servers, backoffs).name == "s"
    assert [s.calls for s in stubs] == [1, 0, 1]
    assert backoffs == []
    # Later calls go straight to the leader.
    assert _get_study(servers, backoffs).name == "s"
    assert [s.calls for s in stubs] == [1, 0, 2]


def test_call_tries_the_next_server_after_a_backoff(servers: _servers.Servers) -> None:
    stubs = [
        _Stub(grpc.StatusCode.UNAVAILABLE, REFUSED),
        _Stub(grpc.StatusCode.UNAVAILABLE, "starting, or standby with no leader yet; try again"),
        _Stub(),
    ]
    servers._stubs = stubs
    backoffs: list[float] = []
    assert _get_study(servers, backoffs).name == "s"
    assert [s.calls for s in stubs] == [1, 1, 1]
    assert len(backoffs) == 2


def test_call_does_not_move_on_other_errors(servers: _servers.Servers) -> None:
    stubs = [_Stub(grpc.StatusCode.NOT_FOUND, "no study s"), _Stub(), _Stub()]
    servers._stubs = stubs
    with pytest.raises(hypertune.NotFoundError):
        _get_study(servers, [])
    assert servers.current()[0] == 0


def test_exhausted_call_names_the_list(servers: _servers.Servers) -> None:
    servers._stubs = [_Stub(grpc.StatusCode.UNAVAILABLE, REFUSED) for _ in range(3)]
    with pytest.raises(hypertune.UnavailableError) as raised:
        _get_study(servers, [], attempts=4)
    assert raised.value.attempts == 4
    assert f"GetStudy to {A},{B},{C} failed after 4 attempts" in raised.value.message
    assert [s.calls for s in servers._stubs] == [2, 1, 1]


def _call(servers: _servers.Servers, idempotent: bool) -> Any:
    return call(
        servers,
        pb.GetStudyRequest(name="s"),
        rpc="GetStudy",
        server=",".join(servers.addresses),
        idempotent=idempotent,
        policy=RetryPolicy(max_attempts=3),
        metadata=(),
        backoff=lambda seconds: None,
    )


class _FailingFirst:
    """A stub whose GetStudy fails ``count`` times with ``code``, then
    answers; ``calls`` counts the calls."""

    def __init__(self, code: grpc.StatusCode, count: int):
        self.code, self.left, self.calls = code, count, 0

    def GetStudy(self, request: Any, **kwargs: Any) -> Any:
        self.calls += 1
        if self.left > 0:
            self.left -= 1
            raise _Failure(self.code, "Cancelled")
        return pb.Study(name=request.name)


def test_a_stopping_servers_cancel_is_retried_where_safe(servers: _servers.Servers) -> None:
    # As the C++ SDK: a hypertuned stopping with SIGTERM cancels the calls
    # it has not answered; a call safe to repeat rides through its restart.
    servers._stubs = [_FailingFirst(grpc.StatusCode.CANCELLED, 2)] * 3
    assert _call(servers, idempotent=True).name == "s"
    assert servers._stubs[0].calls == 3
    assert servers.current()[0] == 0  # a cancel is no reason to move on
    servers._stubs = [_FailingFirst(grpc.StatusCode.CANCELLED, 2)] * 3
    with pytest.raises(hypertune.HypertuneError) as raised:
        _call(servers, idempotent=False)
    assert raised.value.code == grpc.StatusCode.CANCELLED
    assert raised.value.attempts == 1


def test_a_closed_clients_cancel_is_not_retried() -> None:
    listed = _servers.Servers([A], grpc.insecure_channel)
    listed._stubs = [_FailingFirst(grpc.StatusCode.CANCELLED, 2)]
    listed.close()
    with pytest.raises(hypertune.HypertuneError) as raised:
        _call(listed, idempotent=True)
    assert raised.value.code == grpc.StatusCode.CANCELLED
    assert listed._stubs[0].calls == 1


class _Unavailable(pb_grpc.HyperTuneServicer):
    """A HyperTune service whose GetStudy is always UNAVAILABLE."""

    def __init__(self) -> None:
        self.calls = 0

    def GetStudy(self, request: Any, context: grpc.ServicerContext) -> Any:
        self.calls += 1
        context.abort(grpc.StatusCode.UNAVAILABLE, "injected")


def test_one_layer_of_retries_on_a_real_channel() -> None:
    # The retries are this client's loop alone (_retry.py says why not
    # gRPC's retry policy): through a real channel with the client's
    # options, the server sees exactly max_attempts calls.
    service = _Unavailable()
    grpc_server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    pb_grpc.add_HyperTuneServicer_to_server(service, grpc_server)
    port = grpc_server.add_insecure_port("127.0.0.1:0")
    grpc_server.start()
    try:
        address = f"127.0.0.1:{port}"
        client = hypertune.Client(
            address, max_attempts=3, initial_backoff=0.001, max_backoff=0.001
        )
        with pytest.raises(hypertune.UnavailableError) as raised:
            client.get_study("s")
        client.close()
        assert raised.value.attempts == 3
        assert f"GetStudy to {address} failed after 3 attempts: injected" in raised.value.message
        assert service.calls == 3
    finally:
        grpc_server.stop(None)


# ----- Against real servers -----


def _run_trials(study: hypertune.Study, count: int) -> list[int]:
    """Asks for, reports on and completes ``count`` trials; their ids."""
    done = []
    for _ in range(count):
        trial = study.ask()
        assert trial is not None
        trial.report(1, loss=trial.params["x"] + 1.0)
        trial.complete(loss=trial.params["x"])
        done.append(trial.id)
    return done


def test_a_dead_first_server_is_passed_over(server: Hypertuned) -> None:
    listed = f"127.0.0.1:{free_port()},{server.address}"  # nothing listens on the first
    with hypertune.Client(listed) as client:
        assert client.server == listed
        study = client.create_study(study_config(unique_name()))
        ids = _run_trials(study, 3)
        assert {t.id: t.state for t in study.trials()} == {i: "COMPLETED" for i in ids}
    # A watch, the first call of its client, moves on too.
    with hypertune.Client(listed) as client:
        completed = set()
        for event in hypertune.Study(client, pb.Study(name=study.name)).watch(timeout=60):
            if event.trial.state == "COMPLETED":
                completed.add(event.trial.id)
            if completed == set(ids):
                break
        assert completed == set(ids)


def test_hypertune_server_takes_a_list(server: Hypertuned, monkeypatch: Any) -> None:
    listed = f"127.0.0.1:{free_port()},{server.address}"
    monkeypatch.setenv("HYPERTUNE_SERVER", listed)
    with hypertune.Client() as client:
        assert client.server == listed
        name = unique_name()
        client.create_study(study_config(name))
        assert client.get_study(name).name == name


def test_all_servers_dead_names_the_list() -> None:
    listed = f"127.0.0.1:{free_port()},127.0.0.1:{free_port()}"
    with hypertune.Client(listed, max_attempts=3, initial_backoff=0.01) as client:
        with pytest.raises(hypertune.UnavailableError) as raised:
            client.get_study("nothing")
    assert f"GetStudy to {listed} failed after 3 attempts" in raised.value.message


@pytest.fixture
def postgres() -> Iterator[PostgresServer]:
    try:
        with PostgresServer() as running:
            yield running
    except PostgresUnavailable as why:
        pytest.skip(str(why))


def _on_postgres(workdir: str, url: str) -> Hypertuned:
    """A hypertuned on the database at ``url``, advertising the loopback
    address it listens on (which the client's list names)."""
    server = Hypertuned(workdir)
    server.db = url
    server.address = f"127.0.0.1:{free_port()}"
    server.extra_args = ["--advertise", server.address]
    return server


def test_follows_a_standby_to_the_leader_and_the_lead_on_failover(
    postgres: PostgresServer, tmp_path: Any
) -> None:
    with _on_postgres(str(tmp_path / "leader"), postgres.url()) as leader, _on_postgres(
        str(tmp_path / "standby"), postgres.url()
    ) as standby:
        # Enough retries to outlast the standby's takeover (a poll of 250 ms,
        # plus noticing the leader's session ended).
        client = hypertune.Client(
            f"{standby.address},{leader.address}", max_attempts=40, max_backoff=1.0
        )
        backoffs: list[float] = []
        sleep = client._backoff
        client._backoff = lambda seconds: (backoffs.append(seconds), sleep(seconds))
        try:
            # The standby names the leader: the first call goes there at once.
            study = client.create_study(study_config(unique_name(), lease_seconds=600))
            assert backoffs == []
            assert client._servers.current()[0] == 1
            ids = _run_trials(study, 2)
            held = study.ask()
            assert held is not None

            leader.kill()  # kill -9
            # The trial held across the failover completes on the former
            # standby, with the same Client.
            held.complete(loss=held.params["x"])
            assert client._servers.current()[0] == 0
            ids += [held.id] + _run_trials(study, 2)
            assert {t.id: t.state for t in study.trials()} == {i: "COMPLETED" for i in ids}
        finally:
            client.close()
        # The former standby alone serves it all.
        with hypertune.Client(standby.address, max_attempts=1) as alone:
            trials = alone.get_study(study.name).trials()
            assert {t.id: t.state for t in trials} == {i: "COMPLETED" for i in ids}
