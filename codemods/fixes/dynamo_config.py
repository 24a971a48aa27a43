"""The code that tells Dynamo how to trace data-dependent values: configuration set
where the program compiles, and ``torch._check`` calls.

Dynamo reads its configuration when it traces, that is when the compiled code is
*called*, not when ``torch.compile`` is (measured on torch 2.13:
``with torch._dynamo.config.patch(...): model = torch.compile(model)`` changes
nothing). So the configuration goes where it holds for every call, in the forms
PyTorch documents:

* a function compiled with ``@torch.compile``: ``@torch._dynamo.config.patch(flag=True)``
  above it (the documented decorator form; every call, so every trace and retrace,
  runs under it, and nothing else in the process does);
* a function compiled by a call, ``step = torch.compile(train_step)``:
  ``torch._dynamo.config.patch(flag=True)(torch.compile(train_step))``, the same
  decorator applied by hand (the result is still a function);
* a module compiled in a program's own code (``model = torch.compile(model)`` in a
  script): ``torch._dynamo.config.flag = True`` on the line before, the form
  Dynamo's own hint prints. It holds for everything the process compiles, which is
  why fixitem writes it only in a program (a file with an ``if __name__ ==
  "__main__":`` block or a loop at module level), never in a library module.
"""

from __future__ import annotations

import ast

from .. import gen
from ..model.context import FileContext
from ..model.data_dependent import CompileCall, config_settings


def missing_flags(ctx: FileContext, flags: tuple[str, ...]) -> tuple[str, ...]:
    """The flags of ``flags`` the file does not turn on yet."""
    settings = config_settings(ctx)
    return tuple(f for f in flags if f not in settings)


def config_replacements(ctx: FileContext, call: CompileCall, flags: tuple[str, ...]) -> dict[ast.AST, gen.Replacement]:
    """The edit that turns ``flags`` on for what ``call`` compiles (see the module's text)."""
    torch = ctx.torch_name()
    keywords = ", ".join(f"{flag}=True" for flag in flags)
    patch = f"{torch}._dynamo.config.patch({keywords})"
    if call.decorated is not None and call.node in getattr(call.decorated, "decorator_list", ()):
        indent = ctx.indent(call.statement)
        return {call.node: gen.Raw(f"{patch}\n{indent}@{ctx.code(call.node)}")}
    if call.decorated is not None:
        return {call.node: gen.Call(gen.Raw(patch), [call.node])}
    lines = [gen.RawStatement(f"{torch}._dynamo.config.{flag} = True") for flag in flags]
    return {call.statement: gen.Statements([*lines, gen.SourceStatement(call.statement)])}


def config_form(ctx: FileContext, call: CompileCall, flags: tuple[str, ...]) -> str:
    """How the fix sets ``flags``, in words, for the finding's note."""
    names = " and ".join(f"`{f}`" for f in flags)
    line = ctx.position(call.node)[0]
    if call.decorated is not None:
        return f"sets {names} with `torch._dynamo.config.patch` around the function compiled at line {line}"
    return f"sets {names} on the line before the `torch.compile` at line {line}"


def check_statement(ctx: FileContext, condition: str) -> gen.RawStatement:
    """``torch._check(condition)``."""
    return gen.RawStatement(f"{ctx.torch_name()}._check({condition})")
