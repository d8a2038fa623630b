"""`gambit run` and `gambit repl`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from gambit.cli import HELP_OPTIONS
from gambit.core import MISSING, input_from_text, is_end_signal, new_state, run_deck, with_exchange

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
    state_saver,
    stdout_writer,
)


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
    is given. An empty line is skipped; end of input or /exit ends the session, and so does
    the deck calling gambit_end. With --state the conversation is saved after every pass.
    """
    deck_argument_exists(deck)
    flags = RunFlags.parse(options)
    interactive = sys.stdin.isatty()

    async def main() -> None:
        tree = load_tree(deck, strict=flags.strict)
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
            elif (
                not compute
                and state is None
                and (tree.root.start_mode or "assistant") == "assistant"
            ):
                go_on = await turn(None)
            else:
                go_on = True
            while go_on:
                if interactive:
                    click.echo("you> ", nl=False, err=True)
                line = sys.stdin.readline()
                if not line or line.strip() == "/exit":
                    break
                if not line.strip():
                    continue
                go_on = await turn(line.rstrip("\n"))
        finally:
            sink.close()
            await router.aclose()

    run_async(main(), verbose=flags.verbose)
