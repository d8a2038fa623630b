"""The sessions search and pages on the real PostgreSQL (127.0.0.1:5432, as the distributed
profile uses it): the migration's tsvector GIN index, the `@@` query that uses it, and
`ts_headline` for the matching line. Skipped, with the reason, only when PostgreSQL is not
reachable."""

from __future__ import annotations

from tests.support.postgres import run_probe


def test_search_and_pages_on_postgresql(pg_database, tmp_path):
    out = run_probe("tests.decks_app.sessions.pg_search_probe", pg_database, tmp_path)
    assert out["vendor"] == "postgresql"
    found = out["found"]
    for q in ("Q1002", "complaint", "q1002 complain", "BROKEN"):
        assert found[q] == ["wanted"], (q, found[q])
    assert found["hola"] == found["zanzibar"] == ["items"]
    assert found["system"] == []  # the system prompt is not searched
    match = out["match"]
    assert match["text"].startswith("Hi, I have a complaint about order Q1002.")
    start, end = match["highlights"][0]
    assert match["text"][start:end] == "Q1002"
    assert out["html"] is True
    assert out["pages"] == [50, 28]  # 78 sessions, every one reachable
    # the list's query is answered by the GIN index (Bitmap Index Scan on it)
    assert "Index Scan on decks_app_session_search" in out["plan"], out["plan"]
