"""What hypertuned publishes so that clients need not copy it from its
source: its version, limits and name rules (the GetServerInfo call, read
once per Client and cached), and the resolved role of each metric of a
study (``Study.metric_roles``).

Thread safety: the cache is guarded by a lock; a race reads the answer
twice, harmlessly.
"""

from __future__ import annotations

import re
import threading
import weakref
from typing import Any

from hypertune._proto import pb

_lock = threading.Lock()
_cache: "weakref.WeakKeyDictionary[Any, pb.ServerInfo]" = weakref.WeakKeyDictionary()


def server_info(client: Any) -> pb.ServerInfo:
    """The ServerInfo of ``client``'s server (a :class:`hypertune.Client`),
    asked once per client."""
    with _lock:
        info = _cache.get(client)
    if info is None:
        info = client.transport.call("GetServerInfo", pb.GetServerInfoRequest())
        with _lock:
            _cache[client] = info
    return info


def limits(client: Any) -> pb.ServerLimits:
    """The server's limits (common/limits.h, docs/limits.md)."""
    return server_info(client).limits


def is_identifier(client: Any, name: str) -> bool:
    """Whether the server takes ``name`` as a parameter, metric or
    attribute name (its identifier pattern)."""
    pattern = server_info(client).identifier_pattern
    return re.fullmatch(pattern, name) is not None


__all__ = ["is_identifier", "limits", "server_info"]
