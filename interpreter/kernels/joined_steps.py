"""Bound steps built of other steps' pieces (an int8 chain's stages, fusion_int8.py), still one
line of the plan's run_steps. Apart from steps.py: only the int8 kernels need it, and
`import edgelite.interpreter` compiles only what it needs (test_import_budget)."""
from __future__ import annotations

from string import Formatter

from .steps import call_source, calls_step, source_step, step_calls


def joined(*parts):
    """One bound step doing `parts` in order: each a `call(...)`, a bound step (its calls,
    its line of Python, or else one call of it) or None (skipped). A calls_step where every
    part is calls; else a source_step, the calls written as Python beside the lines (each a
    simple statement, or statements joined by `;`). So a step built of other steps' pieces
    (an int8 chain's stages, fusion_int8.py) is still one line of the plan's run_steps."""
    pieces = []       # calls, and the (template, objects) of lines
    for part in parts:
        if part is None:
            continue
        if part.__class__ is tuple:
            pieces.append(part)
        elif getattr(part, "source", None) is not None:
            pieces.append(part.source)
        else:
            pieces.extend(step_calls(part))
    if all(len(p) == 3 for p in pieces):
        return calls_step(*pieces)
    objects: dict = {}

    def field(value) -> str:
        key = f"o{len(objects)}"
        objects[key] = value
        return key

    lines = []
    for piece in pieces:
        if len(piece) == 3:
            lines.append(call_source(piece, lambda v: "{%s}" % field(v)))
            continue
        template, own = piece        # its fields renamed, its literal braces kept escaped
        text = []
        for literal, key, spec, conversion in Formatter().parse(template):
            text.append(literal.replace("{", "{{").replace("}", "}}"))
            if key is not None:
                text.append("{%s%s%s}" % (field(own[key]), "!" + conversion if conversion
                                          else "", ":" + spec if spec else ""))
        lines.append("".join(text))
    return source_step("; ".join(lines), **objects)
