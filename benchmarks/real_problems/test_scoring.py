"""real_problems.py's scoring and encodings on fixtures whose answers are worked
out by hand, and one short cell end to end (needs scikit-learn and Optuna;
skipped without them). Run by ctest as bench_real_problems (pytest)."""

from __future__ import annotations

import math

import pytest

from real_problems import problems as P
from real_problems import scoring


def row(optimizer, problem, seed, best, mode="batch8", **extra):
    return {"optimizer": optimizer, "problem": problem, "seed": seed, "mode": mode,
            "best": best, **extra}


def constant(value, n=128):
    return [value] * n


@pytest.fixture
def rows():
    # Problem a: opt = 1.0 (gp, seed 0), random final bests 3, 5, 9 -> median 5.
    # Problem b: opt = 10.0 (tpe, seed 1), random median 20.
    return [
        row("rand", "a", 0, constant(3.0)), row("rand", "a", 1, constant(5.0)),
        row("rand", "a", 2, constant(9.0)),
        row("rand", "b", 0, constant(20.0)), row("rand", "b", 1, constant(30.0)),
        row("rand", "b", 2, constant(15.0)),
        row("gp", "a", 0, [4.0] * 40 + [1.0] * 88), row("gp", "a", 1, constant(3.0)),
        row("gp", "b", 0, constant(15.0)), row("gp", "b", 1, constant(12.0)),
        row("tpe", "a", 0, constant(5.0)), row("tpe", "a", 1, constant(2.0)),
        row("tpe", "b", 0, constant(20.0)), row("tpe", "b", 1, constant(10.0)),
    ]


def test_normalized_score_is_100_at_the_best_and_0_at_random_median(rows):
    norm = scoring.Normalizer(rows, random="rand")
    assert norm.opt == {"a": 1.0, "b": 10.0}
    assert norm.zero("a", 128) == 5.0
    assert norm.zero("b", 128) == 20.0
    assert norm.score("a", 1.0, 128) == pytest.approx(100.0)
    assert norm.score("a", 5.0, 128) == pytest.approx(0.0)
    assert norm.score("a", 3.0, 128) == pytest.approx(50.0)
    assert norm.score("b", 25.0, 128) == pytest.approx(-50.0)


def test_mean_over_problems_then_seeds_with_standard_error(rows):
    norm = scoring.Normalizer(rows, random="rand")
    summ = scoring.summary(rows, norm, rounds=(4, 16))
    # gp seed 0: a 100, b 50 -> 75; seed 1: a 50, b 80 -> 65. Mean 70, se 5.
    mean, se, seeds, problems = summ["gp/batch8"][16]
    assert (mean, seeds, problems) == (pytest.approx(70.0), 2, 2)
    assert se == pytest.approx(5.0)
    # After 4 rounds (32 evaluations) gp's seed 0 on a was still at 4.0: 25.
    assert summ["gp/batch8"][4][0] == pytest.approx(((25 + 50) / 2 + 65) / 2)
    # tpe: seed 0: a 0, b 0; seed 1: a 75, b 100.
    assert summ["tpe/batch8"][16][0] == pytest.approx(43.75)


def test_head_to_head_counts_ties_within_tolerance(rows):
    norm = scoring.Normalizer(rows, random="rand")
    # (a,0): 100 v 0 win; (b,0): 50 v 0 win; (a,1): 50 v 75 loss; (b,1): 80 v 100 loss.
    assert scoring.head_to_head(rows, norm, "gp/batch8", "tpe/batch8", 128) == (2, 2, 0)
    assert scoring.head_to_head(rows, norm, "gp/batch8", "tpe/batch8", 128, tie=30) == (
        2, 0, 2)
    assert scoring.head_to_head(rows, norm, "gp/batch8", "tpe/batch8", 128, tie=60) == (
        1, 0, 3)


def test_zero_at_the_same_round():
    rs = [row("rand", "a", 0, [8.0] * 32 + [4.0] * 96), row("x", "a", 0, constant(2.0))]
    final = scoring.Normalizer(rs, random="rand", zero="final")
    same = scoring.Normalizer(rs, random="rand", zero="round")
    assert final.score("a", 4.0, 32) == pytest.approx(0.0)
    assert same.score("a", 4.0, 32) == pytest.approx(100 * (1 - 2 / 6))


def test_problem_random_search_solves_is_left_out_with_a_note():
    rs = [row("rand", "a", 0, constant(1.0)), row("x", "a", 0, constant(1.0))]
    norm = scoring.Normalizer(rs, random="rand")
    assert norm.score("a", 1.0, 128) is None
    assert any("left out" in n for n in norm.notes)


def test_table_prints_every_section(rows):
    text = scoring.table(rows, random="rand")
    assert "gp/batch8" in text and "70.0 +- 5.0" in text
    assert "head to head" in text and "2-2-0" in text


def test_unit_encoding_round_trips_and_distance():
    space = [P.Float("lr", 1e-4, 1.0, log=True), P.Int("depth", 1, 9), P.Bool("flag"),
             P.Cat("kind", ("a", "b", "c"))]
    c = {"lr": 1e-2, "depth": 5, "flag": True, "kind": "c"}
    assert P.unit(space[0], 1e-2) == pytest.approx(0.5)
    assert P.unit(space[1], 5) == pytest.approx(0.5)
    for p in space:
        assert P.from_unit(p, P.unit(p, c[p.name])) == pytest.approx(c[p.name])
    d = {"lr": 1e-4, "depth": 5, "flag": False, "kind": "c"}
    # lr differs by 0.5, flag by 1: sqrt((0.25 + 1) / 4).
    assert P.distance(space, c, d) == pytest.approx(math.sqrt(1.25 / 4))
    assert P.distance(space, c, c) == 0.0


def test_one_cell_end_to_end():
    pytest.importorskip("sklearn", reason="needs python3-sklearn")
    pytest.importorskip("optuna", reason="needs python3-optuna")
    from importlib import util
    import os
    import sys

    path = os.path.join(os.path.dirname(os.path.dirname(__file__)), "real_problems.py")
    spec = util.spec_from_file_location("real_problems_main", path)
    main = util.module_from_spec(spec)
    sys.modules["real_problems_main"] = main
    spec.loader.exec_module(main)
    r = main.run_cell("optuna31-tpe", "knn_wine", 0, "batch", 4, 3, 0, None, "")
    assert r["evals"] == 12 and len(r["best"]) == 12 and len(r["suggest_seconds"]) == 3
    assert all(b2 <= b1 for b1, b2 in zip(r["best"], r["best"][1:]))
    assert r["best"][-1] == min(r["values"])
    assert 0 < r["incumbent_clean"] < 1 and 0 < r["spread"][0] <= 1
    # 12 draws from the 100 points of knn_wine's space: repeats are counted
    # against the keys seen, never more than the draws after the first.
    assert 0 <= r["repeats"] <= 11


def test_folds_are_fixed_by_the_split_seed():
    pytest.importorskip("sklearn", reason="needs python3-sklearn")
    knn = P.PROBLEMS["knn_wine"]
    c = {"n_neighbors": 7, "p": 2}
    # kNN has no randomness of its own: the split alone decides the loss.
    assert knn.evaluate(c, 1, 5) == knn.evaluate(c, 2, 5)
    losses = {knn.evaluate(c, 1, split) for split in range(6)}
    assert len(losses) > 1
    assert all(0 < v < 1 for v in losses)
