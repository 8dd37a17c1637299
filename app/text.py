"""User text inside Streamlit's markdown, shown as the characters typed.

`st.markdown`, `st.caption`, `st.error` / `warning` / `info` / `success`, `st.subheader`, and the labels of
widgets, metrics, expanders and status boxes all render GitHub-flavoured markdown (plus Streamlit's `:red[...]`
colours, emoji shortcodes, `$...$` LaTeX and bare-URL links). A class name, model id, path, file name or an
error message that quotes one of them would otherwise render a link (`[x](http://evil)`), fetch a remote image
(`![i](http://evil/x.png)`) or restyle the page. `md` backslash-escapes every ASCII punctuation character
(CommonMark lets any of them be escaped, and an escaped one is always shown literally), which breaks every
markdown construct, including bare `http://` links, while the reader sees the same characters. Raw HTML is
not rendered by these calls (no `unsafe_allow_html`), and `<`/`>` are escaped too.

    st.caption(f"Explaining class **{md(name)}**")     # the page's own markdown stays markdown
"""
from __future__ import annotations

import re
import string

_PUNCTUATION = re.compile("([" + re.escape(string.punctuation) + "])")


def md(value) -> str:
    """`str(value)` with every markdown-significant character backslash-escaped; newlines become spaces (a
    line break would let the next line start a block: a heading, a list, a code fence)."""
    return _PUNCTUATION.sub(r"\\\1", " ".join(str(value).splitlines()))
