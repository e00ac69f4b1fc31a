"""One set of command functions, two command lines: typer's where typer is installed, argparse's
where it is not (a device with the runtime install alone). Both read the `Arg` / `Opt`
annotations of `params.py`; both print a command's `CliError` as one `error:` line and exit 1
(or its code), and refuse bad usage with exit status 2.
"""
from __future__ import annotations

import enum
import functools
import inspect
import os
import sys
import types
import typing

from .common import CliError, echo, error_line, installed
from .params import Arg, Opt

FRONTEND_ENV = "EDGELITE_CLI"     # "typer" or "argparse": force one (tests use it)


def choose(frontend: str | None = None) -> str:
    frontend = frontend or os.environ.get(FRONTEND_ENV)
    if frontend in ("typer", "argparse"):
        return frontend
    return "typer" if installed("typer") else "argparse"


# -- reading a command's parameters --------------------------------------------------------------

class Param(typing.NamedTuple):
    name: str
    base: type           # str, int, float, bool, Path or an Enum
    spec: Arg | Opt
    default: object      # inspect.Parameter.empty when required
    optional: bool       # `X | None`
    repeated: bool       # `list[X]`


def params(func) -> list:
    hints = typing.get_type_hints(func, include_extras=True)
    found = []
    for p in inspect.signature(func).parameters.values():
        hint = hints[p.name]
        if typing.get_origin(hint) is not typing.Annotated:
            raise TypeError(f"{func.__name__}({p.name}): annotate it with Arg or Opt")
        base, spec = typing.get_args(hint)[:2]
        optional = repeated = False
        if typing.get_origin(base) in (typing.Union, types.UnionType):
            (base,) = [a for a in typing.get_args(base) if a is not type(None)]
            optional = True
        if typing.get_origin(base) is list:
            (base,) = typing.get_args(base)
            repeated = True
        found.append(Param(p.name, base, spec, p.default, optional, repeated))
    return found


def summary(func) -> str:
    return (inspect.getdoc(func) or "").split("\n\n")[0].replace("\n", " ")


# -- typer -----------------------------------------------------------------------------------------

def typer_app(name: str, doc: str, commands: dict, version: str, single: bool = False):
    """A typer app of `commands` ({name: function}); `single`: the one command is the program."""
    import typer

    def show_version(value: bool) -> None:
        if value:
            echo(f"{name} {version}")
            raise typer.Exit()

    version_option = typer.Option(False, "--version", callback=show_version, is_eager=True,
                                  help="print the version and exit")
    settings = {"help_option_names": ["-h", "--help"]}
    app = typer.Typer(name=name, help=doc, add_completion=False, no_args_is_help=not single,
                      pretty_exceptions_enable=False, context_settings=settings,
                      rich_markup_mode=None)   # usage errors as plain lines, as argparse's
    if single:
        (func,) = commands.values()
        app.command(help=inspect.getdoc(func))(_typer_command(func, version_option))
        return app

    @app.callback()
    def root(version: bool = version_option) -> None:  # noqa: ARG001  (eager: never reached)
        pass

    root.__doc__ = doc
    for command, func in commands.items():
        app.command(command, help=inspect.getdoc(func), short_help=summary(func))(
            _typer_command(func))
    return app


