"""Hostile values by kind, and the cases that put each into a command's slot.

A value may hold `{canary}` (replaced by the case's own secret, where a secret belongs: a URL
password, a SAS signature, an account key), `{work}` (the scratch folder), `{db}` (the
SQLite file of the valid database) and `{azurite}` (the emulator's blob endpoint). Hosts are loopback port 1 or `.invalid` (RFC 6761), and
every URL that names a real Azure host is refused before any connection, so nothing leaves
the machine.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

CONTROL = "\x1b[2J\x1b]0;pwned\x07\r\x08\x7f\x9b"
"""Clears the screen, sets the window title, returns the carriage, deletes, and a C1 CSI."""
UNICODE = "\u202eevil\u200b\ufeff名前\U0001f600\u0665"
"""Right-to-left override, zero-width space, BOM, CJK, an emoji, an Arabic-Indic digit."""

GENERIC = (
    "",
    " ",
    "-",
    "--json",
    CONTROL,
    UNICODE,
    "a\nPASS injected line",
    "\udc80\udcff",
    "a" * 5000,
    "%00%0a%1b",
    "$(touch {work}/pwned)",
    "'; DROP TABLE documents; --",
)
"""Values every slot gets: empty, option-like, control characters, unicode, lone surrogates
(as a shell passes undecodable bytes), very long, encoded, shell and SQL injection."""

NAMES = ("ab", "a" * 64, "Docs", "a--b", "$root", "a/b", "..", "con", "документы")
NUMBERS = ("0", "-1", "1e3", "9" * 30, "\u0664", "nan", "inf", "1_0", " 4 ", "0x10", "1e999")
DURATIONS = ("0s", "-5m", "9" * 23 + "d", "15 m", "m", "\u0661\u0665m", "1w", "366d", "1e3s")
PATHS = (
    ".",
    "/",
    "/dev/null",
    "{work}",
    "{work}/missing/out.json",
    "{work}/afile/out.json",
    "{work}/adir",
    "{work}/link-to-db",
    "{db}",
    "{work}/out/" + "n" * 300,
    "{work}/out/a\x00b",
    "{work}/out/\x1b[2J.json",
    "{work}/out/ünï.json",
)
URLS = (
    "https://u:{canary}@127.0.0.1:1/x",
    "https://acct.blob.core.windows.net/?sv=1&sig={canary}",
    "https://localhost\\.blob.core.windows.net/?sig={canary}",
    "https://acct.blob.core.windows.net.evil.invalid/?sig={canary}",
    "https://u:{canary}@acct.blob.core.windows.net",
    "https://[::1",
    "http://127.0.0.1:1/devstoreaccount1",
    "ftp://127.0.0.1:1/x",
    "https://",
    "https://acct.blob.core.windows.net:99999",
    "https://\uff41\uff43\uff43\uff54.blob.core.windows.net",  # fullwidth "acct"
    "https://acct%2eblob.core.windows.net",
    "https://acct.blob.core.windows.net./",
)
DB_URLS = (
    "postgresql+psycopg://u:{canary}@127.0.0.1:1/db",
    "postgresql+psycopg://u@127.0.0.1:1/db?password={canary}",
    "postgresql+psycopg://u:{canary}@x@127.0.0.1:1/db",
    "postgresql+psycopg://u:{canary}@127.0.0.1:1/db?sslmode={canary}",
    "postgresql+psycopg://u:{canary}@127.0.0.1:1/db?connect_timeout={canary}",
    "mysql://u:{canary}@127.0.0.1:1/x",
    "sqlite://",
    "sqlite:///:memory:",
    "sqlite:///file::memory:?uri=true",
    "sqlite:///{work}/missing/x.db",
    "sqlite:///{work}/afile",
    "://",
)
CONNECTION_STRINGS = (
    "AccountName=x;AccountKey={canary}",
    "DefaultEndpointsProtocol=https;AccountName=prod;AccountKey={canary};"
    "EndpointSuffix=core.windows.net",
    "BlobEndpoint=https://evil.invalid;SharedAccessSignature=sv=1&sig={canary}",
    "BlobEndpoint={azurite};AccountName=devstoreaccount1;AccountKey={canary}",
    "not a connection string",
    ";;;=",
)
JSON_DOCUMENTS = (
    "[" * 200_000 + "]" * 200_000,
    '{"a":' * 200_000 + "1" + "}" * 200_000,
    "[" * 40 + "]" * 40,
    "null",
    "[]",
    '"a string"',
    "1" * 5000,
    '{"version": 1, "delete": "x"}',
    '{"version": 1, "delete": [{"blob": 1, "etag": null}]}',
    '{"version": 1, "container": "\\u001b[2J", "database_id": "{canary}", "delete": []}',
    '{"finished_utc": "2020-01-01T00:00:00", "source": "\\u001b]0;t\\u0007", "examined": 1}',
    '{"finished_utc": 12, "source": []}',
    '{"finished_utc": "2999-01-01T00:00:00+00:00", "examined": ' + "9" * 4000 + "}",
    "\xff\xfe not utf-8",
    "{",
)
TIMES = ("2020-01-01T00:00:00", "yesterday", "", "2020-13-45T99:99:99+00:00", "9" * 400)
"""Metadata values are HTTP header values: control characters cannot be planted there."""


@dataclass(frozen=True)
class Case:
    """One hostile value in one slot of one command, with a canary secret of its own."""

    command: str
    slot: str
    value: str
    number: int

    @property
    def canary(self) -> str:
        """A secret unique to the case, base64-shaped so it passes as an account key."""
        digest = hashlib.sha256(
            f"{self.command}{self.slot}{self.value}".encode(errors="surrogatepass")
        ).hexdigest()
        return f"Cnry{self.number:04d}{digest[:12]}"

    @property
    def id(self) -> str:
        return f"{self.command}:{self.slot}:{self.number}"


SLOTS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("db init", "--db", DB_URLS),
    ("db upgrade", "--db", DB_URLS),
    ("sweep", "--db", DB_URLS),
    ("sweep", "--container", NAMES),
    ("sweep", "--cutoff", DURATIONS),
    ("sweep", "--concurrency", NUMBERS),
    ("sweep", "--connection-string", CONNECTION_STRINGS),
    ("sweep", "--account-url", URLS),
    ("sweep", "SAFETYNET_CUTOFF", DURATIONS),
    ("sweep", "SAFETYNET_CONTAINER", NAMES),
    ("sweep", "lease-acquired", TIMES),
    ("reconcile", "--older-than", DURATIONS),
    ("reconcile", "--write-plan", PATHS),
    ("reconcile", "--apply-plan", PATHS),
    ("reconcile", "plan-file", JSON_DOCUMENTS),
    ("reconcile", "--max-delete", NUMBERS),
    ("reconcile", "--max-share", NUMBERS),
    ("reconcile", "--account-url", URLS),
    ("audit", "--subscription", NAMES),
    ("audit", "--resource-group", NAMES),
    ("audit", "--account", NAMES),
    ("audit", "--arm-endpoint", URLS),
    ("audit", "--output", PATHS),
    ("audit", "--max-pending-days", NUMBERS),
    ("audit", "SAFETYNET_ARM_TOKEN", ("{canary}\r\n", " {canary}", "{canary}\x1b")),
    ("verify", "--container", NAMES),
    ("verify", "--sweeper-period", DURATIONS),
    ("verify", "--max-pending-days", NUMBERS),
    ("verify", "--output", PATHS),
    ("verify", "--account-url", URLS),
    ("verify", "--second-credential", NAMES),
    ("verify", "heartbeat", JSON_DOCUMENTS),
    ("build-function", "--output", PATHS),
    ("build-function", "--python-version", NUMBERS),
)
"""Every command (demo aside: it replays the seed scenarios and takes minutes), each slot with
the values of its kind. The generic values go to every option slot (not to data slots)."""
DATA_SLOTS = frozenset({"lease-acquired", "plan-file", "heartbeat"})
SLOW_COMMANDS = frozenset({"verify", "build-function"})
"""Commands that take seconds a run: they get their slot's own values, not the generic ones."""


STRIDE = {"verify": 4, "build-function": 3}
"""Of a slot's own values, the default run takes every STRIDE-th (3 unless named), each slot
starting at another offset; SAFETYNET_HOSTILE_FULL=1 takes them all."""


def cases(full: bool = False) -> list[Case]:
    """The corpus, numbered. Data slots keep every value; option slots take their own values
    by stride, and the generic values spread over the command's option slots (each generic
    value in one of them), unless `full`."""
    found: list[Case] = []
    for slot_number, (command, slot, values) in enumerate(SLOTS):
        data = slot in DATA_SLOTS
        stride = 1 if full or data else STRIDE.get(command, 3)
        own = [v for i, v in enumerate(values) if (i + slot_number) % stride == 0]
        generic = () if data or command in SLOW_COMMANDS else _generic_for(command, slot, full)
        for value in (*own, *generic):
            found.append(Case(command, slot, value, len(found)))
    return found


def _generic_for(command: str, slot: str, full: bool) -> tuple[str, ...]:
    option_slots = [s for c, s, _ in SLOTS if c == command and s not in DATA_SLOTS]
    position = option_slots.index(slot)
    return tuple(v for j, v in enumerate(GENERIC) if full or j % len(option_slots) == position)
