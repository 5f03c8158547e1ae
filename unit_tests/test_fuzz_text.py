"""Fuzzing the text front end: a thousand mutated inputs, 3000 with UOPIR_SLOW=1 (the lit files and random printed
graphs with deleted, duplicated and swapped tokens and characters, random unicode, truncation, huge numbers, deep
nesting).

Each one must end in valid IR (which then verifies or fails with IRError only, and round trips when it verifies)
or in an IRError whose Location points into the input; never another exception. A hundred (300) also go through
the uop-opt CLI in-process: exit code 0 or 1, and never a traceback or an "internal error".
"""
from __future__ import annotations

import io
import random
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from graphgen import random_graph
from proptest import FULL

import uopir  # noqa: F401 - registers the dialects
from uopir.ir.diagnostics import IRError
from uopir.ir.lexer import TOKEN_RE
from uopir.ir.parser import parse_ir, split_input
from uopir.ir.printer import print_ir
from uopir.ir.verify import verify

ROOT = Path(__file__).resolve().parents[1]
LIT = ROOT / "lit_tests"
SEED = 20240611
# fixed-seed slices (make fuzz's `text` target mutates without end; UOPIR_SLOW=1 runs the long slices)
N_PARSE = 3000 if FULL else 1000
N_CLI = 300 if FULL else 100
_DIRECTIVE = re.compile(r"^\s*//\s*(RUN|CHECK|GENERIC|[A-Z]+(-NEXT|-SAME|-NOT|-DAG|-LABEL|-EMPTY)?):")

# ---- the corpus -----------------------------------------------------------------------------------------------------


def lit_inputs() -> list[str]:
    """The text of every lit input, with RUN/CHECK directive lines dropped (the IR and its comments stay)."""
    out = []
    for p in sorted(LIT.rglob("*.uop")):
        if "Output" in p.parts:
            continue
        text = p.read_text(encoding="utf-8")
        out.append("\n".join(ln for ln in text.split("\n") if not _DIRECTIVE.match(ln)))
    return out


def corpus(rng: random.Random) -> list[str]:
    texts = lit_inputs()
    for _ in range(60):
        g = random_graph(rng.getrandbits(32), rng.randint(3, 25))
        texts.append(print_ir(g, generic=rng.random() < 0.4))
    # one hand-written input with everything the pretty syntax has (regions, dicts, positional attrs, tags)
    texts.append("""%0 = tensor.buffer {id = 0, device = "python"} : tensor<4xf32>
%1 = tensor.call %0 {name = "k"} ({
  %0 = kernel.param {idx = 0} : ptr<f32, global>
  %1 = core.const 4 : index
  %2 = kernel.range %1 {axis = 0, kind = global} : index
  %3 = kernel.index %0, %2 : ptr<f32, global>
  %4 = core.const [1.0, -0.0, inf, nan] {tag = ["a\\n\\"b", 1, 2.5]} : vector<4xf32>
  %5 = core.gep %4 {idx = [3]} : f32
  %6 = kernel.store %3, %5
  %7 = kernel.end %6, %2
  kernel.def %7 {name = "k"}
})
core.sink %1
""")
    return texts


# ---- mutations ------------------------------------------------------------------------------------------------------
ODD_CHARS = ("%", "=", ",", "{", "}", "(", ")", "[", "]", "<", ">", ":", '"', "\\", "x", "-", ".", "\n", "\t", "\r",
             " ", "0", "9", "\x00", "\x7f", "é", "中", "😀", "\u2028", "\ufeff", "\ud800", "\x85", "/", "$", "e", "#")
ODD_TOKENS = ("%", "%0", "%999", "=", ",", "{", "}", "({", "})", "(", ")", "[", "]", ":", "->", "tensor<4xf32>",
              "tensor<>", "vector<0xf32>", "ptr<f32, nowhere>", "f33", "core.add", "core.nope", "nope.op",
              '"core.const"', "none", "nan", "-inf", "1e999", "0x", "0xffffffffffffffffffffffff", "9" * 5000,
              "-" + "9" * 400, "1." + "0" * 400 + "1", '"unterminated', '"\\q"', "tag", "true", "// -----",
              "// c", "\\", "tensor<" + "2x" * 300 + "f32>", "vector<4xvector<4xf32>>", "ptr<ptr<f32, global>, local>")


