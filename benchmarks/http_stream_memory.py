#!/usr/bin/python3
"""What slow HTTP event streams cost the server (issue 48 items 2 and 6).

  PYTHONPATH=build/python:testing benchmarks/http_stream_memory.py \
      [--streams 32] [--trials 300] [--trial-kb 240] [--bin-dir build/bin]

Alice's study holds --trials trials of about --trial-kb KB each
(attributes). She opens --streams GET /api/studies/big/events streams, each
on a socket with a small receive buffer that never reads. After 10 s the
server's resident memory is read from /proc, and bob (another owner) opens
an event stream on his own small study five times: the time to his first
event. Then alice's sockets are closed and, 5 s later, the memory is read
again. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import tempfile
import time

import grpc
from hypertune.v1 import hypertune_pb2_grpc as pb_grpc
from slow_readers import ALICE, BOB, TOKENS, fill, make_study, rss_mb
from hypertuned_process import Hypertuned, free_port

def open_stream(http: str, study: str, token: str, rcvbuf: int = 0) -> socket.socket:
    host, port = http.rsplit(":", 1)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.connect((host, int(port)))
    sock.sendall(f"GET /api/studies/{study}/events HTTP/1.1\r\nHost: x\r\n"
                 f"Authorization: Bearer {token}\r\n\r\n".encode())
    return sock


def first_event_ms(http: str, study: str, token: str) -> float:
    start = time.monotonic()
    sock = open_stream(http, study, token)
    sock.settimeout(60)
    got = b""
    while b"event: trial" not in got:
        chunk = sock.recv(65536)
        if not chunk:
            break
        got += chunk
    elapsed = (time.monotonic() - start) * 1000.0
    sock.close()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--streams", type=int, default=32)
    parser.add_argument("--trials", type=int, default=300)
    parser.add_argument("--trial-kb", type=int, default=240)
    parser.add_argument("--bin-dir", default=None)
    args = parser.parse_args()
    if args.bin_dir:
        os.environ["HYPERTUNE_BIN_DIR"] = os.path.abspath(args.bin_dir)
    with tempfile.TemporaryDirectory() as work:
        tokens = os.path.join(work, "tokens")
        with open(tokens, "w") as f:
            f.write(TOKENS)
        http = f"127.0.0.1:{free_port()}"
        server = Hypertuned(work, ["--auth-token-file", tokens, "--http", http])
        server.start()
        pid = server.process.pid
        stub = pb_grpc.HyperTuneStub(grpc.insecure_channel(server.address))
        make_study(stub, "big", ALICE)
        fill(stub, "big", args.trials, args.trial_kb, ALICE)
        make_study(stub, "small", BOB)
        fill(stub, "small", 1, 1, BOB)
        idle = rss_mb(pid)
        bob_idle = statistics.median(first_event_ms(http, "small", BOB) for _ in range(5))

        slow = [open_stream(http, "big", ALICE, rcvbuf=4096) for _ in range(args.streams)]
        time.sleep(10)
        held = rss_mb(pid)
        bob_loaded = [first_event_ms(http, "small", BOB) for _ in range(5)]
        for sock in slow:
            sock.close()
        time.sleep(5)
        after = rss_mb(pid)
        server.kill()
        print(json.dumps({
            "streams": args.streams, "trials": args.trials, "trial_kb": args.trial_kb,
            "rss_mb_idle": round(idle, 1), "rss_mb_with_slow_streams": round(held, 1),
            "rss_mb_after_close": round(after, 1),
            "other_owner_first_event_ms_idle": round(bob_idle, 1),
            "other_owner_first_event_ms_median": round(statistics.median(bob_loaded), 1),
            "other_owner_first_event_ms_max": round(max(bob_loaded), 1),
        }))


if __name__ == "__main__":
    main()
