"""Run-independent output for the oracle scripts whose JSON lines are checked in (peft_all_linear.py, hf_defaults.py):
a second run must give a byte-identical file.

Two things made their lines depend on the run: Python salts the hash of every str per process (PYTHONHASHSEED), so a
set of module names iterates in a different order each run, and the libraries' messages print such sets as they
iterate them (PEFT 0.21.2's "Incompatible modules: {'out_proj', 'conv1d'}", which also names the first incompatible
module it meets), and a dict's or set's first missing key decides which KeyError is raised.

pin_hash_seed() re-runs the script under PYTHONHASHSEED=0 (before the heavy imports: call it first), so that every
iteration order is the same each run; error_line() writes an exception as one line with each set or dict literal in
its message sorted, so that the recorded line does not depend on the seed either."""
import ast
import os
import re
import sys

_LITERAL = re.compile(r"\{[^{}]*\}")  # a set or dict display without nested braces


def pin_hash_seed():
    """Re-exec this script with PYTHONHASHSEED=0 unless it already runs with it."""
    if os.environ.get("PYTHONHASHSEED") != "0":
        os.environ["PYTHONHASHSEED"] = "0"
        sys.stdout.flush()
        os.execv(sys.executable, [sys.executable] + sys.argv)


def _sorted_literal(match):
    text = match.group(0)
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text  # not a literal: left as it is
    if isinstance(value, set):
        return "{" + ", ".join(sorted(repr(v) for v in value)) + "}" if value else text
    if isinstance(value, dict):
        return "{" + ", ".join(repr(k) + ": " + repr(value[k]) for k in sorted(value, key=repr)) + "}"
    return text


def sort_literals(text):
    """text with each set or dict literal's elements (a dict's keys) in sorted order."""
    return _LITERAL.sub(_sorted_literal, text)


def error_line(e, limit=200):
    """The exception as the scripts record it: 'Type: message', its first line, literals sorted, cut at limit."""
    return sort_literals((type(e).__name__ + ": " + str(e)).splitlines()[0])[:limit]


if __name__ == "__main__":  # a self-check: python tools/oracle/stable_order.py
    assert sort_literals("Incompatible modules: {'out_proj', 'conv1d'}. x") == "Incompatible modules: {'conv1d', 'out_proj'}. x"
    assert sort_literals("got {'b': 1, 'a': {3, 2}}") == "got {'b': 1, 'a': {2, 3}}"  # nested braces: the inner set alone
    assert sort_literals("{'b': 1, 'a': 2}") == "{'a': 2, 'b': 1}"
    assert sort_literals("f{x} and {}") == "f{x} and {}"
    print("ok")
