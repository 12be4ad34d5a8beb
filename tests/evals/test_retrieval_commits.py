"""benchmarks/retrieval_commits.py places a change in a commit only above the runs' own noise."""

from __future__ import annotations

from tests.evals.benchmarks import load_benchmark


def test_a_question_that_differs_between_runs_of_one_commit_is_not_counted_as_a_change():
    steps = load_benchmark("retrieval_commits").steps
    a1 = {"q1": ["x", "y"], "q2": ["a", "b"], "q3": ["m"]}
    a2 = {"q1": ["x", "y"], "q2": ["a", "c"], "q3": ["m"]}  # q2 flaps at commit a
    b1 = {"q1": ["y", "x"], "q2": ["a", "c"], "q3": ["m"]}
    b2 = {"q1": ["y", "x"], "q2": ["a", "b"], "q3": ["m"]}
    flappers, changes = steps(["a", "b"], {"a": [a1, a2], "b": [b1, b2]})
    assert flappers == ["q2"]
    assert changes == [{"from": "a", "to": "b", "differ": 2, "changed": ["q1"]}]


def test_a_question_flapping_at_any_commit_is_a_flapper_at_every_step():
    steps = load_benchmark("retrieval_commits").steps
    same = {"q1": ["x"], "q2": ["y"]}
    flappers, changes = steps(["a", "b", "c"], {"a": [same, same], "b": [{"q1": ["z"], "q2": ["y"]}, same],
                                                "c": [same, same]})
    assert flappers == ["q1"]
    assert [c["changed"] for c in changes] == [[], []]
    assert [c["differ"] for c in changes] == [1, 1]
