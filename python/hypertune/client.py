"""The connection to hypertuned: studies are created, found and deleted
here; :class:`~hypertune.Study` and :class:`~hypertune.Trial` do the rest.

A Client is the public face of a connection: it reads its arguments (and
the environment), owns the Transport its studies and trials call through
(_transport.py) and the thread that renews their leases (_lease.py), and
creates Study objects.

Thread safety: a Client may be shared by any number of threads (gRPC
channels are); it owns one channel per server it is given.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from typing import Any, Optional

import grpc

from hypertune import _config
from hypertune._lease import LeaseRenewer
from hypertune._proto import pb
from hypertune._retry import RetryPolicy
from hypertune._transport import Transport, bearer_metadata, open_channel
from hypertune.errors import (
    AlreadyExistsError,
    HypertuneError,
    InvalidArgumentError,
)
from hypertune.study import Study
from hypertune.trial import encode_attributes

#: Where the CLI and the SDKs look when neither ``server`` nor
#: ``$HYPERTUNE_SERVER`` says otherwise.
DEFAULT_SERVER = "127.0.0.1:50051"

#: Responses up to this size are accepted (a study's history can outgrow
#: gRPC's default of 4 MiB; the server sends at most this much).
MAX_RECEIVE_MESSAGE_BYTES = 16 << 20

# Reconnect within ~0.1-1 s once a restarted server is back. gRPC's
# defaults wait far longer: reconnection backs off from 1 s growing 1.6x to
# 120 s, and the address (resolved by the dns resolver even for an IP) is
# resolved again at most every 30 s, so a channel could take 3-12 s after the
# server's return, longer than a short lease (measured:
# benchmarks/python_reconnect.py, benchmarks/README.md).
CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", MAX_RECEIVE_MESSAGE_BYTES),
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
    ("grpc.dns_min_time_between_resolutions_ms", 100),
    # No service config from DNS: its retryPolicy would retry beneath our
    # loop (_retry.py says why ours), multiplying the attempts unseen.
    ("grpc.service_config_disable_resolution", 1),
]


def _env(name: str) -> Optional[str]:
    value = os.environ.get(name)
    return value if value else None


def _read(field: str, path: str) -> bytes:
    try:
        with open(path, "rb") as file:
            return file.read()
    except OSError as err:
        raise InvalidArgumentError(f'{field}: cannot read "{path}": {err.strerror}') from None


def _credentials(
    tls_ca: Optional[str], tls_cert: Optional[str], tls_key: Optional[str]
) -> Optional[grpc.ChannelCredentials]:
    """The TLS credentials of the channels, or None for plaintext."""
    if bool(tls_cert) != bool(tls_key):
        raise InvalidArgumentError(
            "tls_cert, tls_key: the client certificate and its key go together"
        )
    if not tls_ca:
        if tls_cert:
            raise InvalidArgumentError(
                "tls_cert, tls_key: a client certificate needs TLS; give the server's CA "
                "too (tls_ca)"
            )
        return None
    return grpc.ssl_channel_credentials(
        root_certificates=_read("tls_ca", tls_ca),
        private_key=_read("tls_key", tls_key) if tls_key else None,
        certificate_chain=_read("tls_cert", tls_cert) if tls_cert else None,
    )


class Client:
    """A connection to hypertuned.

    Args:
        server: ``HOST:PORT``, or a comma-separated list of them (several
            hypertuned sharing a PostgreSQL database, of which one leads
            and the others are standbys); default ``$HYPERTUNE_SERVER``,
            else ``127.0.0.1:50051``, as for the CLI. With a list, calls go
            to one server at a time: a standby's UNAVAILABLE moves them at
            once to the leader it names (when listed), any other
            UNAVAILABLE to the next server, after the backoff.
        token: the bearer token for servers run with auth; default
            ``$HYPERTUNE_TOKEN``.
        tls_ca: the PEM file of the CA that signed the server's certificate:
            talk TLS; default ``$HYPERTUNE_TLS_CA`` (unset: plaintext).
        tls_cert, tls_key: this client's certificate and key, for servers
            that require one; default ``$HYPERTUNE_TLS_CERT`` and
            ``$HYPERTUNE_TLS_KEY``.
        client_id: who holds the trials this client asks for; default
            ``$HYPERTUNE_CLIENT_ID``, else ``<host>-<pid>``.
        call_timeout: seconds each attempt of a call may take.
        max_attempts, initial_backoff, max_backoff: a call that finds the
            server UNAVAILABLE (or, where repeating it is harmless, meets
            DEADLINE_EXCEEDED or a stopping server's CANCELLED) is tried
            again (moving on, with a list, as above), up to
            ``max_attempts`` times in all, after a jittered backoff from
            ``initial_backoff`` doubling to ``max_backoff`` seconds (the C++
            SDK's policy; _retry.py says why not gRPC's).
        heartbeats: renew the lease of the trials this client hands out
            from a background thread (default); False leaves renewal to the
            trials' own calls.
        heartbeat_interval: seconds between renewals; default a third of the
            study's lease.
        devices: devices a trial of this process uses, for the device-seconds
            the server bills; default the entries of
            ``$CUDA_VISIBLE_DEVICES``, else 1.

    Raises:
        InvalidArgumentError: a TLS file cannot be read, or a client
            certificate comes without its key.
    """

    def __deepcopy__(self, memo: dict) -> "Client":
        """The same client: a connection is shared, not copied (so that
        ``sklearn.base.clone`` of an estimator holding one works)."""
        return self

    def __init__(
        self,
        server: Optional[str] = None,
        token: Optional[str] = None,
        tls_ca: Optional[str] = None,
        *,
        tls_cert: Optional[str] = None,
        tls_key: Optional[str] = None,
        client_id: Optional[str] = None,
        call_timeout: float = 30.0,
        max_attempts: int = 8,
        initial_backoff: float = 0.1,
        max_backoff: float = 5.0,
        heartbeats: bool = True,
        heartbeat_interval: Optional[float] = None,
        devices: Optional[int] = None,
    ):
        self.server: str = server or _env("HYPERTUNE_SERVER") or DEFAULT_SERVER
        self.client_id: str = (
            client_id or _env("HYPERTUNE_CLIENT_ID") or f"{socket.gethostname()}-{os.getpid()}"
        )
        self.heartbeats = heartbeats
        self.heartbeat_interval = heartbeat_interval
        if devices is None:
            visible = _env("CUDA_VISIBLE_DEVICES")
            devices = len(visible.split(",")) if visible else 1
        self.devices: int = max(1, devices)
        policy = RetryPolicy(
            max_attempts=max(1, max_attempts),
            initial_backoff=initial_backoff,
            max_backoff=max_backoff,
            call_timeout=call_timeout,
        )
        credentials = _credentials(
            tls_ca or _env("HYPERTUNE_TLS_CA"),
            tls_cert or _env("HYPERTUNE_TLS_CERT"),
            tls_key or _env("HYPERTUNE_TLS_KEY"),
        )
        options = list(CHANNEL_OPTIONS)  # the channels open now, with these
        self._transport = Transport(
            self.server,
            lambda address: open_channel(address, credentials, options),
            policy=policy,
            metadata=bearer_metadata(token or _env("HYPERTUNE_TOKEN")),
            # Through _backoff, which benchmarks/python_reconnect.py and
            # tests/python/test_servers.py replace on the instance.
            backoff=lambda seconds: self._backoff(seconds),
        )
        # What tests/python/test_servers.py reads: which server calls go to.
        self._servers = self._transport.servers
        # Its thread starts with the first lease it renews.
        self._lease_renewer = LeaseRenewer(self._transport)

    def __repr__(self) -> str:
        return f"Client(server={self.server!r}, client_id={self.client_id!r})"

    def close(self) -> None:
        """Closes the connection: later calls fail, and the leases of its
        trials are no longer renewed. Idempotent."""
        self._lease_renewer.close()
        self._transport.close()

    @property
    def transport(self) -> Transport:
        """The connection the client's studies and trials call through
        (hypertune's own plumbing: calls, retries, servers, metadata)."""
        return self._transport

    @property
    def lease_renewer(self) -> LeaseRenewer:
        """The thread that renews the leases of the client's trials
        (hypertune's own plumbing, used by the trials)."""
        return self._lease_renewer

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _backoff(self, seconds: float) -> None:
        """Waits ``seconds`` before a retry, or less (:meth:`Servers.backoff`)."""
        self._transport.servers.backoff(seconds)

    def _call(self, rpc: str, request: Any, *, idempotent: bool = True) -> Any:
        """One RPC of the HyperTune service under the retry policy
        (:meth:`Transport.call`); tests call it for RPCs the client does
        not wrap."""
        return self._transport.call(rpc, request, idempotent=idempotent)

    # ----- Studies -----

    def create_study(
        self,
        config: _config.StudyConfig,
        *,
        name: Optional[str] = None,
        if_exists: str = "raise",
        attributes: Optional[Mapping[str, Any]] = None,
    ) -> Study:
        """Creates a study and returns it.

        Args:
            config: the study as a dict (the protobuf JSON mapping of the
                ``Study`` message, e.g. ``{"name": ..., "spec": {...}}``),
                the path of a JSON file in that form (what ``hypertune study
                create --config`` takes), or a ``hypertune.v1.Study``.
            name: the study's name, replacing the config's.
            if_exists: ``"raise"`` (default): a study of that name is an
                AlreadyExistsError. ``"load"``: return it, for scripts and
                notebooks that are run again, provided its spec is the
                config's (else AlreadyExistsError saying which fields
                differ).
            attributes: notes kept with the study, added to the config's
                ``"attributes"`` (which are text): any JSON value, as
                :meth:`Trial.set_attribute` takes; read back by
                :attr:`Study.user_attrs`.

        Raises:
            InvalidArgumentError: the config is malformed; the message names
                the field.
        """
        if if_exists not in ("raise", "load"):
            raise InvalidArgumentError(f'if_exists: expected "raise" or "load", got {if_exists!r}')
        study = _config.load_study(config, name)
        if attributes is not None:
            study.attributes.update(
                encode_attributes(attributes, "create_study: attributes", study.attributes)
            )
        try:
            created = self._transport.call(
                "CreateStudy", pb.CreateStudyRequest(study=study), idempotent=False
            )
        except AlreadyExistsError as error:
            # On a retry, an earlier attempt may have created it before its
            # reply was lost; with "load", it may be this script's last run.
            if error.attempts == 1 and if_exists != "load":
                raise
            existing = self.get_study(study.name)
            differ = _config.spec_differences(existing.spec, study.spec)
            if not differ:
                return existing
            if if_exists != "load":
                raise
            raise AlreadyExistsError(
                f'study "{study.name}" exists with a different spec ({", ".join(differ)} '
                "differ); delete it or choose another name"
            ) from None
        return Study(self, created)

    def get_study(self, name: str) -> Study:
        """The study called ``name``; NotFoundError if there is none."""
        return Study(self, self._transport.call("GetStudy", pb.GetStudyRequest(name=name)))

    def list_studies(self) -> list[Study]:
        """Every study the caller may read (all of them without auth), by
        name, following the server's pages."""
        studies: list[Study] = []
        request = pb.ListStudiesRequest()
        while True:
            response = self._transport.call("ListStudies", request)
            studies.extend(Study(self, study) for study in response.studies)
            if not response.next_page_token:
                return studies
            request.page_token = response.next_page_token

    def delete_study(self, name: str) -> None:
        """Deletes the study called ``name`` and its trials."""
        try:
            self._transport.call("DeleteStudy", pb.DeleteStudyRequest(name=name))
        except HypertuneError as error:
            # Gone on a retry: an earlier attempt deleted it.
            if not (error.code == grpc.StatusCode.NOT_FOUND and error.attempts > 1):
                raise
