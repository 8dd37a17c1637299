"""Report card: on models whose reasons are known (planted mechanisms), which importance measures recover the truth
and which faithfulness metrics recognise it (app/report_card_view.py; docs/ground-truth.md)."""
from __future__ import annotations

import streamlit as st

from app.report_card_view import render_report_card

st.title("Report card")
st.caption("A model trained with a planted mechanism (Models page: Plant a known mechanism) has reasons known by "
           "construction: here every importance measure is scored for finding them and every faithfulness metric "
           "for preferring the true explanation over hard wrong ones.")
render_report_card()
