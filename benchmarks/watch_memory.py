#!/usr/bin/python3
"""What slow WatchTrials readers cost the server (issue 48 item 2).

  PYTHONPATH=build/python:testing benchmarks/watch_memory.py \
      [--streams 64] [--trials 300] [--trial-kb 240] [--bin-dir build/bin]

Alice's study holds --trials trials of about --trial-kb KB each (attributes).
She opens --streams WatchTrials streams, each on its own connection, that
never read. After 10 s the server's resident memory is read from /proc, and
bob (another owner) opens a stream on his own small study five times: the
time to his first event. Then alice's streams are cancelled and, 5 s later,
the memory is read again. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time

import grpc
from hypertune.v1 import hypertune_pb2 as pb
from hypertune.v1 import hypertune_pb2_grpc as pb_grpc
from slow_readers import ALICE, BOB, TOKENS, auth, fill, make_study, rss_mb
from hypertuned_process import Hypertuned

def first_event_ms(address: str, name: str, token: str) -> float:
    channel = grpc.insecure_channel(address, options=[("grpc.use_local_subchannel_pool", 1)])
    stub = pb_grpc.HyperTuneStub(channel)
    start = time.monotonic()
    stream = stub.WatchTrials(pb.WatchTrialsRequest(study_name=name), metadata=auth(token),
                              timeout=60)
    next(stream)
    elapsed = (time.monotonic() - start) * 1000.0
    stream.cancel()
    channel.close()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--streams", type=int, default=64)
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
        server = Hypertuned(work, ["--auth-token-file", tokens])
        server.start()
        pid = server.process.pid
        channel = grpc.insecure_channel(server.address)
        stub = pb_grpc.HyperTuneStub(channel)
        make_study(stub, "big", ALICE)
        fill(stub, "big", args.trials, args.trial_kb, ALICE)
        make_study(stub, "small", BOB)
        fill(stub, "small", 1, 1, BOB)
        idle = rss_mb(pid)
        bob_idle = statistics.median(first_event_ms(server.address, "small", BOB)
                                     for _ in range(5))

        slow = []
        for _ in range(args.streams):
            ch = grpc.insecure_channel(server.address,
                                       options=[("grpc.use_local_subchannel_pool", 1)])
            call = pb_grpc.HyperTuneStub(ch).WatchTrials(
                pb.WatchTrialsRequest(study_name="big"), metadata=auth(ALICE))
            slow.append((ch, call))
        time.sleep(10)
        held = rss_mb(pid)
        bob_loaded = [first_event_ms(server.address, "small", BOB) for _ in range(5)]
        for ch, call in slow:
            call.cancel()
            ch.close()
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
