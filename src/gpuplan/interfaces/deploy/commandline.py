"""Shell command lines in and out: split a pasted launch script into words, pick out the options a
recorded table knows (options.OptionTable), and print a command one option per line.

Reading follows argparse / click: `--name value`, `--name=value`, flags without a value, nargs='+'
lists of integers, `--no-name` for a BooleanOptionalAction, the last occurrence winning. An option
the table does not record is kept, with the words that follow it up to the next option, in
`ParsedArgs.unmodelled`, so a command gpuplan reads never loses an option silently.

A script may hold here-documents (`cat > FILE <<'EOF' ... EOF`, how an emitted TensorRT-LLM launch
carries its extra options file), `#` comments and backslash line continuations.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from gpuplan.errors import InputError
from gpuplan.interfaces.deploy.options import Kind, OptionTable

_HEREDOC = re.compile(r"^[^\n]*?>\s*(\S+)\s*<<-?\s*'?\"?(\w+)'?\"?[^\n]*\n(.*?)\n\2[ \t]*$", re.DOTALL | re.MULTILINE)
#: longest pasted command or config gpuplan reads (characters): a launch script is a few kB
MAX_TEXT_CHARS = 1_000_000


def check_text(text: str, field_name: str = "from") -> str:
    """`text` as a str within MAX_TEXT_CHARS, else InputError naming `field_name`."""
    if not isinstance(text, str) or not text.strip():
        raise InputError(f"{field_name}: empty; give a launch command, a config file or its path", field=field_name)
    if len(text) > MAX_TEXT_CHARS:
        raise InputError(f"{field_name}: {len(text):,} characters; at most {MAX_TEXT_CHARS:,}", field=field_name)
    if "\x00" in text:
        raise InputError(f"{field_name}: contains a NUL character; give a text command or config", field=field_name)
    return text


def here_documents(text: str) -> tuple[str, dict[str, str]]:
    """(the script without its here-documents, {file name: body})."""
    bodies: dict[str, str] = {}

    def keep(m: re.Match) -> str:
        bodies[m.group(1)] = m.group(3)
        return ""

    return _HEREDOC.sub(keep, text), bodies


def commands(text: str, field_name: str = "from") -> list[list[str]]:
    """The shell commands of a script, each as its words (comments, continuations and
    here-documents removed). InputError on unbalanced quotes."""
    script, _ = here_documents(check_text(text, field_name))
    script = re.sub(r"\\\r?\n", " ", script)
    out = []
    for line in script.splitlines():
        try:
            words = shlex.split(line, comments=True)
        except ValueError as exc:
            raise InputError(f"{field_name}: cannot split the command into words ({exc})", field=field_name) from None
        if words:
            out.append(words)
    return out


def find_command(text: str, is_program, field_name: str = "from", expected: str = "") -> tuple[list[str], list[str]]:
    """(the launcher's words, the program's words) of the first command of the script in which a
    word satisfies `is_program(word, next_word)`; InputError naming `field_name` if none does."""
    for words in commands(text, field_name):
        for i, w in enumerate(words):
            if is_program(w, words[i + 1] if i + 1 < len(words) else ""):
                return words[:i], words[i + 1:]
    raise InputError(f"{field_name}: no {expected or 'launch'} command found", field=field_name)


@dataclass
class ParsedArgs:
    """The recorded options a command gave (`values`, by the table's spelling), the words no option
    took (`positionals`) and every option the table does not record (`unmodelled`)."""

    values: dict[str, object] = field(default_factory=dict)
    positionals: list[str] = field(default_factory=list)
    unmodelled: list[str] = field(default_factory=list)

    def has(self, name: str) -> bool:
        return name in self.values

    def text(self, name: str, default: str | None = None) -> str | None:
        v = self.values.get(name, default)
        return v if v is None or isinstance(v, str) else str(v)

    def integer(self, name: str, default: int | None = None, minimum: int = 1) -> int | None:
        """An integer option (InputError naming it when not an integer >= minimum)."""
        raw = self.values.get(name)
        if raw is None:
            return default
        try:
            value = int(str(raw))
        except ValueError:
            raise InputError(f"{name}: '{raw}' is not an integer", field=name.lstrip("-")) from None
        if value < minimum:
            raise InputError(f"{name}: {value} must be >= {minimum}", field=name.lstrip("-"))
        return value

    def fraction(self, name: str, default: float | None = None) -> float | None:
        """A float in (0, 1] (InputError naming the option otherwise)."""
        raw = self.values.get(name)
        if raw is None:
            return default
        try:
            value = float(str(raw))
        except ValueError:
            raise InputError(f"{name}: '{raw}' is not a number", field=name.lstrip("-")) from None
        if not 0 < value <= 1:
            raise InputError(f"{name}: {value:g} must be in (0, 1]", field=name.lstrip("-"))
        return value

    def choice(self, name: str, allowed, default: str | None = None) -> str | None:
        raw = self.values.get(name, default)
        if raw is not None and raw not in allowed:
            raise InputError(f"{name}: '{raw}' is not one of {', '.join(map(str, allowed))}",
                             field=name.lstrip("-"), allowed=", ".join(map(str, allowed)))
        return raw

    def integers(self, name: str) -> tuple[int, ...] | None:
        raw = self.values.get(name)
        if raw is None:
            return None
        try:
            out = tuple(int(v) for v in raw)
        except ValueError:
            raise InputError(f"{name}: '{' '.join(raw)}' is not a list of integers", field=name.lstrip("-")) from None
        if not out or min(out) < 1:
            raise InputError(f"{name}: give one or more positive integers", field=name.lstrip("-"))
        return out


def _is_option(word: str) -> bool:
    if not word.startswith("-") or word in ("-", "--"):
        return False
    try:
        float(word)
        return False
    except ValueError:
        return True


def parse_args(words: list[str], table: OptionTable, *, also: tuple[OptionTable, ...] = ()) -> ParsedArgs:
    """The options of `words` under `table` (and `also`: a launcher's table) - module docstring."""
    out = ParsedArgs()
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        if not _is_option(word):
            out.positionals.append(word)
            continue
        name, eq, inline = word.partition("=")
        opt = next((t.lookup(name) for t in (table, *also) if t.lookup(name) is not None), None)
        negated = False
        if opt is None and name.startswith("--no-"):
            base = table.lookup("--" + name[5:])
            if base is not None and base.kind is Kind.BOOL:
                opt, negated = base, True
        if opt is None:
            extra = [inline] if eq else []
            while not eq and i < len(words) and not _is_option(words[i]):
                extra.append(words[i])
                i += 1
            out.unmodelled.append(" ".join([name, *extra]))
            continue
        if opt.kind in (Kind.FLAG, Kind.BOOL):
            out.values[opt.name] = not negated
            continue
        if opt.kind is Kind.INTS:
            vals = [inline] if eq else []
            while not eq and i < len(words) and not _is_option(words[i]) and words[i].lstrip("-").isdigit():
                vals.append(words[i])
                i += 1
            out.values[opt.name] = vals
            continue
        if eq:
            out.values[opt.name] = inline
        elif i < len(words):
            out.values[opt.name] = words[i]
            i += 1
        else:
            raise InputError(f"{name}: needs a value", field=name.lstrip("-"))
    return out


def render_command(head: list[str], groups: list[list[str]]) -> str:
    """`head` then one option (a group of words) per line, joined by backslash continuations."""
    lines = [" ".join(shlex.quote(w) for w in head)]
    lines += ["  " + " ".join(shlex.quote(w) for w in g) for g in groups if g]
    return " \\\n".join(lines) + "\n"
