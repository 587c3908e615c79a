"""Plain scalars that kubectl types otherwise than vmtune's YAML 1.1 reader (PyYAML's rules).

kubectl reads manifests with sigs.k8s.io/yaml, whose YAMLToJSON types plain scalars as its fork
of go-yaml v2 does (resolve.go): `y`, `Y`, `n`, `N` are booleans, `0o17`/`0X1F`/`0B11` integers
(strconv.ParseInt, base 0), `08` and `1e3` floats (yamlStyleFloat), `1:20` a string. PyYAML
reads `y` and `08` as strings, `1:20` as 80. A manifest of a pull request could so show vmtune
one VM and the cluster another. Such a scalar in a KubeVirt object is refused at its line, in
one line (exit 2); the texts where both agree, all of a real manifest, are read as they are.

Cost: a search over the text for the few shapes that can differ; PyYAML's scanner runs only on
a file that has one (a comment or a string may, a manifest seldom does).
"""

from __future__ import annotations

import functools
import math
import re
from typing import Any

# at the top, not in disagree(): an import statement in a function costs ~8 k instructions each
# time it runs (the module's __path__ is looked up and fails), and disagree() runs for every file.
from vmtune.stacks.yamldoc import plain_value

# Shapes of a plain scalar that go-yaml v2 and PyYAML may type differently, standing alone
# between YAML's separators: a superset (the scanner and the two typings then decide). Linear:
# no nested quantifiers, each alternative anchored on its first character.
#
# The pattern opens with a character class, the characters a shape can start with: re then
# skips every other character in C, and tries the pattern only where one can start (an assertion
# first, as `(?=[yYnN0-9._+-])`, made it try at every character of the file: ~70 % of the
# KubeVirt front end's pre-scan of a manifest, half of it gone with this form). After that first
# character: the separator before it (start of text or line, whitespace, `[`, `{` or `,`) as a
# look-behind over both, then the rest of the shape, chosen by a look-behind on the character
# taken. The shapes, whole, are:
#   [yYnN]                                            go: bool
#   [-+]?[0-9._][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+  exponent without sign or dot: go float
#   [-+]?0[oObBxX][0-9a-fA-F_]*                       base prefixes PyYAML lacks (0o, 0O, 0B, 0X)
#   [-+]?0[0-9_]*[89][0-9_.]*                         a leading 0 with an 8 or 9: go float, PyYAML str
#   [-+]?[0-9][0-9_]*(?::[0-9_]+)+(?:\.[0-9_]*)?      base 60: PyYAML number, go str
#   [-+]\.[0-9]                                       a signed fraction without its 0: go float, PyYAML str
#   \.[0-9][0-9_]*_                                   `.6_`: PyYAML float, go str (underscores only after a digit)
#   [-+]?[0-9][0-9_]{18}[0-9_]*                       past int64: PyYAML int, go float or str
# tests/test_kubectl_yaml.py holds this form to those shapes.
_UNSIGNED = (r"[0-9._][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+|0[oObBxX][0-9a-fA-F_]*|0[0-9_]*[89][0-9_.]*"
             r"|[0-9][0-9_]*(?::[0-9_]+)+(?:\.[0-9_]*)?|[0-9][0-9_]{18}[0-9_]*")
_SUSPECT_PATTERN = (
    r"[yYnN0-9._+-](?<![^\s\[{,].)(?:"  # a shape's first character, after a separator
    r"(?<=[yYnN])"  # the whole scalar: go's bool
    r"|(?<=[-+])(?:" + _UNSIGNED + r"|\.[0-9])"  # a sign, then a shape that takes one
    r"|(?<=[0-9._])[0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+"  # the rest of each unsigned shape
    r"|(?<=0)[oObBxX][0-9a-fA-F_]*"
    r"|(?<=0)[0-9_]*[89][0-9_.]*"
    r"|(?<=[0-9])[0-9_]*(?::[0-9_]+)+(?:\.[0-9_]*)?"
    r"|(?<=\.)[0-9][0-9_]*_"
    r"|(?<=[0-9])[0-9_]{18}[0-9_]*"
    r")(?=$|[\s,\]}#])")  # the whole scalar: `name` is no `n`


@functools.cache
def suspect() -> re.Pattern[str]:
    """_SUSPECT_PATTERN compiled, at the first search: most runs never search (refuse() asks
    disagree() first), and compiling it cost ~5 M instructions at every start of a manifest check."""
    return re.compile(_SUSPECT_PATTERN, re.M)


