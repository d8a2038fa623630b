"""A deck that needs no model: it greets whoever it is given."""

import gambit


def run(ctx):
    name = (ctx.input or "").strip() or "world"
    ctx.log(f"greeting {name}")
    return f"Hello, {name}!"


deck = gambit.define_deck(
    run=run,
    label="Hello (no model needed)",
    context_schema="gambit://schemas/scenarios/plain_chat_input_optional.zod.ts",
    response_schema="gambit://schemas/scenarios/plain_chat_output.zod.ts",
)
