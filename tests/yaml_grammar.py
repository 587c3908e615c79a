"""Random YAML texts from a small grammar, for the native YAML reader's differential fuzz
(tests/test_yamlnodes_hostile.py, bench/yaml_native_fuzz.py): block and flow collections, every
scalar style, YAML 1.1's typed plain scalars and their near misses, implicit and explicit keys,
empty values, documents and directives, multi-line scalars, and now and then what the native
reader must decline (anchors, aliases, tags, merge keys, keys that are not strings) or what libyaml
refuses or reads specially (NUL, ESC, BOM, NEL, LS/PS, CR, tabs)."""

from __future__ import annotations

import random

# Plain scalars around every resolver and every decision of the native reader.
SCALARS = ("a", "x y", "yes", "No", "ON", "off", "y", "n", "~", "null", "NULL", "Nul", "", "0", "-0", "+0", "00", "07",
           "08", "0b1", "0b", "0x1F", "0x", "0o7", "1_000", "1__", "_1", "1:30", "1:60", "-1:2", "1:2:3.5", "1e3",
           "1.5e+3", "1.e-3", ".5", "5.", ".", "-.", "+.5", ".inf", "-.Inf", "+.INF", ".NaN", ".nan", "=", "<<", "-",
           "+", "2002-12-14", "2001-12-14t21:59:43.10-05:00", "2001-12-14 21:59:43.10 -5", "2001-13-45", "0000-01-01",
           "2001-1-1 1:1:1", "2Gi", "500m", "10.0.0.1", "1.2.3", "5d307ca9-b3ef-428c-8861-06e72d69f223", "9" * 64,
           "9" * 65, "1" * 4300, "1" * 4301, "x" * 64, "x" * 65, "é", "日本", "\U0001f600", "a\tb", "a #b", "a#b",
           "true1", "Yes!", "on_", "1 2", "- a", "a:b", "a,b", "1\t", "12345678901234567890", "-9223372036854775809",
           "0x" + "f" * 300, "1." + "0" * 300, "nan", "inf")
QUOTED = ("'yes'", "\"1\"", "''", "\"\"", "'it''s'", "\"\\x41\\u00e9\\U0001F600\"", "\"\\0\\a\\e\"", "\"\\N\\_\\L\\P\"",
          "\"a\\\n  b\"", "'a\n\n  b'", "\"\\t\"", "\"\\/\"")
KEYS = ("a", "b", "name", "spec", "x y", "é", "\"q\"", "'q'", "\"yes\"", "1", "-1", "1.5", "on", "~", "null", "<<",
        "=", "2002-12-14", "0x1", "1:30", "?", "a" * 64, "a" * 65, "k" * 300, "-x", "\"\"", "''", ".inf", "Y")
ODD = ("\x00", "\x1b", "\ufeff", "\u0085", "\u2028", "\u2029", "\r", "\r\n", "\x7f", "\t", "\x08", "\ud7ff", "\ue000",
       "\ufffe", "\uffff", "\U0010ffff", "&a ", "*a", "!", "!!str ", "!e!x ", "%", "@", "`", "|", ">", "? ", ": ",
       "- ", "#", "[", "]", "{", "}", ",", "'", "\"", "---", "...", "\n", " ", "  ")


