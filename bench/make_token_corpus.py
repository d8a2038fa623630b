"""Writes tests/core/fixtures/token_corpus.json: real-shaped conversations (a support chat,
a tool-using agent with JSON results, a code review, a multilingual exchange, a structured
output task), one entry per request a runtime would send as each conversation grows.

Each entry has `referenceTokens`: what the Responses API's count would be, made with the
shipped o200k_base tokenizer and the framing fitted on recorded OpenAI responses
(docs/decisions.md, "Token counting"). They are the yardstick of the estimate
(tests/core/test_token_counting.py, bench/bench_tokens.py); the tokenizer's own error
against real reported usage is measured on recordings and written in docs/decisions.md.

    .venv/bin/python bench/make_token_corpus.py
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gambit.core._openresponses import CreateResponseRequest
from gambit.core._tokens import request_token_count

OUT = Path(__file__).resolve().parent.parent / "tests" / "core" / "fixtures" / "token_corpus.json"

SUPPORT_TOOLS = [
    {
        "type": "function",
        "name": "order_status",
        "description": "Look up an order by its id.",
        "parameters": {
            "type": "object",
            "properties": {"orderId": {"type": "string", "description": "e.g. A-1042"}},
            "required": ["orderId"],
        },
    },
    {
        "type": "function",
        "name": "gambit_respond",
        "description": "Finish the current deck with a structured response.",
        "parameters": {
            "type": "object",
            "properties": {
                "payload": {"type": "object", "properties": {"answer": {"type": "string"}}},
                "status": {"type": "number"},
                "message": {"type": "string"},
            },
        },
    },
]


def msg(role: str, text: str) -> dict[str, Any]:
    return {"type": "message", "role": role, "content": text}


def call(call_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function_call",
        "call_id": call_id,
        "name": name,
        "arguments": json.dumps(args),
    }


def output(call_id: str, value: Any) -> dict[str, Any]:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return {"type": "function_call_output", "call_id": call_id, "output": text}


def support_chat() -> tuple[list[dict[str, Any]], list[Any]]:
    items = [
        msg(
            "system",
            "You are the support assistant of Northwind Outfitters. Be concise and friendly. "
            "Use order_status to look orders up; never invent tracking numbers. When the "
            "customer is done, call gambit_respond with a one-line answer.",
        )
    ]
    turns = [
        ("Hi! I ordered a rain jacket last week, order A-1042, and it still hasn't arrived.", None),
        (None, ("c1", "order_status", {"orderId": "A-1042"})),
        (
            None,
            {
                "orderId": "A-1042",
                "status": "in_transit",
                "carrier": "UPS",
                "tracking": "1Z999AA10123456784",
                "eta": "2026-03-14",
                "items": [{"sku": "RJ-220-M", "name": "Storm rain jacket", "qty": 1}],
            },
        ),
        (
            "assistant:Your Storm rain jacket (order A-1042) is on its way with UPS, tracking "
            "1Z999AA10123456784, and should arrive on March 14.",
            None,
        ),
        ("Great, can I change the delivery address to my office? It's 12 Harbour St, Leith.", None),
        (
            "assistant:Once a parcel is in transit we can't change the address ourselves, but "
            "UPS lets you redirect it: open the tracking page and choose 'Change delivery'.",
            None,
        ),
        ("Ok thanks, and if it doesn't fit can I return it for free?", None),
        (
            "assistant:Yes — returns are free within 30 days. Start one from Orders → A-1042 → "
            "Return, print the label and drop the parcel at any UPS point.",
            None,
        ),
    ]
    return items, turns


def agent_with_json() -> tuple[list[dict[str, Any]], list[Any]]:
    items = [
        msg(
            "system",
            "You are a data assistant. You can query the warehouse with run_sql and must "
            "explain every number you report.",
        ),
        msg("user", "Which three product categories grew fastest last quarter, and by how much?"),
        call(
            "q1",
            "run_sql",
            {
                "query": "SELECT category, SUM(revenue) AS rev, quarter FROM sales WHERE quarter "
                "IN ('2025Q3','2025Q4') GROUP BY category, quarter ORDER BY category"
            },
        ),
        output(
            "q1",
            {
                "rows": [
                    {"category": c, "quarter": q, "rev": r}
                    for c, q, r in [
                        ("outerwear", "2025Q3", 182340.5),
                        ("outerwear", "2025Q4", 241877.25),
                        ("footwear", "2025Q3", 99410.0),
                        ("footwear", "2025Q4", 101220.75),
                        ("camping", "2025Q3", 55012.0),
                        ("camping", "2025Q4", 80233.4),
                        ("accessories", "2025Q3", 30120.9),
                        ("accessories", "2025Q4", 41876.0),
                    ]
                ],
                "elapsedMs": 412,
            },
        ),
        msg(
            "assistant",
            "Fastest growth from Q3 to Q4 2025:\n\n| category | Q3 | Q4 | growth |\n|---|---|---|---|\n"
            "| camping | 55,012 | 80,233 | +45.8% |\n| accessories | 30,121 | 41,876 | +39.0% |\n"
            "| outerwear | 182,341 | 241,877 | +32.7% |\n\nFootwear barely moved (+1.8%).",
        ),
    ]
    turns = [
        ("Break camping down by month, please.", None),
        (
            None,
            (
                "q2",
                "run_sql",
                {
                    "query": "SELECT month, SUM(revenue) FROM sales WHERE "
                    "category='camping' AND quarter='2025Q4' GROUP BY month"
                },
            ),
        ),
        (None, {"rows": [["2025-10", 21877.1], ["2025-11", 24410.3], ["2025-12", 33946.0]]}),
        (
            "assistant:October 21,877; November 24,410; December 33,946 — December alone is 42% "
            "of the quarter, so the growth is mostly the holiday season.",
            None,
        ),
    ]
    return items, turns


def code_review() -> tuple[list[dict[str, Any]], list[Any]]:
    code = """def merge_intervals(intervals):
    intervals.sort(key=lambda pair: pair[0])
    merged = []
    for start, end in intervals:
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return merged


