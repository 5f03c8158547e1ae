"""Tokens of the .uop text: one compiled regex, applied per line (strings never span lines).

`findall` gives the token strings of a line, which is all the parser needs on the fast path; the column of a
token is recomputed with `finditer` only when an error has to point at it. A token's kind is its first char:
`%` value name, `"` string, a digit / `-` / `.` number, a letter or `_` word (or a `tensor<…>` type), else
punctuation. Any other non-space char is a one-char token, so nothing is silently skipped.
"""
from __future__ import annotations

import re
import sys

TOKEN_RE = re.compile(r"""
    //.*                                            # comment to the end of the line
  | %[A-Za-z0-9_.$-]+                               # value name
  | "[^"\\]*+(?:\\.[^"\\]*+)*+"                      # string (runs, possessive: no per-char backtrack state)
  | (?:tensor|vector|ptr)<[^<>]*+(?:<[^<>]*+(?:<[^<>]*+>[^<>]*+)*+>[^<>]*+)*+>   # compound type (two levels)
  | -?inf(?![A-Za-z0-9_.$])                         # -inf
  | -?(?:0[xX][0-9a-fA-F]+|(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?)(?:_[A-Za-z0-9_.]*)?
                                                    # number (a glued '_…' stays in it, to be rejected by name)
  | [A-Za-z_][A-Za-z0-9_.$]*                        # word: op name, keyword, enum member, scalar type
  | ->                                              # function type arrow
  | \S                                              # any other char: punctuation or an error
""", re.VERBOSE | re.ASCII)

tokenize_line = TOKEN_RE.findall

WORD_START = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_")
NUM_START = frozenset("0123456789-.")

_ESCAPES = {"\\": "\\", '"': '"', "n": "\n", "t": "\t", "r": "\r"}
_ESC_RE = re.compile(r"\\(x[0-9a-fA-F]{2}|.)", re.DOTALL)


def token_col(line: str, k: int) -> int:
    """1-based column of the k-th token of `line` (past the last one: just after the line's text)."""
    for j, m in enumerate(TOKEN_RE.finditer(line)):
        if j == k:
            return m.start() + 1
    return len(line.rstrip()) + 1


def unescape(tok: str) -> str:
    """The value of a string token (with its quotes); ValueError names a bad escape."""
    body = tok[1:-1]
    if "\\" not in body:
        return body

    def one(m: re.Match) -> str:
        g = m.group(1)
        if len(g) == 3:
            return chr(int(g[1:], 16))
        if g in _ESCAPES:
            return _ESCAPES[g]
        raise ValueError(f"invalid escape '\\{g}' in string (use \\\\ \\\" \\n \\t \\r or \\xNN)")

    return _ESC_RE.sub(one, body)


def _max_int_bits() -> int:
    """Bits of the largest int whose decimal text Python will still write (the printer writes ints in decimal)."""
    digits = sys.get_int_max_str_digits() if hasattr(sys, "get_int_max_str_digits") else 0
    return 1 << 62 if digits == 0 else int((digits - 1) * 3.3219280948873626)


def parse_number(tok: str) -> int | float:
    """An int (decimal or 0x hex) or a float literal; ValueError with a message for anything else.

    One grammar whatever the spacing around the token: the lexer's number rule (no '_' digit separators, as in
    MLIR, although Python's int() and float() take them), and no int too long to print back."""
    if "_" in tok:
        raise ValueError(f"invalid number '{tok if len(tok) <= 60 else tok[:57] + '...'}' "
                         "('_' digit separators are not allowed)")
    try:
        if "x" in tok or "X" in tok:
            v = int(tok, 16)
            if v.bit_length() > _max_int_bits():
                raise ValueError(f"integer literal too long ({len(tok)} digits)")
            return v
        if "." in tok or "e" in tok or "E" in tok or "inf" in tok:
            return float(tok)
        return int(tok)
    except ValueError as e:
        if str(e).startswith("integer literal too long") or tok.lstrip("-").isdigit():
            digits = len(tok.lstrip("-"))
            raise ValueError(f"integer literal too long ({digits} digits)") from None
        raise ValueError(f"expected a value, got '{tok if len(tok) <= 60 else tok[:57] + '...'}'") from None
