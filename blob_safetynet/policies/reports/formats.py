"""Every report format by name: the audit's renderers and writers and the verification run's,
one module per format beside this one (`table`, `json`, `sarif`, `junit`, `csv`, `markdown`,
`html`).

Each audit format is a generator of text (`iter_*`), which reads the report's results account
by account and holds none of them: a fleet's results spooled to disk are written with flat
memory (`stream.py`), and `render_*` is the same text joined, byte for byte. Every value that
came from outside goes through the format's rule in `escaping.py`; Jinja2 is imported only
when HTML is asked for."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Final

from blob_safetynet.policies.probes import VerificationRun
from blob_safetynet.policies.reports.csv import iter_csv, render_csv, render_verify_csv
from blob_safetynet.policies.reports.json import iter_json, render_json, render_verify_json
from blob_safetynet.policies.reports.junit import iter_junit, render_junit, render_verify_junit
from blob_safetynet.policies.reports.markdown import (
    iter_markdown,
    render_markdown,
    render_verify_markdown,
)
from blob_safetynet.policies.reports.sarif import iter_sarif, render_sarif, render_verify_sarif
from blob_safetynet.policies.reports.table import iter_table, render_table, render_verify_table
from blob_safetynet.policies.reports.view import (
    Judged,
    ReportContext,
)

AuditRenderer = Callable[[Judged, ReportContext], str]


AuditWriter = Callable[[Judged, ReportContext], Iterator[str]]


def render_html(report: Judged, context: ReportContext) -> str:
    """The HTML report; Jinja2 is imported only when one is asked for."""
    return "".join(iter_html(report, context))


def iter_html(report: Judged, context: ReportContext) -> Iterator[str]:
    """`render_html` as the template writes it."""
    from blob_safetynet.policies.reports import html as report_html

    return report_html.iter_html(report, context)


RENDERERS: Final[dict[str, AuditRenderer]] = {
    "table": render_table,
    "json": render_json,
    "sarif": render_sarif,
    "junit": render_junit,
    "csv": render_csv,
    "markdown": render_markdown,
    "html": render_html,
}


WRITERS: Final[dict[str, AuditWriter]] = {
    "table": iter_table,
    "json": iter_json,
    "sarif": iter_sarif,
    "junit": iter_junit,
    "csv": iter_csv,
    "markdown": iter_markdown,
    "html": iter_html,
}


"""`RENDERERS`, as generators of text that hold one account's result at a time."""


def render_verify_html(run: VerificationRun) -> str:
    """The verification run as HTML; Jinja2 is imported only when one is asked for."""
    from blob_safetynet.policies.reports import html as report_html

    return report_html.render_verify_html(run)


VERIFY_RENDERERS: Final[dict[str, Callable[[VerificationRun], str]]] = {
    "table": render_verify_table,
    "json": render_verify_json,
    "sarif": render_verify_sarif,
    "junit": render_verify_junit,
    "csv": render_verify_csv,
    "markdown": render_verify_markdown,
    "html": render_verify_html,
}
