"""A sweep's training program, standard library only, run by
`hypertune worker NAME --wandb` through W&B's macros (wandb_e2e_test.cc).

It reads its parameters the ways W&B's macros pass them (--name=value,
--flag, name=value, --json JSON, --json_file PATH), exits 3 when they
disagree with each other or with HYPERTUNE_PARAMS, and reports a loss that
is a function of the parameters, with intermediate steps.
"""
import json
import os
import sys


def main():
    flags = {}
    json_text = None
    json_file = None
    tag = None
    args = sys.argv[1:]
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in ("--json", "--json_file", "--tag"):
            value = args[i + 1]
            i += 2
            if arg == "--json":
                json_text = value
            elif arg == "--json_file":
                json_file = value
            else:
                tag = value
            continue
        i += 1
        name, sep, value = arg.lstrip("-").partition("=")
        flags[name] = value if sep else True
    if tag is not None and tag != os.environ.get("WANDB_TEST_TAG"):
        sys.exit("tag %r is not $WANDB_TEST_TAG" % tag)
    if json_file is not None:
        with open(json_file, encoding="utf-8") as f:
            from_file = json.load(f)
        if from_file != json.loads(json_text):
            sys.exit("${args_json_file} %r != ${args_json} %r" %
                     (from_file, json_text))
        print("json_file=" + json_file)
        # Flags of booleans: present when True, absent when False.
        if from_file["augment"] != ("augment" in flags):
            sys.exit("augment %r but flags %r" % (from_file["augment"], flags))
        if not isinstance(from_file["batch_size"], int):
            sys.exit("batch_size is not an integer in JSON")
        flags["augment"] = from_file["augment"]
    params = json.loads(os.environ["HYPERTUNE_PARAMS"])
    lr = float(flags["lr"])
    batch_size = int(flags["batch_size"])  # "32", as W&B writes an int
    layers = int(flags["model.layers"])
    if abs(lr - params["lr"]) > 1e-12 * lr or layers != params["model.layers"]:
        sys.exit("flags %r disagree with HYPERTUNE_PARAMS %r" % (flags, params))
    loss = lr + batch_size / 100 + (flags["optimizer"] == "sgd") + layers * 10
    if flags.get("augment") is True:
        loss += 1000
    for step in (1, 2):
        print("hypertune: loss=%r step=%d" % (loss + 1 / step, step))
    print("hypertune: loss=%r" % loss)


if __name__ == "__main__":
    main()
