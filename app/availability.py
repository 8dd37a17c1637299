"""What each kind of visitor may open and compute: the one table the navigation (app/main.py) and every gated
action read, and the one that docs/configuration.md prints (`python -m app.availability` writes it;
tests/app/test_roles_pages.py walks every page in every role against it).

Three roles: the **admin** (on loopback, the default bind, every visitor is the admin; served to a network, a
session signed in with the admin secret, app/admin.py), an **annotator** (a session opened from a study link:
it sees the study and nothing else, whatever the bind) and an **anonymous** visitor (served to a network, not
signed in). What an anonymous visitor computes beyond reading the shipped results is bounded by app/limits.py.
"""
from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # pages/ are files of the checkout

ANONYMOUS, ANNOTATOR, ADMIN = "anonymous", "annotator", "admin"
ROLES = (ANONYMOUS, ANNOTATOR, ADMIN)
_VISITORS = frozenset({ANONYMOUS, ADMIN})
_ADMIN = frozenset({ADMIN})


@dataclass(frozen=True)
class Page:
    """One page of the navigation: `roles` may open it when served to a network (on loopback every role but the
    annotator may); `file` is under pages/ (None: drawn by app.study_view)."""

    key: str
    title: str
    icon: str
    roles: frozenset
    file: str | None = None
    url_path: str | None = None


@dataclass(frozen=True)
class Action:
    """Something a page lets a visitor do that costs the server compute or disk. `roles` may do it when served to
    a network; `bounded` says what limits it when an anonymous visitor may; `probe` is the widget that offers it
    (kind, key or label) for the role-by-page test, None where the page draws it only for a model kind the test
    has not (a prompted language model)."""

    name: str
    page: str
    what: str
    roles: frozenset
    bounded: str = ""
    probe: tuple[str, str] | None = None


PAGES = (
    Page("home", "Home", ":material/home:", _VISITORS, "home.py"),
    Page("explain", "Explain", ":material/search:", _VISITORS, "explain.py", "explain"),
    Page("masking", "Step-by-step masking", ":material/layers_clear:", _VISITORS, "masking.py"),
    Page("benchmarks", "Benchmarks", ":material/monitoring:", _VISITORS, "benchmarks.py"),
    Page("report-card", "Report card", ":material/fact_check:", _VISITORS, "report_card.py"),
    Page("annotate", "Annotate", ":material/rate_review:", _ADMIN, "annotate.py"),
    Page("attention", "Attention", ":material/visibility:", _VISITORS, "attention.py"),
    Page("simulability", "Simulability", ":material/school:", _VISITORS, "simulability.py"),
    Page("models", "Models", ":material/model_training:", _ADMIN, "models.py"),
    Page("data", "Your data", ":material/dataset:", _ADMIN, "data.py"),
    Page("studies", "Studies", ":material/groups:", _ADMIN, "study_admin.py", "studies"),
    Page("study", "Study", ":material/rate_review:", frozenset({ANNOTATOR})),
)
PAGE = {p.key: p for p in PAGES}

_LIMITED = "bounded per request, per session and per server (app/limits.py)"
ACTIONS = (
    Action("explain", "explain", "explain a typed text with the chosen measures", _VISITORS, _LIMITED,
           ("button", "Explain")),
    Action("first-ranking", "home", "compute a first ranking of the measures for a model the results store holds "
           "nothing for (recursive-masking cells into the results store)", _ADMIN,
           probe=("button", "home_first_ranking")),
    Action("self-explain", "explain", "ask a prompted language model to explain itself (generates text and "
           "writes the generation cache)", _ADMIN),
    Action("mask", "masking", "mask a typed text step by step (fits MaSF once per model and calibration data)",
           _VISITORS, _LIMITED, ("button", "masking_run")),
    Action("compute-cells", "benchmarks", "compute recursive-masking cells into the results store", _ADMIN,
           probe=("expander", "Compute cells")),
    Action("upload-scores", "benchmarks", "upload a scores file and evaluate it (erasure metrics, NAOPC)", _ADMIN,
           probe=("file_uploader", "upload_file")),
    # probe None: the run form is drawn only once a planted model exists, which the role-by-page test has not; the
    # form checks the role again where it runs (app/report_card_view.py)
    Action("report-card", "report-card", "compute a report card for a planted model into the results store", _ADMIN),
    Action("show-attention", "attention", "show two models' attention on a typed text (one forward pass each)",
           _VISITORS, "one forward pass per model, text cut at 5,000 characters", ("button", "attention_show")),
    Action("annotate", "annotate", "annotate and prepare annotation tasks (writes the annotation store)", _ADMIN),
    Action("models", "models", "register model folders, train, convert", _ADMIN),
    Action("data", "data", "upload and register datasets", _ADMIN),
    Action("studies", "studies", "create, open and close studies, invite annotators", _ADMIN),
    Action("study", "study", "take a study's tasks and store answers (the study's own link only)",
           frozenset({ANNOTATOR})),
)
ACTION = {a.name: a for a in ACTIONS}


def role_of(query_params: Mapping[str, str], signed_in_admin: bool) -> str:
    """The role of a session: a study link makes an annotator whatever else holds; else the admin (always on
    loopback, where app.admin.is_admin is True) or an anonymous visitor."""
    from app.study_link import is_study_link

    if is_study_link(query_params):
        return ANNOTATOR
    return ADMIN if signed_in_admin else ANONYMOUS


def current_role() -> str:
    """This session's role (reads the URL and the sign-in of the running Streamlit session)."""
    import streamlit as st

    from app import admin

    return role_of(st.query_params, admin.is_admin())


def allowed(action: str, role: str) -> bool:
    """Whether `role` may do `action` (KeyError naming the actions for an unknown one). On loopback every session
    that is not an annotator is the admin, so the network table is the only one."""
    if action not in ACTION:
        raise KeyError(f"unknown action {action!r}; actions: {', '.join(ACTION)}")
    return role in ACTION[action].roles


def may(action: str) -> bool:
    """Whether this session may do `action`."""
    return allowed(action, current_role())


def require(action: str) -> None:
    """Where an action runs (not only where it is offered): app.admin.AdminRequired when this session may not."""
    from app.admin import AdminRequired

    if not may(action):
        raise AdminRequired(f"{ACTION[action].what} needs the admin: sign in with the admin secret")


def navigation(role: str) -> list:
    """The st.Page list of `role`'s navigation (the annotator's study page is drawn by app/main.py itself)."""
    import streamlit as st

    # the home page is the default (it answers at "/"; a shared Explain view at "/?text=..." is forwarded to
    # /explain by the home page itself)
    return [st.Page(str(ROOT / "pages" / p.file), title=p.title, icon=p.icon, url_path=p.url_path,
                    default=p.key == "home")
            for p in PAGES if p.file and role in p.roles]


def _mark(ok: bool) -> str:
    return "yes" if ok else "no"


def roles_table() -> str:
    """The markdown table of docs/configuration.md: per page, what each role may open and compute when served to
    a network."""
    lines = ["| page | action | anonymous | annotator | admin |", "|---|---|---|---|---|"]
    for page in PAGES:
        lines.append(f"| **{page.title}** | open the page | " + " | ".join(_mark(r in page.roles) for r in ROLES) + " |")
        for action in ACTIONS:
            if action.page == page.key:
                cells = [("yes, " + action.bounded if action.bounded and r == ANONYMOUS else "yes")
                         if r in action.roles else "no" for r in ROLES]
                lines.append(f"| | {action.what} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(roles_table())
    sys.exit(0)