class RateLimiter:
    def __init__(self, rate: float, burst: int) -> None:
        self.rate, self.burst = rate, burst
        self.tokens = float(burst)
        self.updated = time.monotonic()

    def allow(self) -> bool:
        now = time.monotonic()
        self.tokens = min(self.burst, self.tokens + (now - self.updated) * self.rate)
        self.updated = now
        if self.tokens >= 1:
            self.tokens -= 1
            return True
        return False
"""
    items = [msg("system", "You review Python code: correctness first, then clarity.")]
    turns = [
        (f"Please review this module:\n\n```python\n{code}```", None),
        (
            "assistant:Two issues: `merge_intervals` sorts its argument in place (callers may not "
            "expect it: use `sorted(intervals, ...)`), and `time` is never imported. The limiter "
            "is a correct token bucket; consider a lock if `allow` is called from threads.",
            None,
        ),
        (
            "Good catch. Can you rewrite merge_intervals without mutating the input and with type "
            "hints?",
            None,
        ),
        (
            "assistant:```python\ndef merge_intervals(intervals: list[tuple[int, int]]) -> "
            "list[tuple[int, int]]:\n    merged: list[list[int]] = []\n    for start, end in "
            "sorted(intervals):\n        if merged and start <= merged[-1][1]:\n            "
            "merged[-1][1] = max(merged[-1][1], end)\n        else:\n            merged.append("
            "[start, end])\n    return [(s, e) for s, e in merged]\n```",
            None,
        ),
    ]
    return items, turns


def multilingual() -> tuple[list[dict[str, Any]], list[Any]]:
    items = [msg("system", "Réponds dans la langue de l'utilisateur. Sois précis.")]
    turns = [
        (
            "Bonjour ! Quelle est la différence entre « compacter » et « résumer » une conversation ?",
            None,
        ),
        (
            "assistant:Résumer, c'est écrire une version courte ; compacter, c'est remplacer la partie "
            "ancienne de la conversation envoyée au modèle par ce résumé, pour rester dans sa fenêtre "
            "de contexte, tout en gardant l'historique complet ailleurs.",
            None,
        ),
        ("Und auf Deutsch: warum zählt man die Tokens vor der Anfrage statt danach?", None),
        (
            "assistant:Weil eine zu lange Anfrage vom Anbieter abgelehnt wird: wer vorher zählt, kann "
            "rechtzeitig verdichten, statt einen Fehler zu bekommen und es erneut zu versuchen.",
            None,
        ),
        ("日本語でも説明してください。トークン数はどうやって数えますか?", None),
        (
            "assistant:モデルと同じトークナイザーでテキストを分割して数えます。APIの専用エンドポイントに"
            "問い合わせれば、ツール定義やメッセージの区切りも含めた正確な数が分かります。",
            None,
        ),
    ]
    return items, turns


def structured() -> tuple[list[dict[str, Any]], list[Any]]:
    items = [
        msg(
            "system",
            "Extract every meeting from the user's notes as JSON: title, date (YYYY-MM-DD), "
            "attendees, and action items with owners.",
        )
    ]
    notes = (
        "Notes 3 March — Kickoff with Dana, Priya and Tomás. Dana owns the budget draft (due "
        "Friday), Priya sets up the repo. 5 March — Design review: Tomás, Lee. Lee to send the "
        "mockups; Tomás to write the API spec. 10 March — Retro with everyone; nobody owns "
        "anything yet, which is itself an action item for Dana."
    )
    turns = [
        (notes, None),
        (
            "assistant:"
            + json.dumps(
                {
                    "meetings": [
                        {
                            "title": "Kickoff",
                            "date": "2026-03-03",
                            "attendees": ["Dana", "Priya", "Tomás"],
                            "actions": [
                                {"owner": "Dana", "item": "budget draft", "due": "2026-03-06"},
                                {"owner": "Priya", "item": "set up the repo"},
                            ],
                        },
                        {
                            "title": "Design review",
                            "date": "2026-03-05",
                            "attendees": ["Tomás", "Lee"],
                            "actions": [
                                {"owner": "Lee", "item": "send the mockups"},
                                {"owner": "Tomás", "item": "write the API spec"},
                            ],
                        },
                    ]
                },
                ensure_ascii=False,
            ),
            None,
        ),
        ("You missed the retro on the 10th.", None),
    ]
    return items, turns


SCHEMA = {
    "type": "object",
    "properties": {
        "meetings": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "title": {"type": "string"},
                    "date": {"type": "string"},
                    "attendees": {"type": "array", "items": {"type": "string"}},
                },
            },
        }
    },
}


def requests() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for name, build, tools, text in [
        ("support", support_chat, SUPPORT_TOOLS, None),
        (
            "agent",
            agent_with_json,
            [
                {
                    "type": "function",
                    "name": "run_sql",
                    "description": "Run a read-only SQL query.",
                    "parameters": {
                        "type": "object",
                        "properties": {"query": {"type": "string"}},
                        "required": ["query"],
                    },
                }
            ],
            None,
        ),
        ("code", code_review, None, None),
        ("multilingual", multilingual, None, None),
        (
            "structured",
            structured,
            None,
            {
                "format": {
                    "type": "json_schema",
                    "name": "meetings",
                    "strict": True,
                    "schema": SCHEMA,
                }
            },
        ),
    ]:
        items, turns = build()
        pending_call: str | None = None
        for text_turn, call_turn in turns:
            if isinstance(text_turn, str) and text_turn.startswith("assistant:"):
                items.append(msg("assistant", text_turn.removeprefix("assistant:")))
                continue
            if text_turn is not None and not isinstance(text_turn, str):
                items.append(output(pending_call or "x", text_turn))
            elif text_turn is not None:
                items.append(msg("user", text_turn))
            elif call_turn is not None and isinstance(call_turn, tuple):
                pending_call = call_turn[0]
                items.append(call(*call_turn))
                continue
            elif call_turn is not None:
                items.append(output(pending_call or "x", call_turn))
            body: dict[str, Any] = {"model": "gpt-4o", "input": list(items)}
            if tools:
                body["tools"] = tools
            if text:
                body["text"] = text
            request = CreateResponseRequest.model_validate(body)
            reference = request_token_count(request).tokens
            out.append({"conversation": name, "request": body, "referenceTokens": reference})
    return out


def main() -> None:
    corpus = requests()
    OUT.write_text(json.dumps(corpus, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"{len(corpus)} requests -> {OUT}")


if __name__ == "__main__":
    main()
