#!/usr/bin/python3
"""The HTTP API under load, with and without connections that hold on
(issue 48 item 6).

  PYTHONPATH=build/python:testing benchmarks/http_load.py \
      [--clients 8] [--seconds 10] [--idle 540] [--bin-dir build/bin]
      [--header-timeout-ms 600000]

hypertuned with --http and auth off (the default). --clients threads each
GET /api/studies/s over one kept-alive connection for --seconds: requests/s
and the latency percentiles. Then --idle connections from 9 loopback
addresses (127.0.0.2-10) each get an answer and drip the headers of their
next request (a header line every 0.5 s, the review's attack), and the load
is measured again next to them. Each phase is also measured with 2 clients
that open a new connection per request (a client arriving afresh). Prints
one JSON line.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import tempfile
import threading
import time

import grpc
from hypertune.v1 import hypertune_pb2 as pb
from hypertune.v1 import hypertune_pb2_grpc as pb_grpc
from hypertuned_process import Hypertuned, free_port


def threads_of(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    return -1


def percentile(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100.0 * len(ordered)))]


def load(address: str, clients: int, seconds: float, fresh: bool = False) -> dict:
    """`clients` threads asking for `seconds`, each over one kept-alive
    connection, or (`fresh`) a new connection per request."""
    host, port = address.rsplit(":", 1)
    latencies: list[list[float]] = [[] for _ in range(clients)]
    errors = [0] * clients
    stop = time.monotonic() + seconds

    def client(i: int) -> None:
        conn = http.client.HTTPConnection(host, int(port), timeout=60)
        while time.monotonic() < stop:
            start = time.monotonic()
            try:
                conn.request("GET", "/api/studies/s")
                response = conn.getresponse()
                response.read()
                if response.status != 200:
                    errors[i] += 1
            except (OSError, http.client.HTTPException):
                errors[i] += 1
                conn.close()
                conn = http.client.HTTPConnection(host, int(port), timeout=60)
                continue
            latencies[i].append((time.monotonic() - start) * 1000.0)
            if fresh:
                conn.close()
                conn = http.client.HTTPConnection(host, int(port), timeout=60)
        conn.close()

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    began = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - began
    all_ms = [ms for per in latencies for ms in per]
    return {
        "requests_per_s": round(len(all_ms) / elapsed, 1),
        "p50_ms": round(percentile(all_ms, 50), 2),
        "p99_ms": round(percentile(all_ms, 99), 2),
        "max_ms": round(max(all_ms) if all_ms else float("nan"), 2),
        "errors": sum(errors),
    }


def hold(address: str, count: int) -> tuple[list[socket.socket], threading.Event]:
    """`count` connections from 9 addresses, each answered once and then
    dripping the headers of its next request."""
    host, port = address.rsplit(":", 1)
    held = []
    for i in range(count):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind((f"127.0.0.{2 + i % 9}", 0))
        sock.connect((host, int(port)))
        sock.sendall(b"GET /api/studies HTTP/1.1\r\nHost: x\r\n\r\n")
        held.append(sock)
    for sock in held:
        sock.settimeout(30)
        try:
            sock.recv(65536)
            sock.sendall(b"GET /api/studies HTTP/1.1\r\n")
        except OSError:
            pass
    stop = threading.Event()

    def drip() -> None:
        while not stop.wait(0.5):
            for sock in held:
                try:
                    sock.send(b"X-Slow: 1\r\n", socket.MSG_DONTWAIT)
                except OSError:
                    pass

    threading.Thread(target=drip, daemon=True).start()
    return held, stop


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--idle", type=int, default=540)
    parser.add_argument("--bin-dir", default=None)
    # Long, so that the dripping connections stay through the measurement
    # (the default 10 s would cut them off midway).
    parser.add_argument("--header-timeout-ms", type=int, default=600_000)
    args = parser.parse_args()
    if args.bin_dir:
        os.environ["HYPERTUNE_BIN_DIR"] = os.path.abspath(args.bin_dir)
    with tempfile.TemporaryDirectory() as work:
        address = f"127.0.0.1:{free_port()}"
        server = Hypertuned(work, ["--http", address, "--http-header-timeout-ms",
                                   str(args.header_timeout_ms)])
        server.start()
        stub = pb_grpc.HyperTuneStub(grpc.insecure_channel(server.address))
        study = pb.Study(name="s")
        study.spec.parameters.add(name="x").double_spec.max = 1.0
        study.spec.metrics.add(name="loss", goal=pb.MetricSpec.MINIMIZE)
        stub.CreateStudy(pb.CreateStudyRequest(study=study))
        quiet = load(address, args.clients, args.seconds)
        quiet_fresh = load(address, 2, args.seconds / 2, fresh=True)
        threads_alone = threads_of(server.process.pid)
        held, stop = hold(address, args.idle)
        time.sleep(1)
        threads_dripping = threads_of(server.process.pid)
        loaded_fresh = load(address, 2, args.seconds / 2, fresh=True)
        loaded = load(address, args.clients, args.seconds)
        still_open = 0
        for sock in held:
            try:
                sock.setblocking(False)
                still_open += sock.recv(1, socket.MSG_PEEK) != b""
            except BlockingIOError:
                still_open += 1
            except OSError:
                pass
        stop.set()
        for sock in held:
            sock.close()
        server.kill()
        print(json.dumps({
            "clients": args.clients, "seconds": args.seconds,
            "alone": quiet,
            "alone_new_connection_each": quiet_fresh,
            f"next_to_{args.idle}_dripping": loaded,
            f"next_to_{args.idle}_dripping_new_connection_each": loaded_fresh,
            "dripping_still_open": still_open,
            "server_threads_alone": threads_alone,
            "server_threads_next_to_dripping": threads_dripping,
        }))


if __name__ == "__main__":
    main()
