"""Confidence levels as the page, the figures and the report tables print them (issue 46).

Every interval the audit shows is printed with the level its own row recorded, never with an
assumed one: ``ci_level`` (``rci_level`` in the sequential history). A comparison's, a
correlation's and a report table's level is 1 - alpha, a one-sample claim's 1 - 2 alpha (its ends
are the two one-sided bounds), a sequential design's 1 - the design's alpha. A table whose rows
share one level may print it once (a column heading, a legend); a table whose rows differ, or
do not say, prints each row's own level beside its interval.

``DEFAULT_LEVEL`` is the level of a study that declares no ``stats.alpha`` (1 - the schema's
default), for a caller that is given no study config. Torch-, pandas- and numpy-free: the
registry's builders, the figures and the page all import it.
"""

from __future__ import annotations

import math

from audit.schema import schema_defaults

DEFAULT_LEVEL = 1 - float(schema_defaults("stats")["alpha"])
# the level column of each table the page reads, where it is not ``ci_level``
COLUMN = {"sequential": "rci_level"}


def _finite(value) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def level(value, what: str = "CI") -> str:
    """An interval's level as printed: (0.9) -> '90% CI', (0.9, 'Welch CI') -> '90% Welch CI',
    a Holm step's (1 - 0.05 / 3) -> '98.33% CI' (``percent``); '<what> of unstated level' when
    the value is missing or not a number."""
    number = _finite(value)
    return f"{percent(number)}% {what}" if number is not None else f"{what} of unstated level"


def percent(number: float) -> str:
    """A level in per cent as every mark prints it: two decimals at most (0.98333 -> '98.33')."""
    return f"{round(100 * number, 2):g}"


def distinct(values) -> list[float]:
    """The different finite levels among ``values``, ascending (missing ones are skipped: a row
    without an interval, such as a sequential look before the last, states no level)."""
    return sorted({number for number in map(_finite, values if values is not None else []) if number is not None})


def shared(values) -> float | None:
    """The one level every stated value has; None when they state none or several."""
    found = distinct(values)
    return found[0] if len(found) == 1 else None


def heading(value, what: str = "CI") -> str:
    """A column heading's level: the shared level ('90% CI'), or just 'CI' when the rows differ
    or state none (then each cell prints its own, ``own``)."""
    return level(value, what) if _finite(value) is not None else what


def own(value, shared_value, low=0.0) -> str:
    """A cell's level beside its interval, ' (90% CI)', only where the heading cannot say it
    (``shared_value`` None) and the cell has an interval (``low``, its lower end, is a number);
    '' otherwise."""
    return "" if _finite(shared_value) is not None or _finite(low) is None else f" ({level(value)})"


def table_levels(tables: dict) -> dict[str, float | None]:
    """Table name -> the level all its rows share (``shared`` of its level column), None when
    they differ, state none, or the table has no level column."""
    return {name: shared(table[COLUMN.get(name, "ci_level")]) if COLUMN.get(name, "ci_level") in table else None
            for name, table in tables.items()}
