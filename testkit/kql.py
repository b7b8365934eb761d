"""A small evaluator for the KQL subset the alert rules use, over rows built from real telemetry.

No Log Analytics exists here, so the alert queries (blob_safetynet/infra/alerts.py) are run against the rows the
code's own telemetry becomes in Application Insights: custom events (`customEvents`: `name` and
`customDimensions`), gauges (`customMetrics`: `name` and `value`) and log records (`traces`:
`message`), per Microsoft's mapping of OpenTelemetry to those tables
(https://learn.microsoft.com/azure/azure-monitor/app/opentelemetry-add-modify?tabs=python).

The same evaluator runs docs/operations.md's query over the storage account's resource logs
(`StorageBlobLogs`), over rows shaped like that table's columns
(https://learn.microsoft.com/azure/azure-monitor/reference/tables/storagebloblogs).

Only the operators those queries use are understood: `where` with `==`, `>`, `has` and `in` (a
list of strings, compared case-sensitively as KQL's `in` is), `extend` with `parse_json`,
`tostring` and `toint`, `project` of columns, and `sort by` one column (descending unless `asc`,
nulls last when descending and first when ascending, as KQL sorts them:
https://learn.microsoft.com/kusto/query/sort-operator). Anything else raises
`UnsupportedQueryError`, so a query that grows beyond what this evaluator checks fails its test
instead of passing unchecked.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any, Final

Row = dict[str, Any]
_STRING: Final = r'"((?:[^"\\]|\\.)*)"'
_WHERE: Final = re.compile(rf"where (.+?) (==|>|has) ({_STRING}|-?[0-9]+)")
_WHERE_IN: Final = re.compile(rf"where (\w+) in \(({_STRING}(?:, {_STRING})*)\)")
_EXTEND: Final = re.compile(r"extend (.+)")
_PROJECT: Final = re.compile(r"project (\w+(?:, \w+)*)")
_SORT: Final = re.compile(r"sort by (\w+)(?: (asc|desc))?")
_ASSIGN: Final = re.compile(r"(\w+) = (.+)")


class UnsupportedQueryError(ValueError):
    """The query uses KQL this evaluator does not implement."""


def run_query(query: str, tables: Mapping[str, Iterable[Row]]) -> list[Row]:
    """The rows `query` returns from `tables`."""
    table, *steps = [part.strip() for part in query.split("\n| ")]
    if table not in tables:
        raise UnsupportedQueryError(f"unknown table {table!r}")
    rows = [dict(row) for row in tables[table]]
    for step in steps:
        rows = _step(step, rows)
    return rows


def _step(step: str, rows: list[Row]) -> list[Row]:
    listed = _WHERE_IN.fullmatch(step)
    if listed is not None:
        names = {json.loads(f'"{item}"') for item in re.findall(_STRING, listed[2])}
        return [row for row in rows if row.get(listed[1]) in names]
    project = _PROJECT.fullmatch(step)
    if project is not None:
        columns = project[1].split(", ")
        return [{column: row.get(column) for column in columns} for row in rows]
    sort = _SORT.fullmatch(step)
    if sort is not None:
        return _sorted(rows, sort[1], descending=sort[2] != "asc")
    where = _WHERE.fullmatch(step)
    if where is not None:
        left, operator, literal = where[1], where[2], where[3]
        wanted: Any = json.loads(literal) if literal.startswith('"') else int(literal)
        return [row for row in rows if _compare(_value(left, row), operator, wanted)]
    extend = _EXTEND.fullmatch(step)
    if extend is not None:
        assignments = [_ASSIGN.fullmatch(part.strip()) for part in extend[1].split(", ")]
        if any(a is None for a in assignments):
            raise UnsupportedQueryError(f"unsupported extend: {step!r}")
        for row in rows:
            for assignment in assignments:
                assert assignment is not None
                row[assignment[1]] = _value(assignment[2], row)
        return rows
    raise UnsupportedQueryError(f"unsupported step: {step!r}")


def _sorted(rows: list[Row], column: str, *, descending: bool) -> list[Row]:
    present = [row for row in rows if row.get(column) is not None]
    empty = [row for row in rows if row.get(column) is None]
    ordered = sorted(present, key=lambda row: row[column], reverse=descending)
    return ordered + empty if descending else empty + ordered


def _compare(value: Any, operator: str, wanted: Any) -> bool:
    if operator == "==":
        return bool(value == wanted)
    if operator == ">":
        return value is not None and value > wanted
    return isinstance(value, str) and str(wanted).lower() in value.lower()


def _value(expression: str, row: Row) -> Any:
    expression = expression.strip()
    call = re.fullmatch(r"(tostring|toint|parse_json)\((.+)\)", expression)
    if call is not None:
        inner = _value(call[2], row)
        if call[1] == "tostring":
            return "" if inner is None else str(inner)
        if call[1] == "toint":
            return int(inner) if isinstance(inner, int | str) and str(inner).isdigit() else None
        try:
            return json.loads(inner) if isinstance(inner, str) else None
        except ValueError:
            return None
    index = re.fullmatch(rf"(\w+)\[{_STRING}\]", expression)
    if index is not None:
        container = row.get(index[1])
        return container.get(json.loads(f'"{index[2]}"')) if isinstance(container, dict) else None
    member = re.fullmatch(r"(\w+)\.(\w+)", expression)
    if member is not None:
        container = row.get(member[1])
        return container.get(member[2]) if isinstance(container, dict) else None
    if re.fullmatch(r"\w+", expression):
        return row.get(expression)
    raise UnsupportedQueryError(f"unsupported expression: {expression!r}")