def _typer_command(func, version_option=None):
    import typer

    new, annotations = [], {}
    for p in params(func):
        default = ... if p.default is inspect.Parameter.empty else p.default
        if p.repeated:
            default = list(default or [])
        kind = p.base if not p.repeated else list[p.base]
        kind = typing.Optional[kind] if p.optional else kind
        spec = p.spec
        if isinstance(spec, Arg):
            info = typer.Argument(default, help=spec.help, metavar=spec.metavar,
                                  show_default=default not in (..., None))
        else:
            extra = {"min": spec.min} if spec.min is not None else {}
            info = typer.Option(default, *spec.flags, help=spec.help, metavar=spec.metavar,
                                show_default=default not in (..., None, False, []), **extra)
        new.append(inspect.Parameter(p.name, inspect.Parameter.KEYWORD_ONLY, default=info,
                                     annotation=kind))
        annotations[p.name] = kind
    if version_option is not None:
        new.append(inspect.Parameter("_version", inspect.Parameter.KEYWORD_ONLY,
                                     default=version_option, annotation=bool))
        annotations["_version"] = bool

    @functools.wraps(func)
    def command(**kwargs):
        kwargs.pop("_version", None)
        try:
            func(**kwargs)
        except CliError as e:
            echo("error: " + error_line(str(e)), err=True)
            raise typer.Exit(e.code) from None

    command.__signature__ = inspect.Signature(new)
    command.__annotations__ = annotations
    del command.__wrapped__
    return command


def run_typer(app, argv, prog: str) -> int:
    try:
        app(args=argv, prog_name=prog)
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    return 0


# -- argparse --------------------------------------------------------------------------------------

def argparse_parser(name: str, doc: str, commands: dict, version: str, single: bool = False):
    import argparse

    parser = argparse.ArgumentParser(prog=name, description=doc if not single else
                                     inspect.getdoc(next(iter(commands.values()))))
    parser.add_argument("--version", action="version", version=f"{name} {version}",
                        help="print the version and exit")
    if single:
        (func,) = commands.values()
        _add_params(parser, func)
        return parser
    sub = parser.add_subparsers(dest="_command", metavar="COMMAND")
    for command, func in commands.items():
        _add_params(sub.add_parser(command, help=summary(func), description=inspect.getdoc(func)),
                    func)
    return parser


def _add_params(parser, func) -> None:
    parser.set_defaults(_func=func)
    for p in params(func):
        spec, extra = p.spec, {}
        if issubclass(p.base, enum.Enum):
            extra["type"] = _choice(p.base)
            extra["metavar"] = "{" + ",".join(m.value for m in p.base) + "}"
        elif p.base is not bool:
            extra["type"] = _bounded(p.base, getattr(spec, "min", None))
        if isinstance(spec, Arg):
            if p.default is not inspect.Parameter.empty:
                extra.update(nargs="?", default=p.default)
            parser.add_argument(p.name, help=spec.help, metavar=spec.metavar or p.name.upper(),
                                **extra)
            continue
        if p.base is bool:
            extra = {"action": "store_true"}
        elif p.repeated:
            extra.update(action="append", default=[])
        else:
            extra["default"] = p.default
        if spec.metavar and "metavar" not in extra:
            extra["metavar"] = spec.metavar
        parser.add_argument(*spec.flags, dest=p.name, help=spec.help, **extra)


def _choice(kind):
    """argparse's type for an enum of str values: the member, or a refusal listing them."""
    import argparse

    def convert(text: str):
        try:
            return kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"invalid choice: {text!r} (choose from "
                f"{', '.join(repr(m.value) for m in kind)})") from None

    return convert


def _bounded(kind, low):
    def convert(text: str):
        value = kind(text)
        if low is not None and value < low:
            raise ValueError(text)
        return value

    convert.__name__ = f"{kind.__name__}{f' >= {low}' if low is not None else ''}"
    return convert


def run_argparse(parser, argv) -> int:
    try:
        args = vars(parser.parse_args(argv))
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else 0
    func = args.pop("_func", None)
    args.pop("_command", None)
    if func is None:
        parser.print_help()
        return 2
    try:
        func(**args)
    except CliError as e:
        echo("error: " + error_line(str(e)), err=True)
        return e.code
    return 0


def run(name: str, doc: str, commands: dict, version: str, argv=None, single=False,
        frontend: str | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if choose(frontend) == "typer":
        return run_typer(typer_app(name, doc, commands, version, single), argv, name)
    return run_argparse(argparse_parser(name, doc, commands, version, single), argv)


