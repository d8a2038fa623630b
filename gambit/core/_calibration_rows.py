"""Grade exports and plain rating rows, joined into calibration pairs (docs/calibration.md).

Two kinds of row, told apart by their keys:

- a **grade row** has `grader` and `score`: the rows `gambit verify --grades-csv/--grades-jsonl`
  and the simulator's grade exports write (session, run, scenario, grader, graderHash, turn,
  messageRefId, score, humanRating, ...). A filled `humanRating` is a rating of that item by
  the rater "export".
- a **rating row** has `item` and `score` (the plain format, for ratings made elsewhere):
  `{item, conversation?, scenario?, rater?, score}`. `item` names what was rated: a message's
  `messageRefId`, or `<session>#<turn>` / `<run>#<turn>` for a turn of an export, or the
  session or run id for a conversation grade.

Rows are dicts as read from CSV (every value a string, empty for none) or JSON lines; this
module reads no file. A bad row raises `RowError` with one line naming the row, the key and
the fix.

A CSV export neutralises text cells a spreadsheet would run as a formula (`csv_row`), and a
CSV reader undoes it (`csv_cell`), so a round trip loses nothing (docs/calibration.md,
"Exports in spreadsheets").
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ._calibration import CalibrationPair

EXPORT_RATER = "export"
ANONYMOUS_RATER = "anonymous"
UNKNOWN_VERSION = "unknown"


# A cell starting with one of these is a formula to a spreadsheet (OWASP, "CSV Injection":
# https://owasp.org/www-community/attacks/CSV_Injection); a leading `'` makes it text.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "\uff1d", "\uff0b", "\uff0d", "\uff20")
# What a spreadsheet may skip before reading a formula (a trimmed import, a stray newline, an
# invisible character pasted with the text): blanks, control characters, zero-width ones.
_SKIPPED = re.compile(r"[\s\x00-\x1f\x7f\u200b-\u200d\u2060\ufeff]*")


def _formula_like(text: str) -> bool:
    """Whether `text`, its leading quotes and anything a spreadsheet may skip aside, starts
    like a formula: such a text is written with one more quote, so that reading removes
    exactly the one added."""
    rest = text.lstrip("'")
    rest = rest[_SKIPPED.match(rest).end() :]  # type: ignore[union-attr]
    return rest[:1] in FORMULA_STARTS or text.lstrip("'")[:1] in ("\t", "\r")


def csv_row(row: dict[str, Any]) -> dict[str, Any]:
    """`row` as a CSV export writes it: each text cell that starts like a formula gets a
    leading `'` (as OWASP recommends); numbers, a score of -2 among them, stay numbers."""
    return {
        key: "'" + value if isinstance(value, str) and _formula_like(value) else value
        for key, value in row.items()
    }


def csv_cell(text: str) -> str:
    """A cell read from a CSV export as it was before `csv_row` wrote it."""
    return text[1:] if text.startswith("'") and _formula_like(text) else text


class RowError(ValueError):
    """A row that cannot be used; the message is one line: where, which key, the fix."""


@dataclass(frozen=True)
class Rating:
    """One human rating of one item (the item's canonical key once matched)."""

    item: str
    rater: str
    score: float
    conversation: str | None = None
    scenario: str | None = None


@dataclass
class GraderVersion:
    """Everything one version of one grader scored: per item, its scores (repeats)."""

    grader: str
    version: str
    first_seen: int
    time: str | None = None
    scores: dict[str, list[float]] = field(default_factory=dict)
    conversations: dict[str, str] = field(default_factory=dict)
    scenarios: dict[str, str] = field(default_factory=dict)
    lengths: dict[str, float] = field(default_factory=dict)

    def mean_scores(self) -> dict[str, float]:
        return {item: statistics.fmean(values) for item, values in self.scores.items()}


@dataclass
class CalibrationRows:
    """Grade rows grouped by grader and version, and every rating, matched to items."""

    versions: dict[tuple[str, str], GraderVersion] = field(default_factory=dict)
    ratings: list[Rating] = field(default_factory=list)
    unmatched_ratings: int = 0
    aliases: dict[str, str] = field(default_factory=dict)  # any name of an item -> its key
    conversation_of: dict[str, str] = field(default_factory=dict)

    def graders(self) -> list[str]:
        return list(dict.fromkeys(grader for grader, _ in self.versions))

    def versions_of(self, grader: str) -> list[GraderVersion]:
        """A grader's versions, oldest first (by their time when every one has one, else in
        the order the rows first showed them)."""
        found = [v for (g, _), v in self.versions.items() if g == grader]
        if all(v.time for v in found):
            return sorted(found, key=lambda v: (v.time or "", v.first_seen))
        return sorted(found, key=lambda v: v.first_seen)

    def human_scores(self) -> dict[str, float]:
        """Each rated item's human score: the mean over its raters (one rating per rater)."""
        by_item: dict[str, dict[str, float]] = {}
        for rating in self.ratings:
            by_item.setdefault(rating.item, {})[rating.rater] = rating.score
        return {item: statistics.fmean(scores.values()) for item, scores in by_item.items()}

    def pairs_for(
        self, names: list[str | None], version: str | None
    ) -> tuple[list[CalibrationPair], str | None]:
        """The pairs of the grader known by the first of `names` (label, folder, path) that the
        rows name (else by a version of the same hash, whatever its name), preferably of
        `version` (its graderHash), else of its newest version; and a
        note when there is none or another version's errors are used (`gambit verify
        --ratings` and the simulator's Verify both correct pass rates with these)."""
        known = self.graders()
        name = next((n for n in names if n and n in known), None)
        if name is None and version:  # named otherwise (its deck's own label): its rubric
            name = next((g for g, v in self.versions if v == version), None)
        if name is None:
            return [], "no rated grades of this grader; pass rate not corrected"
        versions = self.versions_of(name)
        same = [v for v in versions if v.version == version]
        chosen = same[0] if same else versions[-1]
        pairs = self.pairs(chosen)
        if not pairs:
            return [], "no rated item among its grades; not corrected"
        if not same:
            return pairs, (
                f"no grades of this version ({version}); "
                f"correcting with version {chosen.version}'s errors"
            )
        return pairs, None

    def pairs(self, version: GraderVersion) -> list[CalibrationPair]:
        """The version's mean score of each item beside the item's human score."""
        human = self.human_scores()
        out = []
        for item, score in version.mean_scores().items():
            if item not in human:
                continue
            labels = {"scenario": version.scenarios[item]} if item in version.scenarios else {}
            out.append(
                CalibrationPair(
                    human=human[item],
                    grader=score,
                    links={"item": item, "conversation": version.conversations.get(item)},
                    conversation=version.conversations.get(item),
                    labels=labels,
                )
            )
        return out


def _text(row: dict[str, Any], key: str) -> str | None:
    value = row.get(key)
    if value is None:
        return None
    text = str(value).strip()
    return text or None


def _number(
    row: dict[str, Any], key: str, where: str, fix: str = "write a number (or leave it empty)"
) -> float | None:
    """The number under `key`, None when it is absent or empty; `fix` is what a bad value's
    error tells the user to write (only where an empty value is accepted may it say so)."""
    value = row.get(key)
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, bool):
        raise RowError(f"{where}: {key} is {value!r}; {fix}")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise RowError(f"{where}: {key} is {value!r}; {fix}") from None
    if not math.isfinite(number):
        raise RowError(f"{where}: {key} is {value!r}; write a finite number")
    return number