class Gen:
    """Random YAML text from a small grammar: block and flow collections, every scalar style,
    documents, directives, comments, anchors, tags and merge keys now and then."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.clean = False  # a document the native reader should take: string keys, no tags

    def key(self) -> str:
        return self.rng.choice(KEYS[:9] if self.clean else KEYS)

    def scalar(self, flow: bool) -> str:
        rng = self.rng
        r = rng.random() * (0.85 if self.clean else 1)
        if r < 0.6:
            text = rng.choice(SCALARS)
            if flow and any(c in text for c in ",[]{}#"):
                text = "a"
        elif r < 0.85:
            text = rng.choice(QUOTED)
        elif r < 0.9:
            text = rng.choice(("&a ", "!!str ", "!!int ", "!e ", "! ", "*a", "!!binary ")) + rng.choice(SCALARS[:20])
        elif r < 0.95 and not flow:
            return rng.choice(("|", ">", "|-", ">+", "|2")) + "\n"  # the caller adds the body
        else:
            text = rng.choice(SCALARS) + rng.choice(ODD) + rng.choice(SCALARS)
        return text

    def flow(self, depth: int) -> str:
        rng = self.rng
        if depth > rng.choice((2, 4, 8)) or rng.random() < 0.45:
            s = self.scalar(True)
            return s if not s.endswith("\n") else "x"
        if rng.random() < 0.5:
            items = [self.flow(depth + 1) for _ in range(rng.randint(0, 4))]
            if rng.random() < 0.1 and items:
                items[0] = "? " + items[0]
            if rng.random() < 0.1 and items:
                items[-1] = items[-1] + ": " + self.flow(depth + 1)
            trailing = rng.choice(("", ",")) if items else ""
            return "[" + rng.choice((", ", ",", " , ", ",\n  ")).join(items) + trailing + "]"
        entries = []
        for _ in range(rng.randint(0, 4)):
            key = self.key()
            if rng.random() < 0.15:
                entries.append(key)  # `{a, b: c}`: an implicit key with a null value
            elif rng.random() < 0.1:
                entries.append(f"? {key} : {self.flow(depth + 1)}")
            else:
                entries.append(f"{key}: {self.flow(depth + 1)}")
        return "{" + rng.choice((", ", ",", ",\n ")).join(entries) + "}"

    def block(self, indent: int, depth: int) -> list[str]:
        """Lines of a block node at `indent`."""
        rng = self.rng
        pad = " " * indent
        r = rng.random()
        if depth > rng.choice((3, 5, 8)) or r < 0.15:
            return [pad + self.flow(depth)]
        lines: list[str] = []
        if r < 0.55:  # a mapping
            for _ in range(rng.randint(1, 5)):
                key = self.key()
                if rng.random() < 0.05:
                    lines.append(f"{pad}? {key}")
                    lines.append(f"{pad}:")
                else:
                    lines.append(f"{pad}{key}:")
                self._value(lines, indent, depth)
                if rng.random() < 0.05:
                    lines.append(pad + "# a comment")
        else:  # a sequence
            for _ in range(rng.randint(1, 5)):
                lines.append(f"{pad}-")
                self._value(lines, indent + rng.choice((0, 2)) * (lines[-1].endswith(":") is False), depth)
        return lines

    def _value(self, lines: list[str], indent: int, depth: int) -> None:
        rng = self.rng
        r = rng.random()
        if r < 0.5:
            s = self.scalar(False)
            if s.endswith("\n"):
                lines[-1] += " " + s[:-1]
                for _ in range(rng.randint(0, 3)):
                    lines.append(" " * (indent + 2) + rng.choice(("text", "yes", "", "  more", "# not a comment")))
            else:
                lines[-1] += " " + s
                if rng.random() < 0.05:  # a multi-line plain scalar
                    lines.append(" " * (indent + 2) + rng.choice(("cont", "", "yes", "1")))
        elif r < 0.6:
            lines[-1] += " " + self.flow(depth + 1)
        elif r < 0.65:
            pass  # an empty value
        else:
            child = self.block(indent + rng.choice((1, 2, 4)), depth + 1)
            if rng.random() < 0.2 and lines[-1].endswith("-"):  # `- a: 1` compact form
                lines[-1] += " " + child[0].lstrip(" ")
                lines.extend(child[1:])
            else:
                lines.extend(child)

    def document(self) -> str:
        rng = self.rng
        self.clean = rng.random() < 0.6
        docs = []
        for _ in range(rng.choice((1, 1, 1, 2, 3))):
            head = rng.choice(("", "", "---\n", "--- # c\n", "%YAML 1.1\n---\n", "%TAG !e! tag:e.com,2000:\n---\n",
                               "%YAML 1.2\n---\n", "--- "))
            body = "\n".join(self.block(0, 0)) if rng.random() < 0.85 else self.flow(0)
            if head == "--- " and not body.startswith(("[", "{")):
                head = "---\n"
            docs.append(head + body + rng.choice(("\n", "\n...\n", "", "\n\n# end\n")))
        text = "".join(docs if all(d.startswith(("---", "%")) for d in docs[1:]) else docs[:1])
        if rng.random() < (0.02 if self.clean else 0.2):  # a character YAML refuses or reads specially, somewhere
            pos = rng.randrange(len(text) + 1)
            text = text[:pos] + rng.choice(ODD) + text[pos:]
        if rng.random() < 0.03:
            text = "\ufeff" + text
        if rng.random() < 0.05:
            text = text.replace("\n", rng.choice(("\r\n", "\r", "\u0085")))
        return text
