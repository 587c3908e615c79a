"""Text and attribute values in the domain XML a front end writes as text.

xml.sax.saxutils' escape and quoteattr, written out: importing that module imports urllib,
http.client, ssl and email (~38 ms at every start, also of a check of one KubeVirt manifest,
since every stack source asks each front end whether it wants it). Same output.
"""

from __future__ import annotations


def escape(data: str) -> str:
    return data.replace("&", "&amp;").replace(">", "&gt;").replace("<", "&lt;")


def quoteattr(data: str) -> str:
    data = escape(data).replace("\n", "&#10;").replace("\r", "&#13;").replace("\t", "&#9;")
    if '"' in data:
        return "'" + data + "'" if "'" not in data else '"' + data.replace('"', "&quot;") + '"'
    return '"' + data + '"'
