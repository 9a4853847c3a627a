"""Cross-checks hypertune's reading of a W&B sweep file against PyYAML's,
which `wandb sweep` uses: every number, string and boolean the sweep gives
(bounds, lists of values, constants, the metric, run_cap) must be what the
study holds. Run by wandb_e2e_test.cc with Debian's python3-yaml:

    crosscheck.py SWEEP.yaml STUDY.json    (STUDY: `study get --format json`)

Exits 1 naming each disagreement, 77 when PyYAML is not importable.
"""
import json
import sys

try:
    import yaml
except ImportError:
    print("SKIPPED: python3-yaml is not importable")
    sys.exit(77)

# Distributions whose min and max are the study's bounds as written.
PLAIN_BOUNDS = {"uniform", "int_uniform", "log_uniform_values",
                "inv_log_uniform_values", "q_log_uniform_values"}


def leaves(parameters, prefix=""):
    """(dotted name, W&B parameter) for each parameter, nested ones too."""
    for name, spec in parameters.items():
        if "parameters" in spec:
            yield from leaves(spec["parameters"], prefix + name + ".")
        else:
            yield prefix + name, spec


def as_written(value):
    """A list value as hypertune keeps a category."""
    if isinstance(value, bool):
        return "True" if value else "False"
    return str(value)


def check(sweep, study):
    problems = []
    spec = study["spec"]
    params = {p["name"]: p for p in spec["parameters"]}

    def expect(what, got, want):
        if got != want:
            problems.append("%s: study has %r, PyYAML reads %r" %
                            (what, got, want))

    metric = sweep["metric"]
    expect("metric.name", spec["metrics"][0]["name"], metric["name"])
    expect("metric.goal", spec["metrics"][0]["goal"],
           metric.get("goal", "minimize").upper())
    expect("run_cap", spec.get("max_trials", 0), sweep.get("run_cap", 0))
    for name, w in leaves(sweep["parameters"]):
        p = params.get(name)
        if p is None:
            problems.append("%s: not in the study" % name)
            continue
        values = w.get("values", [w["value"]] if "value" in w else None)
        if values is not None:
            numeric = all(isinstance(v, (int, float)) and
                          not isinstance(v, bool) for v in values)
            if numeric:
                expect(name, p["discrete_spec"]["values"],
                       sorted(set(float(v) for v in values)))
            else:
                want = list(dict.fromkeys(as_written(v) for v in values))
                expect(name, p["categorical_spec"]["values"], want)
            continue
        dist = w.get("distribution")
        if dist is None:
            both_int = isinstance(w["min"], int) and isinstance(w["max"], int)
            dist = "int_uniform" if both_int else "uniform"
        if dist in PLAIN_BOUNDS:
            kind = "integer_spec" if "integer_spec" in p else "double_spec"
            expect(name + ".min", float(p[kind].get("min", 0)),
                   float(w["min"]))
            expect(name + ".max", float(p[kind].get("max", 0)),
                   float(w["max"]))
    return problems


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        sweep = yaml.safe_load(f)
    with open(sys.argv[2], encoding="utf-8") as f:
        study = json.load(f)
    problems = check(sweep, study)
    for problem in problems:
        print(problem)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
