"""The KQL evaluator's `in`, `project` and `sort by`, as KQL defines them."""

from __future__ import annotations

from typing import Any

import pytest

from testkit.kql import UnsupportedQueryError, run_query

ROWS: list[dict[str, Any]] = [
    {"Op": "DeleteBlob", "At": 2, "Who": "a"},
    {"Op": "GetBlob", "At": 3, "Who": "b"},
    {"Op": "DeleteContainer", "At": None, "Who": "c"},
    {"Op": "deleteblob", "At": 1, "Who": "d"},
]


def who(query: str) -> list[str]:
    return [row["Who"] for row in run_query(query, {"T": ROWS})]


def test_in_keeps_rows_whose_column_equals_a_listed_string_case_sensitively() -> None:
    """`in` matches exact strings only: `deleteblob` is not `DeleteBlob`."""
    assert who('T\n| where Op in ("DeleteBlob", "DeleteContainer")') == ["a", "c"]


def test_project_keeps_only_the_named_columns_in_order() -> None:
    """`project` returns the named columns, in the order named, and nothing else."""
    rows = run_query("T\n| project Who, Op", {"T": ROWS[:1]})

    assert [list(row.items()) for row in rows] == [[("Who", "a"), ("Op", "DeleteBlob")]]


def test_sort_is_descending_by_default_with_nulls_last_and_ascending_with_nulls_first() -> None:
    """`sort by` alone sorts high to low with nulls last; `asc` low to high with nulls first."""
    assert who("T\n| sort by At") == ["b", "a", "d", "c"]
    assert who("T\n| sort by At desc") == ["b", "a", "d", "c"]
    assert who("T\n| sort by At asc") == ["c", "d", "a", "b"]


@pytest.mark.parametrize(
    "step",
    ["where Op in (DeleteBlob)", "project Who = Op", "sort by At, Who", "order by At"],
)
def test_forms_beyond_the_subset_are_refused(step: str) -> None:
    """An `in` list of bare names, a computed projection, a sort by two columns and `order by`
    are outside the subset and raise, never pass unchecked."""
    with pytest.raises(UnsupportedQueryError):
        run_query(f"T\n| {step}", {"T": ROWS})
