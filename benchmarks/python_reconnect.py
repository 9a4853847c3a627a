#!/usr/bin/python3
"""How soon the Python client's next call succeeds once a killed hypertuned
is back: with gRPC's default channel settings and retries that sleep their
whole backoff (what a plain client does), with the client's CHANNEL_OPTIONS
(python/hypertune/client.py) alone, and with those and retries that go
ahead as soon as the channel reconnects (the client as it is).

  PYTHONPATH=build/python:testing benchmarks/python_reconnect.py [--downtimes 2,10] [--rounds 3]

Per round: a study, one worker calling Heartbeat-like GetStudy in a loop
(each call with the client's retry policy, as a worker's lease renewals and
reports would); hypertuned is killed with SIGKILL, stays down for the
downtime, and is started again on the same port and database. Prints one
JSON line per (options, downtime) with the seconds from the restarted
server's "listening" line to the first successful call (median and max over
rounds) and the calls that failed even after their retries.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time

import hypertune
from hypertune import client as client_module
from hypertuned_process import Hypertuned

GRPC_DEFAULTS = [("grpc.max_receive_message_length", client_module.MAX_RECEIVE_MESSAGE_BYTES)]


def one_round(options: list, downtime: float, ready_wait: bool = True) -> tuple[float, int]:
    with tempfile.TemporaryDirectory() as work:
        server = Hypertuned(work)
        server.start()
        saved = client_module.CHANNEL_OPTIONS
        client_module.CHANNEL_OPTIONS = options
        try:
            client = hypertune.Client(server.address)
        finally:
            client_module.CHANNEL_OPTIONS = saved
        if not ready_wait:
            client._backoff = time.sleep
        client.create_study({"name": "reconnect", "spec": {
            "parameters": [{"name": "x", "double_spec": {"min": 0, "max": 1}}],
            "metrics": [{"name": "y", "goal": "MINIMIZE"}]}})
        successes: list[float] = []
        failures = 0
        done = threading.Event()

        def work() -> None:
            nonlocal failures
            while not done.is_set():
                try:
                    client.get_study("reconnect")
                    successes.append(time.monotonic())
                except hypertune.UnavailableError:
                    failures += 1
                time.sleep(0.05)

        thread = threading.Thread(target=work)
        thread.start()
        while not successes:
            time.sleep(0.01)
        server.kill()
        time.sleep(downtime)
        server.start()
        back = time.monotonic()
        while not successes or successes[-1] < back:
            time.sleep(0.01)
        first = min(t for t in successes if t >= back)
        done.set()
        thread.join()
        client.close()
        server.kill()
        return first - back, failures


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--downtimes", default="2,10")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    variants = [
        ("grpc-defaults, retries sleep", GRPC_DEFAULTS, False),
        ("channel-options, retries sleep", client_module.CHANNEL_OPTIONS, False),
        ("hypertune-client", client_module.CHANNEL_OPTIONS, True),
    ]
    for label, options, ready_wait in variants:
        for downtime in (float(d) for d in args.downtimes.split(",")):
            results = [one_round(options, downtime, ready_wait) for _ in range(args.rounds)]
            delays = [r[0] for r in results]
            print(json.dumps({
                "client": label, "downtime_s": downtime, "rounds": args.rounds,
                "reconnect_median_s": round(statistics.median(delays), 3),
                "reconnect_max_s": round(max(delays), 3),
                "calls_failed_after_retries": sum(r[1] for r in results)}), flush=True)


if __name__ == "__main__":
    main()
