#!/usr/bin/python3
"""BoTorch peer for the regret protocol (BENCHMARKS.md section 1): qLogNoisyExpectedImprovement
on the public suite, the modern GP-BO default next to the textbook GP of skgp_peer.py.

  botorch_peer.py regret --functions branin2,hartmann6 --trials 100 --seeds 20 \
      [--parallel 4] [--device cpu|cuda] > botorch.jsonl

Same functions, bounds, seeds, budgets and output as ../shared/peers/skgp_peer.py: one JSON
line per run, {"optimizer", "function", "dim", "seed", "trials", "best_regret": [k -> best of
the first k + 1 trials minus the known minimum], "seconds"}, for compare.py.

BoTorch's defaults: SingleTaskGP on inputs scaled to the unit cube (Normalize, with the
function's bounds) and standardized outputs (Standardize), fitted by fit_gpytorch_mll on the
exact marginal likelihood; qLogNEI with X_baseline = the observed points, maximized by
optimize_acqf (10 restarts, 512 raw samples, q = 1); double precision. Init: the first
max(10, d + 1) trials (skgp_peer.py's initial design size) from a scrambled Sobol sequence.

--parallel P follows hypertune-bench's protocol (testing/regret.cc): each suggestion is made
while the P - 1 earlier trials are pending, and they complete oldest first. BoTorch handles
pending points as X_pending, which qLogNEI appends to every candidate, so each suggestion is
scored as a joint q = P batch with the pending points. Labels: botorch-qlognei, -p4 appended.

BoTorch is not a Debian package; install it with pip (it needs a newer torch than Debian's).
Without it the script says so on stderr and exits with status 2: nothing is run or faked.
"""
import argparse
import json
import sys
import time
import warnings
from pathlib import Path

DEFAULT_PEERS_DIR = Path(__file__).resolve().parents[2] / "shared" / "peers"


def botorch_minimize(f, bounds, trials, parallel, seed, device):
    """Minimizes f over the box `bounds` ([(lo, hi)] per dimension); returns f's values in
    trial (= completion) order."""
    import torch
    from botorch.acquisition.logei import qLogNoisyExpectedImprovement
    from botorch.exceptions import ModelFittingError
    from botorch.fit import fit_gpytorch_mll
    from botorch.models import SingleTaskGP
    from botorch.models.transforms import Normalize, Standardize
    from botorch.optim import optimize_acqf
    from gpytorch.mlls import ExactMarginalLogLikelihood

    tkw = {"dtype": torch.double, "device": device}
    box = torch.tensor(bounds, **tkw).T  # 2 x d: row 0 lower, row 1 upper bounds
    dim = box.shape[1]
    n_init = max(10, dim + 1)
    torch.manual_seed(seed)  # raw samples and MC base samples draw from torch's generator
    sobol = torch.quasirandom.SobolEngine(dim, scramble=True, seed=seed)
    X, ys = [], []  # X in creation order; ys[i] = f(X[i]) once trial i has completed

    def complete_oldest():
        ys.append(f(X[len(ys)].squeeze(0).cpu().numpy()))

    for t in range(trials):
        if t < n_init or len(ys) < 2:  # a model needs observations; early pending ones have none
            x = box[0] + (box[1] - box[0]) * sobol.draw(1, dtype=torch.double).to(device)
        else:
            train_X = torch.cat(X[:len(ys)])
            train_Y = -torch.tensor(ys, **tkw).unsqueeze(-1)  # BoTorch maximizes
            model = SingleTaskGP(train_X, train_Y, input_transform=Normalize(dim, bounds=box),
                                 outcome_transform=Standardize(m=1))
            try:
                fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
            except ModelFittingError:
                pass  # BoTorch's retries all failed: keep the initial hyperparameters, as a live loop would
            pending = torch.cat(X[len(ys):]) if len(X) > len(ys) else None
            acqf = qLogNoisyExpectedImprovement(model, X_baseline=train_X, X_pending=pending)
            x, _ = optimize_acqf(acqf, bounds=box, q=1, num_restarts=10, raw_samples=512)
            x = x.detach()
        X.append(x)
        if len(X) - len(ys) == parallel:
            complete_oldest()
    while len(ys) < len(X):
        complete_oldest()
    return ys


def regret(args, functions, device):
    label = "botorch-qlognei" + (f"-p{args.parallel}" if args.parallel > 1 else "")
    for fname in args.functions:
        f, bounds, fmin = functions[fname]
        for seed in range(args.seeds):
            start = time.perf_counter()
            ys = botorch_minimize(f, bounds, args.trials, args.parallel, seed, device)
            best, regrets = float("inf"), []
            for y in ys:
                best = min(best, y)
                regrets.append(float(best - fmin))
            print(json.dumps({"optimizer": label, "function": fname, "dim": len(bounds), "seed": seed,
                              "trials": args.trials, "best_regret": regrets,
                              "seconds": time.perf_counter() - start}), flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("regret", help="simple regret per run, one JSON line each")
    r.add_argument("--functions", default=None,
                   help="comma-separated names (default: all of functions.py)")
    r.add_argument("--trials", type=int, default=100)
    r.add_argument("--seeds", type=int, default=20, help="runs seeds 0..N-1")
    r.add_argument("--parallel", type=int, default=1, help="simulated workers (P - 1 trials pending)")
    r.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto",
                   help="torch device (default: cuda if available, else cpu)")
    r.add_argument("--peers-dir", type=Path, default=DEFAULT_PEERS_DIR,
                   help=f"directory holding functions.py (default: {DEFAULT_PEERS_DIR})")
    a = p.parse_args()
    if a.trials < 1 or a.seeds < 1 or a.parallel < 1:
        p.error("--trials, --seeds and --parallel must be at least 1")

    # Imported here, not at the top, so --help and the message below work without BoTorch.
    try:
        import botorch  # noqa: F401
        import gpytorch  # noqa: F401
        import torch
    except ImportError:
        print("botorch_peer.py: BoTorch is not installed here (pip install botorch); nothing was run",
              file=sys.stderr)
        sys.exit(2)

    # The definitions come from the peers' functions.py, the module skgp_peer.py itself imports
    # FUNCTIONS from; importing skgp_peer.py instead would also pull in scikit-learn for nothing.
    sys.path.insert(0, str(a.peers_dir))
    try:
        from functions import FUNCTIONS
    except ImportError as e:
        p.error(f"cannot import functions.py from --peers-dir {a.peers_dir}: {e}")
    a.functions = a.functions.split(",") if a.functions else list(FUNCTIONS)
    unknown = [n for n in a.functions if n not in FUNCTIONS]
    if unknown:
        p.error(f"unknown functions {','.join(unknown)}; known: {','.join(FUNCTIONS)}")

    if a.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: no CUDA device is available")
    if a.device == "auto":
        a.device = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(a.device)
    # BoTorch warns routinely (jitter added, an optimizer restart stopping early); stdout carries
    # only the JSON lines, and these would bury real errors on stderr, as in skgp_peer.py.
    warnings.filterwarnings("ignore")
    regret(a, FUNCTIONS, device)


if __name__ == "__main__":
    main()
