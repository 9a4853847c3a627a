"""Writes an Optuna RDB storage file for the import-optuna test.

usage: make_optuna_study.py DB_PATH EXPECTED_JSON [demo|conditional|odd]

Exits 77 when optuna cannot be imported (Debian's python3-optuna absent).
demo (the default): the file holds "optuna-demo" (one objective: float, log,
step, int, int step, categorical parameters; completed, pruned, failed and
waiting trials; intermediate values; user attributes) and "optuna-mo" (two
objectives).
conditional: "optuna-conditional", a define-by-run space: "momentum" only
for optimizer "sgd", "units_1" and "units_2" only for 2 or 3 layers,
"warmup" on every third trial (nothing explains it), and a trial that
failed before choosing all its parameters.
odd: "optuna-odd", a study whose file was edited after Optuna wrote it: a
text parameter value, a NULL categorical index, an Int whose step was 2 in
some trials and 3 in others, an Int step over too many values; and, in
DB_PATH.state and DB_PATH.direction, one study each with a trial in state
ZOMBIE and a direction SIDEWAYS.
EXPECTED_JSON receives what the test checks every imported trial against.
"""
import json
import shutil
import sqlite3
import sys

try:
    import optuna
except ImportError:
    sys.exit(77)

optuna.logging.set_verbosity(optuna.logging.WARNING)
db_path, expected_path = sys.argv[1], sys.argv[2]
mode = sys.argv[3] if len(sys.argv) > 3 else "demo"
storage = f"sqlite:///{db_path}"


def describe(trial):
    return {
        "number": trial.number,
        "state": trial.state.name,
        "params": trial.params,
        "values": trial.values,
        "intermediate": {str(k): v for k, v in trial.intermediate_values.items()},
        "user_attrs": trial.user_attrs,
    }


def write_expected():
    expected = {
        s.study_name: [describe(t) for t in
                       optuna.load_study(study_name=s.study_name, storage=storage)
                       .get_trials(deepcopy=False)]
        for s in optuna.get_all_study_summaries(storage)
    }
    with open(expected_path, "w") as f:
        json.dump(expected, f)


if mode == "conditional":
    study = optuna.create_study(
        storage=storage, study_name="optuna-conditional",
        sampler=optuna.samplers.RandomSampler(seed=11))

    def conditional(trial):
        opt = trial.suggest_categorical("optimizer", ["adam", "sgd"])
        lr = trial.suggest_float("lr", 1e-4, 1e-1, log=True)
        loss = lr
        if opt == "sgd":
            loss += trial.suggest_float("momentum", 0.0, 0.99)
        if trial.number == 5:
            raise RuntimeError("failed before choosing its layers")
        layers = trial.suggest_int("layers", 1, 3)
        for i in range(layers):
            loss += trial.suggest_int(f"units_{i}", 8, 64) / 100
        if trial.number % 3 == 0:
            loss += trial.suggest_float("warmup", 0.0, 1.0)
        return loss

    study.optimize(conditional, n_trials=24, catch=(RuntimeError,))
    write_expected()
    sys.exit(0)

if mode == "odd":
    study = optuna.create_study(
        storage=storage, study_name="optuna-odd",
        sampler=optuna.samplers.RandomSampler(seed=5))

    def odd(trial):
        x = trial.suggest_float("x", 0.0, 1.0)
        act = trial.suggest_categorical("act", ["relu", "tanh"])
        layers = trial.suggest_int("layers", 1, 13, step=2 if trial.number < 3 else 3)
        wide = trial.suggest_int("wide", 0, 100000, step=5)
        return x + layers + wide / 1e5 + (act == "relu")

    study.optimize(odd, n_trials=6)
    write_expected()
    db = sqlite3.connect(db_path)
    # Trial 1's x as text, trial 2's act index NULL.
    db.execute("UPDATE trial_params SET param_value = 'abc' WHERE "
               "param_name = 'x' AND trial_id = (SELECT trial_id FROM trials "
               "WHERE number = 1)")
    db.execute("UPDATE trial_params SET param_value = NULL WHERE "
               "param_name = 'act' AND trial_id = (SELECT trial_id FROM trials "
               "WHERE number = 2)")
    db.commit()
    db.close()
    for suffix, sql in (
            ("state", "UPDATE trials SET state = 'ZOMBIE' WHERE number = 4"),
            ("direction", "UPDATE study_directions SET direction = 'SIDEWAYS'")):
        shutil.copyfile(db_path, f"{db_path}.{suffix}")
        db = sqlite3.connect(f"{db_path}.{suffix}")
        db.execute(sql)
        db.commit()
        db.close()
    sys.exit(0)

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

write_expected()