SCORE_FIX = "write a score from -3 to 3"


def _score(row: dict[str, Any], key: str, where: str, *, required: bool = False) -> float | None:
    """A score on the -3..+3 scale (a mean of several raters may fall between two). A grade
    row's score and humanRating may be empty (not graded, not rated); a rating's score may not,
    so its error does not offer that."""
    fix = SCORE_FIX if required else f"{SCORE_FIX} (or leave it empty)"
    number = _number(row, key, where, fix)
    if number is not None and not -3 <= number <= 3:
        raise RowError(f"{where}: {key} is {row.get(key)!r}; {SCORE_FIX}")
    return number


def _turn(row: dict[str, Any], where: str) -> str | None:
    turn = _number(row, "turn", where)
    if turn is None:
        return None
    if turn != int(turn):
        raise RowError(f"{where}: turn is {row.get('turn')!r}; write a message index (0, 1, ...)")
    return str(int(turn))


def read_rows(rows: Iterable[tuple[str, dict[str, Any]]]) -> CalibrationRows:
    """Join grade rows and rating rows (each with where it came from, "file:line")."""
    data = CalibrationRows()
    pending: list[tuple[str, Rating]] = []
    for position, (where, row) in enumerate(rows):
        if not isinstance(row, dict):
            raise RowError(f"{where}: a row must be an object with keys (item, score, ...)")
        if _text(row, "grader") is not None:
            rating = _grade_row(data, position, where, row)
            if rating is not None:
                pending.append((where, rating))
        elif _text(row, "item") is not None:
            score = _score(row, "score", where, required=True)
            if score is None:
                raise RowError(
                    f"{where}: the rating of {row.get('item')!r} has no score; add one from -3 to 3"
                )
            pending.append(
                (
                    where,
                    Rating(
                        item=str(_text(row, "item")),
                        rater=_text(row, "rater") or ANONYMOUS_RATER,
                        score=score,
                        conversation=_text(row, "conversation"),
                        scenario=_text(row, "scenario"),
                    ),
                )
            )
        elif "messages" in row or "items" in row:
            raise RowError(
                f"{where}: a saved session, not a grades export; export its grades (gambit "
                "verify --grades-csv, or the Grade tab's export) and pass that file"
            )
        else:
            raise RowError(
                f"{where}: neither a grade row (with grader and score) nor a rating row (with "
                "item and score); add the missing key"
            )
    # One rating per item and rater: an export repeats an item's rating on each of its grade
    # rows (every grader, every repeat). A rater's later row replaces the earlier, last in
    # order (pop, then insert), in one pass however many rows repeat.
    kept: dict[tuple[str, str], Rating] = {}
    for _where, rating in pending:
        key = data.aliases.get(rating.item)
        if key is None:
            data.unmatched_ratings += 1
            key = rating.item
        kept.pop((key, rating.rater), None)
        kept[(key, rating.rater)] = Rating(
            item=key,
            rater=rating.rater,
            score=rating.score,
            conversation=rating.conversation or data.conversation_of.get(key),
            scenario=rating.scenario,
        )
    data.ratings.extend(kept.values())
    return data


