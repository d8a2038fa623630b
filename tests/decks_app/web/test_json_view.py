import json

from decks_app.web.json_view import MAX_NODES, json_view_html


def test_json_is_a_tree_of_details_every_key_and_value_escaped():
    html = json_view_html({"<k>": "<script>alert(1)</script>", "n": [1, True, None]}, "Result")
    assert "<script>" not in html and "&lt;script&gt;" in html and "&quot;&lt;k&gt;&quot;" in html
    assert html.startswith('<div class="json-view" data-json-view aria-label="Result"')
    assert (
        '<details open><summary><span class="jv-punct">{…}</span> <span class="jv-count">2 keys'
        in html
    )
    assert '<span class="jv-num">1</span>' in html and '<span class="jv-bool">true</span>' in html
    assert '<span class="jv-null">null</span>' in html
    # the Raw block has the pretty-printed text that Copy copies
    raw = html.split('<pre class="json-text">')[1].split("</pre>")[0]
    assert raw.startswith("{\n  &quot;&lt;k&gt;&quot;: ")


def test_deep_and_big_values_start_closed_and_a_huge_one_is_cut_in_the_tree_only():
    html = json_view_html({"a": {"b": {"c": 1}}, "many": list(range(40))})
    assert html.count("<details open>") == 2  # the root and "a"; "b" is deeper, "many" big
    huge = json_view_html(list(range(MAX_NODES + 5)))
    assert "… 5 more (in Raw, and in Copy)" in huge
    assert f"{MAX_NODES + 4}" in huge.split('<pre class="json-text">')[1]


def test_a_string_holding_json_is_shown_parsed_and_a_plain_string_as_a_string():
    assert '<span class="jv-key">&quot;x&quot;</span>' in json_view_html(json.dumps({"x": 1}))
    assert '<span class="jv-str">&quot;found&quot;</span>' in json_view_html("found")
    assert '<span class="jv-punct">[]</span>' in json_view_html([])