def _tokens(text: str) -> list[tuple[int, int]]:
    return [m.span() for m in TOKEN_RE.finditer(text)]


def m_delete_char(rng: random.Random, t: str) -> str:
    i = rng.randrange(len(t))
    return t[:i] + t[i + 1:]


def m_insert_char(rng: random.Random, t: str) -> str:
    i = rng.randrange(len(t) + 1)
    c = rng.choice(ODD_CHARS) if rng.random() < 0.7 else chr(rng.randrange(0x110000))
    return t[:i] + c + t[i:]


def m_swap_chars(rng: random.Random, t: str) -> str:
    i, j = sorted((rng.randrange(len(t)), rng.randrange(len(t))))
    return t[:i] + t[j] + t[i + 1:j] + t[i] + t[j + 1:]


def m_dup_span(rng: random.Random, t: str) -> str:
    i = rng.randrange(len(t))
    j = min(len(t), i + rng.randint(1, 40))
    return t[:j] + t[i:j] + t[j:]


def m_truncate(rng: random.Random, t: str) -> str:
    return t[:rng.randrange(len(t))]


def _tok_edit(fn: Callable[[random.Random, str, list[tuple[int, int]]], str]) -> Callable[[random.Random, str], str]:
    def mutate(rng: random.Random, t: str) -> str:
        toks = _tokens(t)
        return fn(rng, t, toks) if toks else t + rng.choice(ODD_TOKENS)
    return mutate


@_tok_edit
def m_delete_token(rng: random.Random, t: str, toks: list[tuple[int, int]]) -> str:
    a, b = rng.choice(toks)
    return t[:a] + t[b:]


@_tok_edit
def m_dup_token(rng: random.Random, t: str, toks: list[tuple[int, int]]) -> str:
    a, b = rng.choice(toks)
    return t[:b] + rng.choice(("", " ")) + t[a:b] + t[b:]


@_tok_edit
def m_swap_tokens(rng: random.Random, t: str, toks: list[tuple[int, int]]) -> str:
    (a, b), (c, d) = sorted((rng.choice(toks), rng.choice(toks)))
    if c < b:
        return t
    return t[:a] + t[c:d] + t[b:c] + t[a:b] + t[d:]


@_tok_edit
def m_replace_token(rng: random.Random, t: str, toks: list[tuple[int, int]]) -> str:
    a, b = rng.choice(toks)
    if rng.random() < 0.5:
        new = rng.choice(ODD_TOKENS)
    else:  # another token of the same text: a plausible but wrong spelling (%3 for %5, f32 for i32, ...)
        c, d = rng.choice(toks)
        new = t[c:d]
    return t[:a] + new + t[b:]


@_tok_edit
def m_huge_number(rng: random.Random, t: str, toks: list[tuple[int, int]]) -> str:
    nums = [s for s in toks if t[s[0]] in "-0123456789"] or toks
    a, b = rng.choice(nums)
    new = rng.choice(("9" * rng.randint(20, 6000), "-" + "1" * 5000, "1e308", "1e309", "-1e400", "4.9e-325",
                      "0x" + "f" * 300, str(2**64), str(-(2**63) - 1), "00000000000000000007", "1_000"))
    return t[:a] + new + t[b:]


def m_deep_nesting(rng: random.Random, t: str) -> str:
    lines = t.split("\n")
    li = rng.randrange(len(lines))
    n = rng.choice((70, 500, 5000))
    kind = rng.randrange(4)
    if kind == 0:  # a deeply nested list where an attribute value goes
        lines[li] = lines[li].replace("= ", "= " + "[" * n + "1" + "]" * n + " ", 1) if "= " in lines[li] \
            else lines[li] + " {a = " + "[" * n + "]" * n + "}"
    elif kind == 1:  # unbalanced brackets
        lines[li] += rng.choice(("[", "{", "(", "<", "({")) * n
    elif kind == 2:  # deeply nested regions
        d = rng.choice((10, 70, 300))
        nest = "\n".join(f"%{k} = tensor.call {{name = \"k\"}} ({{" for k in range(d))
        lines.insert(li, nest + "\n" + "kernel.def {name = \"k\"}\n" + "})\n" * d)
    else:  # a nested type
        lines[li] += " : " + "vector<4x" * n + "f32" + ">" * n
    return "\n".join(lines)


