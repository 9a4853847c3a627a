"""One adapter per optimizer, each with the same two calls: ask(n) gives n
configurations to evaluate now (n > 1: a batch, its members chosen while the
others are pending), tell(values) gives back their losses in the same order.

  hypertune-gp_bandit, hypertune-tpe, hypertune-random
      hypertuned over gRPC through the Python client (build/python): a study
      per run, study.suggest(n), trial.complete(loss=...). Bools are the
      categories "false"/"true". The study's seed is the run's seed + 1.
  optuna31-tpe      Debian's python3-optuna 3.1: TPESampler(seed), with
                    constant_liar=True when n > 1 (Optuna's advice for
                    parallel workers); ask n trials, then tell them.
  optuna31-tpe-mv   the same with multivariate=True, group=True.
  optuna49-gp       Optuna 4.9's GPSampler(seed) from its source tree
                    ($OPTUNA_SRC); it sees the asked, untold trials as running.
  botorch-qlognei   BoTorch 0.11.1 ($BOTORCH_PATH): the loop of
                    ../shared/peers/botorch_peer.py on the unit-cube encoding
                    of the space (log-scaled where the parameter is, one-hot
                    categories, bools and integers as [0, 1] coordinates
                    rounded when decoded): 2 * (D + 1) scrambled-Sobol points
                    first (whole batches of n), then SingleTaskGP
                    (Normalize, Standardize) fit on the decoded points,
                    qLogNoisyExpectedImprovement, optimize_acqf with q = n
                    jointly, 10 restarts, 512 raw samples.

Only the chosen adapter's library is imported, so one process holds one
Optuna version.
"""

from __future__ import annotations

import os
import sys
import uuid
import warnings
from typing import Optional

import numpy as np

from . import problems as P

HYPERTUNE = {"hypertune-gp_bandit": "GP_BANDIT", "hypertune-tpe": "TPE",
             "hypertune-random": "RANDOM", "hypertune-quasi_random": "QUASI_RANDOM"}
PEERS = ("optuna31-tpe", "optuna31-tpe-mv", "optuna49-gp", "botorch-qlognei")
ALL = tuple(HYPERTUNE) + PEERS


def versions(name: str) -> dict:
    """What ran: library versions, and hypertune's commit."""
    if name in HYPERTUNE:
        return {"hypertune": os.environ.get("REAL_PROBLEMS_COMMIT", ""),
                "bin_dir": os.environ.get("HYPERTUNE_BIN_DIR", "build/bin")}
    if name.startswith("optuna"):
        import optuna
        return {"optuna": optuna.__version__}
    import botorch
    import gpytorch
    import torch
    return {"botorch": botorch.__version__, "gpytorch": gpytorch.__version__,
            "torch": torch.__version__}


def make(name: str, problem: P.Problem, seed: int, server: Optional[str] = None):
    if name in HYPERTUNE:
        return Hypertune(HYPERTUNE[name], problem, seed, server)
    if name.startswith("optuna"):
        return OptunaAdapter(name, problem, seed)
    if name == "botorch-qlognei":
        return BoTorch(problem, seed)
    raise ValueError(f"unknown optimizer {name!r}; known: {', '.join(ALL)}")


# ----- hypertune -----

def hypertune_parameter(p: P.Param) -> dict:
    if isinstance(p, P.Float):
        return {"name": p.name, "double_spec": {
            "min": p.low, "max": p.high, "scale": "LOG" if p.log else "LINEAR"}}
    if isinstance(p, P.Int):
        return {"name": p.name, "integer_spec": {
            "min": p.low, "max": p.high, "scale": "LOG" if p.log else "LINEAR"}}
    if isinstance(p, P.Bool):
        return {"name": p.name, "categorical_spec": {"values": ["false", "true"]}}
    return {"name": p.name, "categorical_spec": {"values": list(p.choices)}}


class Hypertune:
    def __init__(self, algorithm: str, problem: P.Problem, seed: int, server: str):
        import hypertune

        self.space = problem.space
        self.client = hypertune.Client(server)
        self.study = self.client.create_study({
            "name": f"{problem.name}-{algorithm.lower()}-s{seed}-{uuid.uuid4().hex[:8]}",
            "spec": {"parameters": [hypertune_parameter(p) for p in problem.space],
                     "metrics": [{"name": "loss", "goal": "MINIMIZE"}],
                     "algorithm": algorithm, "seed": seed + 1}})
        self.pending: list = []

    def ask(self, n: int) -> list:
        trials = []
        while len(trials) < n:
            got = self.study.suggest(n - len(trials))
            if not got:
                raise RuntimeError(f"study {self.study.name} gave no trial")
            trials.extend(got)
        self.pending = trials
        return [self._config(t.params) for t in trials]

    def _config(self, params: dict) -> dict:
        out = {}
        for p in self.space:
            v = params[p.name]
            if isinstance(p, P.Bool):
                out[p.name] = v == "true"
            elif isinstance(p, P.Int):
                out[p.name] = int(v)
            elif isinstance(p, P.Float):
                out[p.name] = float(v)
            else:
                out[p.name] = v
        return out

    def tell(self, values: list) -> None:
        for trial, value in zip(self.pending, values):
            trial.complete(loss=value)
        self.pending = []

    def close(self) -> None:
        self.client.close()


# ----- Optuna (3.1 from Debian, 4.9 from its source tree) -----

