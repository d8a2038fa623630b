from datetime import UTC, datetime, timedelta

import pytest
from django.template import Context, Template

from decks_app.web.times import as_datetime, relative, reltime_html

NOW = datetime(2026, 11, 26, 23, 20, 5, tzinfo=UTC)


@pytest.mark.parametrize(
    ("ago", "text"),
    [
        (timedelta(seconds=3), "just now"),
        (timedelta(seconds=42), "42 s ago"),
        (timedelta(minutes=5, seconds=59), "5 min ago"),
        (timedelta(hours=3, minutes=1), "3 h ago"),
        (timedelta(days=1, hours=2), "yesterday"),
        (timedelta(days=4), "4 days ago"),
        (timedelta(days=30), "27 Oct"),
        (timedelta(days=400), "22 Oct 2025"),
        (timedelta(minutes=-5), "in 5 min"),
    ],
)
def test_relative_time_reads_as_people_say_it(ago, text):
    assert relative(NOW - ago, NOW) == text


def test_the_markup_has_the_exact_time_on_hover_and_no_raw_iso_text():
    html = reltime_html(NOW - timedelta(minutes=3), NOW)
    assert html == (
        '<time datetime="2026-11-26T23:17:05+00:00" title="Thu 26 Nov 2026, 23:17:05 UTC">'
        "3 min ago</time>"
    )


def test_it_takes_epoch_milliseconds_iso_strings_and_naive_datetimes():
    ms = int(NOW.timestamp() * 1000)
    assert as_datetime(ms) == NOW
    assert as_datetime("2026-11-26T23:20:05Z") == NOW
    assert as_datetime(NOW.replace(tzinfo=None)) == NOW
    for nothing in (None, "", "yesterday", 0, -5, True, [], float("inf")):
        assert as_datetime(nothing) is None
        assert reltime_html(nothing) == "—"


def test_the_reltime_filter_in_a_template():
    out = Template("{% load gambit_ui %}{{ when|reltime }}").render(Context({"when": NOW}))
    assert out.startswith('<time datetime="2026-11-26T23:20:05+00:00" title="Thu 26 Nov 2026')
    assert out.endswith("</time>")
