"""`gambit run` and `gambit repl`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from gambit.cli import HELP_OPTIONS
from gambit.core import (
    MISSING,
    SavedState,
    input_from_text,
    is_end_signal,
    new_state,
    run_deck,
    with_exchange,
)

from ._common import (
    RunFlags,
    TraceSink,
    common_run_options,
    deck_argument_exists,
    load_tree,
    make_router,
    printable_output,
    read_state,
    render_output,
    run_async,
    shown_path,
    state_saver,
    stdout_writer,
)
from ._models import UNDER_TEST, decks_of, note_default_model


@click.command("run", context_settings=HELP_OPTIONS)
@click.argument("deck", type=click.Path(path_type=Path))
@common_run_options
def run_command(deck: Path, **options: Any) -> None:
    """Run DECK once and print its output (JSON when it is not a string).

    With --state the conversation resumes from the file and is saved back after every
    model pass, so a failed run keeps everything recorded so far.
    """
    deck_argument_exists(deck)
    flags = RunFlags.parse(options)

    async def main() -> None:
        tree = load_tree(deck, strict=flags.strict)
        if not flags.model_force:
            note_default_model(flags.model, decks_of(tree, UNDER_TEST))
        sink = TraceSink(flags.trace_path, flags.verbose)
        router = make_router(deck)
        streamed: list[str] = []
        write = stdout_writer()

        def on_text(text: str) -> None:
            streamed.append(text)
            write(text)

        context, message = flags.context, flags.message_or_none
        if tree.root.kind == "compute" and context is MISSING and message is not None:
            context, message = message, None  # a compute deck's input is what it is told
        try:
            result = await run_deck(
                tree,
                provider=router,
                context=context,
                message=message,
                state=read_state(flags.state_path),
                on_state=state_saver(flags.state_path),
                on_stream_text=on_text if flags.stream else None,
                **flags.run_options(router, sink),
            )
        finally:
            sink.close()
            await router.aclose()
        text = printable_output(result.output, deck)
        if flags.stream and streamed and "".join(streamed).rstrip().endswith(text.strip()):
            write("\n")  # the answer already streamed (after whatever a handler streamed)
        else:
            if streamed:
                write("\n")
            click.echo(text)

    run_async(main(), verbose=flags.verbose)


@click.command("repl", context_settings=HELP_OPTIONS)
@click.argument("deck", type=click.Path(path_type=Path))
@common_run_options
def repl_command(deck: Path, **options: Any) -> None:
    """Talk to DECK turn by turn on stdin; replies stream as they arrive.

    The deck speaks first when its startMode is "assistant" (the default) and no --message
    is given; a compute deck, when --context is given (it answers that input first). Each
    line is a message, except the commands: /help lists them, /state shows the
    conversation, /exit or /quit (or Ctrl-D, end of input) leaves; a line starting with //
    is sent as a message starting with /. An empty line is skipped. The deck calling
    gambit_end also ends the session. With --state the conversation is saved after every
    pass.
    """
    deck_argument_exists(deck)
    flags = RunFlags.parse(options)
    interactive = sys.stdin.isatty()

    async def main() -> None:
        tree = load_tree(deck, strict=flags.strict)
        if not flags.model_force:
            note_default_model(flags.model, decks_of(tree, UNDER_TEST))
        if interactive:
            click.echo(
                f"Talking to {tree.root.label or shown_path(deck)}. Type a message and press "
                "Enter; /help lists the commands; /exit or Ctrl-D leaves.",
                err=True,
            )
        sink = TraceSink(flags.trace_path, flags.verbose)
        router = make_router(deck)
        write = stdout_writer()
        state = read_state(flags.state_path)
        save = state_saver(flags.state_path)
        options = flags.run_options(router, sink, stream=True)
        pending_context: Any = flags.context

        compute = tree.root.kind == "compute"

        async def turn(user: Any) -> bool:
            nonlocal state, pending_context
            write("assistant> ")
            streamed: list[str] = []

            def on_text(text: str) -> None:
                streamed.append(text)
                write(text)

            if compute:  # each line is the compute deck's input; it keeps no conversation,
                # so the exchange is recorded here (--state keeps it, for `gambit grade`)
                said = (
                    None if user is None else user if isinstance(user, str) else render_output(user)
                )
                result = await run_deck(
                    tree,
                    provider=router,
                    context=pending_context if user is None else input_from_text(said or ""),
                    state=state or new_state(),
                    on_state=save,
                    on_stream_text=on_text,
                    **options,
                )
                state = with_exchange(result.state, said, printable_output(result.output, deck))
                if save is not None:
                    save(state)
            else:
                result = await run_deck(
                    tree,
                    provider=router,
                    context=pending_context if state is None else MISSING,
                    message=user,
                    state=state,
                    on_state=save,
                    on_stream_text=on_text,
                    **options,
                )
                state = result.state
            pending_context = MISSING
            if is_end_signal(result.output):
                write(printable_output(result.output, deck) + "\n")
                return False
            if not "".join(streamed).strip():
                write(printable_output(result.output, deck))  # nothing streamed: the answer
            write("\n")
            return True

        try:
            if flags.message is not MISSING:
                go_on = await turn(flags.message)
            elif state is None and (
                # a compute deck given a context answers it first (docs/decisions.md)
                flags.context is not MISSING
                if compute
                else (tree.root.start_mode or "assistant") == "assistant"
            ):
                go_on = await turn(None)
            else:
                go_on = True
            while go_on:
                if interactive:
                    click.echo("you> ", nl=False, err=True)
                line = sys.stdin.readline()
                if not line:  # Ctrl-D / end of input
                    if interactive:
                        click.echo("", err=True)  # the shell's prompt on a line of its own
                    break
                text = line.rstrip("\n")
                if not text.strip():
                    continue
                command = text.strip()
                if command.startswith("/") and not command.startswith("//"):
                    if command.split()[0] in ("/exit", "/quit"):
                        break
                    _repl_command(command, state, flags.state_path)
                    continue
                go_on = await turn(text[1:] if command.startswith("//") else text)
        finally:
            sink.close()
            await router.aclose()

    run_async(main(), verbose=flags.verbose)


REPL_HELP = """commands:
  /help          this list
  /state         the conversation so far: its run id, where it is saved, the last messages
  /exit, /quit   leave (so does Ctrl-D)