class OptunaAdapter:
    def __init__(self, name: str, problem: P.Problem, seed: int):
        if name == "optuna49-gp":
            sys.path.insert(0, os.environ["OPTUNA_SRC"])
        import optuna

        optuna.logging.set_verbosity(optuna.logging.ERROR)
        warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
        want = "4.9" if name == "optuna49-gp" else "3.1"
        if not optuna.__version__.startswith(want):
            raise RuntimeError(f"{name} needs Optuna {want}, found {optuna.__version__} "
                               f"(OPTUNA_SRC={os.environ.get('OPTUNA_SRC')})")
        self.optuna = optuna
        self.name, self.seed, self.space = name, seed, problem.space
        self.study = None
        self.pending: list = []

    def _sampler(self, n: int):
        samplers = self.optuna.samplers
        if self.name == "optuna49-gp":
            return samplers.GPSampler(seed=self.seed)
        multivariate = self.name == "optuna31-tpe-mv"
        return samplers.TPESampler(seed=self.seed, constant_liar=n > 1,
                                   multivariate=multivariate, group=multivariate)

    def ask(self, n: int) -> list:
        if self.study is None:  # constant_liar depends on the batch size
            self.study = self.optuna.create_study(sampler=self._sampler(n))
        self.pending = [self.study.ask() for _ in range(n)]
        return [self._suggest(t) for t in self.pending]

    def _suggest(self, trial) -> dict:
        out = {}
        for p in self.space:
            if isinstance(p, P.Float):
                out[p.name] = trial.suggest_float(p.name, p.low, p.high, log=p.log)
            elif isinstance(p, P.Int):
                out[p.name] = trial.suggest_int(p.name, p.low, p.high, log=p.log)
            elif isinstance(p, P.Bool):
                out[p.name] = trial.suggest_categorical(p.name, [False, True])
            else:
                out[p.name] = trial.suggest_categorical(p.name, list(p.choices))
        return out

    def tell(self, values: list) -> None:
        for trial, value in zip(self.pending, values):
            self.study.tell(trial, value)
        self.pending = []

    def close(self) -> None:
        pass


# ----- BoTorch -----

class BoTorch:
    def __init__(self, problem: P.Problem, seed: int):
        for path in reversed([p for p in os.environ.get("BOTORCH_PATH", "").split(os.pathsep)
                              if p]):
            sys.path.insert(0, path)
        import torch

        torch.set_num_threads(1)
        warnings.filterwarnings("ignore")
        self.torch = torch
        self.space = problem.space
        self.dims = sum(len(p.choices) if isinstance(p, P.Cat) else 1 for p in self.space)
        self.n_init = 2 * (self.dims + 1)
        torch.manual_seed(seed)
        self.sobol = torch.quasirandom.SobolEngine(self.dims, scramble=True, seed=seed)
        self.X: list = []  # encoded evaluated points
        self.Y: list = []  # -loss (BoTorch maximizes)
        self.pending: list = []

    def encode(self, config: dict) -> list:
        out = []
        for p in self.space:
            if isinstance(p, P.Cat):
                out.extend(1.0 if config[p.name] == c else 0.0 for c in p.choices)
            else:
                out.append(P.unit(p, config[p.name]))
        return out

    def decode(self, u) -> dict:
        out, i = {}, 0
        for p in self.space:
            if isinstance(p, P.Cat):
                k = len(p.choices)
                out[p.name] = p.choices[int(np.argmax(u[i:i + k]))]
                i += k
            else:
                out[p.name] = P.from_unit(p, u[i])
                i += 1
        return out

    def ask(self, n: int) -> list:
        torch = self.torch
        if len(self.X) < self.n_init:
            cand = self.sobol.draw(n, dtype=torch.double)
        else:
            from botorch.acquisition.logei import qLogNoisyExpectedImprovement
            from botorch.fit import fit_gpytorch_mll
            from botorch.models import SingleTaskGP
            from botorch.models.transforms.input import Normalize
            from botorch.models.transforms.outcome import Standardize
            from botorch.optim import optimize_acqf
            from botorch.sampling.normal import SobolQMCNormalSampler
            from gpytorch.mlls import ExactMarginalLogLikelihood

            X = torch.tensor(self.X, dtype=torch.double)
            Y = torch.tensor(self.Y, dtype=torch.double).unsqueeze(-1)
            bounds = torch.stack([torch.zeros(self.dims, dtype=torch.double),
                                  torch.ones(self.dims, dtype=torch.double)])
            model = SingleTaskGP(X, Y, input_transform=Normalize(d=self.dims, bounds=bounds),
                                 outcome_transform=Standardize(m=1))
            fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
            acqf = qLogNoisyExpectedImprovement(
                model=model, X_baseline=X, prune_baseline=True,
                sampler=SobolQMCNormalSampler(sample_shape=torch.Size([256])))
            cand, _ = optimize_acqf(acqf, bounds=bounds, q=n, num_restarts=10,
                                    raw_samples=512, options={"batch_limit": 5, "maxiter": 200})
            cand = cand.detach()
        self.pending = [self.decode(row.tolist()) for row in cand]
        return self.pending

    def tell(self, values: list) -> None:
        for config, value in zip(self.pending, values):
            self.X.append(self.encode(config))
            self.Y.append(-value)
        self.pending = []

    def close(self) -> None:
        pass
