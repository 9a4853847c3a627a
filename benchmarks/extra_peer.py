#!/usr/bin/python3
"""../shared/peers/optuna_peer.py on the suite's narrow-basin functions too
(extra_functions.py): the same arguments and JSON lines, e.g.

  benchmarks/extra_peer.py regret --sampler tpe --functions shekel10,hartmann3 \
      --trials 50 --seeds 20 > tpe.jsonl

Run from the repository; the peers folder is ../shared/peers (PEERS overrides).
"""
import os
import runpy
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PEERS = os.environ.get("PEERS", os.path.join(HERE, "..", "..", "shared", "peers"))
sys.path[:0] = [PEERS, HERE]

import functions  # noqa: E402  (the peers' suite, extended in place)
from extra_functions import EXTRA_FUNCTIONS  # noqa: E402

functions.FUNCTIONS.update(EXTRA_FUNCTIONS)
sys.argv[0] = os.path.join(PEERS, "optuna_peer.py")
runpy.run_path(sys.argv[0], run_name="__main__")