def _grade_row(
    data: CalibrationRows, position: int, where: str, row: dict[str, Any]
) -> Rating | None:
    grader = str(_text(row, "grader"))
    score = _score(row, "score", where)
    session, run = _text(row, "session"), _text(row, "run")
    conversation = session or run
    if conversation is None:
        raise RowError(f"{where}: the grade row has neither session nor run; add the one it graded")
    turn = _turn(row, where)
    ref = _text(row, "messageRefId")
    if turn is None and ref is None:
        key, names = conversation, [session, run]
    else:
        key = ref or f"{conversation}#{turn}"
        names = [ref, *(f"{c}#{turn}" for c in (session, run) if c and turn is not None)]
    for name in names:
        if name:
            data.aliases.setdefault(name, key)
    data.aliases.setdefault(key, key)
    data.conversation_of.setdefault(key, conversation)
    version_key = (grader, _text(row, "graderHash") or UNKNOWN_VERSION)
    version = data.versions.get(version_key)
    if version is None:
        version = data.versions[version_key] = GraderVersion(grader, version_key[1], position)
    when = _text(row, "gradedAt") or _text(row, "runAt")
    if when and (version.time is None or when < version.time):
        version.time = when  # a version's time: when it first graded
    if score is not None:
        version.scores.setdefault(key, []).append(score)
        version.conversations[key] = conversation
        scenario = _text(row, "scenario")
        if scenario:
            version.scenarios[key] = scenario
        length = _number(row, "replyLength", where)
        if length is not None:
            version.lengths[key] = length
    human = _score(row, "humanRating", where)
    if human is None:
        return None
    return Rating(item=key, rater=_text(row, "humanRater") or EXPORT_RATER, score=human)