_GO_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")  # go-yaml v2's yamlStyleFloat
_GO_WORDS: dict[str, Any] = {
    **dict.fromkeys(("y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"), True),
    **dict.fromkeys(("n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"), False),
    **dict.fromkeys(("", "~", "null", "Null", "NULL"), None),
    **dict.fromkeys((".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"), math.inf),
    **dict.fromkeys(("-.inf", "-.Inf", "-.INF"), -math.inf),
}
_UNJUDGED = object()  # a timestamp, NaN: no KubeVirt field vmtune judges takes one
_INT64 = (-(2 ** 63), 2 ** 64 - 1)


def _go_int(text: str) -> int | None:
    """strconv.ParseInt(text, 0, 64) (then ParseUint), as Go reads a base-0 integer."""
    sign, digits = (text[0], text[1:]) if text[:1] in "+-" else ("", text)
    bases = {"0x": 16, "0X": 16, "0o": 8, "0O": 8, "0b": 2, "0B": 2}
    base = bases.get(digits[:2])
    if base is not None:
        digits = digits[2:]
    elif len(digits) > 1 and digits[0] == "0":
        base, digits = 8, digits[1:]
    else:
        base = 10
    if not digits or not digits.isascii() or not digits.isalnum() or len(digits) > 64:
        return None
    try:
        number = int(sign + digits, base)
    except ValueError:
        return None
    return number if _INT64[0] <= number <= _INT64[1] else None


def kubectl_value(text: str) -> Any:
    """The value sigs.k8s.io/yaml gives a plain scalar: go-yaml v2's resolve() for untagged text."""
    if text in _GO_WORDS:
        return _GO_WORDS[text]
    first = text[:1]
    if first == ".":
        if text in (".nan", ".NaN", ".NAN"):
            return _UNJUDGED
        try:
            return float(text) if _GO_FLOAT.fullmatch(text) else text
        except ValueError:
            return text
    if first and (first in "+-" or first.isdigit()):
        if re.fullmatch(r"[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}([Tt ].*)?", text):
            return _UNJUDGED  # parseTimestamp: a date, as PyYAML reads it too
        plain = text.replace("_", "")
        number = _go_int(plain)
        if number is not None:
            return number
        if _GO_FLOAT.fullmatch(plain) and len(plain) < 400:
            real = float(plain)
            return text if math.isinf(real) else real  # strconv.ParseFloat: ErrRange, then a string
    return text


def _same(ours: Any, theirs: Any) -> bool:
    if theirs is _UNJUDGED:
        return True
    if isinstance(ours, bool) or isinstance(theirs, bool) or ours is None or theirs is None:
        return ours is theirs
    if isinstance(ours, int | float) and isinstance(theirs, int | float):
        # JSON has one number: 8 and 8.0 are the same value to the API server; an integer past
        # 2**53 that one side holds as a float is not the integer the other reads
        if isinstance(ours, int) != isinstance(theirs, int):
            whole = ours if isinstance(ours, int) else theirs
            return abs(whole) <= 2 ** 53 and ours == theirs
        return ours == theirs
    return type(ours) is type(theirs) and ours == theirs


def disagree(plain: list[str]) -> bool:
    """Whether kubectl types one of these plain values otherwise than vmtune. Given the plain
    values the native YAML reader listed (yamldoc.Doc.plain: every one that may be typed
    otherwise), False means differences() finds nothing, and the text need not be searched; True,
    differences() says what (its search of the text first, as for any file). Verdicts are kept
    by text ("8Gi", "1.5" recur from manifest to manifest), for short texts, the table emptied
    when full."""
    for text in plain:
        agreed = _AGREED.get(text)
        if agreed is None:
            agreed = _same(plain_value(text), kubectl_value(text))
            if len(text) <= 64:
                if len(_AGREED) >= 4096:
                    _AGREED.clear()
                _AGREED[text] = agreed
        if not agreed:
            return True
    return False


_AGREED: dict[str, bool] = {}


def differences(text: str) -> list[tuple[int, str, Any, Any]]:
    """Every plain scalar value (not key) kubectl types otherwise than vmtune, in file order:
    (line, text, vmtune's value, kubectl's). One scan of the file, and none without a suspect."""
    if not suspect().search(text):
        return []
    import yaml

    found = []
    after_key = False
    try:
        for token in yaml.scan(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
            if isinstance(token, yaml.KeyToken):
                after_key = True
                continue
            if isinstance(token, yaml.ScalarToken) and token.plain and not after_key:
                ours, theirs = plain_value(token.value), kubectl_value(token.value)
                if not _same(ours, theirs):
                    found.append((token.start_mark.line + 1, token.value, ours, theirs))
            after_key = False
    except yaml.YAMLError:  # the documents were read already: an error past them is not theirs
        pass
    return found
