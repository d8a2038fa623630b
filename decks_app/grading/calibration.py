"""Calibration in the simulator: each grader's scores against the human ratings of the same
messages (or conversations), with every figure's 95% interval, the minimum-evidence rule and a
verdict, per version of its rubric; drift across versions; graders against each other; human
raters against each other (Krippendorff's alpha, the ceiling); self-consistency; and the
verbosity and position bias probes. The figures are the engine's (`gambit.core.verify`), so
`gambit calibrate` gives the same ones for the same pairs (same resamples and seed).

Bootstrap intervals are not free (tens of milliseconds per grader version, about a second for
Krippendorff's alpha over a few hundred ratings), so:

- the report is cached by a hash of its inputs (`Inputs.digest`: every grade, rating, scenario
  and reply length it reads) in Django's cache; equal inputs, the cached report; a new rating
  or grade changes the hash, so no figure is ever stale;
- it is computed on one worker thread of its own (`_POOL`), never on the server's event loop
  nor on the thread Django runs synchronous views on: the calibration page is an async view
  that awaits it, and a rating in the queue starts it at once (`warm`), so the page is usually
  ready by the time it is opened;
- the queue's progress toward the minimum evidence needs only the current versions' pairs and
  kappa intervals (`progress_figures`), computed on the request (about 60 ms per grader).

docs/calibration.md, "In the simulator", says the same.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from functools import lru_cache
from typing import Any

from asgiref.sync import sync_to_async
from django.core.cache import cache
from django.urls import reverse

from decks_app.grading.calibration_inputs import (
    CONVERSATION,
    GraderVersion,
    Inputs,
    read_inputs,
)
from decks_app.models import Workspace
from gambit.core.verify import (
    CalibrationPair,
    calibrate,
    calibration_drift,
    grader_agreement,
    krippendorff_alpha,
    length_bias,
    position_bias,
    self_consistency,
)

RESAMPLES = 2000  # as `gambit calibrate`'s default
SEED = 0
THRESHOLD = 0.0
CACHE_SECONDS = 24 * 3600
UNNAMED_RATER = "unknown"  # how a rating without a rater name is shown and counted


@lru_cache(maxsize=4096)
def _session_url(session_id: str) -> str:
    return reverse("sessions:session", args=[session_id])  # ~1 ms each: once per session


def conversation_url(session_id: str, ref: str | None) -> str:
    url = _session_url(session_id)
    return f"{url}#{ref}" if ref and ref != CONVERSATION else url


def _pairs(inputs: Inputs, version: GraderVersion, human: dict[str, float]) -> list[Any]:
    out = []
    for target, score in version.scores().items():
        if target not in human:
            continue
        session, ref = (
            inputs.session_of.get(target, target.split("#")[0]),
            inputs.ref_of.get(target),
        )
        scenario = inputs.scenario_of.get(session)
        out.append(
            CalibrationPair(
                human=human[target],
                grader=score,
                links={
                    "target": target,
                    "session": session,
                    "messageRefId": ref,
                    "gradeRun": version.grades[target][0].run_id,
                    "url": conversation_url(session, ref),
                },
                conversation=session,
                labels={"scenario": scenario} if scenario else {},
            )
        )
    return out


def _rated(inputs: Inputs, version: GraderVersion, human: dict[str, float]) -> int:
    """Rated items of the version's kind in the sessions it graded (coverage's denominator)."""
    sessions = {inputs.session_of.get(t) for t in version.grades}
    conversation = version.mode != "turns"
    return sum(
        1
        for t in human
        if inputs.session_of.get(t) in sessions and (inputs.ref_of.get(t) is None) == conversation
    )


def _probes(inputs: Inputs, version: GraderVersion) -> dict[str, Any]:
    scores = version.scores()
    items = [t for t in scores if t in inputs.lengths]
    verbosity = length_bias(
        [scores[t] for t in items],
        [inputs.lengths[t] for t in items],
        conversations=[inputs.session_of.get(t, t) for t in items],
        resamples=RESAMPLES,
        seed=SEED,
    )
    # No grader deck here is shown two replies at once, so there is nothing to probe for
    # position yet: the probe says so rather than being left out.
    position = position_bias([])
    return {"verbosity": verbosity.to_json(), "position": position.to_json()}


def _version_entry(inputs: Inputs, version: GraderVersion, human: dict[str, float]) -> dict:
    calibration = calibrate(
        _pairs(inputs, version, human),
        graded=len(version.grades),
        rated=_rated(inputs, version, human),
        threshold=THRESHOLD,
        resamples=RESAMPLES,
        seed=SEED,
    )
    consistency = self_consistency([g.score for g in grades] for grades in version.grades.values())
    return {
        "grader": version.grader,
        "label": version.label,
        "graderHash": version.grader_hash,
        "current": version.current,
        "mode": version.mode,
        "firstGradedAt": version.first_at or None,
        "lastGradedAt": version.last_at or None,
        **calibration.to_json(include_pairs=True),
        "selfConsistency": consistency.to_json(),
        "biasProbes": _probes(inputs, version),
    }


def _drift(inputs: Inputs, human: dict[str, float]) -> dict[str, list[dict[str, Any]]]:
    """Kappa per version of each grader with more than one, oldest first (first graded)."""
    by_grader: dict[str, list[GraderVersion]] = {}
    for version in inputs.versions:
        by_grader.setdefault(version.grader, []).append(version)
    out = {}
    for grader, versions in by_grader.items():
        if len(versions) < 2:
            continue
        versions.sort(key=lambda v: v.first_at)
        points = calibration_drift(
            [(v.grader_hash, v.first_at or None, _pairs(inputs, v, human)) for v in versions],
            resamples=RESAMPLES,
            seed=SEED,
        )
        out[grader] = [point.to_json() for point in points]
    return out


def _agreement(inputs: Inputs) -> dict[str, Any]:
    """Quadratic kappa of every two graders over the items both scored (their current
    versions, else their newest), as a list and as a matrix."""
    newest = inputs.scoring_versions()
    scores = {v.grader: v.scores() for v in newest}
    pairs = grader_agreement(
        scores, conversations=dict(inputs.session_of), resamples=RESAMPLES, seed=SEED
    )
    names = [v.grader for v in newest]
    cells = {(a.first, a.second): a.to_json() for a in pairs}
    matrix = [
        [cells.get((a, b)) or cells.get((b, a)) if a != b else None for b in names] for a in names
    ]
    return {
        "graders": names,
        "labels": [v.label for v in newest],
        "pairs": [a.to_json() for a in pairs],
        "matrix": matrix,
    }


def _raters(inputs: Inputs) -> dict[str, Any]:
    ratings = [(r.target, r.rater or UNNAMED_RATER, r.score) for r in inputs.ratings]
    alpha = krippendorff_alpha(
        ratings,
        clusters=dict(inputs.session_of.items()),
        level="interval",
        resamples=RESAMPLES,
        seed=SEED,
    )
    counts: dict[str, int] = {}
    for _, rater, _ in ratings:
        counts[rater] = counts.get(rater, 0) + 1
    return {**alpha.to_json(), "ratingsPerRater": counts}


def build_report(inputs: Inputs) -> dict[str, Any]:
    """Every figure, as the page's JSON twin: per grader version its calibration with the
    pairs used; drift; agreement between graders; agreement between human raters."""
    human = inputs.human()
    graders = [_version_entry(inputs, v, human) for v in inputs.versions]
    graders.sort(key=lambda g: g["lastGradedAt"] or "", reverse=True)  # newest versions first
    graders.sort(key=lambda g: (g["grader"], not g["current"]))  # within a grader, current on top
    return {
        "threshold": THRESHOLD,
        "resamples": RESAMPLES,
        "seed": SEED,
        "inputsHash": inputs.digest(),
        "ratings": {
            "total": len(inputs.ratings),
            "items": len(human),
            "raters": sorted({r.rater or UNNAMED_RATER for r in inputs.ratings}),
        },
        "graders": graders,
        "drift": _drift(inputs, human),
        "graderAgreement": _agreement(inputs),
        "raters": _raters(inputs),
    }


def _key(workspace: Workspace, inputs: Inputs) -> str:
    return f"gambit:calibration:{workspace.id}:{inputs.digest()}:{RESAMPLES}:{SEED}:{THRESHOLD}"


_POOL = ThreadPoolExecutor(max_workers=1, thread_name_prefix="calibration")
_RUNNING: dict[str, Future[dict[str, Any]]] = {}
_LOCK = threading.Lock()


def _compute(key: str, inputs: Inputs) -> dict[str, Any]:
    try:
        report = build_report(inputs)
        cache.set(key, report, CACHE_SECONDS)
        return report
    finally:
        with _LOCK:
            _RUNNING.pop(key, None)


def _submit(key: str, inputs: Inputs) -> Future[dict[str, Any]]:
    """The computation of this report: the one already running for the same inputs, or a
    new one on the calibration thread."""
    with _LOCK:
        running = _RUNNING.get(key)
        if running is None:
            running = _RUNNING[key] = _POOL.submit(_compute, key, inputs)
        return running


def workspace_report(workspace: Workspace, inputs: Inputs | None = None) -> dict[str, Any]:
    """The workspace's report, from the cache when its inputs have not changed (waits for the
    calibration thread otherwise)."""
    inputs = inputs if inputs is not None else read_inputs(workspace)
    key = _key(workspace, inputs)
    report = cache.get(key)
    return report if report is not None else _submit(key, inputs).result()


async def workspace_report_async(workspace: Workspace) -> dict[str, Any]:
    """`workspace_report` for an async view: reads the database on Django's sync thread and
    awaits the figures from the calibration thread, leaving both free meanwhile."""
    inputs = await sync_to_async(read_inputs)(workspace)
    key = _key(workspace, inputs)
    report = await cache.aget(key)
    if report is None:
        report = await asyncio.wrap_future(_submit(key, inputs))
    return report


def warm(workspace: Workspace, inputs: Inputs) -> None:
    """Start computing the report for these inputs, not waiting for it (after a rating)."""
    key = _key(workspace, inputs)
    if cache.get(key) is None:
        _submit(key, inputs)


def progress_figures(inputs: Inputs) -> list[dict[str, Any]]:
    """Each current grader version's way to the minimum evidence: pairs so far, how many more
    to rate; the same figures the report gives (same pairs, resamples and seed)."""
    key = f"gambit:calibration-progress:{inputs.digest()}:{RESAMPLES}:{SEED}:{THRESHOLD}"
    cached = cache.get(key)
    if cached is not None:
        return cached
    human = inputs.human()
    out = []
    for version in inputs.versions:
        if not version.current:
            continue
        c = calibrate(
            _pairs(inputs, version, human), threshold=THRESHOLD, resamples=RESAMPLES, seed=SEED
        )
        evidence = c.evidence.to_json()
        out.append(
            {
                "grader": version.grader,
                "label": version.label,
                "pairs": c.pairs,
                "minPairs": evidence["minPairs"],
                "rateMore": evidence["rateMore"],
                "enoughEvidence": evidence["enoughEvidence"],
                "percent": min(100, round(100 * c.pairs / evidence["minPairs"])),
            }
        )
    cache.set(key, out, CACHE_SECONDS)
    return out
