"""User text inside Streamlit's markdown, shown as the characters typed.

`st.markdown`, `st.caption`, `st.error` / `warning` / `info` / `success`, `st.subheader`, and the labels of
widgets, metrics, expanders and status boxes all render GitHub-flavoured markdown (plus Streamlit's `:red[...]`
colours, emoji shortcodes, `$...$` LaTeX and bare-URL links). A class name, model id, path, file name or an
error message that quotes one of them would otherwise render a link (`[x](http://evil)`), fetch a remote image
(`![i](http://evil/x.png)`) or restyle the page. `md` backslash-escapes the ASCII punctuation that can open one of these constructs (CommonMark lets any
punctuation be escaped, and an escaped character is always shown literally), and the few that only matter at
the start of a line where they would; hyphens, dots and the like stay bare, so an id such as
`toy-app` reads the same in the page source as on screen. A word holding an address is a code span instead (GFM
links bare addresses whatever their escapes; a code span it never links). Raw HTML is not rendered by these calls (no
`unsafe_allow_html`), and `<`/`>` are escaped too.

    st.caption(f"Explaining class **{md(name)}**")     # the page's own markdown stays markdown
"""
from __future__ import annotations

import re
import string

# every ASCII punctuation character but those that are inert in the middle of a line of inline text
_INERT = "-.,'\"/?;%="
_ESCAPED = re.compile("([" + re.escape("".join(c for c in string.punctuation if c not in _INERT)) + "])")
# What GFM's autolink-literal step links in text (http://, https://, ftp://, www., mailto:, xmpp:, name@host.tld),
# found after escapes are resolved, so no backslash stops it; inside a code span it finds nothing.
_ADDRESS = re.compile(r"(?i)(?:https?|ftp)://|(?:mailto|xmpp):|\bwww\.|[-.\w+]@[-\w]+\.[-\w]")


def code_span(text: str) -> str:
    """`text` (one line) as a markdown code span that shows exactly its characters: the fence is one backtick
    longer than the longest run inside, and padded with a space where the text starts or ends with one."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def md(value) -> str:
    """`str(value)` with every markdown-significant character backslash-escaped; newlines become spaces (a
    line break would let the next line start a block: a heading, a list, a code fence). A word that holds an
    address (`http://host`, `www.host`, `name@host`) is shown as a code span of its own characters instead:
    GFM would link it however it is escaped, and a code span is never linked, so the text a reader copies is the
    text that was typed (no invisible character added)."""
    words = re.split(r"(\s+)", " ".join(str(value).splitlines()))
    text = "".join(code_span(w) if _ADDRESS.search(w) else _ESCAPED.sub(r"\\\1", w) for w in words)
    # a leading "- " or "1. " would start a list where the text opens a block (st.error(md(err)))
    text = re.sub(r"^(\s*)-", r"\1\\-", text)
    return re.sub(r"^(\s*\d+)\.", r"\1\\.", text)
