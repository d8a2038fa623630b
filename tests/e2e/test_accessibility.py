"""axe-core (vendored from npm under tests/support/vendor, injected into the page; no CDN) on
every page of the simulator: no serious or critical violation. The data the pages show is
made through the UI with the offline demo model."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.support.axe import serious_violations


@pytest.mark.parametrize(
    "name",
    [
        "test tab", "session", "trace", "replay", "build tab", "deck", "editor", "grade tab",
        "grade run", "calibration", "verify", "verify batch", "not found", "compare", "rate",
        "rate item rated", "rate without a name",
    ],
)  # fmt: skip
def test_no_serious_or_critical_axe_violation(page, site, pages, name):
    if name.startswith("rate") and name != "rate without a name":
        page.context.add_cookies([{"name": "gambit_rater", "value": "axe", "url": site}])
    page.goto(site + pages[name])
    if name == "rate":
        expect(page.locator("#rate-item")).to_have_attribute("data-rated", "false")
    if name == "editor":
        page.wait_for_function("() => !!window.gambitEditor")
    assert serious_violations(page) == []
