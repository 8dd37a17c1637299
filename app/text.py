"""User text inside Streamlit's markdown, shown as the characters typed.

`st.markdown`, `st.caption`, `st.error` / `warning` / `info` / `success`, `st.subheader`, and the labels of
widgets, metrics, expanders and status boxes all render GitHub-flavoured markdown (plus Streamlit's `:red[...]`
colours, emoji shortcodes, `$...$` LaTeX and bare-URL links). A class name, model id, path, file name or an
error message that quotes one of them would otherwise render a link (`[x](http://evil)`), fetch a remote image
(`![i](http://evil/x.png)`) or restyle the page. `md` backslash-escapes the ASCII punctuation that can open one of these constructs (CommonMark lets any
punctuation be escaped, and an escaped character is always shown literally), and the few that only matter at
the start of a line where they would; hyphens, dots and the like stay bare, so an id such as
`toy-app` reads the same in the page source as on screen. Raw HTML is not rendered by these calls (no
`unsafe_allow_html`), and `<`/`>` are escaped too.

    st.caption(f"Explaining class **{md(name)}**")     # the page's own markdown stays markdown
"""
from __future__ import annotations

import re
import string

# every ASCII punctuation character but those that are inert in the middle of a line of inline text
_INERT = "-.,'\"/?;%="
WORD_JOINER = "\u2060"
_ESCAPED = re.compile("([" + re.escape("".join(c for c in string.punctuation if c not in _INERT)) + "])")


def md(value) -> str:
    """`str(value)` with every markdown-significant character backslash-escaped; newlines become spaces (a
    line break would let the next line start a block: a heading, a list, a code fence)."""
    text = _ESCAPED.sub(r"\\\1", " ".join(str(value).splitlines()))
    # GFM also links bare addresses (http://host, www.host, name@host), and Streamlit's renderer finds them in
    # the text after escapes are resolved, so no backslash stops it: an invisible word joiner (U+2060) after
    # the scheme, "www" or "@" does, and the reader sees the same characters.
    text = re.sub(r"(?i)\b(https?|ftp|mailto|xmpp|www)(?=\\:|\.)", "\\1" + WORD_JOINER, text)
    text = text.replace("\\@", "\\@" + WORD_JOINER)
    # a leading "- " or "1. " would start a list where the text opens a block (st.error(md(err)))
    text = re.sub(r"^(\s*)-", r"\1\\-", text)
    return re.sub(r"^(\s*\d+)\.", r"\1\\.", text)
