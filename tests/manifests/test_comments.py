"""A comment beside ``replicas:`` that pins a workload to one instance."""

from __future__ import annotations

import pytest

from svcdoctor.manifests.comments import pinned_replicas


@pytest.mark.parametrize(
    ("text", "pins"),
    [
        (
            "spec:\n  # DO NOT INCREASE REPLICA COUNT\n  replicas: 1\n",
            {3: "DO NOT INCREASE REPLICA COUNT"},
        ),
        ("spec:\n  replicas: 1 # don't modify this replicas\n", {2: "don't modify this replicas"}),
        (
            "spec:\n  # Do not scale up.\n  # it merges PRs\n  replicas: 1\n",
            {4: "Do not scale up."},
        ),
        (
            "spec:\n  replicas: 1  # must be 1: the scheduler is a singleton\n",
            {2: "must be 1: the scheduler is a singleton"},
        ),
        ("spec:\n  replicas: 1  # only one instance may run\n", {2: "only one instance may run"}),
        (
            "spec:\n  # GHProxy does not support HA\n  replicas: 1\n",  # prow's ghproxy, judge267
            {3: "GHProxy does not support HA"},
        ),
    ],
)
def test_a_comment_that_forbids_a_second_replica_pins(text: str, pins: dict[int, str]) -> None:
    assert pinned_replicas(text) == pins


@pytest.mark.parametrize(
    "text",
    [
        "spec:\n  replicas: 3 # increase for HA\n",
        "spec:\n  # the chart supports HA: raise it\n  replicas: 1\n",
        "spec:\n  # replicas: 1 for dev, 3 for prod\n  replicas: 1\n",
        "spec:\n  # Do not scale up.\n\n  replicas: 1\n",  # a blank line ends the comment block
        "spec:\n  # Do not change the selector\n  selector: {}\n  replicas: 1\n",
        "metadata:\n  annotations: {note: 'replicas: do not scale'}\nspec:\n  replicas: 2\n",
        "spec:\n  replicas: 2\n",
    ],
)
def test_other_comments_pin_nothing(text: str) -> None:
    assert pinned_replicas(text) == {}


def test_lines_count_from_one_across_documents() -> None:
    text = "a: 1\n---\nspec:\n  replicas: 2\n---\nspec:\n  replicas: 1 # singleton\n"
    assert pinned_replicas(text) == {7: "singleton"}
