"""MkDocs hook: the CLI reference, generated from the typer app at build time (so it cannot drift).

``docs/reference/cli.md`` holds the marker ``<!-- cli-reference -->``; it is replaced by one section per
command — usage, help text, and a table of its arguments and options — read from the command object that
typer builds from ``simgrag.cli.app`` (typer's own click; duck-typed, so either click works)."""

from __future__ import annotations

import html
from typing import Any

MARKER = "<!-- cli-reference -->"


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell: one line, no HTML, no column breaks."""
    return html.escape(" ".join(str(text).split()), quote=False).replace("|", "\\|").replace("*", "\\*")


def _para(text: str) -> str:
    return html.escape(text.replace("\b", "").strip(), quote=False).replace("*", "\\*")


def _is_argument(param: Any) -> bool:
    return bool(param.param_type_name == "argument")


def _default(param: Any) -> str:
    value = param.default
    if value is None or value == () or callable(value) or _is_argument(param):
        return ""
    if getattr(param, "is_flag", False) and not param.secondary_opts and value is False:
        return ""
    if isinstance(value, bool) and param.secondary_opts:
        return param.opts[0] if value else param.secondary_opts[0]
    return f"`{value}`"


def _param_row(param: Any, ctx: Any) -> str:
    names = ", ".join(f"`{n}`" for n in (*param.opts, *param.secondary_opts))
    if _is_argument(param):
        names = f"`{param.name.upper()}`"
    kind = "flag" if getattr(param, "is_flag", False) else param.display_type(ctx).strip("<>")
    help_text = getattr(param, "help", None) or ""
    extra = []
    if param.required:
        extra.append("required")
    if not _is_argument(param) and param.multiple and "repeatable" not in help_text:
        extra.append("repeatable")
    if param.envvar:
        extra.append(f"env `{param.envvar}`")
    note = f" ({', '.join(extra)})" if extra else ""
    return f"| {names} | {_cell(kind)} | {_default(param)} | {_cell(help_text)}{note} |"


def _section(command: Any, ctx: Any, level: int) -> list[str]:
    lines = [f"{'#' * level} `{ctx.command_path}`", ""]
    usage = " ".join([ctx.command_path, *command.collect_usage_pieces(ctx)])
    lines += ["```text", usage, "```", ""]
    if command.help:
        lines += [_para(command.help), ""]
    params = [p for p in command.get_params(ctx) if not getattr(p, "hidden", False) and p.name != "help"]
    if params:
        lines += ["| argument / option | type | default | description |", "|---|---|---|---|"]
        lines += [_param_row(p, ctx) for p in params]
        lines.append("")
    if hasattr(command, "list_commands"):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is None or sub.hidden:
                continue
            lines += _section(sub, type(ctx)(sub, info_name=name, parent=ctx), min(level + 1, 4))
    return lines


def cli_reference_markdown() -> str:
    import typer

    from simgrag.cli import app

    root = typer.main.get_command(app)
    ctx = typer.Context(root, info_name="simgrag")
    return "\n".join(_section(root, ctx, 2))


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if MARKER in markdown:
        return markdown.replace(MARKER, cli_reference_markdown())
    return markdown