def m_lines(rng: random.Random, t: str) -> str:
    lines = t.split("\n")
    i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
    k = rng.randrange(4)
    if k == 0:
        del lines[i]
    elif k == 1:
        lines.insert(j, lines[i])
    elif k == 2:
        lines[i], lines[j] = lines[j], lines[i]
    else:
        lines.insert(i, "// -----")
    return "\n".join(lines)


def m_random_unicode(rng: random.Random, t: str) -> str:
    i = rng.randrange(len(t) + 1)
    junk = "".join(chr(rng.choice((rng.randrange(0x20, 0x7f), rng.randrange(0x80, 0x10000), rng.randrange(0x110000))))
                   for _ in range(rng.randint(1, 12)))
    return t[:i] + junk + t[i:]


MUTATIONS = (m_delete_char, m_insert_char, m_swap_chars, m_dup_span, m_truncate, m_delete_token, m_dup_token,
             m_swap_tokens, m_replace_token, m_huge_number, m_deep_nesting, m_lines, m_random_unicode)


def mutate(rng: random.Random, text: str) -> str:
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        if not text:
            text = rng.choice(ODD_TOKENS)
        text = rng.choice(MUTATIONS)(rng, text)
    return text


# ---- the checks -----------------------------------------------------------------------------------------------------
def check_text(text: str, filename: str = "fuzz.uop") -> str:
    """Parse (every `// -----` chunk), verify what parses, round trip what verifies; returns what happened."""
    n_lines = len(text.split("\n"))
    outcome = "ok"
    for first, chunk in split_input(text):
        try:
            g = parse_ir(chunk, filename, first)
        except IRError as e:
            _check_located(e, filename, n_lines, text)
            outcome = "parse-error"
            continue
        try:
            verify(g)
        except IRError as e:
            for d in e.diagnostics:  # parsed nodes carry their location: each diagnostic must point into the file
                if d.loc is not None:
                    assert d.loc.file == filename and 1 <= d.loc.line <= n_lines, (d.format(), text)
            outcome = "verify-error"
            continue
        pretty = print_ir(g)
        assert parse_ir(pretty) is g, (text, pretty)
        assert parse_ir(print_ir(g, generic=True)) is g, (text, pretty)
    return outcome


def _check_located(e: IRError, filename: str, n_lines: int, text: str) -> None:
    loc = e.loc
    assert loc is not None, f"unlocated parse error: {e.message!r}\n--- input:\n{text[:2000]}"
    assert loc.file == filename, (str(e), text[:2000])
    assert 1 <= loc.line <= n_lines, (f"line {loc.line} outside 1..{n_lines}: {e.message}", text[:2000])
    assert loc.col >= 1
    assert "internal parser error" not in e.message, (e.message, text[:2000])
    e.format()  # formatting never fails (caret display of any line)


def test_corpus_parses_or_fails_located() -> None:
    """The unmutated corpus: lit inputs are valid IR or located errors (the invalid.uop files), never a crash."""
    for text in corpus(random.Random(SEED)):
        check_text(text, "corpus.uop")


@pytest.mark.property  # make fuzz runs its long slice (UOPIR_SLOW=1)
def test_mutated_text_never_crashes() -> None:
    rng = random.Random(SEED)
    texts = corpus(rng)
    outcomes: dict[str, int] = {}
    for k in range(N_PARSE):
        text = mutate(rng, rng.choice(texts))
        try:
            out = check_text(text)
        except AssertionError:
            raise
        except Exception as e:  # noqa: BLE001 - the point of the test
            pytest.fail(f"mutation {k}: {type(e).__name__}: {e}\n--- input:\n{text[:3000]}")
        outcomes[out] = outcomes.get(out, 0) + 1
    # the mutations must exercise both sides: some inputs still parse, most do not
    assert outcomes.get("parse-error", 0) > N_PARSE // 3, outcomes
    assert outcomes.get("ok", 0) + outcomes.get("verify-error", 0) > N_PARSE // 20, outcomes