Any other line is a message to the deck; start it with // to send a message starting with /."""


def _repl_command(command: str, state: SavedState | None, state_path: Path | None) -> None:
    """A repl command (a line starting with /): its answer goes to stderr, beside the prompt,
    so stdout keeps only what the deck said."""
    name = command.split()[0]
    if name == "/help":
        click.echo(REPL_HELP, err=True)
    elif name == "/state":
        click.echo(_describe_state(state, state_path), err=True)
    else:
        click.echo(
            f"unknown command {name}; /help lists the commands (send //{name[1:]} to say it "
            "to the deck)",
            err=True,
        )


def _describe_state(state: SavedState | None, state_path: Path | None, last: int = 10) -> str:
    saved = (
        f"saved to {state_path}"
        if state_path is not None
        else "not saved (pass --state FILE to keep it)"
    )
    if state is None:
        return f"state: no conversation yet; {saved}"
    from gambit.core import session_payload  # loads the grading module: only when asked

    messages = [m for m in session_payload(state)["messages"] if m.get("role") != "system"]
    said = ", ".join(
        f"{n} {role}"
        for role in ("user", "assistant", "tool")
        if (n := sum(m.get("role") == role for m in messages))
    )
    lines = [f"state: run {state.run_id}, {len(messages)} messages ({said or 'none'}); {saved}"]
    if len(messages) > last:
        lines.append(f"  ... {len(messages) - last} earlier messages")
    for message in messages[-last:]:
        content = message.get("content")
        text = (
            content
            if isinstance(content, str) or content is None
            else json.dumps(content, ensure_ascii=False)
        )
        if not text and message.get("tool_calls"):
            text = "calls " + ", ".join(c["function"]["name"] for c in message["tool_calls"])
        text = " ".join((text or "").split())
        lines.append(f"  {message.get('role')}: {text[:200]}{'...' if len(text) > 200 else ''}")
    return "\n".join(lines)
