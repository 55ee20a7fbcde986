"""is_complete_request: whether a console may run the code typed so far, or should ask for more lines.

complete: runs as it is (also an IPython-style line that pyc._transform turns into valid code); incomplete,
with the indent of the next line (an open block, bracket or triple-quoted string, or the last line of code
still inside a block, which waits for a blank line as at the >>> prompt); invalid: a syntax error that more
lines cannot fix.
"""

import codeop

_TOP_LEVEL_AWAIT = 0x2000  # ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, without importing ast


def is_complete(src):
    """Returns (status, indent); indent is None unless status is 'incomplete'."""
    if not src.strip():
        return "complete", None
    if src.lstrip()[:3] in (">>>", "In ") or "...:" in src:
        from pyc._transform import without_prompts

        src = without_prompts(src)
    last = src.split("\n")[-1]
    try:
        code = codeop.compile_command(src, "<input>", "exec")
    except (SyntaxError, OverflowError, ValueError, MemoryError):
        return _complete_or_invalid(src)
    indent = last[: len(last) - len(last.lstrip())]
    if code is None:
        # After a newline the next line continues the last line that has code ("for x in y:\n" asks for
        # four spaces, as without the newline).
        ref = last if last.strip() else next((ln for ln in reversed(src.split("\n")) if ln.strip()), "")
        indent = ref[: len(ref) - len(ref.lstrip())]
        if ref.rstrip().endswith(":"):
            indent += "    "
        return "incomplete", indent
    if not last.strip():
        return "complete", None
    return ("incomplete", indent) if _last_line_in_block(src) else ("complete", None)


def _complete_or_invalid(src):
    try:
        compile(src, "<input>", "exec", flags=_TOP_LEVEL_AWAIT, dont_inherit=True)
        return "complete", None
    except SyntaxError as e:
        if "was never closed" in str(e) or "unterminated triple-quoted" in str(e):
            return "incomplete", ""
    except Exception:
        return "invalid", None
    try:
        from pyc._transform import transform_cell

        t = transform_cell(src)
        if t != src:
            compile(t, "<input>", "exec", flags=_TOP_LEVEL_AWAIT, dont_inherit=True)
            return "complete", None
    except Exception:
        pass
    return "invalid", None


def _last_line_in_block(src):
    """True when the last logical line of valid code is indented inside a compound statement."""
    import io
    import tokenize

    depth = block = 0
    try:
        for tok in tokenize.generate_tokens(io.StringIO(src).readline):
            if tok.type == tokenize.INDENT:
                depth += 1
            elif tok.type == tokenize.DEDENT:
                depth -= 1
            elif tok.type == tokenize.NEWLINE:
                block = depth
    except (tokenize.TokenError, SyntaxError):
        return False
    return block > 0