def test_parse_errors_are_located_on_simple_cases() -> None:
    cases = {
        "%0 = core.const 1.0 : f33\ncore.sink %0\n": (1, 23),
        "%0 = core.const 1.0 : f32\ncore.sink %1\n": (2, 11),
        "%0 = core.nope : f32\n": (1, 6),
        '%0 = core.const 1.0 {tag = "abc} : f32\n': (1, 28),
        "": (1, 1),
        "\n\n// only a comment\n": (1, 1),
        "%0 = core.const " + "9" * 5000 + " : i32\n": (1, 17),
    }
    for text, (line, col) in cases.items():
        with pytest.raises(IRError) as ei:
            parse_ir(text, "t.uop")
        assert (ei.value.loc.line, ei.value.loc.col) == (line, col), (text[:80], ei.value.format()[:300])


# ---- the CLI --------------------------------------------------------------------------------------------------------
def _uop_opt() -> Callable[..., int] | None:
    try:
        from uopir.tools.uop_opt import main
    except ImportError:
        return None
    return main


CLI_FLAGS: tuple[tuple[str, ...], ...] = (
    (), ("--print-generic",), ("--split-input-file",), ("--split-input-file", "--verify-diagnostics"),
    ("--no-verify",), ("-p", "canonicalize"), ("-p", "cleanup"), ("-p", "tensor-canonicalize"),
    ("--split-input-file", "-p", "dce", "--print-generic"),
)


@pytest.mark.property  # make fuzz runs its long slice (UOPIR_SLOW=1)
def test_cli_on_mutated_text(tmp_path: Path) -> None:
    main = _uop_opt()
    if main is None:
        pytest.skip("uopir.tools.uop_opt is not there yet")
    rng = random.Random(SEED + 1)
    texts = corpus(rng)
    path = tmp_path / "in.uop"
    seen_codes: set[int] = set()
    for k in range(N_CLI):
        text = mutate(rng, rng.choice(texts))
        # lone surrogates become invalid UTF-8 bytes in the file: the CLI must report that too
        path.write_bytes(text.encode("utf-8", "surrogatepass"))
        flags = list(rng.choice(CLI_FLAGS))
        out, err = io.StringIO(), io.StringIO()
        try:
            code = main([str(path), *flags], out=out, err=err)
        except SystemExit as e:  # pragma: no cover - main must return, not exit
            pytest.fail(f"mutation {k}: uop-opt raised SystemExit({e.code}) with {flags}")
        text_out = out.getvalue() + err.getvalue()
        assert code in (0, 1), f"mutation {k}: exit {code} with {flags}\n{err.getvalue()[-3000:]}\n--- input:\n" \
                               f"{text[:3000]}"
        assert "Traceback" not in text_out and "internal error" not in text_out, (flags, text_out[-3000:])
        if code == 1 and not flags.count("--verify-diagnostics"):
            assert "error" in err.getvalue(), (flags, text_out[-2000:])
        seen_codes.add(code)
    assert seen_codes == {0, 1}


# ---- known parser gaps (minimal reproducers; see the report to the lead) --------------------------------------------
def test_trailing_split_marker_errors_stay_inside_the_file() -> None:
    """A file ending in `// -----` (no newline): the empty last chunk's error must point into the file."""
    text = "%0 = core.const 1.0 : f32\n// -----"
    for first, chunk in split_input(text):
        try:
            parse_ir(chunk, "t.uop", first)
        except IRError as e:
            assert e.loc is not None and e.loc.line <= 2, e.format()


def test_bad_const_value_names_the_value_attribute() -> None:
    """`core.const "one" : f32` is a bad value, not a missing tensor type (the shape attribute is optional)."""
    with pytest.raises(IRError) as ei:
        parse_ir('%0 = core.const "one" : f32\n', "t.uop")
    assert "attribute 'value'" in ei.value.message, ei.value.format()
    assert ei.value.loc.col == 17, ei.value.format()


def test_junk_after_the_type_expects_only_end_of_line() -> None:
    """After `: type` only the end of the line can follow; offering ',' there is misleading."""
    with pytest.raises(IRError) as ei:
        parse_ir("%0 = core.const 1.0 : f32\n%1 = core.neg %0 : f32 ; trailing\ncore.sink %1\n", "t.uop")
    assert ei.value.message == "expected end of line, got ';'", ei.value.format()
    assert (ei.value.loc.line, ei.value.loc.col) == (2, 24)
