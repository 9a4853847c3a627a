"""Writes an Optuna RDB storage file for the import-optuna test.

usage: make_optuna_study.py DB_PATH EXPECTED_JSON

Exits 77 when optuna cannot be imported (Debian's python3-optuna absent).
The file holds "optuna-demo" (one objective: float, log, step, int, int
step, categorical parameters; completed, pruned, failed and waiting trials;
intermediate values; user attributes) and "optuna-mo" (two objectives).
EXPECTED_JSON receives what the test checks every imported trial against.
"""
import json
import sys

try:
    import optuna
except ImportError:
    sys.exit(77)

optuna.logging.set_verbosity(optuna.logging.WARNING)
db_path, expected_path = sys.argv[1], sys.argv[2]
storage = f"sqlite:///{db_path}"

study = optuna.create_study(
    storage=storage,
    study_name="optuna-demo",
    direction="minimize",
    sampler=optuna.samplers.RandomSampler(seed=7),
    pruner=optuna.pruners.NopPruner(),
)
study.set_user_attr("team", "vision")


def objective(trial):
    lr = trial.suggest_float("lr", 1e-4, 1e-1, log=True)
    dropout = trial.suggest_float("dropout", 0.0, 0.5, step=0.1)
    units = trial.suggest_int("units", 16, 256, log=True)
    layers = trial.suggest_int("layers", 1, 7, step=2)
    opt = trial.suggest_categorical("optimizer", ["adam", "sgd", "rmsprop"])
    batch = trial.suggest_categorical("batch", [32, 64, 128])
    loss = (lr * 10 - 0.3) ** 2 + dropout + units / 1000 + layers / 10
    loss += {"adam": 0.0, "sgd": 0.1, "rmsprop": 0.2}[opt] + batch / 1000
    trial.set_user_attr("epochs_run", 3)
    trial.set_user_attr("converged", True)
    trial.set_user_attr("comment", "text is kept as text")
    trial.set_user_attr("layers_used", [1, 2])
    for step in range(3):
        trial.report(loss + (3 - step) * 0.1, step)
        if trial.number in (3, 5) and step == 1:
            raise optuna.TrialPruned()
    if trial.number == 4:
        raise RuntimeError("diverged")
    return loss


study.optimize(objective, n_trials=10, catch=(RuntimeError,))
study.enqueue_trial({"lr": 0.01, "dropout": 0.2, "units": 64, "layers": 3,
                     "optimizer": "adam", "batch": 64})

mo = optuna.create_study(storage=storage, study_name="optuna-mo",
                         directions=["minimize", "maximize"],
                         sampler=optuna.samplers.RandomSampler(seed=3))
mo.optimize(lambda t: (t.suggest_float("x", 0, 1), t.suggest_int("n", 1, 4)),
            n_trials=5)


def describe(trial):
    return {
        "number": trial.number,
        "state": trial.state.name,
        "params": trial.params,
        "values": trial.values,
        "intermediate": {str(k): v for k, v in trial.intermediate_values.items()},
        "user_attrs": trial.user_attrs,
    }


expected = {
    s.study_name: [describe(t) for t in
                   optuna.load_study(study_name=s.study_name, storage=storage)
                   .get_trials(deepcopy=False)]
    for s in optuna.get_all_study_summaries(storage)
}
with open(expected_path, "w") as f:
    json.dump(expected, f)
